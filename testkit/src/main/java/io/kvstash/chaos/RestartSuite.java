package io.kvstash.chaos;

import io.kvstash.process.ChildJvm;
import io.kvstash.process.ShmDirectories;
import io.kvstash.testkit.TestServer;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static io.kvstash.chaos.ChaosRunner.CHUNK_BYTES;

/**
 * Server kill and restart under load: the server ({@link TestServer}) is killed with SIGKILL and started again
 * while load workers run; every worker must reconnect to the new incarnation, verify what it reads, and the
 * dead server's error log must be kept.
 */
final class RestartSuite implements ChaosSuite
{
    @Override
    public String name()
    {
        return "restart";
    }

    @Override
    public void run(final ChaosRunner chaos) throws Exception
    {
        final ChaosRunner.Options options = chaos.options();
        final Map<String, Object> report = chaos.report();
        final Path dir = chaos.newDirectory("restart");
        final SplittableRandom random = new SplittableRandom(options.seed + 1);
        final long poolBytes = 256L * CHUNK_BYTES;
        final Counts counts = new Counts();
        boolean errorLogKept = true;
        ChildJvm server = ChildJvm.start(TestServer.class, TestServer.args(dir, poolBytes, 1000));
        final List<LoadProcess> workers = new ArrayList<>();
        try
        {
            String incarnation = TestServer.incarnation(server.await(TestServer.READY_PREFIX, 30_000));
            for (int i = 0; i < options.workers; i++)
            {
                workers.add(LoadProcess.spawn(dir, i, random, false, i % 3 == 2)); // every third on the copy transport
            }
            for (int restart = 0; restart < options.restarts; restart++)
            {
                Thread.sleep(3_000);
                server.kill9();
                server = ChildJvm.start(TestServer.class, TestServer.args(dir, poolBytes, 1000));
                final String previous = incarnation;
                incarnation = TestServer.incarnation(server.await(TestServer.READY_PREFIX, 30_000));
                errorLogKept &= Files.exists(dir.resolve("dead-control-" + previous));
                for (final LoadProcess worker : workers)
                {
                    counts.reconnects += awaitReconnect(worker, incarnation, counts) ? 1 : 0;
                }
                chaos.progress("restart " + (restart + 1) + ": " + counts.reconnects + " reconnections so far");
            }
            stop(workers, counts);
            server.signal("TERM");
            server.waitFor(20_000);
        }
        finally
        {
            for (final LoadProcess worker : workers)
            {
                worker.jvm.close();
            }
            server.close();
            ShmDirectories.delete(dir);
        }
        report.put("server_restarts", options.restarts);
        report.put("reconnections", counts.reconnects);
        report.put("reconnections_expected", (long)options.restarts * options.workers);
        report.put("restart_worker_crashes", counts.crashes);
        report.put("restart_checksum_mismatches", counts.mismatches);
        report.put("error_log_kept", errorLogKept);
        final Object before = report.getOrDefault("worker_crashes", 0L);
        report.put("worker_crashes", (Long)before + counts.crashes);
        final Object mismatchesBefore = report.getOrDefault("checksum_mismatches", 0L);
        report.put("checksum_mismatches", (Long)mismatchesBefore + counts.mismatches);
        chaos.progress("restarts done: " + counts.reconnects + " of " + (long)options.restarts * options.workers +
            " reconnections, " + counts.crashes + " crashes");
    }

    /**
     * Reads a worker's lines, for up to a minute, until it says it reconnected to the server's new incarnation.
     *
     * @return whether it did.
     */
    private static boolean awaitReconnect(final LoadProcess worker, final String incarnation, final Counts counts)
        throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + 60_000;
        boolean back = false;
        while (!back && System.currentTimeMillis() < deadline)
        {
            final String line = worker.jvm.poll(100);
            if (null == line)
            {
                if (!worker.jvm.isAlive())
                {
                    break;
                }
                continue;
            }
            if (line.startsWith("MISMATCH"))
            {
                counts.mismatches++;
            }
            back = line.equals("RECONNECTED " + incarnation);
        }
        return back;
    }

    /** Asks every worker to stop and reads it to its final line; one that does not exit cleanly is a crash. */
    private static void stop(final List<LoadProcess> workers, final Counts counts) throws InterruptedException
    {
        for (final LoadProcess worker : workers)
        {
            worker.jvm.send("stop");
        }
        for (final LoadProcess worker : workers)
        {
            String line;
            boolean finished = false;
            final long stopBy = System.currentTimeMillis() + 15_000;
            while (!finished && System.currentTimeMillis() < stopBy && null != (line = worker.jvm.poll(100)))
            {
                counts.mismatches += line.startsWith("MISMATCH") ? 1 : 0;
                finished = line.startsWith("FINAL ");
            }
            if (!worker.jvm.waitFor(10_000) || 0 != worker.jvm.exitValue())
            {
                counts.crashes++;
            }
        }
    }

    /** What the suite counted across restarts. */
    private static final class Counts
    {
        long reconnects;
        long crashes;
        long mismatches;
    }
}
