package io.kvstash.perf.bench;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

import static io.kvstash.perf.bench.BenchResults.value;

/**
 * The bench's report, built once every part ran: the ratios, the targets they are judged against and the
 * summaries, as one ordered map that {@code --json} prints, {@code result.json} holds and {@link BenchTables}
 * lays out. Its keys and their order are the bench's output contract.
 */
final class BenchReport
{
    /** The chunk sizes the store and retrieve ratios are taken over: 256 KiB and more. */
    private static final long[] LARGE_CHUNKS = { 256L << 10, 2L << 20, 32L << 20 };

    private BenchReport()
    {
    }

    /**
     * Builds the report (without its verdict, which is judged from its {@code targets}).
     *
     * @param results      the results of every part; its {@code machine} is set to {@code machineFacts}.
     * @param machineFacts the machine's facts ({@link MachineFacts}); the spin gaps are added to it.
     * @param outDir       the output directory.
     * @param quick        whether the run was {@code --quick}.
     * @param elapsedS     seconds the run took so far.
     * @return the report.
     */
    static Map<String, Object> of(
        final BenchResults results,
        final Map<String, Object> machineFacts,
        final Path outDir,
        final boolean quick,
        final double elapsedS)
    {
        results.machine = machineFacts;
        final Map<String, Map<String, Object>> control = results.control;
        final Map<String, Object> ratios = headlineRatios(results);

        final Map<String, Object> report = new LinkedHashMap<>();
        report.put("bench", "kvstash");
        report.put("mode", quick ? "quick" : "full");
        report.put("ratios", ratios);
        report.put("control_p999_us", value(control, BenchSupport.BUSY_SPIN, "p999_us"));
        report.put("control_pairs_per_s", value(control, BenchSupport.BUSY_SPIN, "pairs_per_s"));
        report.put("gc_count_steady", results.gcSteady);
        putWorkerRatios(results, report);
        report.put("first_touch", results.firstTouch);
        if (null != results.l2)
        {
            report.put("l2", results.l2);
        }
        report.put("targets", targets(results, ratios, report));
        report.put("sizes", results.sizes);
        report.put("control", control);
        report.put("control_journal", results.controlJournal);
        report.put("control_dedicated", results.controlDedicated);
        if (!results.controlEviction.isEmpty())
        {
            report.put("control_eviction", results.controlEviction);
        }
        report.put("echo", results.echo);
        if (null != results.scale)
        {
            report.put("scaling", results.scale.get("scaling"));
            report.put("scale", results.scale);
        }
        report.put("control_rounds", controlRounds(results));
        final Map<String, Object> redis = new LinkedHashMap<>();
        redis.put("version", results.redisVersion);
        redis.put("installed_by_bench", results.redisInstalled);
        report.put("redis", redis);
        report.put("run", run(results.settings, elapsedS));
        if (!results.spinGaps.isEmpty())
        {
            machineFacts.put("spin_gaps", results.spinGaps);
        }
        report.put("machine", machineFacts);
        report.put("files", files(outDir));
        return report;
    }

