package io.kvstash.perf.bench;

import java.io.PrintStream;
import java.util.List;
import java.util.Map;

/**
 * The human form of a bench report: the machine, the data-path table per chunk size, the control table per
 * wait mode, and the ratios against their targets.
 */
final class BenchTables
{
    private final PrintStream out;

    BenchTables(final PrintStream out)
    {
        this.out = out;
    }

    static String machineLine(final Map<String, Object> m)
    {
        return BenchSupport.fmt("%s cores, %s, %s GiB, kernel %s, clock %s, load %s -> %s; %s; bench JVM flags [%s]; " +
            "worker JVM flags [%s]", m.get("cores"), m.get("cpu_model"), m.get("memory_gib"), m.get("kernel"),
            m.get("clock_source"), m.get("load_average"), m.get("load_average_end"), m.get("jvm"), m.get("jvm_flags"),
            m.get("worker_jvm_flags"));
    }

    @SuppressWarnings("unchecked")
    private static void controlVariant(
        final PrintStream out,
        final Map<String, Object> report,
        final String key,
        final String mode,
        final String what,
        final String baseline)
    {
        final Map<String, Object> variants = (Map<String, Object>)report.get(key);
        final Map<String, Object> s = null == variants ? null : (Map<String, Object>)variants.get(mode);
        if (null != s)
        {
            out.println(BenchSupport.fmt("%-10s control, %s: p50 %s p99.9 %s, %s pairs/s; against the plain run: " +
                "p50 x%s, pairs/s x%s", mode, what, num(s.get("p50_us"), "%.2f"), num(s.get("p999_us"), "%.2f"),
                num(s.get("pairs_per_s"), "%.0f"), num(s.get("p50_vs_" + baseline), "%.2f"),
                num(s.get("pairs_per_s_vs_" + baseline), "%.2f")));
        }
    }

    @SuppressWarnings("unchecked")
    private static void evictionRounds(final PrintStream out, final Map<String, Object> report, final String mode)
    {
        final Map<String, Object> variants = (Map<String, Object>)report.get("control_eviction");
        final Map<String, Object> s = null == variants ? null : (Map<String, Object>)variants.get(mode);
        if (null == s)
        {
            return;
        }
        final List<Object> rounds = (List<Object>)s.get("rounds");
        out.println(BenchSupport.fmt("%-10s control, eviction %s against lru, %d alternating rounds: median pairs/s " +
            "x%s (%s against %s), median p50 x%s (%s against %s us)", mode, s.get("eviction"), rounds.size(),
            num(s.get("pairs_per_s_vs_lru"), "%.3f"), num(s.get("pairs_per_s"), "%.0f"),
            num(s.get("lru_pairs_per_s"), "%.0f"), num(s.get("p50_vs_lru"), "%.3f"), num(s.get("p50_us"), "%.2f"),
            num(s.get("lru_p50_us"), "%.2f")));
        final StringBuilder each = new StringBuilder();
        for (final Object o : rounds)
        {
            each.append(' ').append(num(((Map<String, Object>)o).get("pairs_per_s_vs_lru"), "%.2f"));
        }
        out.println(BenchSupport.fmt("%-10s   pairs/s ratio of each round:%s", "", each));
    }

    private static String num(final Object v, final String format)
    {
        return v instanceof Number ? BenchSupport.fmt(format, ((Number)v).doubleValue()) : "-";
    }

    private static String ratio(final Object n, final Object d)
    {
        return n instanceof Number && d instanceof Number ?
            BenchSupport.fmt("%.2f", ((Number)n).doubleValue() / ((Number)d).doubleValue()) : "-";
    }

    /**
     * Prints the report's tables and lines in their fixed order.
     *
     * @param report  the report ({@link BenchReport#of}).
     * @param results the results it was built from (whether this run installed redis-server).
     */
    void print(final Map<String, Object> report, final BenchResults results)
    {
        heading(report);
        dataPath(report);
        dataPathBackoff(report);
        pipelinedAndBatched(report);
        firstTouch(report);
        control(report);
        controlRounds(report);
        spinGaps(report);
        L2Report.print(out, report);
        targets(report);
        files(report, results);
    }

    /** The run (mode, repetitions, time) and the machine. */
    @SuppressWarnings("unchecked")
    private void heading(final Map<String, Object> report)
    {
        final Map<String, Object> run = (Map<String, Object>)report.get("run");
        out.println("kvstash bench (" + report.get("mode") + "): median of " + run.get("reps") + " repetitions after " +
            run.get("warmups") + " warm-up; " + run.get("elapsed_s") + " s");
        out.println("machine: " + machineLine((Map<String, Object>)report.get("machine")));
        out.println();
    }

