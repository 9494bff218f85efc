package io.kvstash.perf.bench;

import io.kvstash.process.ChildJvm;
import io.kvstash.tools.Json;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Runs {@code kvstash bench --only scale --quick --json} as a real process (eight worker JVMs against servers in
 * the bench's JVM) and checks the report: a row per worker count for small and 2 MiB chunks, each with traffic
 * and percentiles, every chunk read back with its own stamp, how both sides waited, and the scaling ratios. The
 * figures themselves are not judged: they need a quiet machine with cores to spare. Tagged {@code slow}: it
 * takes about a minute.
 */
@Tag("slow")
class ScaleBenchTest
{
    @TempDir
    Path out;

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    @SuppressWarnings("unchecked")
    void shouldReportEveryWorkerCountWithTrafficPercentilesWaitsAndTheScalingRatios() throws Exception
    {
        final StringBuilder lines = new StringBuilder();
        final String stdout;
        try (ChildJvm bench = new ChildJvm.Options()
            .jvmOptions(List.of())
            .lineListener((line) ->
            {
                synchronized (lines)
                {
                    lines.append(line).append('\n');
                }
            })
            .start(BenchMain.class.getName(), List.of("--only", "scale", "--quick", "--json", "--out", out.toString())))
        {
            final int exit = bench.exitCode(TimeUnit.SECONDS.toMillis(280));
            assertTrue(bench.awaitEndOfOutput(TimeUnit.SECONDS.toMillis(10)), "bench output did not end");
            synchronized (lines)
            {
                stdout = lines.toString();
            }
            assertEquals(0, exit, stdout);
        }
        final Map<String, Object> report = Json.parseObject(stdout.trim());
        final Map<String, Object> scale = (Map<String, Object>)report.get("scale");
        assertNotNull(scale, stdout);
        for (final String chunks : new String[]{ "small", "large" })
        {
            final List<Map<String, Object>> rows = (List<Map<String, Object>>)scale.get(chunks);
            assertEquals(ScalePart.WORKERS.length, rows.size(), chunks);
            for (int i = 0; i < rows.size(); i++)
            {
                final Map<String, Object> row = rows.get(i);
                assertEquals((long)ScalePart.WORKERS[i], ((Number)row.get("workers")).longValue());
                assertRow(chunks, row);
            }
        }
        final Map<String, Object> dedicated = (Map<String, Object>)scale.get("small_dedicated_8");
        assertEquals("DEDICATED", dedicated.get("threading"));
        assertRow("dedicated", dedicated);
        for (final Map<String, Object> row : (List<Map<String, Object>>)scale.get("small_client_backoff"))
        {
            assertEquals("backoff", row.get("client_wait"));
            assertRow("client backoff", row);
        }
        final Map<String, Object> scaling = (Map<String, Object>)report.get("scaling");
        assertNotNull(scaling, stdout);
        for (final String ratio : new String[]{ "ops_8_vs_1", "p99_8_vs_1", "large_ops_8_vs_1",
            "dedicated_8_vs_shared_8", "in_flight_vs_backoff_requests_per_s_8" })
        {
            assertPositive(ratio, scaling.get(ratio));
        }
    }

    @SuppressWarnings("unchecked")
    private static void assertRow(final String name, final Map<String, Object> row)
    {
        for (final String field : new String[]{ "requests_per_s", "ops_per_s", "chunks_per_s", "gb_per_s", "p50_us",
            "p99_us", "p999_us" })
        {
            assertPositive(name + "." + field, row.get(field));
        }
        assertEquals(0L, ((Number)row.get("mismatches")).longValue(), name + ": a chunk read back another's bytes");
        assertFalse(((Map<String, Object>)row.get("failures_by_status")).containsKey("UNKNOWN_INSTANCE"),
            name + ": a worker lost its instance to another's unregister: " + row.get("failures_by_status"));
        for (final String field : new String[]{ "client_parks_per_request", "client_yields_per_request",
            "server_parks_per_request", "server_empty_cycles_per_request" })
        {
            assertTrue(((Number)row.get(field)).doubleValue() >= 0, name + "." + field);
        }
        assertEquals(((Number)row.get("workers")).doubleValue(),
            ((Number)row.get("server_rings_polled_per_cycle")).doubleValue(), 0.5,
            name + ": every duty cycle polls every worker's ring once");
    }

    private static void assertPositive(final String name, final Object value)
    {
        assertTrue(value instanceof Number && ((Number)value).doubleValue() > 0 &&
            Double.isFinite(((Number)value).doubleValue()), name + " = " + value);
    }
}
