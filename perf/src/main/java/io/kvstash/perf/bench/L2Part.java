package io.kvstash.perf.bench;

import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.testkit.RedisCluster;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.tier.L2Tier;
import io.kvstash.tier.TierContext;
import io.kvstash.tier.TieredServer;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The second tier's part of the bench ({@code kvstash bench --only l2}): against one Redis Cluster it starts
 * (3 masters, 3 replicas of Debian's {@code redis-server}, each node's memory bounded) and stops, for each chunk
 * size, side by side:
 * <ol>
 * <li>{@code bare_set}, {@code bare_get}: the cluster engine's own limit, a bare Lettuce loop in the worker JVM
 * with as many commands in flight as one read-through GETs (up to 16 chunks, up to 64 MiB);</li>
 * <li>{@code l2_fetch}: read-through of those chunks by a server with the tier on, LOOKUPs in runs of that many;</li>
 * <li>{@code l2_write}: write-through by the same server of chunks the worker stores;</li>
 * <li>store and retrieve against a raw copy (the data part's pipelined worker and copy) on a server with the tier
 * on and writing through, busy-spin like the data part's headline ratios.</li>
 * </ol>
 * The servers run in this JVM (SHARED threading; the read-through and write-through server in the server's
 * default wait mode, backoff); the collections of this JVM during the measured runs of 2-4 (warm-ups apart,
 * System.gc() first so that the harness's own garbage is not counted) are the part's {@code gc_count_steady}. The tier's call bound
 * is raised to {@link #L2_TIMEOUT_MS} ms so that a slow call on a loaded machine shows as a slower figure, not as
 * a dropped read-through. The cluster is flushed between phases and stopped at the end. Without
 * {@code redis-server} and {@code redis-cli} the part records why it did not run.
 */
final class L2Part
{
    /** Chunk sizes of the part: 2 MiB and 32 MiB. */
    static final long[] SIZES = { 2L << 20, 32L << 20 };
    /** The tier's bound of every cluster call in the part's servers. */
    static final long L2_TIMEOUT_MS = 2_000;
    /** Most chunks one read-through GETs, and the most commands the bare loops keep in flight. */
    static final int RUN_CHUNKS_MAX = 16;
    /** Most bytes one read-through GETs at once, and the most the bare loops keep in flight. */
    static final long IN_FLIGHT_BYTES_MAX = 64L << 20;

    private static final long TIER_UP_TIMEOUT_MS = 30_000;

    private L2Part()
    {
    }

    /**
     * Runs the part, or records why it cannot run; the result goes to {@link BenchResults#l2}.
     *
     * @param worker   the worker JVM.
     * @param settings settings of the run.
     * @param work     the bench's work directory.
     * @param sizes    chunk sizes ({@link #SIZES} unless the command line gave others).
     * @param progress where progress lines go.
     * @param results  where the result goes.
     * @throws Exception when the cluster, a server or the worker fails.
     */
    static void run(
        final WorkerProcess worker,
        final BenchSettings settings,
        final Path work,
        final long[] sizes,
        final Consumer<String> progress,
        final BenchResults results) throws Exception
    {
        final Map<String, Object> l2 = new LinkedHashMap<>();
        results.l2 = l2;
        if (!RedisCluster.available())
        {
            l2.put("status", "skipped");
            l2.put("reason", "redis-server and redis-cli were not found on the PATH: the l2 part starts a Redis " +
                "Cluster of its own and needs both (apt-get install redis-server)");
            progress.accept("l2: skipped: " + l2.get("reason"));
            return;
        }
        // A size's chunks in the cluster: 256 MiB of them in a full run, 64 MiB in a quick one.
        final long bytesPerSize = Math.max(64L << 20, settings.bytesPerRep);
        long maxmemory = 0;
        for (final long size : sizes)
        {
            maxmemory = Math.max(maxmemory, 2 * keys(size, bytesPerSize) * (size + 64) + (64L << 20));
        }
        l2.put("status", "ran");
        l2.put("reason", null);
        l2.put("redis_version", redisVersion());
        final List<Map<String, Object>> rows = new ArrayList<>();
        long gcSteady = 0;
        progress.accept("l2: starting a Redis Cluster (3 masters, 3 replicas)");
        try (RedisCluster cluster = RedisCluster.start())
        {
            onEveryNode(cluster, "config", "set", "maxmemory", Long.toString(maxmemory));
            onEveryNode(cluster, "config", "set", "maxmemory-policy", "allkeys-lru");
            l2.put("cluster", "3 masters + 3 replicas on 127.0.0.1, no persistence, maxmemory " +
                BenchSupport.size(maxmemory) + " a node (allkeys-lru), flushed between phases");
            progress.accept("l2: cluster up, seeds " + cluster.seeds() + ", maxmemory " + BenchSupport.size(maxmemory) +
                " a node");
            for (final long size : sizes)
            {
                final Map<String, Object> row = size(worker, settings, work, cluster, size, bytesPerSize, progress);
                gcSteady += ((Number)row.get("gc_count_steady")).longValue();
                rows.add(row);
            }
            onEveryNode(cluster, "flushall");
        }
        l2.put("l2_timeout_ms", L2_TIMEOUT_MS);
        l2.put("sizes", rows);
        l2.put("gc_count_steady", gcSteady);
        results.gcSteady += gcSteady;
    }

    private static Map<String, Object> size(
        final WorkerProcess worker,
        final BenchSettings settings,
        final Path work,
        final RedisCluster cluster,
        final long chunkBytes,
        final long bytesPerSize,
        final Consumer<String> progress) throws Exception
    {
        final String label = BenchSupport.size(chunkBytes);
        final int run = run(chunkBytes);
        final int keys = keys(chunkBytes, bytesPerSize);
        progress.accept(BenchSupport.fmt("l2 %s: %d chunks in the cluster, %d in flight (a read-through's run), %d " +
            "warm-up + %d measured repetitions", label, keys, run, settings.warmups, settings.reps));
        final Map<String, Object> row = new LinkedHashMap<>();
        row.put("chunk_bytes", chunkBytes);
        row.put("chunks", keys);
        row.put("in_flight", run);
        final Map<String, Object> gcServer = new LinkedHashMap<>();

        onEveryNode(cluster, "flushall");
        final Map<String, Object> bare = new LinkedHashMap<>();
        bare.put("cmd", "l2_bare");
        bare.put("seeds", cluster.seeds());
        bare.put("chunk_bytes", chunkBytes);
        bare.put("keys", keys);
        bare.put("depth", run);
        bare.put("reps", settings.reps);
        bare.put("warmups", settings.warmups);
        final Map<String, Object> bareResult = worker.call(bare, 900);
        final TierRuns tierRuns = tierRuns(worker, settings, work, cluster, chunkBytes, keys, run, gcServer);

        onEveryNode(cluster, "flushall");
        final Map<String, Object> tier = new LinkedHashMap<>();
        final Map<String, Object> dataResult = dataRun(worker, settings, work, cluster, chunkBytes,
            BenchSupport.BUSY_SPIN, tier);
        gcServer.put("data", dataResult.remove("gc_server"));
        onEveryNode(cluster, "flushall");
        final Map<String, Object> backoffResult = dataRun(worker, settings, work, cluster, chunkBytes,
            BenchSupport.BACKOFF, new LinkedHashMap<>());
        gcServer.put("data_backoff", backoffResult.remove("gc_server"));
        onEveryNode(cluster, "flushall");

        putFigures(row, bareResult, tierRuns, dataResult, backoffResult, tier);
        long gcSteady = 0;
        for (final Object n : gcServer.values())
        {
            gcSteady += ((Number)n).longValue();
        }
        long gcWorker = 0;
        for (final Map<String, Object> r : List.of(bareResult, tierRuns.fetch(), tierRuns.write(), dataResult,
            backoffResult))
        {
            gcWorker += ((Number)r.get("gc_worker")).longValue();
        }
        row.put("gc_count_steady", gcSteady);
        row.put("gc_server", gcServer);
        row.put("gc_worker", gcWorker);
        progress.accept(BenchSupport.fmt("l2 %s: bare SET %.2f GET %.2f, fetch %.2f (x%.2f of GET), write %.2f " +
            "(x%.2f of SET) GB/s; with write-through store x%.3f, retrieve x%.3f of the copy (backoff: x%.3f, " +
            "x%.3f); %d collections in the server JVM", label, row.get("bare_set_gbps"), row.get("bare_get_gbps"),
            row.get("l2_fetch_gbps"), row.get("l2_fetch_vs_get"), row.get("l2_write_gbps"), row.get("l2_write_vs_set"),
            row.get("store_vs_copy"), row.get("retrieve_vs_copy"), row.get("store_vs_copy_backoff"),
            row.get("retrieve_vs_copy_backoff"), gcSteady));
        return row;
    }

    /** The measured read-through and write-through results of one chunk size. */
    private record TierRuns(Map<String, Object> fetch, Map<String, Object> write)
    {
    }

    /**
     * Read-through ({@code l2_fetch}) of the chunks the bare loop left in the cluster, then write-through
     * ({@code l2_write}) into the flushed cluster, both by one server with the tier on, each after its warm-up.
     * {@code gcServer} gets this JVM's collections during each measured run.
     */
    private static TierRuns tierRuns(
        final WorkerProcess worker,
        final BenchSettings settings,
        final Path work,
        final RedisCluster cluster,
        final long chunkBytes,
        final int keys,
        final int run,
        final Map<String, Object> gcServer) throws Exception
    {
        final long tierPool = Math.max(settings.poolBytes, 2L * keys * chunkBytes + (64L << 20));
        final Path tierDir = work.resolve("l2-tier-" + chunkBytes);
        try (TieredServer tiered = launch(cluster, tierDir, BenchSupport.BACKOFF, tierPool))
        {
            final KvStashServer server = tiered.server();
            final Map<String, Object> fetch = new LinkedHashMap<>();
            fetch.put("cmd", "l2_fetch");
            fetch.put("dir", server.directory().toString());
            fetch.put("chunk_bytes", chunkBytes);
            fetch.put("keys", keys);
            fetch.put("run", run);
            fetch.put("reps", settings.warmups);
            worker.call(fetch, 900);
            fetch.put("reps", settings.reps);
            System.gc();
            long gc0 = BenchSupport.gcCount();
            final Map<String, Object> fetchResult = worker.call(fetch, 900);
            gcServer.put("fetch", BenchSupport.gcCount() - gc0);

            onEveryNode(cluster, "flushall");
            final Map<String, Object> write = new LinkedHashMap<>();
            write.put("cmd", "l2_write");
            write.put("dir", server.directory().toString());
            write.put("seeds", cluster.seeds());
            write.put("chunk_bytes", chunkBytes);
            write.put("keys", keys);
            write.put("reps", settings.warmups);
            write.put("first_rep", -settings.warmups);
            worker.call(write, 900);
            write.put("reps", settings.reps);
            write.put("first_rep", 0);
            System.gc();
            gc0 = BenchSupport.gcCount();
            final Map<String, Object> writeResult = worker.call(write, 900);
            gcServer.put("write", BenchSupport.gcCount() - gc0);
            return new TierRuns(fetchResult, writeResult);
        }
        finally
        {
            ShmDirectories.delete(tierDir);
        }
    }

    /** A size's figures: the bare loops, read-through and write-through, and the data runs against the copy. */
    private static void putFigures(
        final Map<String, Object> row,
        final Map<String, Object> bareResult,
        final TierRuns tierRuns,
        final Map<String, Object> dataResult,
        final Map<String, Object> backoffResult,
        final Map<String, Object> tier)
    {
        final double setGbps = median(bareResult, "set");
        final double getGbps = median(bareResult, "get");
        final double fetchGbps = median(tierRuns.fetch(), "fetch");
        final double writeGbps = median(tierRuns.write(), "write");
        row.put("bare_set_gbps", setGbps);
        row.put("bare_get_gbps", getGbps);
        row.put("bare_get_runs_gbps", median(bareResult, "get_runs"));
        row.put("l2_fetch_gbps", fetchGbps);
        row.put("l2_write_gbps", writeGbps);
        row.put("l2_fetch_vs_get", fetchGbps / getGbps);
        row.put("l2_write_vs_set", writeGbps / setGbps);
        row.put("l2_write_stores_gbps", tierRuns.write().get("store_gbps"));
        row.put("l2_fetch_hits", tierRuns.fetch().get("fetch_hits"));
        final double copyIn = median(dataResult, "copy_in");
        final double store = median(dataResult, "store_pipelined");
        final double copyOut = median(dataResult, "copy_out");
        final double retrieve = median(dataResult, "retrieve_pipelined");
        row.put("copy_in_gbps", copyIn);
        row.put("store_gbps", store);
        row.put("copy_out_gbps", copyOut);
        row.put("retrieve_gbps", retrieve);
        row.put("store_vs_copy", store / copyIn);
        row.put("retrieve_vs_copy", retrieve / copyOut);
        row.put("tier_during_store_retrieve", tier);
        row.put("store_vs_copy_backoff", median(backoffResult, "store_pipelined") / median(backoffResult, "copy_in"));
        row.put("retrieve_vs_copy_backoff", median(backoffResult, "retrieve_pipelined") /
            median(backoffResult, "copy_out"));
    }

    /**
     * Store and retrieve against the copy (the data part's pipelined worker) on a server with the tier on and
     * writing through, the server and the worker in one wait mode.
     *
     * @return the worker's data result, plus {@code gc_server} (this JVM's collections during it); {@code tier}
     *         gets the tier's counters during the run.
     */
    private static Map<String, Object> dataRun(
        final WorkerProcess worker,
        final BenchSettings settings,
        final Path work,
        final RedisCluster cluster,
        final long chunkBytes,
        final String wait,
        final Map<String, Object> tier) throws Exception
    {
        final Path dataDir = work.resolve("l2-data-" + chunkBytes + "-" + wait);
        try (TieredServer tiered = launch(cluster, dataDir, wait, settings.poolBytes))
        {
            final KvStashServer server = tiered.server();
            final Map<String, Object> data = new LinkedHashMap<>();
            data.put("cmd", "data");
            data.put("dir", server.directory().toString());
            data.put("chunk_bytes", chunkBytes);
            data.put("reps", settings.reps);
            data.put("warmups", settings.warmups);
            data.put("chunks_per_rep", settings.chunksPerRep(chunkBytes));
            data.put("wait", wait);
            data.put("write_through", true);
            final StoreCounters counters = server.counters();
            final int[] ids = { CountersDescriptor.L2_WRITES, CountersDescriptor.L2_WRITE_SKIPS, CountersDescriptor.L2_WRITE_ERRORS,
                CountersDescriptor.L2_NOTICES_DROPPED, CountersDescriptor.L2_TIMEOUTS };
            final String[] names = { "l2_writes", "l2_write_skips", "l2_write_errors", "l2_notices_dropped",
                "l2_timeouts" };
            final long[] before = new long[ids.length];
            for (int i = 0; i < ids.length; i++)
            {
                before[i] = counters.get(ids[i]);
            }
            System.gc();
            final long gc0 = BenchSupport.gcCount();
            final Map<String, Object> result = worker.call(data, 900);
            result.put("gc_server", BenchSupport.gcCount() - gc0);
            for (int i = 0; i < ids.length; i++)
            {
                tier.put(names[i], counters.get(ids[i]) - before[i]);
            }
            return result;
        }
        finally
        {
            ShmDirectories.delete(dataDir);
        }
    }

    /**
     * Chunks of one read-through run: up to {@link #RUN_CHUNKS_MAX}, up to {@link #IN_FLIGHT_BYTES_MAX}.
     */
    static int run(final long chunkBytes)
    {
        return (int)Math.max(1, Math.min(RUN_CHUNKS_MAX, IN_FLIGHT_BYTES_MAX / chunkBytes));
    }

    /**
     * Chunks of a size in the cluster: about {@code bytesPerSize}, whole runs, at least two runs (so two
     * repetitions' first read-throughs never follow each other).
     */
    static int keys(final long chunkBytes, final long bytesPerSize)
    {
        final int run = run(chunkBytes);
        final long runs = Math.max(2, bytesPerSize / chunkBytes / run);
        return (int)(runs * run);
    }

    private static TieredServer launch(
        final RedisCluster cluster, final Path dir, final String waitMode, final long poolBytes) throws Exception
    {
        final TieredServer server = TieredServer.launch(new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.SHARED)
            .waitMode(WaitMode.parse(waitMode))
            .storeContext(new StoreContext().poolSizeBytes(poolBytes)),
            new TierContext().seeds(cluster.seeds()).timeoutMs(L2_TIMEOUT_MS));
        final long deadline = System.currentTimeMillis() + TIER_UP_TIMEOUT_MS;
        while (L2Tier.STATE_UP != server.tier().state())
        {
            if (System.currentTimeMillis() > deadline)
            {
                server.close();
                throw new IOException("the server's second tier did not connect to the cluster in " +
                    TIER_UP_TIMEOUT_MS + " ms");
            }
            Thread.sleep(20);
        }
        return server;
    }

    private static double median(final Map<String, Object> result, final String series)
    {
        @SuppressWarnings("unchecked")
        final Map<String, Object> s = (Map<String, Object>)result.get(series);
        return ((Number)s.get("median_gbps")).doubleValue();
    }

    /**
     * Runs a command on every node (a replica refuses FLUSHALL; that is expected and ignored).
     */
    private static void onEveryNode(final RedisCluster cluster, final String... args)
        throws IOException, InterruptedException
    {
        for (int i = 0; i < RedisCluster.NODES; i++)
        {
            final List<String> command = new ArrayList<>(List.of("redis-cli", "-p", String.valueOf(cluster.port(i))));
            command.addAll(List.of(args));
            final Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            if (!p.waitFor(30, TimeUnit.SECONDS))
            {
                p.destroyForcibly();
                throw new IOException("redis-cli " + String.join(" ", args) + " did not finish on port " +
                    cluster.port(i));
            }
        }
    }

    private static String redisVersion()
    {
        try
        {
            final Process p = new ProcessBuilder("redis-server", "--version").redirectErrorStream(true).start();
            final String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            p.waitFor(10, TimeUnit.SECONDS);
            final Matcher m = Pattern.compile("v=(\\S+)").matcher(out);
            return m.find() ? m.group(1) : out.trim();
        }
        catch (final IOException ex)
        {
            return null;
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return null;
        }
    }
}
