package io.kvstash.perf.pipeline;

import io.kvstash.pipeline.latency.IntervalLogger;
import io.kvstash.pipeline.latency.LatencyRecorders;
import io.kvstash.wire.RequestType;
import org.HdrHistogram.HistogramLogWriter;

import java.io.File;
import java.io.FileNotFoundException;
import java.util.Arrays;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * What closing one latency interval costs the thread that does it ({@link IntervalLogger#poll(long)}): each
 * round records a server's second of values (LOOKUP and PREPARE_STORE, and stage timings) and times the poll,
 * with the {@code .hlog} written and without. This work ran in the server's receiver duty cycle until it
 * moved to a thread of its own.
 * <pre>
 * java --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -cp perf/target/kvstash-perf-benchmarks.jar \
 *     io.kvstash.perf.pipeline.IntervalPollCost [rounds] [values per round] [hlog file]
 * </pre>
 */
public final class IntervalPollCost
{
    private IntervalPollCost()
    {
    }

    /**
     * Runs the rounds and prints the poll's min, median, p90 and max, without and with the log written.
     *
     * @param args rounds, values per round, log file (default {@code /dev/shm/kvstash-interval-poll.hlog}).
     * @throws FileNotFoundException when the log file cannot be created.
     */
    public static void main(final String[] args) throws FileNotFoundException
    {
        final int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 60;
        final int values = args.length > 1 ? Integer.parseInt(args[1]) : 100_000;
        final File file = new File(args.length > 2 ? args[2] : "/dev/shm/kvstash-interval-poll.hlog");
        try
        {
            for (final boolean written : new boolean[]{ false, true })
            {
                final long[] ns = timePolls(rounds, values, written ? new HistogramLogWriter(file) : null);
                Arrays.sort(ns);
                System.out.printf(Locale.ROOT, "%-22s poll: min %.3f ms, median %.3f ms, p90 %.3f ms, max %.3f ms%n",
                    written ? "with the .hlog written" : "totals only", ns[0] / 1e6, ns[rounds / 2] / 1e6,
                    ns[rounds * 9 / 10] / 1e6, ns[rounds - 1] / 1e6);
            }
        }
        finally
        {
            if (!file.delete() && file.exists())
            {
                System.err.println("could not delete " + file);
            }
        }
    }

    private static long[] timePolls(final int rounds, final int values, final HistogramLogWriter writer)
    {
        final LatencyRecorders recorders = new LatencyRecorders();
        final IntervalLogger logger = new IntervalLogger(recorders, writer, System.currentTimeMillis());
        final SplittableRandom random = new SplittableRandom(1);
        final long[] ns = new long[rounds];
        for (int r = 0; r < rounds; r++)
        {
            for (int v = 0; v < values; v++)
            {
                recorders.recordRequest(0 == v % 3 ? RequestType.PREPARE_STORE : RequestType.LOOKUP,
                    500 + random.nextInt(5_000));
                if (0 == (v & 63))
                {
                    recorders.recordStage(v & 3, 100 + random.nextInt(1_000), 50 + random.nextInt(500));
                }
            }
            final long start = System.nanoTime();
            logger.poll(System.currentTimeMillis());
            ns[r] = System.nanoTime() - start;
        }
        logger.close();
        return ns;
    }
}
