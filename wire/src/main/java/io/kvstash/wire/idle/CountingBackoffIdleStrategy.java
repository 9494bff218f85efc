package io.kvstash.wire.idle;

import java.util.concurrent.locks.LockSupport;

/**
 * Agrona's backoff (spin, yield, then park with pauses doubling to a longest one) that counts its spins, yields and
 * parks, so that a benchmark or {@code stat} can say how often a thread parked and had to be woken by a timer. The
 * yield phase may also be bounded in time: past {@code yieldNs} from its first yield the wait parks, whatever yields
 * are left, and keeps parking until it is reset (the client's wait for an answer, which yields for up to a
 * millisecond on a machine with cores to spare). The counts are plain fields written by the one thread that idles;
 * read them on that thread or after it stopped.
 * <p>
 * One class for the server's agents (the {@code backoff} wait mode) and the client's wait for a response, so it
 * lives in {@code wire}, the one module both reach (the client depends on {@code wire} and Agrona alone).
 * <p>
 * Not thread safe: one per agent runner or client.
 */
public final class CountingBackoffIdleStrategy extends ResetOnWorkIdleStrategy
{
    private final int maxSpins;
    private final long maxSpinsAndYields;
    private final long yieldNs;
    private final long minParkNs;
    private final long maxParkNs;
    private long idlesInRow;
    private long yieldsFromNs;
    private boolean parking;
    private long parkNs;
    private long spins;
    private long yields;
    private long parks;

    /**
     * A backoff of the given phases, yielding for as long as the yields take.
     *
     * @param maxSpins  spins before yielding.
     * @param maxYields yields before parking.
     * @param minParkNs the first park.
     * @param maxParkNs the longest park.
     */
    public CountingBackoffIdleStrategy(
        final int maxSpins, final int maxYields, final long minParkNs, final long maxParkNs)
    {
        this(maxSpins, maxYields, Long.MAX_VALUE, minParkNs, maxParkNs);
    }

    /**
     * A backoff of the given phases, its yield phase bounded in time.
     *
     * @param maxSpins  spins before yielding.
     * @param maxYields yields before parking, at most.
     * @param yieldNs   time from the first yield after which the wait parks, at most; {@link Long#MAX_VALUE} for
     *                  no bound.
     * @param minParkNs the first park.
     * @param maxParkNs the longest park.
     */
    public CountingBackoffIdleStrategy(
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
    public void idle()
    {
        final long n = idlesInRow++;
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
        idlesInRow = 0;
        parking = false;
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

    @Override
    public String toString()
    {
        return "CountingBackoffIdleStrategy{spins=" + maxSpins + ", yields=" + (maxSpinsAndYields - maxSpins) +
            (Long.MAX_VALUE == yieldNs ? "" : " for " + yieldNs + " ns") + ", park=" + minParkNs + "-" + maxParkNs +
            " ns}";
    }
}
