package io.kvstash.chaos;

import io.kvstash.core.StoreCounters;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.testkit.LoadWorker;

import java.nio.file.Path;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Kill chaos: load workers ({@link LoadWorker}) armed with failpoints are killed there, others at random, and
 * respawned, against an in-process server with a short lease; every read is verified, and afterwards every
 * reservation and pin of a killed worker must be gone.
 */
final class KillSuite implements ChaosSuite
{
    @Override
    public String name()
    {
        return "kill";
    }

    @Override
    public void run(final ChaosRunner chaos) throws Exception
    {
        final ChaosRunner.Options options = chaos.options();
        final Map<String, Object> report = chaos.report();
        final Path dir = chaos.newDirectory("kill");
        final SplittableRandom random = new SplittableRandom(options.seed);
        final Map<LoadWorker.Failpoint, Long> killsAt = new EnumMap<>(LoadWorker.Failpoint.class);
        final KillTally killed = new KillTally();
        long spawns = 0;
        long verifiedCopy = 0;
        long randomKills = 0;
        long mismatches = 0;
        long crashes = 0;
        long verifiedDone = 0;
        long staleDone = 0;
        long opsDone = 0;
        final long leaseMs = 1_000;
        try (KvStashServer server = KvStashServer.launch(ChaosRunner.serverContext(dir, 256, leaseMs)))
        {
            final LoadProcess[] workers = new LoadProcess[options.workers];
            for (int i = 0; i < workers.length; i++)
            {
                workers[i] = LoadProcess.spawn(dir, i, random, random.nextInt(4) != 0, spawns++ % 3 == 2);
            }
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(options.killSeconds);
            long nextRandomKill = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            long nextProgress = System.nanoTime();
            while (true)
            {
                long verified = verifiedDone;
                for (final LoadProcess worker : workers)
                {
                    verified += worker.verified;
                }
                final boolean timeUp = System.nanoTime() - deadline > 0;
                if (timeUp && verified >= options.minVerifiedReads)
                {
                    break;
                }
                if (System.nanoTime() - nextProgress > 0)
                {
                    chaos.progress("kill chaos: " + killed.total + " kills, " + verified + " verified reads, " +
                        mismatches + " mismatches");
                    nextProgress = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                }
                for (int i = 0; i < workers.length; i++)
                {
                    final LoadProcess worker = workers[i];
                    String line;
                    boolean respawn = false;
                    while (null != (line = worker.jvm.pollNow()))
                    {
                        if (line.startsWith("AT "))
                        {
                            mismatches += kill(worker, killed, chaos);
                            killsAt.merge(worker.failpoint, 1L, Long::sum);
                            respawn = true;
                            break;
                        }
                        mismatches += worker.onLine(line, chaos);
                    }
                    if (!respawn && !worker.jvm.isAlive())
                    {
                        crashes++;
                        chaos.progress("worker " + worker.jvm.pid() + " exited by itself with " +
                            worker.jvm.exitValue());
                        respawn = true;
                    }
                    if (!respawn && null == worker.failpoint && System.nanoTime() - nextRandomKill > 0)
                    {
                        mismatches += kill(worker, killed, chaos);
                        randomKills++;
                        respawn = true;
                        nextRandomKill = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
                    }
                    if (respawn)
                    {
                        verifiedDone += worker.verified;
                        verifiedCopy += worker.copyTransport ? worker.verified : 0;
                        staleDone += worker.stale;
                        opsDone += worker.ops;
                        workers[i] = LoadProcess.spawn(dir, i, random, random.nextInt(4) != 0, spawns++ % 3 == 2);
                    }
                }
                Thread.sleep(5);
            }
            for (final LoadProcess worker : workers)
            {
                worker.jvm.send("stop");
            }
            for (final LoadProcess worker : workers)
            {
                final long stopBy = System.currentTimeMillis() + 15_000;
                boolean finished = false;
                String line;
                while (!finished && System.currentTimeMillis() < stopBy &&
                    null != (line = worker.jvm.poll(100)))
                {
                    if (line.startsWith("AT "))
                    {
                        mismatches += kill(worker, killed, chaos);
                        killsAt.merge(worker.failpoint, 1L, Long::sum);
                        finished = true;
                    }
                    else
                    {
                        mismatches += worker.onLine(line, chaos);
                        finished = line.startsWith("FINAL ");
                    }
                }
                if (!finished)
                {
                    // A worker waiting at a failpoint never answers "stop": that is one more kill.
                    mismatches += kill(worker, killed, chaos);
                }
                else if (worker.jvm.waitFor(10_000) && !worker.jvm.killedByUs() && 0 != worker.jvm.exitValue())
                {
                    crashes++;
                }
                verifiedDone += worker.verified;
                verifiedCopy += worker.copyTransport ? worker.verified : 0;
                staleDone += worker.stale;
                opsDone += worker.ops;
            }

            // One lease and a few sweeps later every reservation and pin of a killed worker must be gone.
            Thread.sleep(leaseMs + 500);
            awaitZero(server, StoreCounters.WIRE_CLIENTS, 5_000);
            final StoreCounters counters = server.counters();
            report.put("kills", killed.total);
            report.put("kills_after_attach", killed.afterAttach);
            report.put("kills_copy_transport", killed.copyTransport);
            final Map<String, Long> byFailpoint = new LinkedHashMap<>();
            for (final LoadWorker.Failpoint failpoint : LoadWorker.Failpoint.values())
            {
                byFailpoint.put(failpoint.name().toLowerCase(), killsAt.getOrDefault(failpoint, 0L));
            }
            byFailpoint.put("random", randomKills);
            report.put("kills_by_failpoint", byFailpoint);
            report.put("operations", opsDone);
            report.put("verified_reads", verifiedDone);
            report.put("verified_reads_copy_transport", verifiedCopy);
            report.put("stale_reads", staleDone);
            report.put("checksum_mismatches", mismatches);
            report.put("leaked_reservations", counters.get(StoreCounters.RESERVED_CHUNKS));
            report.put("leaked_pins", counters.get(StoreCounters.PINNED_CHUNKS));
            report.put("pending_transfers", counters.get(StoreCounters.PENDING_TRANSFERS));
            report.put("free_plus_readable_equals_total",
                counters.get(StoreCounters.FREE_SLOTS) + counters.get(StoreCounters.READABLE_CHUNKS) ==
                counters.get(StoreCounters.SLOT_CAPACITY));
            report.put("dead_clients_reaped", counters.get(StoreCounters.DEAD_CLIENTS));
            report.put("clients_left", counters.get(StoreCounters.WIRE_CLIENTS));
            report.put("reclaimed_leases", counters.get(StoreCounters.RECLAIMED_LEASES));
            report.put("evictions", counters.get(StoreCounters.EVICTIONS));
            report.put("worker_crashes", crashes);
            chaos.progress("kill chaos done: " + killed.total + " kills, " + verifiedDone + " verified reads, " +
                mismatches + " mismatches, " + crashes + " crashes");
        }
        finally
        {
            ShmDirectories.delete(dir);
        }
    }

    /**
     * Kills a load worker and reads what it printed before it died, so a mismatch or its attach printed just
     * before the kill is not lost.
     *
     * @return mismatch lines among them.
     */
    private static long kill(final LoadProcess worker, final KillTally killed, final ChaosRunner chaos)
        throws InterruptedException
    {
        worker.jvm.kill9();
        worker.jvm.awaitEndOfOutput(5_000);
        long mismatches = 0;
        String line;
        while (null != (line = worker.jvm.pollNow()))
        {
            mismatches += worker.onLine(line, chaos);
        }
        killed.total++;
        killed.afterAttach += worker.attached ? 1 : 0;
        killed.copyTransport += worker.copyTransport ? 1 : 0;
        return mismatches;
    }

    /** Kills of load workers, counted by what the worker was doing. */
    private static final class KillTally
    {
        long total;
        long afterAttach;
        long copyTransport;
    }

    private static void awaitZero(final KvStashServer server, final int counter, final long timeoutMs)
        throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (0 != server.counters().get(counter) && System.currentTimeMillis() < deadline)
        {
            Thread.sleep(10);
        }
    }
}
