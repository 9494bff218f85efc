package io.kvstash.server;

import io.kvstash.core.PoolCommitment;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.file.PoolPages;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * Commits the pool's pages one step ({@link #STEP_BYTES}, a region) at a time, lowest first, on a thread of its own,
 * and publishes the committed prefix in the counter {@code pool_bytes_committed}. It ends once the whole pool is
 * committed. Its thread ({@link #run}) parks while nothing is asked of it, so an idle server spends nothing on it;
 * the store's notices unpark it.
 * <ul>
 *     <li><b>On demand</b> ({@code --prepare-pool on-demand}): it is the store's {@link PoolCommitment}. It commits
 *     up to the headroom above the highest region the store has given. A step is written with zeros through the file
 *     first ({@link PoolPages#commitRange}): the write allocates the pages, and a full file system fails it with an
 *     error (ENOSPC) rather than a SIGBUS; the step then stays uncommitted, the store evicts within what is, and the
 *     step is tried again after {@link #RETRY_NS}. Zeros are safe there: no region past the committed prefix was
 *     ever given. When a store needs a region before this thread got to it, the reserve stage commits it itself
 *     ({@link #commitTo}, counted in {@code pool_commit_misses}): that request waits a step's time instead of the
 *     store evicting chunks while the pool has room.</li>
 *     <li><b>Background</b> (the default): every region is in use from the start, so it only touches the pages (an
 *     atomic add of zero, safe beside clients writing), the whole pool in order, then ends.</li>
 * </ul>
 * Owner: its thread for {@link #run} and {@link #doWork()}; the reserve stage for the {@link PoolCommitment} notices;
 * {@link #committedBytes()} any thread.
 */
final class PoolPreparer implements PoolCommitment
{
    /** Bytes one duty cycle commits: a region of the store, a few milliseconds of work. */
    static final long STEP_BYTES = 16L << 20;
    /** How long a step the file system refused waits before it is tried again. */
    static final long RETRY_NS = TimeUnit.SECONDS.toNanos(1);
    /** Longest park while nothing is asked: a refused step is retried within it. */
    static final long IDLE_PARK_NS = TimeUnit.MILLISECONDS.toNanos(200);

    private final FileChannel channel;
    private final long dataOffset;
    private final UnsafeBuffer[] segments;
    private final long segmentBytes;
    private final long poolBytes;
    private final long headroomBytes;
    private final boolean onDemand;
    private StoreCounters counters;
    private final Consumer<String> log;
    private final long startNs = System.nanoTime();
    /** Committed prefix: written by its thread only. */
    private volatile long committed;
    /** What the store asks to have committed: written by the reserve stage only. */
    private volatile long wanted;
    /** The runner's thread, unparked when the store asks for more. */
    private volatile Thread thread;
    private long retryAtNs;
    private boolean refusalLogged;
    private boolean done;

    /**
     * @param channel       the pool file, open for writing.
     * @param dataOffset    file offset of the data region.
     * @param segments      the data region's mapped segments, in order.
     * @param segmentBytes  bytes of every segment but the last.
     * @param poolBytes     bytes of the data region.
     * @param headroomBytes on demand: bytes kept committed above the highest region in use, and committed first.
     * @param onDemand      true to commit on demand (zeros written first), false to touch the whole pool.
     * @param log           one line at a time, from its thread.
     */
    PoolPreparer(
        final FileChannel channel,
        final long dataOffset,
        final UnsafeBuffer[] segments,
        final long segmentBytes,
        final long poolBytes,
        final long headroomBytes,
        final boolean onDemand,
        final Consumer<String> log)
    {
        this.channel = channel;
        this.dataOffset = dataOffset;
        this.segments = segments;
        this.segmentBytes = segmentBytes;
        this.poolBytes = poolBytes;
        this.headroomBytes = headroomBytes;
        this.onDemand = onDemand;
        this.log = log;
        this.wanted = onDemand ? Math.min(poolBytes, headroomBytes) : poolBytes;
    }

    /**
     * Commits what the start commits on the calling thread, before ready: the headroom on demand, nothing in the
     * background.
     *
     * @param aborted true stops it between steps.
     * @throws IOException when a step fails (the file system is full) or the start was aborted.
     */
    void commitBeforeReady(final java.util.function.BooleanSupplier aborted) throws IOException
    {
        while (onDemand && committed < wanted)
        {
            if (aborted.getAsBoolean())
            {
                throw new IOException("the pool's preparation was interrupted");
            }
            commitStep();
        }
    }

    /**
     * The server's counters, once the control file exists (before {@link #run} starts and before the store is built):
     * {@code pool_bytes_committed} is this preparer's thread's, {@code pool_commit_misses} the reserve stage's.
     *
     * @param counters the counters.
     */
    void counters(final StoreCounters counters)
    {
        this.counters = counters;
    }

    /**
     * The thread's loop: a step per cycle while one is asked for, parked otherwise (unparked by the store's notices,
     * or after {@link #IDLE_PARK_NS} to retry a refused step), until the whole pool is committed or {@code stop}.
     *
     * @param stop true ends the loop between steps.
     */
    void run(final java.util.function.BooleanSupplier stop)
    {
        thread = Thread.currentThread();
        while (!done && !stop.getAsBoolean())
        {
            if (0 == doWork())
            {
                LockSupport.parkNanos(this, IDLE_PARK_NS);
            }
        }
    }

    /**
     * Commits one step when one is asked for and the last refusal is old enough.
     *
     * @return 1 when a step was committed, else 0.
     */
    int doWork()
    {
        final long bytes = committed;
        if (bytes >= poolBytes)
        {
            done = true;
            if (!onDemand)
            {
                log.accept(String.format(Locale.ROOT, "kvstash: the pool's pages are prepared (%s in %.1f s)",
                    Sizes.formatSize(poolBytes), (System.nanoTime() - startNs) / 1e9));
            }
            return 0;
        }
        if (bytes >= wanted || (0 != retryAtNs && System.nanoTime() < retryAtNs))
        {
            return 0;
        }
        try
        {
            commitStep();
            retryAtNs = 0;
            return 1;
        }
        catch (final IOException ex)
        {
            retryAtNs = System.nanoTime() + RETRY_NS;
            if (!refusalLogged)
            {
                refusalLogged = true;
                log.accept("kvstash: warning: the pool's next " + Sizes.formatSize(STEP_BYTES) + " could not be " +
                    "committed (" + ex.getMessage() + "): the store evicts within the " + Sizes.formatSize(bytes) +
                    " committed; tried again every second");
            }
            return 0;
        }
        catch (final InternalError ex)
        {
            // Background only (nothing was written first): a page the file system could not back.
            done = true;
            log.accept("kvstash: error: preparing the pool's pages failed: " + ex);
            return 0;
        }
    }

    /**
     * Commits the next step. Synchronized: the preparer's thread and, when it is behind, the reserve stage
     * ({@link #commitTo}) both commit, never the same step twice (zeros over a step in use would lose chunks).
     */
    private synchronized void commitStep() throws IOException
    {
        final long from = committed;
        if (from >= poolBytes)
        {
            return;
        }
        final long to = Math.min(poolBytes, (from / STEP_BYTES + 1) * STEP_BYTES);
        if (onDemand)
        {
            PoolPages.commitRange(channel, dataOffset, segments, segmentBytes, from, to);
        }
        else
        {
            PoolPages.touchRange(segments, segmentBytes, from, to);
        }
        committed = to;
        if (null != counters)
        {
            counters.set(CountersDescriptor.POOL_BYTES_COMMITTED, to);
        }
    }

    /** {@inheritDoc} */
    @Override
    public long committedBytes()
    {
        return committed;
    }

    /** {@inheritDoc} */
    @Override
    public void onRegionGiven(final long endBytes)
    {
        ask(Math.min(poolBytes, endBytes + headroomBytes));
    }

    /** {@inheritDoc} */
    @Override
    public boolean commitTo(final long endBytes)
    {
        counters.increment(CountersDescriptor.POOL_COMMIT_MISSES);
        ask(Math.min(poolBytes, endBytes + headroomBytes));
        try
        {
            // Waits for a step the preparer's thread is in the middle of, then commits what is still missing.
            while (committed < endBytes)
            {
                commitStep();
            }
            return true;
        }
        catch (final IOException ex)
        {
            return false;
        }
    }

    private void ask(final long bytes)
    {
        if (bytes > wanted)
        {
            wanted = bytes;
            final Thread t = thread;
            if (null != t)
            {
                LockSupport.unpark(t);
            }
        }
    }
}