    /**
     * The headline ratios, busy-spin, that the targets judge.
     * <p>
     * Against the copy bound the worker is the pipelined one, as a worker streaming a prompt's chunks runs:
     * each chunk still goes prepare, write, commit, with the next chunk's prepare sent before the bytes
     * move, so the server's decision overlaps the copy instead of adding two round trips to it. The
     * one-request-at-a-time worker's figures are in ratios_serial; against Redis (one SET or GET at a
     * time) and the in-process map the serial worker is compared, access pattern for access pattern.
     */
    private static Map<String, Object> headlineRatios(final BenchResults results)
    {
        final Map<String, Object> ratios = new LinkedHashMap<>();
        ratios.put("store_vs_copy", ratio(results, "store_pipelined_gbps", "copy_in_gbps", 256L << 10, 2L << 20,
            32L << 20));
        ratios.put("retrieve_vs_copy", ratio(results, "retrieve_pipelined_gbps", "copy_out_gbps", 256L << 10,
            2L << 20, 32L << 20));
        ratios.put("store_vs_redis_small", ratio(results, "store_gbps", "redis_set_gbps", 256L << 10, 2L << 20));
        ratios.put("retrieve_vs_redis_small", ratio(results, "retrieve_gbps", "redis_get_gbps", 256L << 10,
            2L << 20));
        ratios.put("store_vs_redis_large", ratio(results, "store_gbps", "redis_set_gbps", 32L << 20));
        ratios.put("retrieve_vs_redis_large", ratio(results, "retrieve_gbps", "redis_get_gbps", 32L << 20));
        // Control against echo from the alternating rounds (each round's two p50s measured seconds apart,
        // in the same host state); the long runs' ratio, a minute apart, is kept in control_rounds.
        final Double roundsRatio = results.medianRoundRatio("control_p50_vs_echo");
        ratios.put("control_p50_vs_echo", null != roundsRatio ? roundsRatio : longRunsControlVsEcho(results));
        ratios.put("store_vs_map", ratio(results, "store_gbps", "map_put_gbps", 256L << 10, 2L << 20, 32L << 20));
        ratios.put("retrieve_vs_map", ratio(results, "retrieve_gbps", "map_get_gbps", 256L << 10, 2L << 20,
            32L << 20));
        L2Report.addRatios(results, ratios);
        return ratios;
    }

    /**
     * The ratios of the other workers and modes, beside the headline: ratios_backoff, ratios_serial, ratios_p50,
     * ratios_pipelined and ratios_batched, in that order.
     */
    private static void putWorkerRatios(final BenchResults results, final Map<String, Object> report)
    {
        final Map<String, Object> ratiosBackoff = new LinkedHashMap<>();
        ratiosBackoff.put("store_vs_copy", ratio(results, "store_pipelined_backoff_gbps", "copy_in_backoff_gbps",
            256L << 10, 2L << 20, 32L << 20));
        ratiosBackoff.put("retrieve_vs_copy", ratio(results, "retrieve_pipelined_backoff_gbps",
            "copy_out_backoff_gbps", 256L << 10, 2L << 20, 32L << 20));
        ratiosBackoff.put("store_vs_redis_small", ratio(results, "store_backoff_gbps", "redis_set_gbps", 256L << 10,
            2L << 20));
        ratiosBackoff.put("retrieve_vs_redis_small", ratio(results, "retrieve_backoff_gbps", "redis_get_gbps",
            256L << 10, 2L << 20));
        ratiosBackoff.put("store_vs_redis_large", ratio(results, "store_backoff_gbps", "redis_set_gbps", 32L << 20));
        ratiosBackoff.put("retrieve_vs_redis_large", ratio(results, "retrieve_backoff_gbps", "redis_get_gbps",
            32L << 20));
        report.put("ratios_backoff", ratiosBackoff);
        // The worker with one request in flight: prepare, write, commit, each answer awaited before the next
        // request goes out (two round trips per chunk on top of the copy); and its per-chunk medians (time of
        // the copy / time of the store): the typical chunk, not the loop's throughput, which a shared
        // machine's scheduling stalls dominate.
        report.put("ratios_serial", againstCopy(results, "", false));
        report.put("ratios_p50", againstCopy(results, "", true));
        // The worker streaming chunks: the next chunk's prepare sent before the current chunk's bytes move,
        // commits not awaited (two requests in flight).
        final Map<String, Object> ratiosPipelined = againstCopy(results, "_pipelined", false);
        final Map<String, Object> pipelinedP50 = againstCopy(results, "_pipelined", true);
        ratiosPipelined.put("store_p50_vs_copy", pipelinedP50.get("store_vs_copy"));
        ratiosPipelined.put("retrieve_p50_vs_copy", pipelinedP50.get("retrieve_vs_copy"));
        report.put("ratios_pipelined", ratiosPipelined);
        // The worker that prepares and commits eight chunks per request (a prompt's chunks at a time, as an
        // inference engine stores them), pipelined like the one above: beside the headline, not in it.
        report.put("ratios_batched", againstCopy(results, "_batched", false));
    }