    /** The serial worker's data path in busy-spin against the copy, Redis and a map, a row per chunk size. */
    @SuppressWarnings("unchecked")
    private void dataPath(final Map<String, Object> report)
    {
        out.println("Data path, GB/s (10^9 bytes/s), single thread; store/retrieve = serial worker process (one " +
            "request in flight, every answer awaited) through the " +
            "server, zero-copy slot views");
        out.println("(store/copy: store GB/s over a plain memory copy's; retr/copy the same for retrieve; " +
            "store/SET and retr/GET: over Redis SET and GET; map: an in-process hash map)");
        out.println(BenchSupport.fmt("%-8s %7s %7s %10s %8s %8s %9s %9s %9s %9s %8s %7s %7s %9s %9s",
            "chunk", "copyIn", "store", "store/copy", "copyOut", "retrieve", "retr/copy", "redisSET", "redisGET",
            "store/SET", "retr/GET", "mapPut", "mapGet", "store p50", "retr p50"));
        for (final Map<String, Object> row : (List<Map<String, Object>>)report.get("sizes"))
        {
            out.println(BenchSupport.fmt("%-8s %7s %7s %10s %8s %8s %9s %9s %9s %9s %8s %7s %7s %9s %9s",
                BenchSupport.size(((Number)row.get("chunk_bytes")).longValue()),
                num(row.get("copy_in_gbps"), "%.2f"), num(row.get("store_gbps"), "%.2f"),
                ratio(row.get("store_gbps"), row.get("copy_in_gbps")),
                num(row.get("copy_out_gbps"), "%.2f"), num(row.get("retrieve_gbps"), "%.2f"),
                ratio(row.get("retrieve_gbps"), row.get("copy_out_gbps")),
                num(row.get("redis_set_gbps"), "%.2f"), num(row.get("redis_get_gbps"), "%.2f"),
                ratio(row.get("store_gbps"), row.get("redis_set_gbps")),
                ratio(row.get("retrieve_gbps"), row.get("redis_get_gbps")),
                num(row.get("map_put_gbps"), "%.2f"), num(row.get("map_get_gbps"), "%.2f"),
                num(row.get("store_p50_us"), "%.1fus"), num(row.get("retrieve_p50_us"), "%.1fus")));
        }
        out.println();
    }

    /** The data path in backoff, and the per-chunk medians against the copy in both modes. */
    @SuppressWarnings("unchecked")
    private void dataPathBackoff(final Map<String, Object> report)
    {
        out.println("The same in backoff mode (server WaitMode.BACKOFF, client backoff), and per-chunk medians " +
            "(copy time / kvstash time) of both modes");
        out.println(BenchSupport.fmt("%-8s %7s %7s %10s %8s %8s %9s | %14s %14s %14s %14s", "chunk", "copyIn",
            "store", "store/copy", "copyOut", "retrieve", "retr/copy", "p50 store/copy", "p50 retr/copy",
            "p50 store/copy", "p50 retr/copy"));
        out.println(BenchSupport.fmt("%-8s %7s %7s %10s %8s %8s %9s | %14s %14s %14s %14s", "", "", "", "", "", "", "",
            "busy-spin", "busy-spin", "backoff", "backoff"));
        for (final Map<String, Object> row : (List<Map<String, Object>>)report.get("sizes"))
        {
            out.println(BenchSupport.fmt("%-8s %7s %7s %10s %8s %8s %9s | %14s %14s %14s %14s",
                BenchSupport.size(((Number)row.get("chunk_bytes")).longValue()),
                num(row.get("copy_in_backoff_gbps"), "%.2f"), num(row.get("store_backoff_gbps"), "%.2f"),
                ratio(row.get("store_backoff_gbps"), row.get("copy_in_backoff_gbps")),
                num(row.get("copy_out_backoff_gbps"), "%.2f"), num(row.get("retrieve_backoff_gbps"), "%.2f"),
                ratio(row.get("retrieve_backoff_gbps"), row.get("copy_out_backoff_gbps")),
                ratio(row.get("copy_in_p50_us"), row.get("store_p50_us")),
                ratio(row.get("copy_out_p50_us"), row.get("retrieve_p50_us")),
                ratio(row.get("copy_in_backoff_p50_us"), row.get("store_backoff_p50_us")),
                ratio(row.get("copy_out_backoff_p50_us"), row.get("retrieve_backoff_p50_us"))));
        }
        out.println();
    }

