package io.kvstash.cli;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code replay --eviction} and {@code --compare-policies} on the bundled trace: a one-worker replay through a
 * real server and worker process under a policy counts exactly the offline replay's hits under that policy;
 * the comparison reproduces the exact-LRU and clairvoyant reference figures; bad names and journal replays
 * are refused.
 */
@Timeout(300)
class EvictionReplayTest
{
    @ParameterizedTest
    @ValueSource(strings = { "chain", "slru", "default" })
    void shouldCountTheOfflineHitsOfThePolicyWhenOneWorkerReplaysThroughAServer(final String policy)
    {
        final Cli cli = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--capacity-chunks", "1024",
            "--workers", "1", "--eviction", policy, "--json", "--quiet");
        assertEquals(0, cli.exitCode, cli.toString());
        final Map<String, Object> json = cli.json();
        assertEquals("default".equals(policy) ? "slru-admit" : policy, json.get("eviction"));
        assertEquals(json.get("policy_hit_chunks"), json.get("hit_chunks"), cli.out);
        assertEquals(10_219L, json.get("lru_hit_chunks"));
        assertTrue((Long)json.get("hit_chunks") > 10_219L, cli.out);
        assertEquals(0L, json.get("checksum_mismatches"));
        assertEquals(0L, json.get("no_space"));
        assertEquals(0L, json.get("other_errors"));
        // Only the admission stores chunks cold: one-off prompts' tails and new prompts of rarely read lengths.
        final long cold = (Long)json.get("cold_chunks");
        assertTrue("default".equals(policy) ? cold > 0 && cold < (Long)json.get("stored_chunks") : 0 == cold, cli.out);
    }

    @Test
    void shouldCompareEveryPolicyWithExactLruAndTheClairvoyantReference()
    {
        final Cli cli = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--capacity-chunks", "4096",
            "--compare-policies", "--json");
        assertEquals(0, cli.exitCode, cli.toString());
        final Map<String, Object> json = cli.json();
        @SuppressWarnings("unchecked")
        final Map<String, Object> hits = (Map<String, Object>)json.get("hit_chunks");
        assertEquals(28_871L, hits.get("lru"));
        assertEquals(59_762L, json.get("clairvoyant_hit_chunks"));
        final long best = (Long)hits.get((String)json.get("default"));
        assertTrue(best >= 28_871L * 11 / 10, "the default gains at least 10 % at 4,096 chunks: " + best);
        for (final String policy : new String[]{ "chain", "slru", "slru-admit" })
        {
            assertTrue((Long)hits.get(policy) > 28_871L, policy + " " + hits);
        }

        final Cli table = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--capacity-chunks", "1024",
            "--compare-policies");
        assertEquals(0, table.exitCode, table.toString());
        assertTrue(table.out.contains("clairvoyant (reference)") && table.out.contains("32,315") &&
            table.out.contains("10,219"), table.out);
    }

    @Test
    void shouldRefuseAnUnknownPolicyAndAPolicyForAJournalReplay()
    {
        final Cli unknown = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--eviction", "fifo");
        assertEquals(2, unknown.exitCode, unknown.toString());
        assertTrue(unknown.err.contains("lru, chain, slru, slru-admit, default"), unknown.err);

        final Cli journal = Cli.run("replay", "--format", "kvstash", "--trace", Cli.TRACE.toString(),
            "--eviction", "lru");
        assertEquals(2, journal.exitCode, journal.toString());
        assertTrue(journal.err.contains("--eviction does not apply"), journal.err);

        final Cli noCapacity = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--compare-policies");
        assertEquals(2, noCapacity.exitCode, noCapacity.toString());
        assertTrue(noCapacity.err.contains("--capacity-chunks"), noCapacity.err);
    }
}
