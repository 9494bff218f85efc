package io.kvstash.perf.bench;

import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.tools.WorkerResult;
import org.HdrHistogram.Histogram;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;

/**
 * The scaling part of the bench ({@code --only scale}): 1, 2, 4 and 8 worker processes against one server with
 * the default settings, each worker running the same mix ({@link ScaleRun}) over the same window of time, once
 * with small chunks (4 KiB: the control path dominates) and once with 2 MiB chunks; then 8 workers again against
 * a DEDICATED server (a receiver thread and a pipeline thread), small chunks, beside the default, and 1 and 8
 * workers whose clients wait as the client library did before (parking after 100 yields). Per worker
 * count: aggregate requests/s (round trips), operations/s, chunks/s and GB/s, the round trips' p50/p99/p99.9
 * over every worker, and how both sides waited: the clients' spins, yields and parks per request, and the
 * receiver's duty cycles, empty cycles, rings polled and parks per request (each park a timer wake-up).
 * {@code scaling.ops_8_vs_1} and {@code scaling.p99_8_vs_1} compare 8 workers with 1 (small chunks); when the
 * control part ran in the same invocation, {@code scaling.vs_saturated} compares the 8 workers' requests/s with
 * the server's saturated rate there (two requests a control pair, 64 in flight, backoff).
 * <p>
 * The worker JVMs are started once and kept for every run; the coordinator (this JVM) runs the servers.
 */
final class ScalePart
{
    /** Worker counts, in the order run. */
    static final int[] WORKERS = { 1, 2, 4, 8 };
    static final int SMALL_CHUNK = 4 << 10;
    static final int LARGE_CHUNK = 2 << 20;
    private static final String WORKER_HEAP = "256m";

    private ScalePart()
    {
    }

    /**
     * Runs the part.
     *
     * @param quick    short windows.
     * @param work     the bench's work directory (the servers' directories go under it).
     * @param progress where progress lines go.
     * @param control  the control part's summaries by wait mode (may be empty).
     * @return the part's result: {@code small}, {@code large}, {@code small_dedicated_8} and {@code scaling}.
     * @throws Exception when a worker or a server fails.
     */
    static Map<String, Object> run(
        final boolean quick,
        final Path work,
        final Consumer<String> progress,
        final Map<String, Map<String, Object>> control) throws Exception
    {
        final long durationMs = quick ? 400 : 3000;
        final long warmupMs = quick ? 600 : 2000;
        final int most = WORKERS[WORKERS.length - 1];
        final List<WorkerProcess> workers = new ArrayList<>();
        final Map<String, Object> result = new LinkedHashMap<>();
        try
        {
            progress.accept("scale: starting " + most + " worker JVMs (-Xmx" + WORKER_HEAP + ")");
            for (int i = 0; i < most; i++)
            {
                workers.add(WorkerProcess.start(WORKER_HEAP, progress));
            }
            final List<Map<String, Object>> small = new ArrayList<>();
            final List<Map<String, Object>> large = new ArrayList<>();
            for (final int n : WORKERS)
            {
                small.add(one(workers, n, SMALL_CHUNK, 16, 64, 64L << 20, ThreadingMode.SHARED, null, work,
                    durationMs, warmupMs, progress));
            }
            for (final int n : WORKERS)
            {
                large.add(one(workers, n, LARGE_CHUNK, 4, 8, quick ? 256L << 20 : 1L << 30, ThreadingMode.SHARED,
                    null, work, durationMs, warmupMs, progress));
            }
            final Map<String, Object> dedicated = one(workers, most, SMALL_CHUNK, 16, 64, 64L << 20,
                ThreadingMode.DEDICATED, null, work, durationMs, warmupMs, progress);
            // The client library's earlier wait (parks after 100 yields), at 1 and 8 workers, beside the default.
            final List<Map<String, Object>> earlierWait = new ArrayList<>();
            for (final int n : new int[]{ 1, most })
            {
                earlierWait.add(one(workers, n, SMALL_CHUNK, 16, 64, 64L << 20, ThreadingMode.SHARED,
                    BenchSupport.BACKOFF, work, durationMs, warmupMs, progress));
            }
            result.put("small", small);
            result.put("large", large);
            result.put("small_dedicated_" + most, dedicated);
            result.put("small_client_backoff", earlierWait);
            result.put("scaling", scaling(small, large, dedicated, earlierWait, control));
        }
        finally
        {
            for (final WorkerProcess worker : workers)
            {
                worker.close();
            }
        }
        return result;
    }

