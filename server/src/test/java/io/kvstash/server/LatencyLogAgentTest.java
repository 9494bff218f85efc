package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.latency.IntervalLogger;
import io.kvstash.pipeline.latency.LatencyRecorders;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;
import org.agrona.concurrent.CachedEpochClock;
import org.agrona.concurrent.CachedNanoClock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(60)
class LatencyLogAgentTest
{
    private static final long MS = 1_000_000L;

    private Path dir;
    private Path hlog;

    @AfterEach
    void cleanup() throws Exception
    {
        ShmDirectories.delete(dir);
        if (null != hlog)
        {
            Files.deleteIfExists(hlog);
        }
    }

    @Test
    void shouldCloseAnIntervalOnlyWhenItIsDueOnTheMonotonicClock()
    {
        final LatencyRecorders recorders = new LatencyRecorders();
        final CachedEpochClock wall = new CachedEpochClock();
        final CachedNanoClock monotonic = new CachedNanoClock();
        wall.update(1_700_000_000_000L);
        monotonic.update(MS);
        final IntervalLogger logger = new IntervalLogger(recorders, null, wall.time());
        final LatencyLogAgent agent = new LatencyLogAgent(logger, wall, monotonic, 1_000, 1);

        recorders.recordRequest(RequestType.PING, 1_500);
        assertEquals(0, agent.doWork());
        monotonic.update(1_000 * MS - 1 + MS);
        assertEquals(0, agent.doWork());
        assertEquals(0, logger.requestTotal(RequestType.PING).getTotalCount());

        // The wall clock stepping back an hour neither delays the interval nor closes one early.
        wall.update(wall.time() - 3_600_000L);
        monotonic.update(1_000 * MS + MS);
        assertEquals(1, agent.doWork());
        assertEquals(1, logger.requestTotal(RequestType.PING).getTotalCount());

        recorders.recordRequest(RequestType.PING, 2_500);
        wall.update(wall.time() + 7_200_000L);
        monotonic.update(1_500 * MS + MS);
        assertEquals(0, agent.doWork(), "the next interval is due a whole interval after the last close");
        monotonic.update(2_000 * MS + MS);
        assertEquals(1, agent.doWork());
        assertEquals(2, logger.requestTotal(RequestType.PING).getTotalCount());
    }

    @Test
    void shouldReadTheClockOnceInSoManyCyclesWhenInvoked()
    {
        final LatencyRecorders recorders = new LatencyRecorders();
        final CachedEpochClock wall = new CachedEpochClock();
        final CachedNanoClock monotonic = new CachedNanoClock();
        final IntervalLogger logger = new IntervalLogger(recorders, null, wall.time());
        final LatencyLogAgent agent = new LatencyLogAgent(logger, wall, monotonic, 1_000, 4);
        recorders.recordRequest(RequestType.PING, 1_500);
        monotonic.update(5_000 * MS);
        assertEquals(0, agent.doWork());
        assertEquals(0, agent.doWork());
        assertEquals(0, agent.doWork());
        assertEquals(0, logger.requestTotal(RequestType.PING).getTotalCount(), "no clock read in three cycles");
        assertEquals(1, agent.doWork(), "the fourth cycle reads the clock and finds the interval due");
        assertEquals(1, logger.requestTotal(RequestType.PING).getTotalCount());
        assertThrows(IllegalArgumentException.class, () -> new LatencyLogAgent(logger, wall, monotonic, 1_000, 0));
    }

    @Test
    void shouldLeaveAnIntervalOpenWhileNoClientIsActive()
    {
        final LatencyRecorders recorders = new LatencyRecorders();
        final CachedEpochClock wall = new CachedEpochClock();
        final CachedNanoClock monotonic = new CachedNanoClock();
        final IntervalLogger logger = new IntervalLogger(recorders, null, wall.time());
        final long[] records = { 5 };
        final LatencyLogAgent agent = new LatencyLogAgent(logger, wall, monotonic, 1_000, 1, () -> records[0]);

        recorders.recordRequest(RequestType.PING, 1_500);
        monotonic.update(1_000 * MS);
        assertEquals(0, agent.doWork(), "no record arrived since the agent started: nothing is copied");
        assertEquals(0, logger.requestTotal(RequestType.PING).getTotalCount());

        records[0]++;
        monotonic.update(1_500 * MS);
        assertEquals(0, agent.doWork(), "the skipped interval still moved the schedule on");
        monotonic.update(2_000 * MS);
        assertEquals(1, agent.doWork());
        assertEquals(1, logger.requestTotal(RequestType.PING).getTotalCount(), "what waited is in this interval");

        recorders.recordRequest(RequestType.PING, 2_500);
        monotonic.update(3_000 * MS);
        assertEquals(0, agent.doWork());
        assertEquals(1, logger.requestTotal(RequestType.PING).getTotalCount());
    }

