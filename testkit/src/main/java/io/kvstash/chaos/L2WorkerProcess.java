package io.kvstash.chaos;

import io.kvstash.process.ChildJvm;
import io.kvstash.testkit.L2LoadWorker;
import io.kvstash.testkit.TestWorker;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A worker process of the second tier suite ({@link TestWorker} {@code l2load}, see {@link L2LoadWorker}) and
 * the figures it reported last.
 */
final class L2WorkerProcess
{
    /** Figure names of the worker's progress lines, in the order the suite reports their sums. */
    static final String[] FIGURES = { "ops", "stores", "verified", "l2verified", "mismatches", "stale", "requests",
        "slow", "maxus", "probes", "served" };

    final ChildJvm jvm;
    final int host;
    final Map<String, Long> figures = new HashMap<>();
    /** {@code SLOW ...} lines not yet taken by the suite. */
    final List<String> slowLines = new ArrayList<>();
    boolean finished;

    private L2WorkerProcess(final ChildJvm jvm, final int host)
    {
        this.jvm = jvm;
        this.host = host;
    }

    /**
     * Starts a worker on one host's server.
     *
     * @param dir          the host's server directory.
     * @param instance     the worker's instance id.
     * @param seed         its random choices.
     * @param host         the host's index.
     * @param hosts        hosts in all.
     * @param prefixes     prefixes of the shared key space.
     * @param prefixLength chunks of each prefix.
     * @param timeoutMs    the tier's timeout: a request slower than it is counted.
     * @return the running worker.
     * @throws IOException when the process cannot start.
     */
    static L2WorkerProcess spawn(
        final Path dir,
        final long instance,
        final long seed,
        final int host,
        final int hosts,
        final int prefixes,
        final int prefixLength,
        final long timeoutMs)
        throws IOException
    {
        return new L2WorkerProcess(ChildJvm.start(TestWorker.class, "l2load", dir.toString(), Long.toString(instance),
            Long.toString(seed), Integer.toString(host), Integer.toString(hosts), Integer.toString(prefixes),
            Integer.toString(prefixLength), Integer.toString(ChaosRunner.CHUNK_BYTES), Long.toString(timeoutMs)),
            host);
    }

    /**
     * Takes every stdout line the worker printed so far.
     *
     * @param chaos where mismatches and corrupt reads are reported at once.
     */
    void pump(final ChaosRunner chaos)
    {
        String line;
        while (null != (line = jvm.pollNow()))
        {
            onLine(line, chaos);
        }
    }

    /**
     * Takes one stdout line of the worker.
     *
     * @param line  the line.
     * @param chaos where mismatches and corrupt reads are reported at once.
     */
    void onLine(final String line, final ChaosRunner chaos)
    {
        if (line.startsWith("P ") || line.startsWith("FINAL "))
        {
            finished |= line.startsWith("FINAL ");
            for (final String part : line.split(" "))
            {
                final int eq = part.indexOf('=');
                if (eq > 0)
                {
                    figures.put(part.substring(0, eq), Long.parseLong(part.substring(eq + 1)));
                }
            }
        }
        else if (line.startsWith("SLOW "))
        {
            slowLines.add(line);
        }
        else if (line.startsWith("MISMATCH") || line.startsWith("CORRUPT_SERVED"))
        {
            chaos.progress("l2 worker " + jvm.pid() + " on host " + host + ": " + line);
        }
    }

    /**
     * The last value of one figure.
     *
     * @param name figure name.
     * @return value, 0 before the first progress line.
     */
    long figure(final String name)
    {
        return figures.getOrDefault(name, 0L);
    }
}
