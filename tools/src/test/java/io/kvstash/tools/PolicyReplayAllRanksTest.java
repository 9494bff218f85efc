package io.kvstash.tools;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.trace.MooncakeTrace;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.IOException;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The policies learn as much from LOOKUP_ALL_RANKS (what the vLLM connector sends) as from LOOKUP: the bundled
 * trace replayed offline with either gives the same hit chunks under every policy, and the learning policies beat
 * exact LRU with either. (Before LOOKUP_ALL_RANKS fed the key history and the parent hints, a replay asking with it
 * lost the history's and the hints' gains.)
 */
class PolicyReplayAllRanksTest
{
    private static final int CAPACITY = 1024;
    private static List<MooncakeTrace.Request> requests;
    private static long lru;

    @BeforeAll
    static void readTrace() throws IOException
    {
        requests = MooncakeTrace.read(BundledTrace.locate()).requests();
        lru = PolicyReplay.hitChunks(requests, CAPACITY, EvictionPolicy.LRU, false);
        assertEquals(BundledTrace.referenceHitChunks().get(CAPACITY), lru, "the exact-LRU reference");
    }

    @ParameterizedTest
    @EnumSource(value = EvictionPolicy.class, names = { "CHAIN", "SLRU", "SLRU_ADMIT" })
    void aLookupOfAllRanksTeachesThePolicyAsALookupDoes(final EvictionPolicy policy)
    {
        final long lookup = PolicyReplay.hitChunks(requests, CAPACITY, policy, false);
        final long allRanks = PolicyReplay.hitChunks(requests, CAPACITY, policy, true);
        assertEquals(lookup, allRanks, policy.label());
        assertTrue(allRanks > lru, policy.label() + ": " + allRanks + " hit chunks, exact LRU " + lru);
    }
}