    private static Map<String, Object> scaling(
        final List<Map<String, Object>> small,
        final List<Map<String, Object>> large,
        final Map<String, Object> dedicated,
        final List<Map<String, Object>> earlierWait,
        final Map<String, Map<String, Object>> control)
    {
        final Map<String, Object> one = small.get(0);
        final Map<String, Object> eight = small.get(small.size() - 1);
        final Map<String, Object> s = new LinkedHashMap<>();
        s.put("ops_8_vs_1", ratio(eight, one, "requests_per_s"));
        s.put("p99_8_vs_1", ratio(eight, one, "p99_us"));
        s.put("p999_8_vs_1", ratio(eight, one, "p999_us"));
        s.put("large_ops_8_vs_1", ratio(large.get(large.size() - 1), large.get(0), "requests_per_s"));
        s.put("large_p99_8_vs_1", ratio(large.get(large.size() - 1), large.get(0), "p99_us"));
        s.put("dedicated_8_vs_shared_8", ratio(dedicated, eight, "requests_per_s"));
        s.put("client_backoff_ops_8_vs_1", ratio(earlierWait.get(1), earlierWait.get(0), "requests_per_s"));
        s.put("client_backoff_p99_8_vs_1", ratio(earlierWait.get(1), earlierWait.get(0), "p99_us"));
        s.put("in_flight_vs_backoff_requests_per_s_8", ratio(eight, earlierWait.get(1), "requests_per_s"));
        final Map<String, Object> backoff = control.get(BenchSupport.BACKOFF);
        if (null != backoff && backoff.get("pairs_per_s") instanceof Number)
        {
            final double saturated = 2 * ((Number)backoff.get("pairs_per_s")).doubleValue();
            s.put("server_saturated_requests_per_s", saturated);
            s.put("vs_saturated", round(((Number)eight.get("requests_per_s")).doubleValue() / saturated));
        }
        s.put("target_ops_8_vs_1", ">= 4, or 8 workers >= 0.8 of the saturated rate (machines of 10+ cores)");
        s.put("target_p99_8_vs_1", "<= 2 (machines of 10+ cores)");
        return s;
    }

    private static double ratio(final Map<String, Object> a, final Map<String, Object> b, final String key)
    {
        final double denominator = ((Number)b.get(key)).doubleValue();
        return denominator > 0 ? round(((Number)a.get(key)).doubleValue() / denominator) : 0;
    }

    private static double round(final double value)
    {
        return Math.round(value * 1000) / 1000.0;
    }

    /**
     * One run: a fresh server, {@code n} workers over one shared window, the server's counts over that window.
     */
    private static Map<String, Object> one(
        final List<WorkerProcess> workers,
        final int n,
        final int chunkBytes,
        final int maxChunks,
        final int recent,
        final long poolBytes,
        final ThreadingMode threading,
        final String clientWait,
        final Path work,
        final long durationMs,
        final long warmupMs,
        final Consumer<String> progress) throws Exception
    {
        final Path dir = work.resolve("scale-" + threading.name().toLowerCase(Locale.ROOT) + "-" + chunkBytes + "-" +
            n + (null == clientWait ? "" : "-" + clientWait));
        final KvStashServer server = KvStashServer.launch(new ServerContext()
            .directory(dir)
            .threadingMode(threading)
            .storeContext(new StoreContext().poolSizeBytes(poolBytes)));
        final List<Map<String, Object>> results = new ArrayList<>();
        final Map<String, Long> before;
        final Map<String, Long> after;
        try
        {
            // Time for every worker to connect and register before the warm-up ends.
            final long startMs = System.currentTimeMillis() + warmupMs + 200L * n;
            final List<Map<String, Object>> commands = new ArrayList<>();
            for (int i = 0; i < n; i++)
            {
                final Map<String, Object> command = new LinkedHashMap<>();
                command.put("cmd", "scale");
                command.put("dir", server.directory().toString());
                command.put("chunk_bytes", chunkBytes);
                command.put("max_chunks", maxChunks);
                command.put("recent", recent);
                command.put("worker", i);
                command.put("start_ms", startMs);
                command.put("duration_ms", durationMs);
                if (null != clientWait)
                {
                    command.put("wait", clientWait);
                }
                commands.add(command);
                workers.get(i).submit(command);
            }
            sleepUntil(startMs);
            before = server.receiverCounts();
            sleepUntil(startMs + durationMs);
            after = server.receiverCounts();
            for (int i = 0; i < n; i++)
            {
                results.add(workers.get(i).await(commands.get(i), 120 + (warmupMs + durationMs) / 1000));
            }
        }
        finally
        {
            server.close();
            ShmDirectories.delete(dir);
        }
        final Map<String, Object> row = summarize(n, chunkBytes, threading, clientWait, results, before, after);
        progress.accept(BenchSupport.fmt("scale, %s, client %s, %s chunks, %d worker%s: %s requests/s, %s chunks/s, " +
            "%.2f GB/s, p50 %.1f us, p99 %.1f us, p99.9 %.1f us; client parks %.3f a request, server parks %.3f",
            threading, row.get("client_wait"), BenchSupport.size(chunkBytes), n, 1 == n ? "" : "s", row.get("requests_per_s"),
            row.get("chunks_per_s"), row.get("gb_per_s"), row.get("p50_us"), row.get("p99_us"), row.get("p999_us"),
            row.get("client_parks_per_request"), row.get("server_parks_per_request")));
        return row;
    }