    /** Control p50 over echo p50 from the long busy-spin runs, or null when either did not run. */
    private static Double longRunsControlVsEcho(final BenchResults results)
    {
        final Object controlP50 = value(results.control, BenchSupport.BUSY_SPIN, "p50_us");
        final Object echoP50 = value(results.echo, BenchSupport.BUSY_SPIN, "p50_us");
        return controlP50 instanceof Number && echoP50 instanceof Number ?
            ((Number)controlP50).doubleValue() / ((Number)echoP50).doubleValue() : null;
    }

    /** The alternating rounds of control and echo, with their median ratios and the long runs' ratio. */
    private static Map<String, Object> controlRounds(final BenchResults results)
    {
        final Map<String, Object> controlRounds = new LinkedHashMap<>();
        controlRounds.put("median_control_p50_vs_echo", results.medianRoundRatio("control_p50_vs_echo"));
        controlRounds.put("long_runs_control_p50_vs_echo", longRunsControlVsEcho(results));
        controlRounds.put("median_control_p50_vs_echo_header_only",
            results.medianRoundRatio("control_p50_vs_echo_header_only"));
        controlRounds.put("rounds", results.rounds);
        return controlRounds;
    }

    /** How the run ran: repetitions, pool, where the server ran, and the seconds it took. */
    private static Map<String, Object> run(final BenchSettings settings, final double elapsedS)
    {
        final Map<String, Object> run = new LinkedHashMap<>();
        run.put("reps", settings.reps);
        run.put("warmups", settings.warmups);
        run.put("pool_bytes", settings.poolBytes);
        run.put("server", "in the bench JVM: SHARED threading (receiver and pipeline on one thread); data path " +
            "in busy-spin (ratios) and backoff (ratios_backoff), server and client alike");
        run.put("elapsed_s", Math.round(elapsedS * 10) / 10.0);
        return run;
    }

    /** The absolute paths of the output directory and of the files the run writes there. */
    private static Map<String, Object> files(final Path outDir)
    {
        final Map<String, Object> files = new LinkedHashMap<>();
        files.put("dir", outDir.toAbsolutePath().toString());
        files.put("hlog", outDir.resolve(BenchFiles.HLOG).toAbsolutePath().toString());
        files.put("plot", outDir.resolve(BenchFiles.PLOT).toAbsolutePath().toString());
        files.put("json", outDir.resolve(BenchFiles.JSON).toAbsolutePath().toString());
        return files;
    }

    /**
     * The smallest ratio of two fields of the size rows over the given chunk sizes.
     *
     * @return the ratio, or null when a row of those sizes lacks either field.
     */
    private static Double ratio(
        final BenchResults results, final String numerator, final String denominator, final long... sizesOf)
    {
        Double min = null;
        for (final long size : sizesOf)
        {
            for (final Map<String, Object> row : results.sizes)
            {
                if (((Number)row.get("chunk_bytes")).longValue() != size)
                {
                    continue;
                }
                final Object n = row.get(numerator);
                final Object d = row.get(denominator);
                if (!(n instanceof Number) || !(d instanceof Number))
                {
                    return null;
                }
                final double r = ((Number)n).doubleValue() / ((Number)d).doubleValue();
                min = null == min ? r : Math.min(min, r);
            }
        }
        return min;
    }

