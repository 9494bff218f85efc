package io.kvstash.testkit;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Stalls of this JVM as a whole: a thread that sleeps 1 ms at a time and records every wake-up that came more
 * than {@link #THRESHOLD_NS} late (a collection's safepoint, or the process not being scheduled on a busy
 * machine), with {@link System#nanoTime()} bounds, which every JVM of one Linux machine reads from the same
 * monotonic clock, and whether this JVM collected meanwhile. A test asks how much of an interval this JVM spent
 * stalled, to tell a slow answer from a slow asker or a starved machine. Keeps the last {@link #CAPACITY} stalls.
 */
public final class HiccupMeter implements AutoCloseable
{
    /** A wake-up later than this is a stall. */
    public static final long THRESHOLD_NS = TimeUnit.MILLISECONDS.toNanos(5);
    /** Stalls kept. */
    public static final int CAPACITY = 1_024;

    private static final long SLEEP_NS = TimeUnit.MILLISECONDS.toNanos(1);

    private final long[] startNs = new long[CAPACITY];
    private final long[] endNs = new long[CAPACITY];
    private final boolean[] collected = new boolean[CAPACITY];
    private final List<GarbageCollectorMXBean> collectors = ManagementFactory.getGarbageCollectorMXBeans();
    private final Thread thread;
    private long count;
    private long longestNs;
    private volatile boolean running = true;

    private HiccupMeter(final String name)
    {
        thread = new Thread(this::run, name);
        thread.setDaemon(true);
    }

    /**
     * Starts a meter on a daemon thread.
     *
     * @param name the thread's name.
     * @return the running meter.
     */
    public static HiccupMeter start(final String name)
    {
        final HiccupMeter meter = new HiccupMeter(name);
        meter.thread.start();
        return meter;
    }

    private void run()
    {
        long collections = collections();
        while (running)
        {
            final long before = System.nanoTime();
            LockSupport.parkNanos(SLEEP_NS);
            final long after = System.nanoTime();
            if (after - before - SLEEP_NS > THRESHOLD_NS)
            {
                final long now = collections();
                record(before + SLEEP_NS, after, now != collections);
                collections = now;
            }
        }
    }

    private long collections()
    {
        long total = 0;
        for (int i = 0; i < collectors.size(); i++)
        {
            total += Math.max(0, collectors.get(i).getCollectionCount());
        }
        return total;
    }

    private synchronized void record(final long from, final long to, final boolean gc)
    {
        final int i = (int)(count++ % CAPACITY);
        startNs[i] = from;
        endNs[i] = to;
        collected[i] = gc;
        longestNs = Math.max(longestNs, to - from);
    }

    /**
     * How long this JVM was stalled within an interval.
     *
     * @param fromNs start ({@link System#nanoTime()}).
     * @param toNs   end.
     * @return nanoseconds of recorded stalls inside the interval.
     */
    public long stalledNs(final long fromNs, final long toNs)
    {
        return stalledNs(fromNs, toNs, true);
    }

    /**
     * How long this JVM was stalled within an interval while it did not collect: the process was not scheduled.
     *
     * @param fromNs start ({@link System#nanoTime()}).
     * @param toNs   end.
     * @return nanoseconds of recorded stalls without a collection inside the interval.
     */
    public long stalledWithoutCollectionNs(final long fromNs, final long toNs)
    {
        return stalledNs(fromNs, toNs, false);
    }

    private synchronized long stalledNs(final long fromNs, final long toNs, final boolean withCollections)
    {
        long total = 0;
        final int kept = (int)Math.min(count, CAPACITY);
        for (int i = 0; i < kept; i++)
        {
            if (collected[i] && !withCollections)
            {
                continue;
            }
            final long overlap = Math.min(toNs, endNs[i]) - Math.max(fromNs, startNs[i]);
            total += Math.max(0, overlap);
        }
        return total;
    }

    /**
     * The longest stall so far.
     *
     * @return nanoseconds.
     */
    public synchronized long longestNs()
    {
        return longestNs;
    }

    /**
     * Stops the meter's thread.
     */
    @Override
    public void close()
    {
        running = false;
        thread.interrupt();
    }
}