    @Test
    void shouldSleepATenthOfTheIntervalWithinBounds()
    {
        assertEquals(100, LatencyLogAgent.sleepPeriodMs(1_000));
        assertEquals(100, LatencyLogAgent.sleepPeriodMs(60_000));
        assertEquals(5, LatencyLogAgent.sleepPeriodMs(50));
        assertEquals(1, LatencyLogAgent.sleepPeriodMs(3));
    }

    @Test
    void shouldRefuseANonPositiveInterval()
    {
        assertThrows(IllegalArgumentException.class, () -> new ServerContext().latencyIntervalMs(0).conclude());
    }

    @Test
    void shouldLogIntervalsFromAThreadOfItsOwnWhileTheServerRuns() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-latency-log-");
        hlog = Files.createTempFile("kvstash-latency-log-test", ".hlog");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.SHARED)
            .latencyIntervalMs(50)
            .latencyLogFile(hlog)
            .storeContext(new StoreContext().poolSizeBytes(16L << 20));
        int pings = 0;
        // Counted, not looked for: another test's server in this JVM would have a thread of the same name.
        final int threadsBefore = threadsNamed(LatencyLogAgent.ROLE_NAME);
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertTrue(null != server.latency(), "latency recording is on");
            assertEquals(threadsBefore + 1, threadsNamed(LatencyLogAgent.ROLE_NAME), "the latency log thread runs");
            final long end = System.nanoTime() + 400_000_000L;
            while (System.nanoTime() - end < 0)
            {
                assertEquals(Status.OK, client.ping().status());
                pings++;
                if (0 == pings % 64)
                {
                    Thread.sleep(5);
                }
            }
            // Intervals are written while the server runs, not only by the final poll of close().
            Thread.sleep(200);
            assertTrue(intervalCount(hlog) >= 2, "intervals written while running");
        }
        assertEquals(threadsBefore, threadsNamed(LatencyLogAgent.ROLE_NAME), "the thread stops with the server");

        final Set<Long> ends = new HashSet<>();
        final long logged = pingIntervals(hlog, ends);
        assertTrue(ends.size() >= 2, "intervals " + ends);
        // One request in flight: the receiver times one PING in 8 and records it with a count of 8.
        assertTrue(Math.abs(logged - pings) <= 8, "PINGs logged " + logged + " of " + pings + " sent");
    }

    private static int threadsNamed(final String name)
    {
        int threads = 0;
        for (final Thread thread : Thread.getAllStackTraces().keySet())
        {
            threads += name.equals(thread.getName()) && thread.isAlive() ? 1 : 0;
        }
        return threads;
    }

    /**
     * Sums the counts of the PING intervals in a log and collects their end times.
     */
    private static long pingIntervals(final Path file, final Set<Long> ends) throws Exception
    {
        long total = 0;
        final HistogramLogReader reader = new HistogramLogReader(file.toFile());
        try
        {
            EncodableHistogram h;
            while (null != (h = reader.nextIntervalHistogram()))
            {
                if (("type." + RequestType.name(RequestType.PING)).equals(h.getTag()))
                {
                    total += ((Histogram)h).getTotalCount();
                    ends.add(h.getEndTimeStamp());
                }
            }
        }
        finally
        {
            reader.close();
        }
        return total;
    }

    private static long intervalCount(final Path file) throws Exception
    {
        long intervals = 0;
        final HistogramLogReader reader = new HistogramLogReader(file.toFile());
        try
        {
            while (null != reader.nextIntervalHistogram())
            {
                intervals++;
            }
        }
        finally
        {
            reader.close();
        }
        return intervals;
    }
}