    /** The pipelined and the batched workers against the copy, a table each. */
    @SuppressWarnings("unchecked")
    private void pipelinedAndBatched(final Map<String, Object> report)
    {
        for (final String[] worker : new String[][]{
            { "_pipelined", "Pipelined worker (the next chunk's prepare sent before the current chunk's bytes move, " +
                "commits not awaited): the ratios' store_vs_copy and retrieve_vs_copy" },
            { "_batched", "Batched worker (eight chunks per prepare and per commit, pipelined the same way): " +
                "ratios_batched, beside the headline" } })
        {
            out.println(worker[1] + "; GB/s against the copy of the same repetitions");
            out.println(BenchSupport.fmt("%-8s %10s %10s %10s %9s | %13s %10s %12s %9s", "chunk", "store spin",
                "store/copy", "retr spin", "retr/copy", "store backoff", "store/copy", "retr backoff", "retr/copy"));
            final String st = "store" + worker[0];
            final String re = "retrieve" + worker[0];
            for (final Map<String, Object> row : (List<Map<String, Object>>)report.get("sizes"))
            {
                out.println(BenchSupport.fmt("%-8s %10s %10s %10s %9s | %13s %10s %12s %9s",
                    BenchSupport.size(((Number)row.get("chunk_bytes")).longValue()),
                    num(row.get(st + "_gbps"), "%.2f"), ratio(row.get(st + "_gbps"), row.get("copy_in_gbps")),
                    num(row.get(re + "_gbps"), "%.2f"), ratio(row.get(re + "_gbps"), row.get("copy_out_gbps")),
                    num(row.get(st + "_backoff_gbps"), "%.2f"),
                    ratio(row.get(st + "_backoff_gbps"), row.get("copy_in_backoff_gbps")),
                    num(row.get(re + "_backoff_gbps"), "%.2f"),
                    ratio(row.get(re + "_backoff_gbps"), row.get("copy_out_backoff_gbps"))));
            }
            out.println();
        }
    }

    /** Stores into pages never touched against the same pages again, when the part ran. */
    @SuppressWarnings("unchecked")
    private void firstTouch(final Map<String, Object> report)
    {
        final Map<String, Object> firstTouch = (Map<String, Object>)report.get("first_touch");
        if (null != firstTouch)
        {
            out.println(BenchSupport.fmt("First touch (a pool neither the server nor the client prepared, %s chunks): " +
                "store %s GB/s into pages never touched, %s GB/s into the same pages again (x%s)",
                BenchSupport.size(((Number)firstTouch.get("chunk_bytes")).longValue()),
                num(firstTouch.get("first_touch_store_gbps"), "%.2f"), num(firstTouch.get("touched_store_gbps"), "%.2f"),
                num(firstTouch.get("first_touch_vs_touched"), "%.2f")));
            out.println();
        }
    }

    /** Control pairs against echo pairs, the server's own time and the control variants, per wait mode. */
    @SuppressWarnings("unchecked")
    private void control(final Map<String, Object> report)
    {
        out.println("Control pairs (PREPARE_STORE + COMMIT_STORE of one chunk, no bytes written) vs bare ring echo " +
            "pairs (same record sizes), microseconds");
        out.println(BenchSupport.fmt("%-10s %-8s %8s %8s %8s %9s %12s %10s %10s", "mode", "who", "p50", "p99", "p99.9",
            "max", "pairs/s", "paced p50", "paced p99.9"));
        for (final String mode : new String[]{ BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF })
        {
            for (final String who : new String[]{ "control", "echo" })
            {
                final Map<String, Object> s = (Map<String, Object>)((Map<String, Object>)report.get(who)).get(mode);
                if (null == s)
                {
                    continue;
                }
                out.println(BenchSupport.fmt("%-10s %-8s %8s %8s %8s %9s %12s %10s %10s", mode, who,
                    num(s.get("p50_us"), "%.2f"), num(s.get("p99_us"), "%.2f"), num(s.get("p999_us"), "%.2f"),
                    num(s.get("max_us"), "%.1f"), num(s.get("pairs_per_s"), "%.0f"), num(s.get("paced_p50_us"), "%.2f"),
                    num(s.get("paced_p999_us"), "%.2f")));
            }
        }
        for (final String mode : new String[]{ BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF })
        {
            final Map<String, Object> s = (Map<String, Object>)((Map<String, Object>)report.get("control")).get(mode);
            if (null != s && null != s.get("server_prepare_p50_us"))
            {
                out.println(BenchSupport.fmt("%-10s server time (receiver stamp to response written, every request): " +
                    "prepare p50 %s p99 %s, commit p50 %s p99 %s", mode, num(s.get("server_prepare_p50_us"), "%.2f"),
                    num(s.get("server_prepare_p99_us"), "%.2f"), num(s.get("server_commit_p50_us"), "%.2f"),
                    num(s.get("server_commit_p99_us"), "%.2f")));
            }
        }
        for (final String mode : new String[]{ BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF })
        {
            controlVariant(out, report, "control_journal", mode, "journal on (serve --capture)", "no_journal");
            controlVariant(out, report, "control_dedicated", mode, "server DEDICATED (receiver and pipeline threads)",
                "shared");
            evictionRounds(out, report, mode);
        }
    }

