package io.kvstash.core.book;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Under {@code chain}, a store whose range starts at the first chunk a lookup missed continues the lookup's last
 * hit: its chunks enter before that parent and are evicted before it. A LOOKUP_ALL_RANKS leaves that hint for every
 * rank, as each rank's own LOOKUP would; without it rank 1's continuation would enter as a chain of its own, newer
 * than its prefix, and a flood of new stores would take the prefix first (leaving the continuation unreachable).
 */
class AllRanksHintTest
{
    private static final long RANK0 = 20;
    private static final long RANK1 = 21;
    private static final String MODEL = "hint";

    private enum Asked
    {
        NOTHING, RANK1_LOOKUP, ALL_RANKS, OTHER_RANK_LOOKUP
    }

    @Test
    void aLookupOfAllRanksLeavesEachRankTheParentOfItsNextStore()
    {
        assertEquals(0, prefixKept(Asked.NOTHING), "no hint: the continuation is a new chain, the prefix goes first");
        assertEquals(2, prefixKept(Asked.RANK1_LOOKUP), "rank 1's own LOOKUP");
        assertEquals(2, prefixKept(Asked.ALL_RANKS), "a LOOKUP_ALL_RANKS of both ranks");
        assertEquals(0, prefixKept(Asked.OTHER_RANK_LOOKUP), "rank 0's LOOKUP is no hint for rank 1's store");
    }

    /**
     * Both ranks store chunks 1-2; the lookup asks for 1-4; rank 1 stores 3-4 alone (a range starting at its first
     * missing chunk); four new chunks then evict four of the six: with the hint rank 0's chain and rank 1's 4 and 3
     * (its tail), without it rank 0's chain and rank 1's 2 and 1 (its older prefix).
     *
     * @return chunks of 1-4 rank 1 still reads from the start.
     */
    private static int prefixKept(final Asked asked)
    {
        final KvStore store = new KvStore(new StoreContext()
            .poolSizeBytes(6 * 64).alignment(64).chunkTokens(1).slotBytes(64).eviction(EvictionPolicy.CHAIN)
            .conclude());
        assertEquals(Status.OK, store.register(RANK0, Layout.of(MODEL, 2, 0, 1, 16, Dtype.UINT8, true)).status);
        assertEquals(Status.OK, store.register(RANK1, Layout.of(MODEL, 2, 1, 1, 16, Dtype.UINT8, true)).status);
        stored(store, RANK0, ChunkKeys.ofIds(1, 2));
        stored(store, RANK1, ChunkKeys.ofIds(1, 2));
        final ChunkKeys wanted = ChunkKeys.ofIds(1, 2, 3, 4);
        switch (asked)
        {
            case RANK1_LOOKUP -> assertEquals(2, store.lookup(RANK1, wanted, false).hitChunks);
            case OTHER_RANK_LOOKUP -> assertEquals(2, store.lookup(RANK0, wanted, false).hitChunks);
            case ALL_RANKS ->
            {
                final byte[] model = MODEL.getBytes(StandardCharsets.UTF_8);
                final StoreCommand all = store.lookupAllRanks(model, model.length, 2, wanted);
                assertEquals(Status.OK, all.status, all.message);
                assertEquals(2, all.hitChunks);
            }
            default ->
            {
            }
        }
        stored(store, RANK1, ChunkKeys.ofIds(3, 4));
        stored(store, RANK1, ChunkKeys.ofIds(100, 101, 102, 103));
        assertNull(store.book().verifyInvariants());
        return store.lookup(RANK1, wanted, false).hitChunks;
    }

    private static void stored(final KvStore store, final long instance, final ChunkKeys keys)
    {
        final StoreCommand prepare = store.prepareStore(instance, keys);
        assertEquals(Status.OK, prepare.status, prepare.message);
        assertEquals(Status.OK, store.commitStore(instance, prepare.outTransferId).status);
    }
}
