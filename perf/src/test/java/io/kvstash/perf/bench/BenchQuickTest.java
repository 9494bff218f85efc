package io.kvstash.perf.bench;

import io.kvstash.process.ChildJvm;
import io.kvstash.tools.Json;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

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

/**
 * Runs {@code kvstash bench --quick --json} as a real process (it starts its own worker JVM, kvstash servers
 * and, when installed, redis-server) and checks the JSON is complete and its numbers sane: every ratio and
 * field present, positive and finite. The targets are not checked here: a quick run is too short to judge
 * them, and its verdict passes once every contender ran ({@link BenchVerdict}). The redis contender is left out when redis-server is not installed
 * (the bench itself would install it, which a test must not do). Tagged {@code bench}: it takes about
 * 30-60 s; it runs in {@code mvn verify}.
 */
@Tag("bench")
class BenchQuickTest
{
    private static final String[] RATIOS = {
        "store_vs_copy", "retrieve_vs_copy", "store_vs_redis_small", "retrieve_vs_redis_small",
        "store_vs_redis_large", "retrieve_vs_redis_large", "control_p50_vs_echo" };

    @TempDir
    Path out;

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    @SuppressWarnings("unchecked")
    void shouldPrintACompleteAndSaneJsonReportWhenRunQuick() throws Exception
    {
        final boolean redis = null != RedisContender.find();
        final String stdout = runQuick(redis);
        final Map<String, Object> report = Json.parseObject(stdout.trim());
        final Map<String, Object> firstTouch = (Map<String, Object>)report.get("first_touch");
        assertNotNull(firstTouch, stdout);
        assertSane("first_touch.first_touch_store_gbps", firstTouch.get("first_touch_store_gbps"));
        assertSane("first_touch.touched_store_gbps", firstTouch.get("touched_store_gbps"));
        final Map<String, Object> verdict = (Map<String, Object>)report.get("verdict");
        assertEquals("PASS", verdict.get("verdict"), "a quick run passes once every contender ran: " + verdict);
        assertTrue(String.valueOf(verdict.get("line")).startsWith("PASS: quick smoke run"), verdict.toString());
        final Map<String, Object> ratios = assertRatios(report, redis, stdout);
        assertSane("control_p999_us", report.get("control_p999_us"));
        assertSane("control_pairs_per_s", report.get("control_pairs_per_s"));
        assertControlVariants(report, stdout);
        final Object gc = report.get("gc_count_steady");
        assertTrue(gc instanceof Number && ((Number)gc).longValue() >= 0, "gc_count_steady " + gc);
        assertEquals(4, ((List<Object>)report.get("sizes")).size());
        assertTrue(Files.size(out.resolve("bench.hlog")) > 0);
        assertTrue(Files.readString(out.resolve("bench-plot.html")).contains("<svg"));
        assertNotNull(((Map<String, Object>)report.get("machine")).get("cpu_model"));
        assertControlRounds(report, ratios, stdout);
        assertSpinGaps(report);
    }

