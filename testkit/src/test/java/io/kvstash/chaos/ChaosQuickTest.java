package io.kvstash.chaos;

import io.kvstash.tools.Json;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The quick profile of every reliability suite with real worker and server processes: what the
 * suites promise, asserted; how fast things happened is reported, never asserted.
 */
@Timeout(300)
class ChaosQuickTest
{
    @Test
    void shouldLoseNothingAndLeakNothingUnderKillsZombiesRestartsFuzzExhaustionAndClusterFaults() throws Exception
    {
        final ChaosRunner.Options options = ChaosRunner.Options.quick();
        options.killSeconds = 15;
        options.zombieReps = 10;
        options.fuzzRecords = 10_000;
        final Map<String, Object> report = new ChaosRunner(options).run();
        System.out.println(Json.write(report));

        assertTrue((Long)report.get("kills") > 0, "no worker was killed");
        assertTrue((Long)report.get("verified_reads") > 0, "no read was verified");
        // Every third load worker moves its bytes in messages (the fallback copy transport), killed at the same
        // failpoints; its reads are verified by the same seals.
        assertTrue((Long)report.get("verified_reads_copy_transport") > 0, "no copy-transport read was verified");
        assertEquals(0L, report.get("checksum_mismatches"));
        assertEquals(0L, report.get("leaked_reservations"));
        assertEquals(0L, report.get("leaked_pins"));
        assertEquals(0L, report.get("pending_transfers"));
        assertEquals(true, report.get("free_plus_readable_equals_total"));
        assertEquals(0L, report.get("worker_crashes"));
        // Every worker seen attached and then killed was reaped as a dead client; a kill may land before the
        // worker attached (nothing to reap) or between its attach and its ATTACHED line, hence the range.
        final long reaped = (Long)report.get("dead_clients_reaped");
        assertTrue(reaped >= (Long)report.get("kills_after_attach"), "a killed worker was not reaped: " + reaped);
        assertTrue(reaped <= (Long)report.get("kills"), "more dead clients than kills: " + reaped);
        assertEquals(0L, report.get("clients_left"));

        assertEquals(report.get("late_commits_total"), report.get("late_commits_rejected"));
        assertEquals(0L, report.get("late_writes"));
        assertEquals(report.get("late_commits_total"), report.get("new_owner_bytes_intact"));

        assertEquals(report.get("reconnections_expected"), report.get("reconnections"));
        assertEquals(true, report.get("error_log_kept"));

        assertEquals(0L, report.get("fuzz_unanswered"));
        assertEquals(true, report.get("fuzz_server_alive"));
        assertEquals(0L, report.get("fuzz_server_errors"));
        assertTrue((Long)report.get("fuzz_answered") > 0);
        // Answering bad records allocates nothing in the server, so it never collects while being fuzzed; its
        // threads allocate about 200 KiB meanwhile (attaching the fuzzer's clients, directory scans), where
        // 100 bytes for each of the 10,000 records would pass 1 MiB.
        assertEquals(0L, report.get("fuzz_server_gc_count"));
        assertTrue((Long)report.get("fuzz_server_allocated_bytes") < (1L << 20),
            "fuzz_server_allocated_bytes " + report.get("fuzz_server_allocated_bytes"));

        assertTrue((Long)report.get("exhaustion_no_space") > 0, "the flood never ran out of space");
        assertEquals(true, report.get("exhaustion_pinned_intact"));
        assertEquals(true, report.get("exhaustion_reserved_intact"));

        assertSecondTierHeld(report);
    }

    /**
     * The second tier under a master's SIGKILL, the whole cluster's restart and two corrupted values. Whether a
     * request took longer than the tier's timeout is reported ({@code l2_requests_over_timeout}, which fails
     * {@code kvstash chaos}), not asserted here: on a shared machine that is a matter of the machine's load.
     */
    private static void assertSecondTierHeld(final Map<String, Object> report)
    {
        if (report.containsKey("l2_skipped"))
        {
            System.out.println("second tier suite skipped: " + report.get("l2_skipped"));
            return;
        }
        assertEquals(null, report.get("l2_error"));
        assertEquals(1L, report.get("l2_node_kills"));
        assertEquals(1L, report.get("l2_cluster_restarts"));
        assertTrue((Long)report.get("l2_verified_reads") > 0, "no chunk was read through the tier");
        assertEquals(0L, report.get("l2_checksum_mismatches"));
        // Both corrupted values were counted by host B's tier, and neither was ever served.
        assertEquals(report.get("l2_corrupted_keys"), report.get("l2_corrupted_keys_counted"));
        assertTrue((Long)report.get("l2_corrupt_values") >= (Long)report.get("l2_corrupted_keys"));
        assertEquals(0L, report.get("l2_corrupt_values_served"));
        assertTrue(report.containsKey("l2_requests_over_timeout"));
        assertEquals(0L, report.get("l2_leaked_reservations"));
        assertEquals(0L, report.get("l2_leaked_pins"));
        assertEquals(0L, report.get("l2_pending_transfers"));
        assertEquals(true, report.get("l2_free_plus_readable_equals_total"));
        assertEquals(true, report.get("l2_resumed"), "the tier did not write and fetch again after the restart");
        assertEquals(true, report.get("l2_state_up_at_end"));
        assertEquals(0L, report.get("l2_worker_crashes"));
    }
}
