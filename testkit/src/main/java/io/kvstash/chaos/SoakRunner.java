package io.kvstash.chaos;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.testkit.TestWorker;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.process.ChildJvm;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The soak: a server (in this process) under worker processes doing the chaos load for a long time, with
 * client churn (a worker replaced every churn interval, a short-lived client connecting and closing every
 * second). Once a minute it samples the server's heap after a GC, the bytes of its mappings of the server
 * directory ({@code /proc/self/maps}), and the bytes the directory holds; at the end it fits a line through
 * the samples of the last 20 minutes (or the last two thirds of a shorter soak) and reports the growth, and
 * checks a clean shutdown leaves no file but the lock file.
 */
public final class SoakRunner
{
    private final long durationMs;
    private final int workers;
    private final long churnMs;
    private final long sampleMs;
    private final Path base;
    private final PrintStream progress;

    /**
     * A soak.
     *
     * @param durationMs how long.
     * @param workers    load worker processes.
     * @param churnMs    a worker is replaced this often.
     * @param sampleMs   sampling period.
     * @param base       where the server directory goes.
     * @param progress   progress lines, or null.
     */
    public SoakRunner(
        final long durationMs,
        final int workers,
        final long churnMs,
        final long sampleMs,
        final Path base,
        final PrintStream progress)
    {
        this.durationMs = durationMs;
        this.workers = workers;
        this.churnMs = churnMs;
        this.sampleMs = sampleMs;
        this.base = base;
        this.progress = progress;
    }