    private String runQuick(final boolean redis) throws Exception
    {
        final List<String> args = new ArrayList<>(List.of("--quick", "--json", "--out", out.toString()));
        if (!redis)
        {
            args.add("--no-redis");
        }
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
            .start(BenchMain.class.getName(), args))
        {
            final int exit = bench.exitCode(TimeUnit.SECONDS.toMillis(140));
            assertTrue(bench.awaitEndOfOutput(TimeUnit.SECONDS.toMillis(10)), "bench output did not end");
            synchronized (lines)
            {
                stdout = lines.toString();
            }
            assertEquals(0, exit, stdout);
        }
        return stdout;
    }

    /** The headline ratios, and the serial and batched workers' beside them. */
    @SuppressWarnings("unchecked")
    private static Map<String, Object> assertRatios(
        final Map<String, Object> report, final boolean redis, final String stdout)
    {
        final Map<String, Object> ratios = (Map<String, Object>)report.get("ratios");
        assertNotNull(ratios, stdout);
        for (final String name : RATIOS)
        {
            assertTrue(ratios.containsKey(name), "missing ratio " + name);
            if (!redis && name.contains("redis"))
            {
                continue;
            }
            assertSane(name, ratios.get(name));
        }
        // The headline store/retrieve ratios are the pipelined worker's; the serial worker's are beside them.
        final Map<String, Object> serial = (Map<String, Object>)report.get("ratios_serial");
        assertNotNull(serial, stdout);
        assertSane("ratios_serial.store_vs_copy", serial.get("store_vs_copy"));
        assertSane("ratios_serial.retrieve_vs_copy", serial.get("retrieve_vs_copy"));
        // And the batched worker's (eight chunks per request), beside the headline.
        final Map<String, Object> batched = (Map<String, Object>)report.get("ratios_batched");
        assertNotNull(batched, stdout);
        assertSane("ratios_batched.store_vs_copy", batched.get("store_vs_copy"));
        assertSane("ratios_batched.retrieve_vs_copy", batched.get("retrieve_vs_copy"));
        return ratios;
    }

    /**
     * The control run again with the journal on, with the server in serve's default threading mode, and under
     * the default eviction policy, each against the plain run of its wait mode.
     */
    @SuppressWarnings("unchecked")
    private static void assertControlVariants(final Map<String, Object> report, final String stdout)
    {
        for (final String mode : new String[]{ "busy-spin", "backoff" })
        {
            final Map<String, Object> journal = (Map<String, Object>)((Map<String, Object>)report
                .get("control_journal")).get(mode);
            assertSane("control_journal." + mode + ".pairs_per_s_vs_no_journal",
                journal.get("pairs_per_s_vs_no_journal"));
            final Map<String, Object> dedicated = (Map<String, Object>)((Map<String, Object>)report
                .get("control_dedicated")).get(mode);
            assertNotNull(dedicated, stdout);
            assertSane("control_dedicated." + mode + ".p50_us", dedicated.get("p50_us"));
            assertSane("control_dedicated." + mode + ".pairs_per_s", dedicated.get("pairs_per_s"));
            assertSane("control_dedicated." + mode + ".p50_vs_shared", dedicated.get("p50_vs_shared"));
            assertSane("control_dedicated." + mode + ".pairs_per_s_vs_shared",
                dedicated.get("pairs_per_s_vs_shared"));
            // The default eviction policy's server, beside the lru one in the same run.
            final Map<String, Object> eviction = (Map<String, Object>)((Map<String, Object>)report
                .get("control_eviction")).get(mode);
            assertNotNull(eviction, stdout);
            assertEquals("slru-admit", eviction.get("eviction"));
            assertSane("control_eviction." + mode + ".pairs_per_s_vs_lru", eviction.get("pairs_per_s_vs_lru"));
            assertSane("control_eviction." + mode + ".p50_vs_lru", eviction.get("p50_vs_lru"));
            // Alternating rounds, the order swapped each round, the summary their median.
            final List<Object> evictionRounds = (List<Object>)eviction.get("rounds");
            assertEquals(2, evictionRounds.size());
            assertEquals("lru", ((Map<String, Object>)evictionRounds.get(0)).get("first"));
            assertEquals("slru-admit", ((Map<String, Object>)evictionRounds.get(1)).get("first"));
            for (final Object o : evictionRounds)
            {
                assertSane("control_eviction." + mode + " round pairs_per_s_vs_lru",
                    ((Map<String, Object>)o).get("pairs_per_s_vs_lru"));
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static void assertControlRounds(
        final Map<String, Object> report, final Map<String, Object> ratios, final String stdout)
    {
        // control_p50_vs_echo is the median of the alternating rounds, each a control and an echo p50.
        final Map<String, Object> rounds = (Map<String, Object>)report.get("control_rounds");
        final List<Object> each = (List<Object>)rounds.get("rounds");
        assertEquals(2, each.size(), stdout);
        for (final Object o : each)
        {
            final Map<String, Object> r = (Map<String, Object>)o;
            assertSane("round control_p50_us", r.get("control_p50_us"));
            assertSane("round echo_p50_us", r.get("echo_p50_us"));
            assertSane("round echo_header_only_p50_us", r.get("echo_header_only_p50_us"));
            assertSane("round control_p50_vs_echo_header_only", r.get("control_p50_vs_echo_header_only"));
        }
        assertEquals(rounds.get("median_control_p50_vs_echo"), ratios.get("control_p50_vs_echo"));
        assertSane("median_control_p50_vs_echo_header_only", rounds.get("median_control_p50_vs_echo_header_only"));
    }

    @SuppressWarnings("unchecked")
    private static void assertSpinGaps(final Map<String, Object> report)
    {
        final Map<String, Object> gaps = (Map<String, Object>)((Map<String, Object>)((Map<String, Object>)report
            .get("machine")).get("spin_gaps")).get("before_control");
        assertEquals(Runtime.getRuntime().availableProcessors(), ((Number)gaps.get("threads")).intValue());
        // Whatever the machine takes, the report must hold together: a gap is longer than the threshold, the
        // share of time lost is a share, and the clear pair time is there exactly when gaps were seen.
        final double lost = ((Number)gaps.get("time_lost_pct")).doubleValue();
        assertTrue(lost >= 0 && lost <= 100, "time_lost_pct " + gaps);
        if (((Number)gaps.get("gaps_per_s")).longValue() > 0)
        {
            assertTrue(((Number)gaps.get("gap_p50_us")).doubleValue() >= 10, "gap_p50_us " + gaps);
            assertSane("p999_clear_pair_us", gaps.get("p999_clear_pair_us"));
        }
        else
        {
            assertNull(gaps.get("p999_clear_pair_us"), "p999_clear_pair_us without gaps " + gaps);
        }
    }

    private static void assertSane(final String name, final Object value)
    {
        assertTrue(value instanceof Number, name + " is " + value);
        final double v = ((Number)value).doubleValue();
        assertTrue(Double.isFinite(v) && v > 0, name + " = " + v);
    }

}
