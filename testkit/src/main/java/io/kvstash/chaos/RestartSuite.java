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
        long reconnects = 0;
        long crashes = 0;
        long mismatches = 0;
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
                            mismatches++;
                        }
                        back = line.equals("RECONNECTED " + incarnation);
                    }
                    reconnects += back ? 1 : 0;
                }
                chaos.progress("restart " + (restart + 1) + ": " + reconnects + " reconnections so far");
            }
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
                    mismatches += line.startsWith("MISMATCH") ? 1 : 0;
                    finished = line.startsWith("FINAL ");
                }
                if (!worker.jvm.waitFor(10_000) || 0 != worker.jvm.exitValue())
                {
                    crashes++;
                }
            }
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
        report.put("reconnections", reconnects);
        report.put("reconnections_expected", (long)options.restarts * options.workers);
        report.put("restart_worker_crashes", crashes);
        report.put("restart_checksum_mismatches", mismatches);
        report.put("error_log_kept", errorLogKept);
        final Object before = report.getOrDefault("worker_crashes", 0L);
        report.put("worker_crashes", (Long)before + crashes);
        final Object mismatchesBefore = report.getOrDefault("checksum_mismatches", 0L);
        report.put("checksum_mismatches", (Long)mismatchesBefore + mismatches);
        chaos.progress("restarts done: " + reconnects + " of " + (long)options.restarts * options.workers +
            " reconnections, " + crashes + " crashes");
    }
}