    /**
     * Runs the soak.
     *
     * @return report fields.
     * @throws Exception when the server cannot start.
     */
    public Map<String, Object> run() throws Exception
    {
        final Path dir = base.resolve("kvstash-soak-" + Long.toHexString(ThreadLocalRandom.current().nextLong()));
        final List<double[]> samples = new ArrayList<>();
        final SplittableRandom random = new SplittableRandom(11);
        final Counts counts = new Counts();
        final ServerContext context = new ServerContext()
            .directory(dir)
            .sweepIntervalMs(20)
            .storeContext(new StoreContext().poolSizeBytes(1024L * ChaosRunner.CHUNK_BYTES)
                .leaseNs(TimeUnit.SECONDS.toNanos(2)));
        final KvStashServer server = KvStashServer.launch(context);
        final ChildJvm[] load = new ChildJvm[workers];
        try
        {
            for (int i = 0; i < workers; i++)
            {
                load[i] = spawn(dir, i, random);
            }
            soak(server, dir, load, random, samples, counts);
            for (final ChildJvm worker : load)
            {
                worker.send("stop");
            }
            for (final ChildJvm worker : load)
            {
                worker.waitFor(15_000);
                worker.close();
            }
        }
        finally
        {
            for (final ChildJvm worker : load)
            {
                if (null != worker)
                {
                    worker.close();
                }
            }
            server.close();
        }
        final List<String> left = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir))
        {
            files.forEach(p -> left.add(p.getFileName().toString()));
        }
        left.remove("server.lock");
        Files.deleteIfExists(dir.resolve("server.lock"));
        Files.deleteIfExists(dir);
        return report(samples, counts, left.size());
    }

    /**
     * For the soak's duration: reads the workers' lines, replaces one worker every churn interval, connects and
     * closes a short-lived client every second, and samples memory every sample interval.
     */
    private void soak(
        final KvStashServer server,
        final Path dir,
        final ChildJvm[] load,
        final SplittableRandom random,
        final List<double[]> samples,
        final Counts counts) throws Exception
    {
        final long start = System.currentTimeMillis();
        long nextSample = start;
        long nextChurn = start + churnMs;
        long nextShort = start;
        int churnIndex = 0;
        while (System.currentTimeMillis() - start < durationMs)
        {
            final long now = System.currentTimeMillis();
            for (final ChildJvm worker : load)
            {
                String line;
                while (null != (line = worker.pollNow()))
                {
                    counts.mismatches += line.startsWith("MISMATCH") ? 1 : 0;
                }
            }
            if (now >= nextChurn)
            {
                load[churnIndex].send("stop");
                load[churnIndex].waitFor(15_000);
                load[churnIndex].close();
                load[churnIndex] = spawn(dir, churnIndex, random);
                churnIndex = (churnIndex + 1) % workers;
                counts.churned++;
                nextChurn = now + churnMs;
            }
            if (now >= nextShort)
            {
                try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
                {
                    client.ping();
                }
                counts.shortClients++;
                nextShort = now + 1_000;
            }
            if (now >= nextSample)
            {
                final double[] sample = sample(dir, (now - start) / 60_000.0);
                samples.add(sample);
                if (null != progress)
                {
                    progress.printf("[soak] %.1f min: heap %.1f MiB, mapped %.1f MiB, directory %.1f MiB, " +
                        "clients %d%n", sample[0], sample[1] / (1 << 20), sample[2] / (1 << 20),
                        sample[3] / (1 << 20), server.counters().get(CountersDescriptor.WIRE_CLIENTS));
                }
                nextSample = now + sampleMs;
            }
            Thread.sleep(20);
        }
    }

    /** The report: growth rates over the last samples (up to 20, at least two), and the soak's counts. */
    private Map<String, Object> report(final List<double[]> samples, final Counts counts, final int staleFiles)
    {
        final Map<String, Object> report = new LinkedHashMap<>();
        final int from = samples.size() - Math.max(2, Math.min(20, samples.size() * 2 / 3));
        final List<double[]> tail = samples.subList(Math.max(0, from), samples.size());
        report.put("soak_minutes", round(durationMs / 60_000.0));
        report.put("soak_samples", samples.size());
        report.put("soak_window_minutes", tail.isEmpty() ? 0 : round(tail.get(tail.size() - 1)[0] - tail.get(0)[0]));
        report.put("soak_heap_growth_mib_per_hour", round(slope(tail, 1) * 60 / (1 << 20)));
        report.put("soak_mapped_growth_mib_per_hour", round(slope(tail, 2) * 60 / (1 << 20)));
        report.put("soak_shm_growth_mib_per_hour", round(slope(tail, 3) * 60 / (1 << 20)));
        report.put("soak_heap_last_mib", samples.isEmpty() ? 0 : round(samples.get(samples.size() - 1)[1] / (1 << 20)));
        report.put("soak_workers_churned", counts.churned);
        report.put("soak_short_clients", counts.shortClients);
        report.put("soak_checksum_mismatches", counts.mismatches);
        report.put("soak_stale_files", staleFiles);
        return report;
    }

    /** What the soak counted. */
    private static final class Counts
    {
        long churned;
        long shortClients;
        long mismatches;
    }

    private ChildJvm spawn(final Path dir, final int index, final SplittableRandom random) throws IOException
    {
        return ChildJvm.start(TestWorker.class, "load", dir.toString(), Long.toString(100 + index),
            Long.toString(random.nextLong()), "3000", Integer.toString(ChaosRunner.CHUNK_BYTES));
    }

    /**
     * One sample: minutes, heap used after a GC, bytes of this process's mappings of the directory, bytes
     * the directory's files hold.
     */
    private static double[] sample(final Path dir, final double minutes) throws IOException
    {
        System.gc();
        final double heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
        double mapped = 0;
        final String prefix = dir.toAbsolutePath().toString();
        for (final String line : Files.readAllLines(Path.of("/proc/self/maps")))
        {
            if (line.contains(prefix))
            {
                final String range = line.substring(0, line.indexOf(' '));
                final int dash = range.indexOf('-');
                mapped += Long.parseUnsignedLong(range.substring(dash + 1), 16) -
                    Long.parseUnsignedLong(range.substring(0, dash), 16);
            }
        }
        double held = 0;
        try (Stream<Path> files = Files.list(dir))
        {
            for (final Path file : (Iterable<Path>)files::iterator)
            {
                try
                {
                    held += Files.size(file);
                }
                catch (final NoSuchFileException ex)
                {
                    // a client detached between the listing and this: its file holds nothing any more
                }
            }
        }
        return new double[]{ minutes, heap, mapped, held };
    }

    /**
     * Least-squares slope of a column over the minutes column, per minute.
     */
    private static double slope(final List<double[]> samples, final int column)
    {
        final int n = samples.size();
        if (n < 2)
        {
            return 0;
        }
        double sx = 0;
        double sy = 0;
        double sxx = 0;
        double sxy = 0;
        for (final double[] s : samples)
        {
            sx += s[0];
            sy += s[column];
            sxx += s[0] * s[0];
            sxy += s[0] * s[column];
        }
        final double denominator = n * sxx - sx * sx;
        return 0 == denominator ? 0 : (n * sxy - sx * sy) / denominator;
    }

    private static double round(final double value)
    {
        return Math.round(value * 1000.0) / 1000.0;
    }
}
