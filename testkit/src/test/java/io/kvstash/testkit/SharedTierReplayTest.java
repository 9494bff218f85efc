package io.kvstash.testkit;

import io.kvstash.chaos.ChaosMain;
import io.kvstash.tools.BundledTrace;
import io.kvstash.tools.Json;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Two hosts sharing the second tier replay a prefix of the bundled trace ({@code kvstash tier-replay --json}),
 * against a real Redis Cluster, real servers and real worker processes. No mocks, no timings.
 */
@Timeout(300)
class SharedTierReplayTest
{
    private static final int REQUESTS = 300;
    private static final int CAPACITY = 2048;
    @RegisterExtension
    static final RedisClusterExtension CLUSTER = new RedisClusterExtension();

    @TempDir
    Path temp;

    @Test
    @SuppressWarnings("unchecked")
    void shouldServeEachHostTheChunksTheOtherStoredThroughTheTier() throws Exception
    {
        final Path trace = prefix();
        final StringWriter out = new StringWriter();
        final CommandLine commandLine = ChaosMain.newCommandLine();
        commandLine.setOut(new PrintWriter(out, true));
        final int exitCode = commandLine.execute("tier-replay", "--trace", trace.toString(), "--capacity-chunks",
            String.valueOf(CAPACITY), "--hosts", "2", "--l2", CLUSTER.cluster().seeds(), "--tier-wait-ms", "50",
            "--json");
        assertEquals(0, exitCode, out.toString());
        final List<Object> runs = (List<Object>)Json.parseObject(out.toString().strip()).get("runs");
        assertEquals(1, runs.size());
        final Map<String, Object> report = (Map<String, Object>)runs.get(0);

        for (final String field : List.of("trace", "requests", "capacity_chunks", "hosts", "host_capacity_chunks",
            "tier_wait_ms", "l2", "one_host", "hosts_without_tier", "hosts_with_tier", "checksum_mismatches"))
        {
            assertTrue(report.containsKey(field), field + " in " + report);
        }
        assertEquals((long)REQUESTS, report.get("requests"));
        assertEquals(CAPACITY / 2L, report.get("host_capacity_chunks"));
        assertEquals(0L, report.get("checksum_mismatches"), report.toString());

        final Map<String, Object> one = (Map<String, Object>)report.get("one_host");
        assertEquals(one.get("lru_hit_chunks"), one.get("hit_chunks"), "one host is an exact LRU");

        final Map<String, Object> without = (Map<String, Object>)report.get("hosts_without_tier");
        final Map<String, Object> with = (Map<String, Object>)report.get("hosts_with_tier");
        assertEquals(0L, without.get("checksum_mismatches"));
        assertEquals(0L, with.get("checksum_mismatches"), "chunks that came through the tier verified too");
        for (final String field : List.of("hit_chunks", "l2_writes", "l2_fetch_hits", "l2_fetch_misses",
            "l2_timeouts", "l2_errors", "l2_corrupt_values", "per_host"))
        {
            assertTrue(with.containsKey(field), field + " in " + with);
        }
        assertTrue((long)with.get("l2_writes") > 0, "the hosts wrote their chunks through");
        assertEquals(0L, with.get("l2_corrupt_values"));

        long fetchHits = 0;
        long requests = 0;
        for (final Object h : (List<Object>)with.get("per_host"))
        {
            final Map<String, Object> host = (Map<String, Object>)h;
            assertEquals(REQUESTS / 2L, host.get("requests"), "request i to host i % 2: " + host);
            assertEquals(0L, host.get("checksum_mismatches"));
            assertTrue((long)host.get("l2_writes") > 0, "host " + host.get("host") + " wrote through: " + host);
            fetchHits += (long)host.get("l2_fetch_hits");
            requests += (long)host.get("requests");
            if ((long)host.get("l2_fetch_hits") > 0)
            {
                assertTrue((long)host.get("hit_chunks") >= (long)host.get("l2_fetch_hits"),
                    "the chunks the tier brought were hits of that host's LOOKUPs: " + host);
            }
        }
        assertEquals((long)REQUESTS, requests);
        assertTrue(fetchHits > 0, "a host was served chunks only the other stored: " + with);
        for (final Object h : (List<Object>)without.get("per_host"))
        {
            assertEquals(REQUESTS / 2L, ((Map<String, Object>)h).get("requests"));
            assertTrue(!((Map<String, Object>)h).containsKey("l2_writes"), "no tier, no tier counters");
        }
    }

    @Test
    void shouldRefuseAHostPoolSmallerThanTheLargestRequest() throws Exception
    {
        final Path trace = prefix();
        final IllegalArgumentException ex = assertThrows(IllegalArgumentException.class,
            () -> new SharedTierReplay().trace(trace).capacityChunks(64).hosts(2).l2Seeds(CLUSTER.cluster().seeds())
                .run());
        assertTrue(ex.getMessage().contains("largest request"), ex.getMessage());
    }

    private Path prefix() throws Exception
    {
        final List<String> lines = Files.readAllLines(BundledTrace.locate(), StandardCharsets.UTF_8);
        final Path trace = temp.resolve("prefix.jsonl");
        Files.write(trace, lines.subList(0, REQUESTS), StandardCharsets.UTF_8);
        return trace;
    }
}
