package io.kvstash.perf.bench;

import java.io.PrintStream;
import java.util.List;
import java.util.Map;

/**
 * The second tier's part in the bench's report: its four ratios (each the minimum over the part's chunk sizes),
 * its targets, and its table. Nothing is added when the part was not asked for; when it was but could not run
 * (no {@code redis-server}), the ratios are null and the report's {@code l2} section says why.
 */
final class L2Report
{
    /** Ratio name to the field of the part's size rows it is the minimum of. */
    private static final String[][] RATIOS = {
        { "l2_fetch_vs_get", "l2_fetch_vs_get" },
        { "l2_write_vs_set", "l2_write_vs_set" },
        { "store_vs_copy_l2", "store_vs_copy" },
        { "retrieve_vs_copy_l2", "retrieve_vs_copy" },
        { "store_vs_copy_l2_backoff", "store_vs_copy_backoff" },
        { "retrieve_vs_copy_l2_backoff", "retrieve_vs_copy_backoff" } };

    private L2Report()
    {
    }

    /**
     * Adds the part's ratios to the report's {@code ratios}.
     *
     * @param results the bench's results.
     * @param ratios  the report's ratios.
     */
    static void addRatios(final BenchResults results, final Map<String, Object> ratios)
    {
        if (null == results.l2)
        {
            return;
        }
        for (final String[] r : RATIOS)
        {
            ratios.put(r[0], minimum(results.l2, r[1]));
        }
    }

    /**
     * Adds the part's targets: fetch and write at least 0.8 of a bare GET and SET, store and retrieve with
     * write-through on at least 0.90 of the copy (its collections are in the bench's {@code gc_count_steady}).
     *
     * @param results the bench's results.
     * @param ratios  the report's ratios, with the part's.
     * @param targets the report's targets.
     */
    static void addTargets(final BenchResults results, final Map<String, Object> ratios,
        final Map<String, Object> targets)
    {
        if (null == results.l2)
        {
            return;
        }
        BenchReport.target(targets, "l2_fetch_vs_get", ratios.get("l2_fetch_vs_get"), ">=", 0.8);
        BenchReport.target(targets, "l2_write_vs_set", ratios.get("l2_write_vs_set"), ">=", 0.8);
        BenchReport.target(targets, "store_vs_copy_l2", ratios.get("store_vs_copy_l2"), ">=", 0.90);
        BenchReport.target(targets, "retrieve_vs_copy_l2", ratios.get("retrieve_vs_copy_l2"), ">=", 0.90);
    }

    @SuppressWarnings("unchecked")
    private static Double minimum(final Map<String, Object> l2, final String field)
    {
        final Object rows = l2.get("sizes");
        if (!(rows instanceof List) || ((List<Object>)rows).isEmpty())
        {
            return null;
        }
        Double min = null;
        for (final Object o : (List<Object>)rows)
        {
            final Object v = ((Map<String, Object>)o).get(field);
            if (!(v instanceof Number))
            {
                return null;
            }
            min = null == min ? ((Number)v).doubleValue() : Math.min(min, ((Number)v).doubleValue());
        }
        return min;
    }

    /**
     * Prints the part's table, or why it did not run.
     *
     * @param out    where to print.
     * @param report the report.
     */
    @SuppressWarnings("unchecked")
    static void print(final PrintStream out, final Map<String, Object> report)
    {
        final Map<String, Object> l2 = (Map<String, Object>)report.get("l2");
        if (null == l2)
        {
            return;
        }
        if (!"ran".equals(l2.get("status")))
        {
            out.println("Second tier (l2): not run: " + l2.get("reason"));
            out.println();
            return;
        }
        out.println("Second tier (l2), redis-server " + l2.get("redis_version") + ", " + l2.get("cluster") +
            "; GB/s (10^9 chunk bytes/s)");
        out.println("(bare SET/GET: a bare Lettuce cluster loop, as many in flight as one read-through; fetch: " +
            "LOOKUP runs read through a server; write: stores written through, until l2_writes counts them; " +
            "store/retrieve: the pipelined worker with write-through on, against the copy, busy-spin; the backoff " +
            "run's ratios on the next lines)");
        out.println(BenchSupport.fmt("%-8s %6s %8s %8s %8s %9s %8s %9s %8s %10s %9s %9s %4s", "chunk", "chunks",
            "bareSET", "bareGET", "fetch", "fetch/GET", "write", "write/SET", "store", "store/copy", "retrieve",
            "retr/copy", "GCs"));
        for (final Map<String, Object> row : (List<Map<String, Object>>)l2.get("sizes"))
        {
            out.println(BenchSupport.fmt("%-8s %6s %8s %8s %8s %9s %8s %9s %8s %10s %9s %9s %4s",
                BenchSupport.size(((Number)row.get("chunk_bytes")).longValue()), row.get("chunks"),
                num(row.get("bare_set_gbps"), "%.2f"), num(row.get("bare_get_gbps"), "%.2f"),
                num(row.get("l2_fetch_gbps"), "%.2f"), num(row.get("l2_fetch_vs_get"), "%.2f"),
                num(row.get("l2_write_gbps"), "%.2f"), num(row.get("l2_write_vs_set"), "%.2f"),
                num(row.get("store_gbps"), "%.2f"), num(row.get("store_vs_copy"), "%.3f"),
                num(row.get("retrieve_gbps"), "%.2f"), num(row.get("retrieve_vs_copy"), "%.3f"),
                row.get("gc_count_steady")));
        }
        for (final Map<String, Object> row : (List<Map<String, Object>>)l2.get("sizes"))
        {
            out.println(BenchSupport.fmt("  %s: the tier while the store/retrieve loops ran: %s; server JVM " +
                "collections %s, worker's %s", BenchSupport.size(((Number)row.get("chunk_bytes")).longValue()),
                row.get("tier_during_store_retrieve"), row.get("gc_server"), row.get("gc_worker")));
            out.println(BenchSupport.fmt("  %s: bare GET in runs of one read-through (next run after the last " +
                "value) %s GB/s; server and worker in backoff: store x%s, retrieve x%s of the copy",
                BenchSupport.size(((Number)row.get("chunk_bytes")).longValue()),
                num(row.get("bare_get_runs_gbps"), "%.2f"), num(row.get("store_vs_copy_backoff"), "%.3f"),
                num(row.get("retrieve_vs_copy_backoff"), "%.3f")));
        }
        out.println();
    }

    private static String num(final Object v, final String format)
    {
        return v instanceof Number ? BenchSupport.fmt(format, ((Number)v).doubleValue()) : "-";
    }
}
