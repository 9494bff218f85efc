package io.kvstash.perf.bench;

import io.kvstash.process.ChildJvm;
import io.kvstash.testkit.RedisCluster;
import io.kvstash.tools.Json;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Runs {@code kvstash bench --only l2 --quick --json} as a real process at small chunk sizes (256 KiB and 1 MiB)
 * against the Redis Cluster it starts itself, and checks that the report has every field of the part with sane
 * values (positive, finite), and that the tier really did the work measured: the read-through stored every chunk
 * of every fetch repetition. Timings are not judged. Without {@code redis-server}, the part must say why it did not
 * run, in the JSON, and the bench must still finish. Tagged {@code bench} like {@link BenchQuickTest}.
 */
@Tag("bench")
class BenchL2Test
{
    private static final long[] SIZES = { 256L << 10, 1L << 20 };
    private static final String[] RATIOS = { "l2_fetch_vs_get", "l2_write_vs_set", "store_vs_copy_l2",
        "retrieve_vs_copy_l2" };
    /** Reported beside the targets, without one. */
    private static final String[] BACKOFF_RATIOS = { "store_vs_copy_l2_backoff", "retrieve_vs_copy_l2_backoff" };
    private static final String[] ROW_FIGURES = { "bare_set_gbps", "bare_get_gbps", "bare_get_runs_gbps",
        "l2_fetch_gbps", "l2_write_gbps", "l2_fetch_vs_get", "l2_write_vs_set", "copy_in_gbps", "store_gbps",
        "copy_out_gbps", "retrieve_gbps", "store_vs_copy", "retrieve_vs_copy", "store_vs_copy_backoff",
        "retrieve_vs_copy_backoff" };
    /** Measured repetitions of a --quick run. */
    private static final int QUICK_REPS = 3;

    @TempDir
    Path out;

