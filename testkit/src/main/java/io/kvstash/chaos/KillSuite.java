package io.kvstash.chaos;

import io.kvstash.core.StoreCounters;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.testkit.LoadWorker;
import io.kvstash.wire.file.CountersDescriptor;

import java.io.IOException;
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
        final Path dir = chaos.newDirectory("kill");
        final Tally tally = new Tally(new SplittableRandom(options.seed));
        final long leaseMs = 1_000;
        try (KvStashServer server = KvStashServer.launch(ChaosRunner.serverContext(dir, 256, leaseMs)))
        {
            final LoadProcess[] workers = new LoadProcess[options.workers];
            for (int i = 0; i < workers.length; i++)
            {
                workers[i] = spawn(dir, i, tally);
            }
            churn(chaos, dir, workers, tally);
            stop(chaos, workers, tally);

            // One lease and a few sweeps later every reservation and pin of a killed worker must be gone.
            Thread.sleep(leaseMs + 500);
            awaitZero(server, CountersDescriptor.WIRE_CLIENTS, 5_000);
            report(chaos.report(), tally, server.counters());
            chaos.progress("kill chaos done: " + tally.kills + " kills, " + tally.verifiedDone + " verified reads, " +
                tally.mismatches + " mismatches, " + tally.crashes + " crashes");
        }
        finally
        {
            ShmDirectories.delete(dir);
        }
    }

    /**
     * Until the suite's time is up and enough reads were verified: kills each worker that reached its failpoint,
     * one worker without a failpoint every 3 s, and respawns those and any that exited by themselves.
     */
    private static void churn(
        final ChaosRunner chaos, final Path dir, final LoadProcess[] workers, final Tally tally) throws Exception
    {
        final ChaosRunner.Options options = chaos.options();
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(options.killSeconds);
        long nextRandomKill = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
        long nextProgress = System.nanoTime();
        while (true)
        {
            long verified = tally.verifiedDone;
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
                chaos.progress("kill chaos: " + tally.kills + " kills, " + verified + " verified reads, " +
                    tally.mismatches + " mismatches");
                nextProgress = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            }
            for (int i = 0; i < workers.length; i++)
            {
                final LoadProcess worker = workers[i];
                boolean respawn = readUntilFailpoint(chaos, worker, tally);
                if (!respawn && !worker.jvm.isAlive())
                {
                    tally.crashes++;
                    chaos.progress("worker " + worker.jvm.pid() + " exited by itself with " + worker.jvm.exitValue());
                    respawn = true;
                }
                if (!respawn && null == worker.failpoint && System.nanoTime() - nextRandomKill > 0)
                {
                    tally.mismatches += kill(worker, tally, chaos);
                    tally.randomKills++;
                    respawn = true;
                    nextRandomKill = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
                }
                if (respawn)
                {
                    tally.retire(worker);
                    workers[i] = spawn(dir, i, tally);
                }
            }
            Thread.sleep(5);
        }
    }

    /**
     * Reads what a worker printed so far; a worker that reached its failpoint is killed there.
     *
     * @return whether it was killed.
     */
    private static boolean readUntilFailpoint(final ChaosRunner chaos, final LoadProcess worker, final Tally tally)
        throws InterruptedException
    {
        String line;
        while (null != (line = worker.jvm.pollNow()))
        {
            if (line.startsWith("AT "))
            {
                tally.mismatches += kill(worker, tally, chaos);
                tally.killsAt.merge(worker.failpoint, 1L, Long::sum);
                return true;
            }
            tally.mismatches += worker.onLine(line, chaos);
        }
        return false;
    }

    /**
     * Asks every worker to stop and reads it to its final line; one waiting at a failpoint is killed there, and
     * one that never answers is killed too.
     */
    private static void stop(final ChaosRunner chaos, final LoadProcess[] workers, final Tally tally)
        throws InterruptedException
    {
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
                    tally.mismatches += kill(worker, tally, chaos);
                    tally.killsAt.merge(worker.failpoint, 1L, Long::sum);
                    finished = true;
                }
                else
                {
                    tally.mismatches += worker.onLine(line, chaos);
                    finished = line.startsWith("FINAL ");
                }
            }
            if (!finished)
            {
                // A worker waiting at a failpoint never answers "stop": that is one more kill.
                tally.mismatches += kill(worker, tally, chaos);
            }
            else if (worker.jvm.waitFor(10_000) && !worker.jvm.killedByUs() && 0 != worker.jvm.exitValue())
            {
                tally.crashes++;
            }
            tally.retire(worker);
        }
    }

    /** The suite's counts, then the server's: nothing a killed worker held may be left. */
    private static void report(final Map<String, Object> report, final Tally tally, final StoreCounters counters)
    {
        report.put("kills", tally.kills);
        report.put("kills_after_attach", tally.killsAfterAttach);
        report.put("kills_copy_transport", tally.killsCopyTransport);
        final Map<String, Long> byFailpoint = new LinkedHashMap<>();
        for (final LoadWorker.Failpoint failpoint : LoadWorker.Failpoint.values())
        {
            byFailpoint.put(failpoint.name().toLowerCase(), tally.killsAt.getOrDefault(failpoint, 0L));
        }
        byFailpoint.put("random", tally.randomKills);
        report.put("kills_by_failpoint", byFailpoint);
        report.put("operations", tally.opsDone);
        report.put("verified_reads", tally.verifiedDone);
        report.put("verified_reads_copy_transport", tally.verifiedCopy);
        report.put("stale_reads", tally.staleDone);
        report.put("checksum_mismatches", tally.mismatches);
        report.put("leaked_reservations", counters.get(CountersDescriptor.RESERVED_CHUNKS));
        report.put("leaked_pins", counters.get(CountersDescriptor.PINNED_CHUNKS));
        report.put("pending_transfers", counters.get(CountersDescriptor.PENDING_TRANSFERS));
        report.put("free_plus_readable_equals_total",
            counters.get(CountersDescriptor.FREE_SLOTS) + counters.get(CountersDescriptor.READABLE_CHUNKS) ==
            counters.get(CountersDescriptor.SLOT_CAPACITY));
        report.put("dead_clients_reaped", counters.get(CountersDescriptor.DEAD_CLIENTS));
        report.put("clients_left", counters.get(CountersDescriptor.WIRE_CLIENTS));
        report.put("reclaimed_leases", counters.get(CountersDescriptor.RECLAIMED_LEASES));
        report.put("evictions", counters.get(CountersDescriptor.EVICTIONS));
        report.put("worker_crashes", tally.crashes);
    }

    /**
     * Spawns load worker {@code index}: three in four armed with a random failpoint, every third spawn on the
     * copy transport.
     */
    private static LoadProcess spawn(final Path dir, final int index, final Tally tally) throws IOException
    {
        return LoadProcess.spawn(dir, index, tally.random, tally.random.nextInt(4) != 0, tally.spawns++ % 3 == 2);
    }

    /**
     * Kills a load worker and reads what it printed before it died, so a mismatch or its attach printed just
     * before the kill is not lost.
     *
     * @return mismatch lines among them.
     */
    private static long kill(final LoadProcess worker, final Tally tally, final ChaosRunner chaos)
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
        tally.kills++;
        tally.killsAfterAttach += worker.attached ? 1 : 0;
        tally.killsCopyTransport += worker.copyTransport ? 1 : 0;
        return mismatches;
    }

    /** What the suite counted: kills by what the worker was doing, and the work of the workers gone. */
    private static final class Tally
    {
        final SplittableRandom random;
        final Map<LoadWorker.Failpoint, Long> killsAt = new EnumMap<>(LoadWorker.Failpoint.class);
        long spawns;
        long kills;
        long killsAfterAttach;
        long killsCopyTransport;
        long randomKills;
        long mismatches;
        long crashes;
        long verifiedDone;
        long verifiedCopy;
        long staleDone;
        long opsDone;

        Tally(final SplittableRandom random)
        {
            this.random = random;
        }

        /** Adds the work of a worker that is gone (killed, exited or stopped). */
        void retire(final LoadProcess worker)
        {
            verifiedDone += worker.verified;
            verifiedCopy += worker.copyTransport ? worker.verified : 0;
            staleDone += worker.stale;
            opsDone += worker.ops;
        }
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