    private static Map<String, Object> summarize(
        final int n,
        final int chunkBytes,
        final ThreadingMode threading,
        final String clientWait,
        final List<Map<String, Object>> results,
        final Map<String, Long> before,
        final Map<String, Long> after)
    {
        final Histogram requestTimes = BenchSupport.newHistogram();
        final Histogram opTimes = BenchSupport.newHistogram();
        double requestsPerS = 0;
        double opsPerS = 0;
        double chunksPerS = 0;
        double bytesPerS = 0;
        long requests = 0;
        long mismatches = 0;
        long failures = 0;
        final Map<String, Long> failuresByStatus = new TreeMap<>();
        long gcs = 0;
        long spins = 0;
        long yields = 0;
        long parks = 0;
        for (final Map<String, Object> r : results)
        {
            final double seconds = number(r, "elapsed_ns") / 1e9;
            requests += (long)number(r, "requests");
            requestsPerS += number(r, "requests") / seconds;
            opsPerS += number(r, "ops") / seconds;
            chunksPerS += number(r, "chunks") / seconds;
            bytesPerS += number(r, "bytes") / seconds;
            mismatches += (long)number(r, "mismatches");
            failures += (long)number(r, "failures");
            if (r.get("failures_by_status") instanceof Map)
            {
                for (final Map.Entry<?, ?> e : ((Map<?, ?>)r.get("failures_by_status")).entrySet())
                {
                    failuresByStatus.merge(String.valueOf(e.getKey()), ((Number)e.getValue()).longValue(), Long::sum);
                }
            }
            gcs += (long)number(r, "gc_count");
            spins += (long)number(r, "client_spins");
            yields += (long)number(r, "client_yields");
            parks += (long)number(r, "client_parks");
            requestTimes.add(WorkerResult.decode(String.valueOf(r.get("request_times"))));
            opTimes.add(WorkerResult.decode(String.valueOf(r.get("op_times"))));
        }
        final Map<String, Object> row = new LinkedHashMap<>();
        row.put("workers", n);
        row.put("chunk_bytes", chunkBytes);
        row.put("threading", threading.name());
        row.put("client_wait", null == clientWait ? "in-flight" : clientWait);
        row.put("requests_per_s", Math.round(requestsPerS));
        row.put("ops_per_s", Math.round(opsPerS));
        row.put("chunks_per_s", Math.round(chunksPerS));
        row.put("gb_per_s", round(bytesPerS / 1e9));
        row.put("p50_us", us(requestTimes, 50));
        row.put("p99_us", us(requestTimes, 99));
        row.put("p999_us", us(requestTimes, 99.9));
        row.put("op_p50_us", us(opTimes, 50));
        row.put("op_p99_us", us(opTimes, 99));
        row.put("op_p999_us", us(opTimes, 99.9));
        row.put("requests", requests);
        row.put("mismatches", mismatches);
        row.put("failures", failures);
        row.put("failures_by_status", new LinkedHashMap<String, Object>(failuresByStatus));
        row.put("worker_gc_count", gcs);
        final double perRequest = Math.max(1, requests);
        row.put("client_spins_per_request", round(spins / perRequest));
        row.put("client_yields_per_request", round(yields / perRequest));
        row.put("client_parks_per_request", round(parks / perRequest));
        putServerFigures(row, before, after);
        return row;
    }

