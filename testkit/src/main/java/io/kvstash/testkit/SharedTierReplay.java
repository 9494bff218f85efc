package io.kvstash.testkit;

import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.process.ShmDirectories;
import io.kvstash.tools.ReplayReport;
import io.kvstash.tools.TraceReplay;
import io.kvstash.tools.WorkerResult;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * A Mooncake trace replay over several hosts sharing the second tier, beside the one-host replay at the same total
 * pool capacity. Three runs, one after the other:
 * <ol>
 *     <li>one host: the plain {@link TraceReplay} with one worker and the whole capacity (an exact LRU);</li>
 *     <li>H hosts without the tier: H servers in H directories standing for H hosts, each with a pool of
 *     capacity / H chunks and one worker replaying request {@code i} when {@code i % H} is its index, in trace
 *     order, the hosts concurrently;</li>
 *     <li>H hosts with the tier: the same, every server on one Redis Cluster ({@code --l2}), every LOOKUP waiting
 *     up to a bound for the tier's read-through, so a chunk another host stored comes back in the same call.</li>
 * </ol>
 * Every chunk read is verified against the pattern its writer filled it with, a chunk that came through the
 * tier included. The one-host figure is deterministic; the others depend on how the hosts interleave.
 * <p>
 * The cluster is given ({@link #l2Seeds}) or started here ({@link RedisCluster}); each tier run registers a model
 * name of its own, so chunks a previous run left in the cluster are never found. Lives in the testkit, which owns
 * the cluster harness: the server module cannot depend on it.
 */
public final class SharedTierReplay
{
    /** Default bound of a LOOKUP's wait for the tier. */
    public static final long TIER_WAIT_MS_DEFAULT = 50;
    /** Most hosts of one replay. */
    public static final int MAX_HOSTS = 8;
    /** Seeds value that starts a cluster for the replay. */
    public static final String AUTO = "auto";

    Path trace;
    int payloadBytes = TraceReplay.PAYLOAD_BYTES_DEFAULT;
    int capacityChunks = 16_384;
    int hosts = 2;
    long tierWaitMs = TIER_WAIT_MS_DEFAULT;
    String l2Seeds = AUTO;
    PrintStream log;
    int largestRequest;
    private final List<AutoCloseable> open = new ArrayList<>();

    /**
     * Sets the Mooncake trace.
     *
     * @param trace JSON lines file.
     * @return this.
     */
    public SharedTierReplay trace(final Path trace)
    {
        this.trace = trace;
        return this;
    }

    /**
     * Sets the bytes of one chunk.
     *
     * @param payloadBytes bytes.
     * @return this.
     */
    public SharedTierReplay payloadBytes(final int payloadBytes)
    {
        this.payloadBytes = payloadBytes;
        return this;
    }

    /**
     * Sets the total pool capacity: the one host's pool, split evenly over the hosts.
     *
     * @param capacityChunks chunks.
     * @return this.
     */
    public SharedTierReplay capacityChunks(final int capacityChunks)
    {
        this.capacityChunks = capacityChunks;
        return this;
    }

    /**
     * Sets the number of hosts.
     *
     * @param hosts 2 to {@link #MAX_HOSTS}.
     * @return this.
     */
    public SharedTierReplay hosts(final int hosts)
    {
        this.hosts = hosts;
        return this;
    }

    /**
     * Sets the bound of each LOOKUP's wait for the tier.
     *
     * @param tierWaitMs milliseconds, at least 1.
     * @return this.
     */
    public SharedTierReplay tierWaitMs(final long tierWaitMs)
    {
        this.tierWaitMs = tierWaitMs;
        return this;
    }

    /**
     * Sets the cluster.
     *
     * @param l2Seeds {@code redis://host:port[,host:port...]}, or {@link #AUTO} to start one for the replay.
     * @return this.
     */
    public SharedTierReplay l2Seeds(final String l2Seeds)
    {
        this.l2Seeds = l2Seeds;
        return this;
    }

    /**
     * Where a line per phase goes.
     *
     * @param log stream (standard error), or null for none.
     * @return this.
     */
    public SharedTierReplay log(final PrintStream log)
    {
        this.log = log;
        return this;
    }

    /**
     * Runs the three replays.
     *
     * @return the report: {@code one_host}, {@code hosts_without_tier}, {@code hosts_with_tier}, as
     * {@code tier-replay --json} prints it.
     * @throws IOException          when the trace cannot be read, or a server, worker or the cluster cannot start.
     * @throws InterruptedException when interrupted.
     */
    public Map<String, Object> run() throws IOException, InterruptedException
    {
        validate();
        // Interrupted (Ctrl-C): stop the cluster, the servers and the workers, remove the directories.
        final Thread cleanup = new Thread(this::closeAll, "kvstash-tier-replay-cleanup");
        Runtime.getRuntime().addShutdownHook(cleanup);
        try
        {
            return runAll();
        }
        finally
        {
            closeAll();
            try
            {
                Runtime.getRuntime().removeShutdownHook(cleanup);
            }
            catch (final IllegalStateException ignore)
            {
                // The JVM is shutting down: the hook runs anyway.
            }
        }
    }

    private Map<String, Object> runAll() throws IOException, InterruptedException
    {
        final Path tracePath = trace.toAbsolutePath();
        final int requests = MooncakeTrace.read(tracePath).requests().size();

        say("one host, " + capacityChunks + " chunks ...");
        final ReplayReport one = new TraceReplay().trace(tracePath).payloadBytes(payloadBytes)
            .capacityChunks(capacityChunks).workers(1).run();
        final Map<String, Object> oneHost = new LinkedHashMap<>();
        oneHost.put("capacity_chunks", one.capacityChunks());
        oneHost.put("requests", one.result().count(WorkerResult.REQUESTS));
        oneHost.put("chunks", one.result().count(WorkerResult.CHUNKS));
        oneHost.put("hit_chunks", one.result().count(WorkerResult.HIT_CHUNKS));
        oneHost.put("hit_rate", rate(one.result().count(WorkerResult.HIT_CHUNKS), one.result().count(WorkerResult.CHUNKS)));
        oneHost.put("lru_hit_chunks", one.lruHitChunks());
        oneHost.put("checksum_mismatches", one.result().count(WorkerResult.CHECKSUM_MISMATCHES));

        say(hosts + " hosts without the tier, " + capacityChunks / hosts + " chunks each ...");
        final Map<String, Object> withoutTier = runHosts(null);

        final Map<String, Object> withTier;
        if (AUTO.equals(l2Seeds))
        {
            say("starting a Redis Cluster ...");
            final RedisCluster cluster = opened(RedisCluster.start());
            say(hosts + " hosts with the tier at " + cluster.seeds() + " ...");
            withTier = runHosts(cluster.seeds());
            closeAll();
        }
        else
        {
            say(hosts + " hosts with the tier at " + l2Seeds + " ...");
            withTier = runHosts(l2Seeds);
        }

        final Map<String, Object> report = new LinkedHashMap<>();
        report.put("trace", tracePath.toString());
        report.put("requests", requests);
        report.put("capacity_chunks", capacityChunks);
        report.put("hosts", hosts);
        report.put("host_capacity_chunks", capacityChunks / hosts);
        report.put("payload_bytes", payloadBytes);
        report.put("tier_wait_ms", tierWaitMs);
        report.put("l2", l2Seeds);
        report.put("one_host", oneHost);
        report.put("hosts_without_tier", withoutTier);
        report.put("hosts_with_tier", withTier);
        report.put("checksum_mismatches", (long)oneHost.get("checksum_mismatches") +
            (long)withoutTier.get("checksum_mismatches") + (long)withTier.get("checksum_mismatches"));
        return report;
    }

    private void validate() throws IOException
    {
        if (null == trace)
        {
            throw new IllegalArgumentException("no trace");
        }
        if (hosts < 2 || hosts > MAX_HOSTS)
        {
            throw new IllegalArgumentException("--hosts " + hosts + " is out of range: give 2 to " + MAX_HOSTS);
        }
        if (tierWaitMs < 1)
        {
            throw new IllegalArgumentException("--tier-wait-ms must be at least 1: " + tierWaitMs);
        }
        if (null == l2Seeds || l2Seeds.isBlank())
        {
            throw new IllegalArgumentException("--l2 needs redis://host:port[,host:port...] or auto");
        }
        if (AUTO.equals(l2Seeds) && !RedisCluster.available())
        {
            throw new IllegalArgumentException("--l2 auto needs redis-server and redis-cli on the PATH");
        }
        largestRequest = 0;
        try
        {
            for (final MooncakeTrace.Request request : MooncakeTrace.read(trace.toAbsolutePath()).requests())
            {
                largestRequest = Math.max(largestRequest, request.blockCount());
            }
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IOException("not a Mooncake trace: " + ex.getMessage(), ex);
        }
        if (capacityChunks / hosts < largestRequest)
        {
            throw new IllegalArgumentException("--capacity-chunks " + capacityChunks + " over " + hosts +
                " hosts gives each " + capacityChunks / hosts + " chunks, fewer than the largest request of " +
                trace.getFileName() + " (" + largestRequest + " chunks): give at least " + largestRequest * hosts);
        }
    }

    /**
     * Runs the hosts concurrently, each its share of the trace.
     *
     * @param seeds the cluster's seeds, or null for hosts without the tier.
     */
    private Map<String, Object> runHosts(final String seeds) throws IOException, InterruptedException
    {
        final String model = "kvstash-trace-replay-" + Long.toHexString(new SplittableRandom().nextLong());
        final String prefix = "kvstash-tier-replay-" + ProcessHandle.current().pid() + "-";
        final List<SharedTierHost> started = new ArrayList<>();
        try
        {
            for (int h = 0; h < hosts; h++)
            {
                final Path directory = ShmDirectories.newPath(prefix + "host" + h + "-");
                opened(() -> ShmDirectories.delete(directory));
                started.add(opened(SharedTierHost.start(this, h, directory, seeds, model)));
            }
            for (final SharedTierHost host : started)
            {
                host.awaitReady();
            }
            final long startNs = System.nanoTime();
            for (final SharedTierHost host : started)
            {
                host.go();
            }
            boolean done = false;
            while (!done)
            {
                Thread.sleep(20);
                done = true;
                for (final SharedTierHost host : started)
                {
                    done &= host.hasExited();
                }
            }
            final long wallNs = System.nanoTime() - startNs;
            final List<Object> perHost = new ArrayList<>();
            final Map<String, Object> map = new LinkedHashMap<>();
            long chunks = 0;
            long hits = 0;
            long mismatches = 0;
            final long[] tier = new long[SharedTierHost.TIER_COUNTERS.length];
            for (final SharedTierHost host : started)
            {
                host.finish();
                perHost.add(host.toMap());
                chunks += host.result().count(WorkerResult.CHUNKS);
                hits += host.result().count(WorkerResult.HIT_CHUNKS);
                mismatches += host.result().count(WorkerResult.CHECKSUM_MISMATCHES);
                for (int i = 0; i < tier.length; i++)
                {
                    tier[i] += host.counter(SharedTierHost.TIER_COUNTERS[i]);
                }
            }
            map.put("tier", null != seeds);
            map.put("chunks", chunks);
            map.put("hit_chunks", hits);
            map.put("hit_rate", rate(hits, chunks));
            map.put("checksum_mismatches", mismatches);
            if (null != seeds)
            {
                for (int i = 0; i < tier.length; i++)
                {
                    map.put(SharedTierHost.TIER_COUNTER_NAMES[i], tier[i]);
                }
            }
            map.put("elapsed_s", Math.round(wallNs / 1e6) / 1e3);
            map.put("per_host", perHost);
            return map;
        }
        finally
        {
            closeAll();
        }
    }

    private synchronized <T extends AutoCloseable> T opened(final T resource)
    {
        open.add(resource);
        return resource;
    }

    /**
     * Closes what is open, last opened first: hosts (worker, then server) before their directories, the cluster
     * last.
     */
    private synchronized void closeAll()
    {
        for (int i = open.size() - 1; i >= 0; i--)
        {
            try
            {
                open.get(i).close();
            }
            catch (final Exception ex)
            {
                say("cleanup: " + ex);
            }
        }
        open.clear();
    }

    private void say(final String line)
    {
        if (null != log)
        {
            log.println("tier-replay: " + line);
            log.flush();
        }
    }

    private static double rate(final long hits, final long chunks)
    {
        return Math.round(1e6 * hits / Math.max(1, chunks)) / 1e6;
    }
}
