package io.kvstash.chaos;

import io.kvstash.process.ChildJvm;
import io.kvstash.testkit.LoadWorker;
import io.kvstash.testkit.TestWorker;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A load worker process of the kill and restart suites ({@link TestWorker} {@code load}, see {@link LoadWorker})
 * and the figures it reported last.
 */
final class LoadProcess
{
    final ChildJvm jvm;
    final LoadWorker.Failpoint failpoint;
    final boolean copyTransport;
    boolean attached;
    long verified;
    long stale;
    long ops;

    private LoadProcess(final ChildJvm jvm, final LoadWorker.Failpoint failpoint, final boolean copyTransport)
    {
        this.jvm = jvm;
        this.failpoint = failpoint;
        this.copyTransport = copyTransport;
    }

    /**
     * Starts a load worker on a shared key space.
     *
     * @param dir           the server's directory.
     * @param slot          the worker's place among the suite's workers (its instance is 100 + slot).
     * @param random        the suite's random choices.
     * @param arm           whether to arm a random failpoint after a random number of operations.
     * @param copyTransport whether the worker uses the copy transport.
     * @return the running worker.
     * @throws IOException when the process cannot start.
     */
    static LoadProcess spawn(
        final Path dir, final int slot, final SplittableRandom random, final boolean arm, final boolean copyTransport)
        throws IOException
    {
        final LoadWorker.Failpoint[] failpoints = LoadWorker.Failpoint.values();
        final List<String> args = new ArrayList<>(List.of("load", dir.toString(), Long.toString(100 + slot),
            Long.toString(random.nextLong()), "600", Integer.toString(ChaosRunner.CHUNK_BYTES)));
        if (copyTransport)
        {
            args.add("copy");
        }
        LoadWorker.Failpoint failpoint = null;
        if (arm)
        {
            failpoint = failpoints[random.nextInt(failpoints.length)];
            args.add(failpoint.name());
            args.add(Integer.toString(20 + random.nextInt(400)));
        }
        return new LoadProcess(ChildJvm.start(TestWorker.class, args.toArray(new String[0])), failpoint, copyTransport);
    }

    /**
     * Takes one stdout line of the worker.
     *
     * @param line  the line.
     * @param chaos where a mismatch is reported.
     * @return 1 for a mismatch line, else 0.
     */
    long onLine(final String line, final ChaosRunner chaos)
    {
        if (line.startsWith("P ") || line.startsWith("FINAL "))
        {
            parseProgress(line);
        }
        else if ("ATTACHED".equals(line))
        {
            attached = true;
        }
        else if (line.startsWith("MISMATCH"))
        {
            chaos.progress("worker " + jvm.pid() + ": " + line);
            return 1;
        }
        return 0;
    }

    private void parseProgress(final String line)
    {
        for (final String part : line.split(" "))
        {
            final int eq = part.indexOf('=');
            if (eq < 0)
            {
                continue;
            }
            final long value = Long.parseLong(part.substring(eq + 1));
            switch (part.substring(0, eq))
            {
                case "verified":
                    verified = value;
                    break;
                case "stale":
                    stale = value;
                    break;
                case "ops":
                    ops = value;
                    break;
                default:
                    break;
            }
        }
    }
}