    @Test
    @Timeout(value = 280, unit = TimeUnit.SECONDS)
    @SuppressWarnings("unchecked")
    void shouldReportEveryFigureOfTheSecondTierAgainstARealCluster() throws Exception
    {
        assumeTrue(RedisCluster.available(), "redis-server and redis-cli are not installed");
        final String stdout;
        final StringBuilder lines = new StringBuilder();
        try (ChildJvm bench = new ChildJvm.Options()
            .jvmOptions(List.of())
            .lineListener((line) ->
            {
                synchronized (lines)
                {
                    lines.append(line).append('\n');
                }
            })
            .start(BenchMain.class.getName(), List.of("--only", "l2", "--quick", "--json", "--out", out.toString(),
                "--l2-sizes", SIZES[0] + "," + SIZES[1])))
        {
            final int exit = bench.exitCode(TimeUnit.SECONDS.toMillis(270));
            assertTrue(bench.awaitEndOfOutput(TimeUnit.SECONDS.toMillis(10)), "bench output did not end");
            synchronized (lines)
            {
                stdout = lines.toString();
            }
            assertEquals(0, exit, stdout);
        }

        final Map<String, Object> report = Json.parseObject(stdout.trim());
        final Map<String, Object> ratios = (Map<String, Object>)report.get("ratios");
        for (final String name : RATIOS)
        {
            assertSane("ratios." + name, ratios.get(name));
        }
        for (final String name : BACKOFF_RATIOS)
        {
            assertSane("ratios." + name, ratios.get(name));
        }
        final Map<String, Object> l2 = (Map<String, Object>)report.get("l2");
        assertNotNull(l2, stdout);
        assertEquals("ran", l2.get("status"), l2.toString());
        assertNotNull(l2.get("redis_version"));
        final Object gc = report.get("gc_count_steady");
        assertTrue(gc instanceof Number && ((Number)gc).longValue() >= 0, "gc_count_steady " + gc);
        assertEquals(((Number)l2.get("gc_count_steady")).longValue(), ((Number)gc).longValue(),
            "only the l2 part ran: its collections are the bench's");
        final List<Object> rows = (List<Object>)l2.get("sizes");
        assertEquals(SIZES.length, rows.size(), l2.toString());
        double minFetchVsGet = Double.MAX_VALUE;
        for (int i = 0; i < SIZES.length; i++)
        {
            final Map<String, Object> row = (Map<String, Object>)rows.get(i);
            assertEquals(SIZES[i], ((Number)row.get("chunk_bytes")).longValue());
            for (final String figure : ROW_FIGURES)
            {
                assertSane(SIZES[i] + " " + figure, row.get(figure));
            }
            final long chunks = ((Number)row.get("chunks")).longValue();
            final long inFlight = ((Number)row.get("in_flight")).longValue();
            assertTrue(chunks >= 2 * inFlight && 0 == chunks % inFlight, row.toString());
            // Each measured repetition cleared the pool and read every chunk through again.
            assertTrue(((Number)row.get("l2_fetch_hits")).longValue() >= QUICK_REPS * chunks, row.toString());
            final Map<String, Object> tier = (Map<String, Object>)row.get("tier_during_store_retrieve");
            assertEquals(0L, ((Number)tier.get("l2_write_errors")).longValue(), row.toString());
            final Map<String, Object> gcServer = (Map<String, Object>)row.get("gc_server");
            assertEquals(List.of("fetch", "write", "data", "data_backoff"), new ArrayList<>(gcServer.keySet()));
            minFetchVsGet = Math.min(minFetchVsGet, ((Number)row.get("l2_fetch_vs_get")).doubleValue());
        }
        assertEquals(minFetchVsGet, ((Number)ratios.get("l2_fetch_vs_get")).doubleValue(), 1e-12,
            "the ratio is the minimum over the sizes");
        final Map<String, Object> targets = (Map<String, Object>)report.get("targets");
        for (final String name : RATIOS)
        {
            final Map<String, Object> t = (Map<String, Object>)targets.get(name);
            assertNotNull(t, "missing target " + name);
            assertNotNull(t.get("met"), name + " measured");
        }
        assertEquals(">= 0.8", ((Map<String, Object>)targets.get("l2_fetch_vs_get")).get("target"));
        assertEquals(">= 0.9", ((Map<String, Object>)targets.get("store_vs_copy_l2")).get("target"));
        // The data part did not run: the report carries no data rows.
        assertTrue(((List<Object>)report.get("sizes")).isEmpty());
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    @SuppressWarnings("unchecked")
    void shouldSayWhyTheSecondTierDidNotRunWithoutRedisServer() throws Exception
    {
        // A PATH with no redis-server on it; the JVMs are found through java.home, not the PATH.
        final Path emptyBin = Files.createDirectories(out.resolve("bin"));
        final List<String> command = new ArrayList<>(List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
            "-cp", ChildJvm.absoluteClassPath(), BenchMain.class.getName(),
            "--only", "l2", "--json", "--out", out.resolve("run").toString()));
        final ProcessBuilder builder = new ProcessBuilder(command).redirectError(out.resolve("stderr").toFile());
        builder.environment().put("PATH", emptyBin.toString());
        final Process bench = builder.start();
        final String stdout;
        try
        {
            stdout = new String(bench.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(bench.waitFor(100, TimeUnit.SECONDS), "the bench did not finish");
        }
        finally
        {
            bench.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
        final String stderr = Files.readString(out.resolve("stderr"));
        final Map<String, Object> report = Json.parseObject(stdout.trim());
        final Map<String, Object> l2 = (Map<String, Object>)report.get("l2");
        assertNotNull(l2, stdout + stderr);
        assertEquals("skipped", l2.get("status"));
        assertTrue(String.valueOf(l2.get("reason")).contains("redis-server"), l2.toString());
        final Map<String, Object> ratios = (Map<String, Object>)report.get("ratios");
        for (final String name : RATIOS)
        {
            assertTrue(ratios.containsKey(name), "missing ratio " + name);
            assertNull(ratios.get(name), name);
        }
        final Map<String, Object> verdict = (Map<String, Object>)report.get("verdict");
        assertTrue(String.valueOf(verdict.get("line")).contains("not measured in this run: "), verdict.toString());
        assertEquals(0, bench.exitValue(), "nothing measured is nothing missed: " + verdict + "\n" + stderr);
    }

    private static void assertSane(final String name, final Object value)
    {
        assertTrue(value instanceof Number, name + " is " + value);
        final double v = ((Number)value).doubleValue();
        assertTrue(Double.isFinite(v) && v > 0, name + " = " + v);
    }
}
