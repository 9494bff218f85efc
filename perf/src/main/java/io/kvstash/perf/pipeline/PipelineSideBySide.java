package io.kvstash.perf.pipeline;

import io.kvstash.perf.bench.BenchSupport;
import io.kvstash.pipeline.Pipeline;
import io.kvstash.wire.RequestType;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The pipeline contenders of {@link PipelineThroughputBenchmark} side by side in one JVM: short rounds of
 * each in turn, many times over, so the load of a shared machine falls on all of them alike; prints the
 * median requests per second of each and the median of the per-round ratios to the first contender. JMH
 * runs its benchmarks one after another, minutes apart, which on a 2-core machine shared with compilers
 * moves the figures by more than the differences sought; this harness is for the ratios.
 * <p>
 * Usage: {@code PipelineSideBySide [LOOKUP|PING] [rounds] [roundMs] [contender...]}; contenders:
 * {@code direct}, {@code latency}, {@code no-latency}, {@code journal}, {@code stage-timing-all}, and
 * {@code toggled-off} and {@code toggled-on}: one pipeline shared by the two, latency recording switched off or on
 * before each round ({@link Pipeline#latencyEnabled(boolean)}). Two pipelines built alike ran up to 6 % apart
 * here, by where their memory landed, so the cost of latency recording, about 2 %, is measured on one pipeline.
 * Run it with a young generation that holds every contender's pipeline ({@code -Xms4g -Xmn3g}): it warns when a
 * collection ran after the first pipeline was built, because a collection that copies a pipeline slows it down.
 */
public final class PipelineSideBySide
{
    /**
     * Requests after which the journal contender starts over with a fresh pipeline and journal (5.6 GB of
     * 56-byte LOOKUP records on {@code /dev/shm}).
     */
    private static final long JOURNAL_REQUESTS = 100_000_000L;

    /** Prefix of the contenders sharing one pipeline with latency recording switched. */
    private static final String TOGGLED = "toggled-";

    private PipelineSideBySide()
    {
    }

    /**
     * One contender: runs requests for a while and returns how many.
     */
    interface Contender
    {
        long run(long deadlineNs) throws Exception;

        /**
         * Housekeeping between rounds, outside the timed part.
         *
         * @throws Exception when it fails.
         */
        default void between() throws Exception
        {
        }

        void close() throws IOException;
    }

    /**
     * Runs the comparison.
     *
     * @param args request type, rounds, round length in ms, contenders.
     * @throws Exception when a contender fails its checks.
     */
    public static void main(final String[] args) throws Exception
    {
        final String request = args.length > 0 ? args[0] : "LOOKUP";
        final int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 30;
        final long roundNs = (args.length > 2 ? Long.parseLong(args[2]) : 200) * 1_000_000L;
        final List<String> names = args.length > 3 ? Arrays.asList(args).subList(3, args.length) :
            List.of("direct", "no-latency", "latency", "journal");
        final long collectionsBefore = BenchSupport.gcCount();
        final List<Contender> contenders = new ArrayList<>();
        PipelineThroughputBenchmark.Shared toggled = null;
        for (final String name : names)
        {
            if (name.startsWith(TOGGLED))
            {
                final boolean owner = null == toggled;
                if (owner)
                {
                    toggled = newShared(request, "latency");
                }
                contenders.add(pipelineContender(toggled, toggledLatency(name), owner));
            }
            else
            {
                contenders.add(contender(request, name));
            }
        }
        final double[][] rates = new double[names.size()][rounds];
        for (int warm = 0; warm < 5; warm++)
        {
            for (final Contender c : contenders)
            {
                c.run(System.nanoTime() + roundNs);
            }
        }
        for (int r = 0; r < rounds; r++)
        {
            for (int k = 0; k < contenders.size(); k++)
            {
                final int i = (k + r) % contenders.size();
                contenders.get(i).between();
                final long start = System.nanoTime();
                final long n = contenders.get(i).run(start + roundNs);
                rates[i][r] = n * 1e9 / (System.nanoTime() - start);
            }
        }
        final long collections = BenchSupport.gcCount() - collectionsBefore;
        for (final Contender c : contenders)
        {
            c.close();
        }
        System.out.printf(Locale.ROOT, "%s, %d rounds of %d ms each, rotating order%n", request, rounds,
            roundNs / 1_000_000);
        System.out.printf(Locale.ROOT, "%-18s %14s %14s %14s %12s%n", "contender", "median req/s", "min", "max",
            "ratio to " + names.get(0));
        if (collections > 0)
        {
            // A pipeline's ring holds about a thousand events of some 70 KiB each (arrays sized for the server's
            // largest request): building one fills a default young generation, and a young collection copies
            // the pipelines built before it. A copied pipeline runs measurably slower than one left where it was
            // allocated, so the contenders built first would be the slow ones, and ratios to them off by as much.
            System.out.printf(Locale.ROOT, "WARNING: %d garbage collections since the first pipeline was built; " +
                "the ratios are not fair. Run with -Xms4g -Xmn3g.%n", collections);
        }
        for (int i = 0; i < names.size(); i++)
        {
            final double[] ratio = new double[rounds];
            for (int r = 0; r < rounds; r++)
            {
                ratio[r] = rates[i][r] / rates[0][r];
            }
            final double[] sorted = rates[i].clone();
            Arrays.sort(sorted);
            System.out.printf(Locale.ROOT, "%-18s %14.0f %14.0f %14.0f %12.3f%n", names.get(i), median(rates[i]),
                sorted[0], sorted[rounds - 1], median(ratio));
        }
    }

    private static double median(final double[] values)
    {
        final double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    private static Contender contender(final String request, final String name) throws IOException
    {
        final int type = PipelineFixture.requestType(request);
        if ("direct".equals(name))
        {
            final PipelineThroughputBenchmark.Direct state = new PipelineThroughputBenchmark.Direct();
            state.request = request;
            state.setupTrial();
            state.setupIteration();
            return new Contender()
            {
                public long run(final long deadlineNs)
                {
                    long n = 0;
                    int sink = 0;
                    do
                    {
                        for (int i = 0; i < PipelineThroughputBenchmark.BATCH; i++)
                        {
                            sink += state.execute();
                        }
                        n += PipelineThroughputBenchmark.BATCH;
                    }
                    while (System.nanoTime() < deadlineNs);
                    if (RequestType.LOOKUP == type && sink != n)
                    {
                        throw new IllegalStateException("a direct lookup missed");
                    }
                    return n;
                }

                public void close()
                {
                    state.verifyIteration();
                }
            };
        }
        return pipelineContender(newShared(request, name), null, true);
    }

    private static Boolean toggledLatency(final String name)
    {
        switch (name)
        {
            case TOGGLED + "on":
                return Boolean.TRUE;
            case TOGGLED + "off":
                return Boolean.FALSE;
            default:
                throw new IllegalArgumentException("unknown contender " + name);
        }
    }

    private static PipelineThroughputBenchmark.Shared newShared(final String request, final String variant)
        throws IOException
    {
        final PipelineThroughputBenchmark.Shared state = new PipelineThroughputBenchmark.Shared();
        state.request = request;
        state.variant = variant;
        state.setupIteration();
        return state;
    }

    /**
     * A contender running a SHARED pipeline's duty cycles on this thread.
     *
     * @param state   the pipeline and its producer.
     * @param latency latency recording to switch to before each round, or null to leave it as built.
     * @param owner   whether this contender closes the pipeline (one of those sharing it does).
     */
    private static Contender pipelineContender(
        final PipelineThroughputBenchmark.Shared state, final Boolean latency, final boolean owner)
    {
        return new Contender()
        {
            private long requests;

            public long run(final long deadlineNs) throws Exception
            {
                if (null != latency)
                {
                    state.pipeline.latencyEnabled(latency);
                }
                long n = 0;
                do
                {
                    state.batch();
                    n += PipelineThroughputBenchmark.BATCH;
                }
                while (System.nanoTime() < deadlineNs);
                requests += n;
                return n;
            }

            public void between() throws Exception
            {
                if (requests > JOURNAL_REQUESTS && null != state.journalFile)
                {
                    // Keep the journal file bounded: a fresh pipeline and journal, between two timed rounds.
                    state.tearDownIteration();
                    state.setupIteration();
                    requests = 0;
                }
            }

            public void close() throws IOException
            {
                if (owner)
                {
                    state.tearDownIteration();
                }
            }
        };
    }
}