    /**
     * The server receiver's counts over the measured window ({@code after - before}) and what they come to per
     * request read and per duty cycle.
     */
    private static void putServerFigures(
        final Map<String, Object> row, final Map<String, Long> before, final Map<String, Long> after)
    {
        final Map<String, Object> server = new LinkedHashMap<>();
        for (final Map.Entry<String, Long> e : after.entrySet())
        {
            server.put(e.getKey(), e.getValue() - before.getOrDefault(e.getKey(), 0L));
        }
        final double read = Math.max(1, (long)server.get("requests_read"));
        final double cycles = Math.max(1, (long)server.get("duty_cycles"));
        final long busy = (long)server.get("duty_cycles") - (long)server.get("empty_cycles");
        row.put("server_parks_per_request", server.containsKey("parks") ? round((long)server.get("parks") / read) : 0);
        row.put("server_empty_cycles_per_request", round((long)server.get("empty_cycles") / read));
        row.put("server_rings_polled_per_cycle", round((long)server.get("rings_polled") / cycles));
        row.put("server_requests_per_busy_cycle", round(read / Math.max(1, busy)));
        row.put("server_receiver", server);
    }

    /**
     * Prints the part's rows as a table, when it ran.
     *
     * @param out   where.
     * @param scale the part's result, or null.
     */
    @SuppressWarnings("unchecked")
    static void print(final PrintStream out, final Map<String, Object> scale)
    {
        if (null == scale)
        {
            return;
        }
        out.println();
        out.println("Scaling: worker processes against one server, the same mix each (requests are round trips; " +
            "parks are timer wake-ups, per request)");
        out.println(BenchSupport.fmt("%-10s %-9s %6s %7s %12s %11s %7s %9s %9s %9s %12s %12s", "threading",
            "client", "chunk",
            "workers", "requests/s", "chunks/s", "GB/s", "p50 us", "p99 us", "p99.9 us", "client parks",
            "server parks"));
        final List<Map<String, Object>> rows = new ArrayList<>((List<Map<String, Object>>)scale.get("small"));
        rows.addAll((List<Map<String, Object>>)scale.get("large"));
        for (final Map.Entry<String, Object> e : scale.entrySet())
        {
            if (e.getKey().startsWith("small_dedicated"))
            {
                rows.add((Map<String, Object>)e.getValue());
            }
            else if (e.getKey().equals("small_client_backoff"))
            {
                rows.addAll((List<Map<String, Object>>)e.getValue());
            }
        }
        for (final Map<String, Object> row : rows)
        {
            out.println(BenchSupport.fmt("%-10s %-9s %6s %7d %12d %11d %7.2f %9.1f %9.1f %9.1f %12.3f %12.3f",
                row.get("threading"), row.get("client_wait"), BenchSupport.size(((Number)row.get("chunk_bytes")).longValue()),
                row.get("workers"), row.get("requests_per_s"), row.get("chunks_per_s"), row.get("gb_per_s"),
                row.get("p50_us"), row.get("p99_us"), row.get("p999_us"), row.get("client_parks_per_request"),
                row.get("server_parks_per_request")));
        }
        out.println("scaling: " + scale.get("scaling"));
    }

    private static double number(final Map<String, Object> r, final String key)
    {
        return ((Number)r.get(key)).doubleValue();
    }

    private static double us(final Histogram h, final double percentile)
    {
        return 0 == h.getTotalCount() ? 0 : Math.round(h.getValueAtPercentile(percentile) / 10.0) / 100.0;
    }

    private static void sleepUntil(final long epochMs) throws InterruptedException
    {
        long left;
        while ((left = epochMs - System.currentTimeMillis()) > 0)
        {
            Thread.sleep(Math.min(left, 50));
        }
    }
}
