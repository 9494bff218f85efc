package io.kvstash.pipeline;

import org.agrona.concurrent.IdleStrategy;

import java.util.concurrent.locks.LockSupport;

/**
 * Agrona's backoff (spin, yield, then park with pauses doubling to a longest one) that counts its spins, yields
 * and parks, so that a benchmark can say how often a server thread parked and had to be woken by a timer. The
 * counts are plain fields written by the one thread that idles; read them on that thread or after it stopped.
 * <p>
 * Not thread safe: one per agent runner.
 */
public final class CountingBackoffIdleStrategy implements IdleStrategy
{
    private final int maxSpins;
    private final long maxSpinsAndYields;
    private final long minParkNs;
    private final long maxParkNs;
    private long idlesInRow;
    private long parkNs;
    private long spins;
    private long yields;
    private long parks;

    /**
     * A backoff of the given phases.
     *
     * @param maxSpins  spins before yielding.
     * @param maxYields yields before parking.
     * @param minParkNs the first park.
     * @param maxParkNs the longest park.
     */
    public CountingBackoffIdleStrategy(
        final int maxSpins, final int maxYields, final long minParkNs, final long maxParkNs)
    {
        if (maxSpins < 0 || maxYields < 0 || minParkNs <= 0 || maxParkNs < minParkNs)
        {
            throw new IllegalArgumentException("bad phases: spins " + maxSpins + ", yields " + maxYields +
                ", parks " + minParkNs + "-" + maxParkNs + " ns");
        }
        this.maxSpins = maxSpins;
        this.maxSpinsAndYields = (long)maxSpins + maxYields;
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
        final long n = idlesInRow++;
        if (n < maxSpins)
        {
            spins++;
            Thread.onSpinWait();
        }
        else if (n < maxSpinsAndYields)
        {
            yields++;
            Thread.yield();
        }
        else
        {
            parks++;
            LockSupport.parkNanos(parkNs);
            parkNs = Math.min(parkNs << 1, maxParkNs);
        }
    }

    @Override
    public void reset()
    {
        idlesInRow = 0;
        parkNs = minParkNs;
    }

    @Override
    public String alias()
    {
        return "backoff";
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
}
