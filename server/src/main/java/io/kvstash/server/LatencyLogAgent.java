package io.kvstash.server;

import io.kvstash.pipeline.latency.IntervalLogger;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.NanoClock;

import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * Closes the server's latency intervals ({@link IntervalLogger#poll(long)}) once an interval, on a thread of
 * its own. A poll copies and resets two dozen histograms of about 200 KiB each and compresses the non-empty
 * ones into the {@code .hlog}, which takes milliseconds ({@code IntervalPollCost} measures it). Run in the
 * receiver's duty cycle, every request arriving during a poll would wait for it, once an interval.
 * The recorders are {@link org.HdrHistogram.SingleWriterRecorder}s, so this reader never blocks the publish
 * stage that writes them.
 * <p>
 * An interval in which no client sent a record (its activity count did not move) is not closed: the copies cost
 * an idle server most of its CPU (3 % of a core on the 2-vCPU VM). What the server's own timers recorded meanwhile
 * (a sampled sweep) stays in the recorders and goes into the next interval a client is active in.
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
    private final EpochClock epochClock;
    private final NanoClock nanoClock;
    private final long intervalNs;
    private final int cyclesPerClockRead;
    private final LongSupplier activity;
    private long lastActivity;
    private int cyclesToClockRead;
    private long nextNs;

    /**
     * An agent closing an interval every {@code intervalMs}, the first one interval from now.
     *
     * @param logger             the server's interval logger.
     * @param epochClock         wall clock, for the intervals' time stamps.
     * @param nanoClock          monotonic clock, for the schedule (a step of the wall clock moves no interval).
     * @param intervalMs         interval length.
     * @param cyclesPerClockRead duty cycles per read of the clock: 1 on a thread of its own, which sleeps
     *                           between cycles; {@link #INVOKED_CYCLES_PER_CLOCK_READ} in an invoker's duty
     *                           cycle, which would otherwise pay a clock read, as dear as the rest of an idle
     *                           cycle, every cycle.
     */
    LatencyLogAgent(
        final IntervalLogger logger,
        final EpochClock epochClock,
        final NanoClock nanoClock,
        final long intervalMs,
        final int cyclesPerClockRead)
    {
        this(logger, epochClock, nanoClock, intervalMs, cyclesPerClockRead, null);
    }

    /**
     * An agent closing an interval every {@code intervalMs} in which {@code activity} moved.
     *
     * @param logger             the server's interval logger.
     * @param epochClock         wall clock, for the intervals' time stamps.
     * @param nanoClock          monotonic clock, for the schedule.
     * @param intervalMs         interval length.
     * @param cyclesPerClockRead duty cycles per read of the clock (see the other constructor).
     * @param activity           a count that moves when clients send records (read with acquire), or null to close
     *                           every interval.
     */
    LatencyLogAgent(
        final IntervalLogger logger,
        final EpochClock epochClock,
        final NanoClock nanoClock,
        final long intervalMs,
        final int cyclesPerClockRead,
        final LongSupplier activity)
    {
        if (cyclesPerClockRead < 1)
        {
            throw new IllegalArgumentException("cycles per clock read must be positive: " + cyclesPerClockRead);
        }
        this.logger = logger;
        this.epochClock = epochClock;
        this.nanoClock = nanoClock;
        this.intervalNs = TimeUnit.MILLISECONDS.toNanos(intervalMs);
        this.cyclesPerClockRead = cyclesPerClockRead;
        this.cyclesToClockRead = cyclesPerClockRead;
        this.activity = activity;
        this.lastActivity = null == activity ? 0 : activity.getAsLong();
        this.nextNs = nanoClock.nanoTime() + intervalNs;
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
        final long nowNs = nanoClock.nanoTime();
        if (nowNs - nextNs < 0)
        {
            return 0;
        }
        nextNs = nowNs + intervalNs;
        if (null != activity)
        {
            final long now = activity.getAsLong();
            if (now == lastActivity)
            {
                return 0;
            }
            lastActivity = now;
        }
        logger.poll(epochClock.time());
        return 1;
    }

    @Override
    public String roleName()
    {
        return ROLE_NAME;
    }
}
