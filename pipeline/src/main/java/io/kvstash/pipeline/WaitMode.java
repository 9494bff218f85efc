package io.kvstash.pipeline;

import com.lmax.disruptor.BlockingWaitStrategy;
import com.lmax.disruptor.BusySpinWaitStrategy;
import com.lmax.disruptor.SleepingWaitStrategy;
import com.lmax.disruptor.WaitStrategy;
import com.lmax.disruptor.YieldingWaitStrategy;
import io.kvstash.wire.idle.CountingBackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingMillisIdleStrategy;
import org.agrona.concurrent.YieldingIdleStrategy;

import java.util.concurrent.TimeUnit;

/**
 * How idle threads wait, as one choice that names both the Disruptor {@link WaitStrategy} of the stage
 * processors and the Agrona {@link IdleStrategy} of agents. Busy-spin gives the lowest latency and burns a
 * core per thread (two spinning threads saturate a 2-core machine); backoff is the default.
 */
public enum WaitMode
{
    /** Spin forever: latency runs only. */
    BUSY_SPIN,
    /** Spin, then yield. */
    YIELDING,
    /** Spin, yield, then park with growing pauses (the default). */
    BACKOFF,
    /**
     * Block when idle: least CPU, a kernel wake-up a request. The stages block on a lock and condition; the server's
     * receiver, which has only shared memory to watch, sleeps on the doorbell its clients ring (the server's
     * {@code DoorbellIdleStrategy}), or a millisecond at a time where there is none ({@link #newIdleStrategy()}).
     */
    BLOCKING;

    /**
     * A fresh Disruptor wait strategy for this mode.
     *
     * @return the strategy.
     */
    public WaitStrategy newWaitStrategy()
    {
        switch (this)
        {
            case BUSY_SPIN:
                return new BusySpinWaitStrategy();
            case YIELDING:
                return new YieldingWaitStrategy();
            case BLOCKING:
                return new BlockingWaitStrategy();
            case BACKOFF:
            default:
                return new SleepingWaitStrategy(200, TimeUnit.MICROSECONDS.toNanos(50));
        }
    }

    /**
     * A fresh Agrona idle strategy for this mode; backoff's counts its parks ({@link CountingBackoffIdleStrategy}).
     *
     * @return the strategy.
     */
    public IdleStrategy newIdleStrategy()
    {
        switch (this)
        {
            case BUSY_SPIN:
                return new BusySpinIdleStrategy();
            case YIELDING:
                return new YieldingIdleStrategy();
            case BLOCKING:
                return new SleepingMillisIdleStrategy(1);
            case BACKOFF:
            default:
                return new CountingBackoffIdleStrategy(100, 1000, TimeUnit.MICROSECONDS.toNanos(1),
                    TimeUnit.MICROSECONDS.toNanos(50));
        }
    }

    /**
     * Parses a mode name as the command line spells it ({@code busy-spin}, {@code backoff}, ...).
     *
     * @param name mode name, case-insensitive, '-' or '_'.
     * @return the mode.
     */
    public static WaitMode parse(final String name)
    {
        return valueOf(name.trim().toUpperCase().replace('-', '_'));
    }
}
