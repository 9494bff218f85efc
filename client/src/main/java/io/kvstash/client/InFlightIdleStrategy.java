package io.kvstash.client;

import org.agrona.concurrent.IdleStrategy;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The client's default wait for a response: spin, then yield for up to a millisecond, and park only when the
 * answer is that late (on a machine of fewer than {@link #MANY_CORES} cores: 100 yields, as before). A worker waiting for a
 * response has a request in flight, so the answer is due within a server duty cycle or a few; a park costs a
 * timer wake-up (about 50 us on Linux, the default timer slack, whatever the requested pause) and the answer
 * waits in the ring for all of it. With one server thread answering several workers a wait grows with the
 * queue ahead, past a short spin-and-yield phase, so a strategy that parks after a few hundred idle passes
 * parks on most requests once workers are many. Yielding keeps the worker ready to read its answer at once
 * while handing the core to any thread that can run; it is free where cores outnumber the busy threads, and
 * where they do not, a yielding worker stays runnable and takes its share of them, which the time bound
 * limits.
 * <p>
 * Counts its spins, yields and parks (plain fields: read them on the client's thread, or after it stopped), so
 * that a benchmark can say how a worker waited.
 * <p>
 * Not thread safe: one per client, used on the client's thread.
 */
public final class InFlightIdleStrategy implements IdleStrategy
{
    /** Cores from which the default wait yields for a millisecond. */
    public static final int MANY_CORES = 4;
    /** Default spins before yielding. */
    public static final int SPINS_DEFAULT = 100;
    /** Default yields before parking, at most (a few milliseconds of waiting when the core is free). */
    public static final int YIELDS_DEFAULT = 20_000;
    /** Default time a wait yields before it parks, at most, on a machine of {@link #MANY_CORES} cores or more. */
    public static final long YIELD_NS_DEFAULT = TimeUnit.MILLISECONDS.toNanos(1);
    /** Yields before parking on a machine of fewer than {@link #MANY_CORES} cores: the earlier default's. */
    public static final int FEW_CORES_YIELDS = 100;
    /** Default first park. */
    public static final long MIN_PARK_NS_DEFAULT = TimeUnit.MICROSECONDS.toNanos(1);
    /** Default longest park. */
    public static final long MAX_PARK_NS_DEFAULT = TimeUnit.MICROSECONDS.toNanos(100);

    private final int maxSpins;
    private final long maxSpinsAndYields;
    private final long yieldNs;
    private final long minParkNs;
    private final long maxParkNs;
    private long idlesInWait;
    private long yieldsFromNs;
    private boolean parking;
    private long parkNs;
    private long spins;
    private long yields;
    private long parks;

    /**
     * The default wait: {@link #SPINS_DEFAULT} spins, {@link #YIELDS_DEFAULT} yields for {@link #YIELD_NS_DEFAULT}
     * at most, then parks of {@link #MIN_PARK_NS_DEFAULT} doubling to {@link #MAX_PARK_NS_DEFAULT}; on a machine of
     * fewer than {@link #MANY_CORES} cores, where a server thread and a worker or two already fill the cores and a
     * yielding worker takes the server's share, {@link #FEW_CORES_YIELDS} yields without a time bound (the client
     * library's earlier default).
     */
    public InFlightIdleStrategy()
    {
        this(SPINS_DEFAULT, manyCores() ? YIELDS_DEFAULT : FEW_CORES_YIELDS,
            manyCores() ? YIELD_NS_DEFAULT : Long.MAX_VALUE, MIN_PARK_NS_DEFAULT, MAX_PARK_NS_DEFAULT);
    }

    private static boolean manyCores()
    {
        return Runtime.getRuntime().availableProcessors() >= MANY_CORES;
    }

    /**
     * A wait of the given phases, yielding for as long as the yields take.
     *
     * @param maxSpins  spins before yielding.
     * @param maxYields yields before parking.
     * @param minParkNs the first park.
     * @param maxParkNs the longest park.
     */
    public InFlightIdleStrategy(final int maxSpins, final int maxYields, final long minParkNs, final long maxParkNs)
    {
        this(maxSpins, maxYields, Long.MAX_VALUE, minParkNs, maxParkNs);
    }

    /**
     * A wait of the given phases.
     *
     * @param maxSpins  spins before yielding.
     * @param maxYields yields before parking, at most.
     * @param yieldNs   time from the first yield after which the wait parks, at most.
     * @param minParkNs the first park.
     * @param maxParkNs the longest park.
     */
    public InFlightIdleStrategy(
        final int maxSpins, final int maxYields, final long yieldNs, final long minParkNs, final long maxParkNs)
    {
        if (maxSpins < 0 || maxYields < 0 || yieldNs < 0 || minParkNs <= 0 || maxParkNs < minParkNs)
        {
            throw new IllegalArgumentException("bad phases: spins " + maxSpins + ", yields " + maxYields +
                ", parks " + minParkNs + "-" + maxParkNs + " ns");
        }
        this.maxSpins = maxSpins;
        this.maxSpinsAndYields = (long)maxSpins + maxYields;
        this.yieldNs = yieldNs;
        this.minParkNs = minParkNs;
        this.maxParkNs = maxParkNs;
        this.parkNs = minParkNs;
    }

    @Override
    public void idle(final int workCount)
    {
        if (workCount > 0)
        {
            reset();
        }
        else
        {
            idle();
        }
    }

    @Override
    public void idle()
    {
        final long n = idlesInWait++;
        if (n < maxSpins)
        {
            spins++;
            Thread.onSpinWait();
        }
        else if (!parking && n < maxSpinsAndYields && yielding(n))
        {
            yields++;
            Thread.yield();
        }
        else
        {
            parking = true;
            parks++;
            LockSupport.parkNanos(parkNs);
            parkNs = Math.min(parkNs << 1, maxParkNs);
        }
    }

    /**
     * Whether the yield phase goes on: a clock read per yield (a yield costs a system call, many times more),
     * none when the phase has no time bound.
     */
    private boolean yielding(final long n)
    {
        if (Long.MAX_VALUE == yieldNs)
        {
            return true;
        }
        final long now = System.nanoTime();
        if (n == maxSpins)
        {
            yieldsFromNs = now;
            return true;
        }
        return now - yieldsFromNs < yieldNs;
    }

    @Override
    public void reset()
    {
        idlesInWait = 0;
        parking = false;
        parkNs = minParkNs;
    }

    @Override
    public String alias()
    {
        return "in-flight";
    }

    /**
     * Spins so far.
     *
     * @return count.
     */
    public long spins()
    {
        return spins;
    }

    /**
     * Yields so far.
     *
     * @return count.
     */
    public long yields()
    {
        return yields;
    }

    /**
     * Parks so far: each one a timer wake-up.
     *
     * @return count.
     */
    public long parks()
    {
        return parks;
    }

    @Override
    public String toString()
    {
        return "InFlightIdleStrategy{spins=" + maxSpins + ", yields=" + (maxSpinsAndYields - maxSpins) +
            (Long.MAX_VALUE == yieldNs ? "" : " for " + yieldNs + " ns") + ", park=" + minParkNs + "-" + maxParkNs +
            " ns}";
    }
}
