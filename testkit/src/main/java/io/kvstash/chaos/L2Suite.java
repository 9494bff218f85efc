package io.kvstash.chaos;

import io.kvstash.core.StoreCounters;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.testkit.HiccupMeter;
import io.kvstash.testkit.L2LoadWorker;
import io.kvstash.testkit.RedisCluster;
import io.kvstash.tier.L2Tier;
import io.kvstash.tier.TierContext;
import io.kvstash.tier.TieredServer;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.file.CountersDescriptor;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The second tier under faults: two servers in two directories standing for two hosts, each with the tier on one
 * Redis Cluster (3 masters, 3 replicas, {@link #TIMEOUT_MS} ms bound on every cluster call), and worker processes
 * on both ({@link L2LoadWorker}) storing their own host's prefixes and reading every host's, so each host reads
 * through chunks the other wrote. Every read is verified against the chunk's seal and every request is timed.
 * Faults, in order, under load: a master killed with SIGKILL until its replica has taken over (then the node
 * started again, as a replica); the whole cluster stopped and started again (empty: the test cluster keeps no
 * data on disk); one stored value overwritten with garbage and another truncated ({@link L2Corruption}).
 * <p>
 * Promises: no read fails its seal; no corrupted value is served, and each is counted in the servers'
 * {@code l2_corrupt_values}; no request takes longer than the tier's timeout; after the load no reservation, pin
 * or pending transfer is left on either server; after the cluster's restart both tiers are up again and the
 * cluster's writes and fetches grow again. Without {@code redis-server} the suite is skipped and says why.
 */
final class L2Suite implements ChaosSuite
{
    /** Hosts: two servers, two directories. */
    static final int HOSTS = 2;
    /** The tier's bound of every cluster call, and the bound every worker request is checked against. */
    static final long TIMEOUT_MS = 100;
    /** Prefixes of the workers' key space, half home to each host. */
    static final int PREFIXES = 128;
    /** Chunks of each prefix. */
    static final int PREFIX_LENGTH = 8;
    /** Pool slots of each server: fewer than the key space's 1,024 chunks, so eviction and read-throughs go on. */
    static final int SLOTS = 384;

    private static final long WAIT_MS = 60_000;

    @Override
    public String name()
    {
        return "l2";
    }

    @Override
    public void run(final ChaosRunner chaos) throws Exception
    {
        final Map<String, Object> report = chaos.report();
        if (!RedisCluster.available())
        {
            report.put("l2_skipped", "redis-server and redis-cli are not installed");
            chaos.progress("l2 suite skipped: redis-server and redis-cli are not installed");
            return;
        }
        // The tier's cluster client logs every refused connection while a node is down: the suite reports them.
        final Logger lettuce = Logger.getLogger("io.lettuce");
        final Level lettuceLevel = lettuce.getLevel();
        lettuce.setLevel(Level.SEVERE);
        try
        {
            new Run(chaos).run();
        }
        catch (final Exception | AssertionError ex)
        {
            report.put("l2_error", String.valueOf(ex));
            chaos.progress("l2 suite failed: " + ex);
        }
        finally
        {
            lettuce.setLevel(lettuceLevel);
        }
    }

    /** One run of the suite: its cluster, servers, workers and figures. */
    private static final class Run
    {
        private final ChaosRunner chaos;
        private final ChaosRunner.Options options;
        private final Map<String, Object> report;
        private final List<L2WorkerProcess> workers = new ArrayList<>();
        private final TieredServer[] tiered = new TieredServer[HOSTS];
        private final KvStashServer[] servers = new KvStashServer[HOSTS];
        private final Path[] dirs = new Path[HOSTS];
        private final List<String> slowRequests = new ArrayList<>();
        private final List<Long> phaseStartNs = new ArrayList<>();
        private final List<String> phaseNames = new ArrayList<>();
        private HiccupMeter hiccups;
        private RedisCluster cluster;
        private long crashes;
        private long slowJudged;
        private long overTimeout;

        Run(final ChaosRunner chaos)
        {
            this.chaos = chaos;
            this.options = chaos.options();
            this.report = chaos.report();
        }

        void run() throws Exception
        {
            final long phaseMs = TimeUnit.SECONDS.toMillis(options.l2PhaseSeconds);
            hiccups = HiccupMeter.start("l2-chaos-hiccups");
            try
            {
                phase("start");
                cluster = RedisCluster.start();
                for (int h = 0; h < HOSTS; h++)
                {
                    dirs[h] = chaos.newDirectory("l2-" + (char)('a' + h));
                    tiered[h] = TieredServer.launch(ChaosRunner.serverContext(dirs[h], SLOTS, 1_000),
                        new TierContext().seeds(cluster.seeds()).timeoutMs(TIMEOUT_MS));
                    servers[h] = tiered[h].server();
                }
                awaitTiersUp("the tiers came up");
                final SplittableRandom random = new SplittableRandom(options.seed + 5);
                for (int h = 0; h < HOSTS; h++)
                {
                    for (int w = 0; w < options.l2WorkersPerHost; w++)
                    {
                        workers.add(L2WorkerProcess.spawn(dirs[h], 300 + w, random.nextLong(), h, HOSTS,
                            PREFIXES, PREFIX_LENGTH, TIMEOUT_MS));
                    }
                }
                for (final L2WorkerProcess worker : workers)
                {
                    worker.jvm.await("ATTACHED", 30_000);
                }
                chaos.progress("l2: cluster " + cluster.seeds() + ", " + workers.size() + " workers on " + HOSTS +
                    " hosts");
                phase("load");
                load(phaseMs);

                killMasters(phaseMs);
                restartCluster(phaseMs);

                final L2Corruption corruption = new L2Corruption(cluster);
                corruption.storeAndCorrupt(servers[0], WAIT_MS);
                for (final L2WorkerProcess worker : workers)
                {
                    for (int probe = 0; probe < L2Corruption.PROBES; probe++)
                    {
                        worker.jvm.send("probe " + L2Corruption.first(probe) + " " + L2Corruption.PROBE_LENGTH +
                            " " + L2Corruption.bad(probe));
                    }
                }
                chaos.progress("l2: one value overwritten with garbage, one truncated; workers read them too");
                phase("load with corrupt values");
                load(phaseMs);
                stopWorkers();

                final long[] corrupt = corruption.check(servers[1]);
                report.put("l2_corrupted_keys", (long)L2Corruption.PROBES);
                report.put("l2_corrupted_keys_counted", corrupt[0]);
                reportWorkers(corrupt[1]);
                reportServers();
            }
            finally
            {
                for (final L2WorkerProcess worker : workers)
                {
                    worker.jvm.close();
                }
                for (int h = 0; h < HOSTS; h++)
                {
                    if (null != tiered[h])
                    {
                        tiered[h].close();
                    }
                    if (null != dirs[h])
                    {
                        ShmDirectories.delete(dirs[h]);
                    }
                }
                if (null != cluster)
                {
                    cluster.close();
                }
                hiccups.close();
            }
        }

        /**
         * Kills masters with SIGKILL, one at a time under load, each until a replica has taken over and the
         * cluster says ok; then starts the killed node again (it rejoins as a replica) and waits for both tiers.
         */
        private void killMasters(final long phaseMs) throws Exception
        {
            long kills = 0;
            final List<Long> failoverMs = new ArrayList<>();
            for (int kill = 0; kill < options.l2NodeKills; kill++)
            {
                final int[] masters = cluster.masters();
                final int victim = masters[kill % masters.length];
                final long start = System.nanoTime();
                phase("master " + victim + " killed");
                cluster.kill9(victim);
                kills++;
                chaos.progress("l2: killed master " + victim + " (port " + cluster.port(victim) + ") with SIGKILL");
                final int[] after = awaitWhileLoading(() -> cluster.awaitFailover(victim, masters.length, WAIT_MS));
                failoverMs.add(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
                chaos.progress("l2: failed over in " + failoverMs.get(failoverMs.size() - 1) + " ms, masters now " +
                    Arrays.toString(after));
                phase("failed over, killed node starting again");
                cluster.startAll();
                awaitWhileLoading(() ->
                {
                    cluster.awaitOk(WAIT_MS);
                    return null;
                });
                awaitTiersUp("the tiers came back after the failover");
                phase("load after the failover");
                load(phaseMs);
            }
            report.put("l2_node_kills", kills);
            report.put("l2_failover_ms", failoverMs);
        }

        /**
         * Stops the whole cluster under load, then starts it again (empty) and waits until both tiers are up and
         * the cluster's writes and fetches have grown again.
         */
        private void restartCluster(final long phaseMs) throws Exception
        {
            boolean resumed = true;
            final List<Long> downStates = new ArrayList<>();
            for (int restart = 0; restart < options.l2ClusterRestarts; restart++)
            {
                phase("cluster stopped");
                cluster.stopAll();
                chaos.progress("l2: stopped the whole cluster");
                load(Math.max(2_000, phaseMs / 2));
                for (final KvStashServer server : servers)
                {
                    downStates.add(server.counters().get(CountersDescriptor.L2_STATE));
                }
                phase("cluster starting again");
                awaitWhileLoading(() ->
                {
                    cluster.restart();
                    return null;
                });
                chaos.progress("l2: started the cluster again (empty)");
                awaitTiersUp("the tiers came back after the cluster's restart");
                phase("load after the cluster's restart");
                final long writes = sum(CountersDescriptor.L2_WRITES);
                final long fetches = sum(CountersDescriptor.L2_FETCH_HITS);
                final long deadline = System.currentTimeMillis() + WAIT_MS;
                while ((sum(CountersDescriptor.L2_WRITES) <= writes || sum(CountersDescriptor.L2_FETCH_HITS) <= fetches) &&
                    System.currentTimeMillis() < deadline)
                {
                    load(100);
                }
                final boolean grew =
                    sum(CountersDescriptor.L2_WRITES) > writes && sum(CountersDescriptor.L2_FETCH_HITS) > fetches;
                chaos.progress("l2: after the restart writes " + writes + " -> " + sum(CountersDescriptor.L2_WRITES) +
                    ", fetches " + fetches + " -> " + sum(CountersDescriptor.L2_FETCH_HITS));
                resumed &= grew;
                load(phaseMs);
            }
            report.put("l2_cluster_restarts", (long)options.l2ClusterRestarts);
            report.put("l2_state_while_cluster_down", downStates);
            report.put("l2_resumed", resumed);
        }

        /** Runs the load for a while, taking the workers' lines and noting a worker that died. */
        private void load(final long ms) throws InterruptedException
        {
            final long deadline = System.currentTimeMillis() + ms;
            do
            {
                pump();
                Thread.sleep(20);
            }
            while (System.currentTimeMillis() < deadline);
        }

        private void phase(final String name)
        {
            phaseStartNs.add(System.nanoTime());
            phaseNames.add(name);
        }

        /**
         * Judges and describes a worker's slow request: its latency, how long the worker's JVM and this JVM (the
         * servers') were stalled meanwhile, and the phase it started in. It is over the timeout unless it was
         * not, less the longer of the worker's stalls (a collection of its own, or not scheduled) and the
         * servers' JVM's stalls without a collection (the whole process not scheduled: the machine was busy
         * elsewhere). A stall of the servers' JVM for a collection counts against the servers.
         */
        private String describeSlow(final L2WorkerProcess worker, final String line)
        {
            final Map<String, String> fields = new java.util.HashMap<>();
            for (final String part : line.split(" "))
            {
                final int eq = part.indexOf('=');
                if (eq > 0)
                {
                    fields.put(part.substring(0, eq), part.substring(eq + 1));
                }
            }
            final long start = Long.parseLong(fields.get("start"));
            final long end = Long.parseLong(fields.get("end"));
            final long tookNs = TimeUnit.MICROSECONDS.toNanos(Long.parseLong(fields.get("us")));
            final long ownNs = TimeUnit.MICROSECONDS.toNanos(Long.parseLong(fields.get("own_us")));
            final long machineNs = hiccups.stalledWithoutCollectionNs(start, end);
            final boolean over = tookNs - Math.max(ownNs, machineNs) > TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS);
            slowJudged++;
            overTimeout += over ? 1 : 0;
            String phase = "?";
            for (int i = 0; i < phaseStartNs.size() && phaseStartNs.get(i) - start <= 0; i++)
            {
                phase = phaseNames.get(i);
            }
            return String.format(java.util.Locale.ROOT,
                "%s on host %d: %.1f ms (worker stalled %.1f ms, servers' JVM stalled %.1f ms, %.1f ms of it " +
                "without a collection) during '%s'%s", fields.get("type"), worker.host, tookNs / 1e6, ownNs / 1e6,
                hiccups.stalledNs(start, end) / 1e6, machineNs / 1e6, phase,
                over ? "" : ": not counted, slow only while a process was stalled");
        }

        private void takeSlow(final L2WorkerProcess worker)
        {
            for (final String line : worker.slowLines)
            {
                final String slow = describeSlow(worker, line);
                chaos.progress("l2 slow request: " + slow);
                if (slowRequests.size() < 20)
                {
                    slowRequests.add(slow);
                }
            }
            worker.slowLines.clear();
        }

        private void pump()
        {
            for (final L2WorkerProcess worker : workers)
            {
                worker.pump(chaos);
                takeSlow(worker);
                if (!worker.finished && !worker.jvm.isAlive() && !worker.jvm.killedByUs())
                {
                    worker.pump(chaos);
                    if (!worker.finished)
                    {
                        crashes++;
                        worker.finished = true; // counted once
                        chaos.progress("l2 worker " + worker.jvm.pid() + " exited by itself with " +
                            worker.jvm.exitValue() + "; its last lines: " + worker.jvm.recentLines());
                    }
                }
            }
        }

        /** Runs a blocking step on another thread while this one keeps taking the workers' lines. */
        private <T> T awaitWhileLoading(final Step<T> step) throws Exception
        {
            final Object[] result = new Object[1];
            final Exception[] failure = new Exception[1];
            final Thread thread = new Thread(() ->
            {
                try
                {
                    result[0] = step.run();
                }
                catch (final Exception ex)
                {
                    failure[0] = ex;
                }
            }, "l2-chaos-step");
            thread.start();
            while (thread.isAlive())
            {
                load(50);
            }
            thread.join();
            if (null != failure[0])
            {
                throw failure[0];
            }
            @SuppressWarnings("unchecked")
            final T value = (T)result[0];
            return value;
        }

        private void awaitTiersUp(final String what) throws InterruptedException, IOException
        {
            final long deadline = System.currentTimeMillis() + WAIT_MS;
            for (final KvStashServer server : servers)
            {
                while (L2Tier.STATE_UP != server.counters().get(CountersDescriptor.L2_STATE))
                {
                    if (System.currentTimeMillis() > deadline)
                    {
                        throw new IOException("timed out waiting until " + what + ": l2_state " +
                            server.counters().get(CountersDescriptor.L2_STATE) + " on " + server.directory());
                    }
                    load(20);
                }
            }
        }

        private void stopWorkers() throws InterruptedException
        {
            for (final L2WorkerProcess worker : workers)
            {
                worker.jvm.send("stop");
            }
            for (final L2WorkerProcess worker : workers)
            {
                final long stopBy = System.currentTimeMillis() + 15_000;
                String line;
                while (!worker.finished && System.currentTimeMillis() < stopBy &&
                    null != (line = worker.jvm.poll(100)))
                {
                    worker.onLine(line, chaos);
                }
                takeSlow(worker);
                if (!worker.finished || !worker.jvm.waitFor(10_000) || 0 != worker.jvm.exitValue())
                {
                    crashes++;
                    chaos.progress("l2 worker " + worker.jvm.pid() + " did not stop cleanly; its last lines: " +
                        worker.jvm.recentLines());
                }
            }
        }

        private void reportWorkers(final long servedToCheck)
        {
            final long[] sums = new long[L2WorkerProcess.FIGURES.length];
            long maxUs = 0;
            for (final L2WorkerProcess worker : workers)
            {
                for (int i = 0; i < sums.length; i++)
                {
                    sums[i] += worker.figure(L2WorkerProcess.FIGURES[i]);
                }
                maxUs = Math.max(maxUs, worker.figure("maxus"));
            }
            report.put("l2_workers", (long)workers.size());
            report.put("l2_operations", sums[0]);
            report.put("l2_chunks_stored", sums[1]);
            report.put("l2_verified_reads", sums[3]);
            report.put("l2_verified_reads_all", sums[2]);
            report.put("l2_checksum_mismatches", sums[4]);
            report.put("l2_stale_reads", sums[5]);
            report.put("l2_requests", sums[6]);
            // A slow request whose line never came (a worker that died) counts as over the timeout.
            report.put("l2_requests_over_timeout", overTimeout + Math.max(0, sums[7] - slowJudged));
            report.put("l2_requests_over_timeout_while_stalled", slowJudged - overTimeout);
            report.put("l2_timeout_ms", TIMEOUT_MS);
            report.put("l2_max_request_ms", ChaosRunner.round(maxUs / 1e3));
            report.put("l2_slow_requests", new ArrayList<>(slowRequests));
            report.put("l2_servers_jvm_longest_stall_ms", ChaosRunner.round(hiccups.longestNs() / 1e6));
            report.put("l2_probe_reads", sums[9]);
            report.put("l2_corrupt_values_served", sums[10] + servedToCheck);
            report.put("l2_worker_crashes", crashes);
        }

        private void reportServers() throws InterruptedException
        {
            // The tiers may still be writing through (each write pins its chunk a moment): wait for them to drain.
            final long deadline = System.currentTimeMillis() + 15_000;
            while (leftOver() > 0 && System.currentTimeMillis() < deadline)
            {
                Thread.sleep(50);
            }
            report.put("l2_leaked_reservations", sum(CountersDescriptor.RESERVED_CHUNKS));
            report.put("l2_leaked_pins", sum(CountersDescriptor.PINNED_CHUNKS));
            report.put("l2_pending_transfers", sum(CountersDescriptor.PENDING_TRANSFERS));
            boolean balanced = true;
            for (final KvStashServer server : servers)
            {
                final StoreCounters c = server.counters();
                balanced &= c.get(CountersDescriptor.FREE_SLOTS) + c.get(CountersDescriptor.READABLE_CHUNKS) ==
                    c.get(CountersDescriptor.SLOT_CAPACITY);
            }
            report.put("l2_free_plus_readable_equals_total", balanced);
            boolean up = true;
            for (final KvStashServer server : servers)
            {
                up &= L2Tier.STATE_UP == server.counters().get(CountersDescriptor.L2_STATE);
            }
            report.put("l2_state_up_at_end", up);
            report.put("l2_server_side_max_ms", serverSideMaxMs());
            report.put("l2_corrupt_values", sum(CountersDescriptor.L2_CORRUPT_VALUES));
            report.put("l2_writes", sum(CountersDescriptor.L2_WRITES));
            report.put("l2_write_skips", sum(CountersDescriptor.L2_WRITE_SKIPS));
            report.put("l2_write_errors", sum(CountersDescriptor.L2_WRITE_ERRORS));
            report.put("l2_fetch_hits", sum(CountersDescriptor.L2_FETCH_HITS));
            report.put("l2_fetch_misses", sum(CountersDescriptor.L2_FETCH_MISSES));
            report.put("l2_timeouts", sum(CountersDescriptor.L2_TIMEOUTS));
            report.put("l2_errors", sum(CountersDescriptor.L2_ERRORS));
            chaos.progress("l2 done: " + report.get("l2_verified_reads") + " verified reads through the tier, " +
                report.get("l2_checksum_mismatches") + " mismatches, " + report.get("l2_corrupt_values") +
                " corrupt values counted, " + report.get("l2_requests_over_timeout") + " requests over " +
                TIMEOUT_MS + " ms");
        }

        /**
         * The servers' own longest time for each request type the workers send (the pipeline's enqueue to
         * publish, the tier's requests included), beside what the workers measured: a request slow for the worker
         * but quick in the server waited outside the pipeline.
         */
        private Map<String, Double> serverSideMaxMs()
        {
            final Map<String, Double> max = new java.util.LinkedHashMap<>();
            for (final int type : new int[]{ RequestType.LOOKUP, RequestType.RELEASE, RequestType.PREPARE_STORE,
                RequestType.COMMIT_STORE, RequestType.PREPARE_RETRIEVE, RequestType.COMMIT_RETRIEVE })
            {
                long ns = 0;
                for (final KvStashServer server : servers)
                {
                    if (null != server.latency())
                    {
                        server.latency().poll(System.currentTimeMillis());
                        ns = Math.max(ns, server.latency().copyRequestTotal(type).getMaxValue());
                    }
                }
                max.put(RequestType.name(type).toLowerCase(java.util.Locale.ROOT), ChaosRunner.round(ns / 1e6));
            }
            return max;
        }

        private long leftOver()
        {
            return sum(CountersDescriptor.RESERVED_CHUNKS) + sum(CountersDescriptor.PINNED_CHUNKS) +
                sum(CountersDescriptor.PENDING_TRANSFERS);
        }

        private long sum(final int counter)
        {
            long total = 0;
            for (final KvStashServer server : servers)
            {
                total += server.counters().get(counter);
            }
            return total;
        }
    }

    /** A blocking step of the suite. */
    @FunctionalInterface
    private interface Step<T>
    {
        T run() throws Exception;
    }
}