    /**
     * One worker's store and retrieve against the copy of the same repetitions, busy-spin and backoff,
     * each the minimum over the chunks of 256 KiB and more.
     *
     * @param worker       "" for the serial worker, "_pipelined" or "_batched" for the others.
     * @param perChunkP50  per-chunk medians (copy time / kvstash time) instead of GB/s.
     */
    private static Map<String, Object> againstCopy(
        final BenchResults results, final String worker, final boolean perChunkP50)
    {
        final Map<String, Object> m = new LinkedHashMap<>();
        for (final String mode : new String[]{ "", "_backoff" })
        {
            for (final String[] op : new String[][]{ { "store", "copy_in" }, { "retrieve", "copy_out" } })
            {
                final String name = op[0] + ("".equals(mode) ? "" : "_backoff") + "_vs_copy";
                m.put(name, perChunkP50 ?
                    ratio(results, op[1] + mode + "_p50_us", op[0] + worker + mode + "_p50_us", LARGE_CHUNKS) :
                    ratio(results, op[0] + worker + mode + "_gbps", op[1] + mode + "_gbps", LARGE_CHUNKS));
            }
        }
        return m;
    }

    private static Map<String, Object> targets(
        final BenchResults results, final Map<String, Object> ratios, final Map<String, Object> report)
    {
        final Map<String, Object> t = new LinkedHashMap<>();
        target(t, "store_vs_copy", ratios.get("store_vs_copy"), ">=", 0.90);
        target(t, "retrieve_vs_copy", ratios.get("retrieve_vs_copy"), ">=", 0.90);
        target(t, "store_vs_redis_small", ratios.get("store_vs_redis_small"), ">=", 3);
        target(t, "retrieve_vs_redis_small", ratios.get("retrieve_vs_redis_small"), ">=", 3);
        target(t, "store_vs_redis_large", ratios.get("store_vs_redis_large"), ">=", 10);
        target(t, "retrieve_vs_redis_large", ratios.get("retrieve_vs_redis_large"), ">=", 10);
        target(t, "control_p50_vs_echo", ratios.get("control_p50_vs_echo"), "<=", 1.5);
        target(t, "control_p999_us", report.get("control_p999_us"), "<=", 20);
        final Map<String, Object> spinGaps = results.spinGaps;
        if (spinGaps.get("before_control") instanceof Map)
        {
            // The longest pair whose p99.9 the machine's gaps leave alone (see SpinGaps).
            @SuppressWarnings("unchecked")
            final Map<String, Object> target = (Map<String, Object>)t.get("control_p999_us");
            target.put("machine_p999_clear_pair_us",
                ((Map<?, ?>)spinGaps.get("before_control")).get("p999_clear_pair_us"));
            target.put("control_p50_us", value(results.control, BenchSupport.BUSY_SPIN, "p50_us"));
        }
        target(t, "control_pairs_per_s", report.get("control_pairs_per_s"), ">=", 1_000_000);
        target(t, "gc_count_steady", report.get("gc_count_steady"), "<=", 0);
        for (final String mode : new String[]{ BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF })
        {
            // The eviction policy's bookkeeping, when --eviction named one: at most 10 % of the lru pairs/s.
            if (results.controlEviction.containsKey(mode))
            {
                target(t, "eviction_pairs_per_s_vs_lru_" + mode.replace('-', '_'),
                    value(results.controlEviction, mode, "pairs_per_s_vs_lru"), ">=", 0.90);
            }
        }
        L2Report.addTargets(results, ratios, t);
        return t;
    }

    static void target(
        final Map<String, Object> t, final String name, final Object value, final String op, final double bound)
    {
        final Map<String, Object> m = new LinkedHashMap<>();
        m.put("value", value);
        m.put("target", op + " " + (bound == Math.rint(bound) ? Long.toString((long)bound) : Double.toString(bound)));
        if (value instanceof Number)
        {
            final double v = ((Number)value).doubleValue();
            m.put("met", ">=".equals(op) ? v >= bound : v <= bound);
        }
        else
        {
            m.put("met", null);
        }
        t.put(name, m);
    }
}