    /** The busy-spin alternating rounds of control and echo, when they ran. */
    @SuppressWarnings("unchecked")
    private void controlRounds(final Map<String, Object> report)
    {
        final Map<String, Object> rounds = (Map<String, Object>)report.get("control_rounds");
        if (null != rounds && !((List<Object>)rounds.get("rounds")).isEmpty())
        {
            out.println("busy-spin, alternating rounds (control, then echo right after, then the header-only echo):");
            for (final Object o : (List<Object>)rounds.get("rounds"))
            {
                final Map<String, Object> r = (Map<String, Object>)o;
                out.println(BenchSupport.fmt("  control p50 %s p99.9 %s (server prepare %s, commit %s) | echo p50 %s " +
                    "p99.9 %s | ratio %s | header-only echo p50 %s, ratio %s", num(r.get("control_p50_us"), "%.2f"),
                    num(r.get("control_p999_us"), "%.2f"), num(r.get("server_prepare_p50_us"), "%.2f"),
                    num(r.get("server_commit_p50_us"), "%.2f"), num(r.get("echo_p50_us"), "%.2f"),
                    num(r.get("echo_p999_us"), "%.2f"), num(r.get("control_p50_vs_echo"), "%.2f"),
                    num(r.get("echo_header_only_p50_us"), "%.2f"),
                    num(r.get("control_p50_vs_echo_header_only"), "%.2f")));
            }
            out.println(BenchSupport.fmt("  median ratio %s (the long runs above, a minute apart: %s; against the " +
                "header-only echo: %s)", num(rounds.get("median_control_p50_vs_echo"), "%.2f"),
                num(rounds.get("long_runs_control_p50_vs_echo"), "%.2f"),
                num(rounds.get("median_control_p50_vs_echo_header_only"), "%.2f")));
        }
    }

    /** The machine's spin gaps, when they were measured. */
    @SuppressWarnings("unchecked")
    private void spinGaps(final Map<String, Object> report)
    {
        final Map<String, Object> gaps = (Map<String, Object>)((Map<String, Object>)report.get("machine")).get("spin_gaps");
        if (null != gaps)
        {
            for (final Map.Entry<String, Object> e : gaps.entrySet())
            {
                final Map<String, Object> g = (Map<String, Object>)e.getValue();
                out.println(BenchSupport.fmt("spin gaps %s: %s gaps/s over %s us (p50 %s us, max %s us), %s %% of the " +
                    "time lost, %s/s over 500 us (%s ms/s); pairs up to %s us keep their p99.9 clear of them",
                    e.getKey(), g.get("gaps_per_s"), g.get("gap_over_us"), num(g.get("gap_p50_us"), "%.1f"),
                    num(g.get("gap_max_us"), "%.0f"), g.get("time_lost_pct"), g.get("gaps_over_500us_per_s"),
                    g.get("gaps_over_500us_ms_per_s"), num(g.get("p999_clear_pair_us"), "%.2f")));
            }
        }
    }

    /** Each target: its figure, its bound and whether it was met. */
    @SuppressWarnings("unchecked")
    private void targets(final Map<String, Object> report)
    {
        out.println();
        out.println("Targets: what each compares, the figure of this run, the bound and whether it was met");
        final Map<String, Object> targets = (Map<String, Object>)report.get("targets");
        int nameWidth = 24;
        for (final String name : targets.keySet())
        {
            nameWidth = Math.max(nameWidth, name.length());
        }
        final String row = "  %-" + nameWidth + "s %14s  target %-12s %-13s %s";
        for (final Map.Entry<String, Object> e : targets.entrySet())
        {
            final Map<String, Object> t = (Map<String, Object>)e.getValue();
            final Object met = t.get("met");
            out.println(BenchSupport.fmt(row, e.getKey(), num(t.get("value"), "%.3f"),
                t.get("target"), null == met ? "not measured" : Boolean.TRUE.equals(met) ? "met" : "MISSED",
                BenchVerdict.DESCRIPTIONS.getOrDefault(e.getKey(), "")));
        }
    }

    /** Where the files went, and whether this run installed redis-server. */
    @SuppressWarnings("unchecked")
    private void files(final Map<String, Object> report, final BenchResults results)
    {
        final Map<String, Object> files = (Map<String, Object>)report.get("files");
        out.println();
        out.println("files: " + files.get("hlog") + ", " + files.get("plot") + ", " + files.get("json"));
        if (results.redisInstalled)
        {
            out.println("note: redis-server was missing and was installed with apt-get by this run");
        }
    }
}
