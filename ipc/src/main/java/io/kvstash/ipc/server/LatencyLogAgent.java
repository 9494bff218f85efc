package io.kvstash.ipc.server;

import io.kvstash.pipeline.latency.IntervalLogger;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.EpochClock;

/**
 * Closes the server's latency intervals ({@link IntervalLogger#poll(long)}) once an interval, on a thread of
 * its own. A poll copies and resets two dozen histograms of about 200 KiB each and compresses the non-empty
 * ones into the {@code .hlog}: 0.4-1.6 ms at the median here and up to 10 ms. Run in the receiver's duty cycle,
 * as it was, every request arriving during a poll waited for it, once a second: the bench's paced control
 * runs (20,000 pairs a second, coordinated omission corrected) had a p99.9 of 2-11 ms. The recorders are
 * {@link org.HdrHistogram.SingleWriterRecorder}s, so this reader never blocks the publish stage that writes
 * them.
 * <p>
 * Owner: the latency log thread (or the invoking thread when the server runs on an
 * {@link org.agrona.concurrent.AgentInvoker}).
 */
final class LatencyLogAgent implements Agent
{
    /** Name of the agent and of its thread. */
    static final String ROLE_NAME = "kvstash-latency-log";

    /** Duty cycles between reads of the clock when the agent shares an invoker's duty cycle. */
    static final int INVOKED_CYCLES_PER_CLOCK_READ = 1024;

    private final IntervalLogger logger;
    private final EpochClock clock;
    private final long intervalMs;
    private final int cyclesPerClockRead;
    private int cyclesToClockRead;
    private long nextMs;

    /**
     * An agent closing an interval every {@code intervalMs}, the first one interval from now.
     *
     * @param logger             the server's interval logger.
     * @param clock              wall clock, for the schedule and the intervals' time stamps.
     * @param intervalMs         interval length.
     * @param cyclesPerClockRead duty cycles per read of the clock: 1 on a thread of its own, which sleeps
     *                           between cycles; {@link #INVOKED_CYCLES_PER_CLOCK_READ} in an invoker's duty
     *                           cycle, where a clock read (20-30 ns here) every cycle doubled an idle cycle.
     */
    LatencyLogAgent(
        final IntervalLogger logger, final EpochClock clock, final long intervalMs, final int cyclesPerClockRead)
    {
        if (cyclesPerClockRead < 1)
        {
            throw new IllegalArgumentException("cycles per clock read must be positive: " + cyclesPerClockRead);
        }
        this.logger = logger;
        this.clock = clock;
        this.intervalMs = intervalMs;
        this.cyclesPerClockRead = cyclesPerClockRead;
        this.cyclesToClockRead = cyclesPerClockRead;
        this.nextMs = clock.time() + intervalMs;
    }

    /**
     * How long the agent's thread sleeps between checks of the clock: a tenth of the interval, within
     * [1, 100] ms, so an interval closes at most that late.
     *
     * @param intervalMs interval length.
     * @return sleep period in ms.
     */
    static long sleepPeriodMs(final long intervalMs)
    {
        return Math.max(1, Math.min(100, intervalMs / 10));
    }

    @Override
    public int doWork()
    {
        if (--cyclesToClockRead > 0)
        {
            return 0;
        }
        cyclesToClockRead = cyclesPerClockRead;
        final long nowMs = clock.time();
        if (nowMs - nextMs < 0)
        {
            return 0;
        }
        logger.poll(nowMs);
        nextMs = nowMs + intervalMs;
        return 1;
    }

    @Override
    public String roleName()
    {
        return ROLE_NAME;
    }
}
