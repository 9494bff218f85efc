package io.kvstash.cli;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.server.Sizes;
import io.kvstash.tools.BundledTrace;
import io.kvstash.tools.ReplayReport;
import io.kvstash.tools.WorkerResult;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.file.CountersDescriptor;
import org.HdrHistogram.Histogram;

import java.io.PrintWriter;
import java.util.Locale;

/**
 * Prints the human report of a trace replay ({@code replay} without {@code --json}, and {@code demo}).
 */
final class ReportPrinter
{
    /** Width of the name column of the replay report's latency tables. */
    private static final int NAME_WIDTH = 22;

    private static final int[] SERVER_TYPES =
    {
        RequestType.LOOKUP, RequestType.PREPARE_RETRIEVE, RequestType.COMMIT_RETRIEVE, RequestType.PREPARE_STORE,
        RequestType.COMMIT_STORE
    };

    private ReportPrinter()
    {
    }

    static void print(final ReplayReport report, final PrintWriter out, final boolean demo)
    {
        final WorkerResult r = report.result();
        final double seconds = report.wallNs() / 1e9;
        final long chunks = r.count(WorkerResult.CHUNKS);
        final long hits = r.count(WorkerResult.HIT_CHUNKS);
        final long written = r.count(WorkerResult.BYTES_WRITTEN);
        final long read = r.count(WorkerResult.BYTES_READ);
        final Locale l = Locale.ROOT;

        out.printf(l, "kvstash %s: %s%n", demo ? "demo" : "replay", report.trace());
        out.printf(l, "  %d worker process%s, %s chunks, pool of %,d chunks (%s)%n", report.workers(),
            1 == report.workers() ? "" : "es", Sizes.formatSize(report.payloadBytes()), report.capacityChunks(),
            Sizes.formatSize(report.poolSizeBytes()));
        out.println();
        out.printf(l, "  %-20s %,d in %.2f s: %,.0f requests/s, %,.0f server round trips/s%n", "requests",
            r.count(WorkerResult.REQUESTS), seconds, r.count(WorkerResult.REQUESTS) / Math.max(1e-9, seconds),
            report.operationsPerSecond());
        out.printf(l, "  %-20s %.2f GB/s (%.2f GB written at %.2f GB/s + %.2f GB read at %.2f GB/s)%n",
            "throughput", report.gigabytesPerSecond(), written / 1e9, written / 1e9 / Math.max(1e-9, seconds),
            read / 1e9, read / 1e9 / Math.max(1e-9, seconds));
        out.printf(l, "  %-20s %,d referenced, %,d hits, %,d read and checked, %,d stored, %,d skipped%n", "chunks",
            chunks, hits, r.count(WorkerResult.RETRIEVED_CHUNKS), r.count(WorkerResult.STORED_CHUNKS),
            r.count(WorkerResult.SKIPPED_CHUNKS));
        out.printf(l, "  %-20s %.2f %% (%,d of %,d chunks)%n", "hit rate", 100.0 * report.hitRate(), hits, chunks);
        printReference(report, out);
        printOutcomes(report, out);
        out.println();
        printLatency(report, out);
    }

    /**
     * The hit rate beside the exact-LRU figure, and beside the offline replay of the server's own policy.
     */
    private static void printReference(final ReplayReport report, final PrintWriter out)
    {
        final WorkerResult r = report.result();
        final long chunks = r.count(WorkerResult.CHUNKS);
        final long hits = r.count(WorkerResult.HIT_CHUNKS);
        final Locale l = Locale.ROOT;
        final Long table = report.bundled() ? BundledTrace.referenceHitChunks().get(report.capacityChunks()) : null;
        final long reference = null != table ? table : report.lruHitChunks();
        out.printf(l, "  %-20s %.2f %% (%,d hits) with an exact LRU of %,d chunks replayed in file order%s%n",
            "reference", 100.0 * reference / Math.max(1, chunks), reference, report.capacityChunks(),
            null != table ? " (the published figure, traces/README.md)" : " (computed offline)");
        if (report.workers() > 1)
        {
            out.printf(l, "  %-20s %d workers interleave the requests (a turn may look up a prefix another worker " +
                "is still storing),%n  %-20s so a concurrent replay's hit rate differs from the ordered figure%n", "",
                report.workers(), "");
        }
        else
        {
            if (EvictionPolicy.LRU == report.eviction())
            {
                out.printf(l, "  %-20s %s%n", "", hits == reference ? "identical to the reference, to the chunk" :
                    "DIFFERS from the reference by " + (hits - reference) + " chunks");
            }
        }
        if (EvictionPolicy.LRU != report.eviction())
        {
            final long policy = report.policyHitChunks();
            out.printf(l, "  %-20s %s: %,d hits offline (%+.1f %% against exact LRU)%s%n", "eviction",
                report.eviction().label(), policy, 100.0 * policy / Math.max(1, reference) - 100,
                report.workers() > 1 ? "" : hits == policy ? ", identical to the chunk" :
                ", DIFFERS by " + (hits - policy) + " chunks");
        }
    }

    /**
     * Evictions, checksum mismatches, and the outcomes that are not a replay's business (when there are any).
     */
    private static void printOutcomes(final ReplayReport report, final PrintWriter out)
    {
        final WorkerResult r = report.result();
        final Locale l = Locale.ROOT;
        out.printf(l, "  %-20s %,d%s%n", "evictions", report.counter(CountersDescriptor.EVICTIONS),
            EvictionPolicy.SLRU_ADMIT != report.eviction() ? "" : String.format(l, " (%,d chunks stored cold)",
            report.counter(CountersDescriptor.COLD_CHUNKS)));
        out.printf(l, "  %-20s %,d of %,d chunks read%s%n", "checksum mismatches",
            r.count(WorkerResult.CHECKSUM_MISMATCHES), r.count(WorkerResult.RETRIEVED_CHUNKS),
            0 == r.count(WorkerResult.CHECKSUM_MISMATCHES) ? " (every chunk read back intact)" : " (CORRUPTION)");
        final long problems = r.count(WorkerResult.NO_SPACE) + r.count(WorkerResult.RETRIEVE_MISSES) +
            r.count(WorkerResult.UNKNOWN_TRANSFER) + r.count(WorkerResult.OTHER_ERRORS) +
            r.count(WorkerResult.FENCE_FAILURES) + report.counter(CountersDescriptor.ERRORS);
        if (problems > 0)
        {
            out.printf(l, "  %-20s no_space %d, retrieve misses %d, unknown transfer %d, other errors %d, " +
                "fence failures %d, server errors %d%n", "other outcomes", r.count(WorkerResult.NO_SPACE),
                r.count(WorkerResult.RETRIEVE_MISSES), r.count(WorkerResult.UNKNOWN_TRANSFER),
                r.count(WorkerResult.OTHER_ERRORS), r.count(WorkerResult.FENCE_FAILURES),
                report.counter(CountersDescriptor.ERRORS));
        }
    }

    /**
     * The workers' latency per operation, then the server's per request type.
     */
    private static void printLatency(final ReplayReport report, final PrintWriter out)
    {
        final WorkerResult r = report.result();
        latencyHeader(out, "client latency (us)", NAME_WIDTH);
        for (int op = 0; op < WorkerResult.OPERATION_TYPES; op++)
        {
            latencyLine(out, "  " + WorkerResult.OPERATION_NAMES[op], r.histogram(op), NAME_WIDTH);
        }
        latencyLine(out, "  all round trips", r.roundTrips(), NAME_WIDTH);

        boolean header = false;
        for (final int type : SERVER_TYPES)
        {
            final Histogram h = report.serverLatency(type);
            if (null != h && h.getTotalCount() > 0)
            {
                if (!header)
                {
                    latencyHeader(out, "server latency (us)", NAME_WIDTH);
                    header = true;
                }
                latencyLine(out, "  " + RequestType.name(type).toLowerCase(Locale.ROOT), h, NAME_WIDTH);
            }
        }
        if (header)
        {
            out.println("  (server side: from reading the request off the client's ring to writing the response)");
        }
    }

    /**
     * The header of a latency table: a title in the name column, then count, p50, p90, p99, p99.9 and max.
     */
    static void latencyHeader(final PrintWriter out, final String title, final int nameWidth)
    {
        out.printf(Locale.ROOT, "%-" + nameWidth + "s %12s %9s %9s %9s %9s %9s%n",
            title, "count", "p50", "p90", "p99", "p99.9", "max");
    }

    /**
     * A row of a latency table in microseconds from a histogram in nanoseconds; nothing for an empty histogram.
     */
    static void latencyLine(final PrintWriter out, final String name, final Histogram h, final int nameWidth)
    {
        latencyLine(out, name, h, nameWidth, "");
    }

    /**
     * A row of a latency table with a note after the figures (e.g. that it rests on few samples).
     */
    static void latencyLine(
        final PrintWriter out, final String name, final Histogram h, final int nameWidth, final String note)
    {
        if (h.getTotalCount() == 0)
        {
            return;
        }
        out.printf(Locale.ROOT, "%-" + nameWidth + "s %,12d %9.1f %9.1f %9.1f %9.1f %9.1f%s%n", name, h.getTotalCount(),
            h.getValueAtPercentile(50) / 1000.0, h.getValueAtPercentile(90) / 1000.0,
            h.getValueAtPercentile(99) / 1000.0, h.getValueAtPercentile(99.9) / 1000.0, h.getMaxValue() / 1000.0, note);
    }
}
