package io.kvstash.wire.file;

import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.function.BooleanSupplier;

/**
 * Gets the pool's pages ready before the first chunk moves, so that no page fault lands on a chunk copy.
 * <p>
 * Touching a fresh mapping one page at a time takes one fault per 4 KiB page: 262,144 faults for a 1 GiB pool,
 * about 10 us each on a virtual machine with shadow page tables (seconds per GiB for the server and for each
 * client). Two things cut that:
 * <ul>
 *     <li>The server fills a new pool file with zeros through {@code pwrite} first: the kernel allocates the
 *     file's pages without a fault (about 0.2 s for 1 GiB).</li>
 *     <li>A read fault on a page already in the file's page cache maps its neighbours too (the kernel's fault
 *     around, {@code fault_around_bytes}, 64 KiB by default): reading one byte every {@link #FAULT_AROUND_BYTES}
 *     maps the whole region with a sixteenth of the faults.</li>
 * </ul>
 * Then one atomic add of zero per page takes the first write to each page (which a virtual machine's shadow page
 * tables still charge for), and leaves every byte as it was: safe beside a running server and other clients.
 * Together they more than halve the time to get a pool ready on one thread. The server splits a new pool among up
 * to {@link #MAX_THREADS} threads, one per processor, and a client its mapping among
 * {@code ClientContext.pretouchThreads}.
 */
public final class PoolPages
{
    /** Page size the touch steps by. */
    public static final int PAGE_BYTES = 4096;
    /** Bytes one read fault maps when the pages are in the page cache (Linux's default fault-around). */
    public static final int FAULT_AROUND_BYTES = 64 * 1024;

    /** Most threads {@link #prepareNewPool} and {@link #touchSegments} use. */
    public static final int MAX_THREADS = 8;

    /** Bytes prepared between two looks at the abort flag: a few milliseconds of work. */
    public static final long ABORT_CHECK_BYTES = 16L * 1024 * 1024;

    private static final int ZERO_BLOCK_BYTES = 1024 * 1024;

    /** Where the reads' sum goes, so that no compiler drops the reads as unused. */
    @SuppressWarnings("unused")
    private static volatile int readSink;

    private PoolPages()
    {
    }

    /**
     * Writes zeros over a region of a file through the channel, so the file's pages exist before it is mapped.
     * Only for a region no one uses yet: it overwrites whatever is there.
     *
     * @param channel  open for writing.
     * @param position first byte.
     * @param length   bytes.
     * @throws IOException when a write fails.
     */
    public static void fillWithZeros(final FileChannel channel, final long position, final long length)
        throws IOException
    {
        final ByteBuffer zeros = ByteBuffer.allocateDirect((int)Math.min(ZERO_BLOCK_BYTES, Math.max(1, length)));
        long written = 0;
        while (written < length)
        {
            zeros.clear();
            zeros.limit((int)Math.min(zeros.capacity(), length - written));
            while (zeros.hasRemaining())
            {
                written += channel.write(zeros, position + written);
            }
        }
    }

    /**
     * Fills a new pool's data region with zeros and touches every page of its mapped segments, the region split
     * among {@code threads} threads (the faults of different pages proceed in parallel: two threads take a 2 GiB
     * pool in 2.0 s instead of 3.0-3.7 s on this project's 2-vCPU VMs). Only for a pool no one uses yet. It stops
     * between blocks of {@link #ABORT_CHECK_BYTES} once {@code aborted} says so (a signal during a start), failing
     * with an {@link IOException}.
     *
     * @param channel      the pool file, open for writing.
     * @param dataOffset   file offset of the data region.
     * @param dataBytes    bytes of the data region.
     * @param segments     the data region's mapped segments, in order.
     * @param segmentBytes bytes of every segment but the last.
     * @param threads      threads to use (1 to {@link #MAX_THREADS}; the caller's thread is one of them).
     * @param aborted      read by every thread between blocks; true stops the preparation.
     * @throws IOException when a write fails or the preparation was aborted.
     */
    public static void prepareNewPool(
        final FileChannel channel,
        final long dataOffset,
        final long dataBytes,
        final UnsafeBuffer[] segments,
        final long segmentBytes,
        final int threads,
        final BooleanSupplier aborted) throws IOException
    {
        split(dataBytes, segmentBytes, threads, (from, to) ->
        {
            for (long block = from; block < to; block += ABORT_CHECK_BYTES)
            {
                if (aborted.getAsBoolean())
                {
                    throw new IOException("the pool's preparation was interrupted");
                }
                final long end = Math.min(to, block + ABORT_CHECK_BYTES);
                fillWithZeros(channel, dataOffset + block, end - block);
                touchRange(segments, segmentBytes, block, end);
            }
        });
    }

    /**
     * Maps every page of a pool's mapped segments for reading and writing now, the region split among
     * {@code threads} threads; every byte stays as it was, so it is safe beside a running server and other clients.
     *
     * @param dataBytes    bytes of the data region.
     * @param segments     the data region's mapped segments, in order.
     * @param segmentBytes bytes of every segment but the last.
     * @param threads      threads to use (1 to {@link #MAX_THREADS}; the caller's thread is one of them).
     * @throws IOException when a thread fails.
     */
    public static void touchSegments(
        final long dataBytes,
        final UnsafeBuffer[] segments,
        final long segmentBytes,
        final int threads) throws IOException
    {
        touchSegments(dataBytes, segments, segmentBytes, threads, () -> false);
    }

    /**
     * {@link #touchSegments(long, UnsafeBuffer[], long, int)} that stops between blocks of
     * {@link #ABORT_CHECK_BYTES} once {@code stop} says so: for a pool in use, prepared in the background.
     *
     * @param dataBytes    bytes of the data region.
     * @param segments     the data region's mapped segments, in order.
     * @param segmentBytes bytes of every segment but the last.
     * @param threads      threads to use (1 to {@link #MAX_THREADS}; the caller's thread is one of them).
     * @param stop         read by every thread between blocks; true ends the touching early.
     * @return true when every page was touched, false when stopped early.
     * @throws IOException when a thread fails.
     */
    public static boolean touchSegments(
        final long dataBytes,
        final UnsafeBuffer[] segments,
        final long segmentBytes,
        final int threads,
        final BooleanSupplier stop) throws IOException
    {
        split(dataBytes, segmentBytes, threads, (from, to) ->
        {
            for (long block = from; block < to && !stop.getAsBoolean(); block += ABORT_CHECK_BYTES)
            {
                touchRange(segments, segmentBytes, block, Math.min(to, block + ABORT_CHECK_BYTES));
            }
        });
        return !stop.getAsBoolean();
    }

    /**
     * Commits one range of a pool's data region that no one uses yet: zeros written through the channel (a file
     * system that is full fails the write with an {@link IOException}, never a SIGBUS), then every page of the
     * range touched in the mapped segments. Once it returns, touching any byte of the range allocates nothing: it
     * is safe in any process. For an on-demand pool, one region at a time, ahead of the regions in use.
     *
     * @param channel      the pool file, open for writing.
     * @param dataOffset   file offset of the data region.
     * @param segments     the data region's mapped segments, in order.
     * @param segmentBytes bytes of every segment but the last.
     * @param from         first byte of the range in the data region.
     * @param to           end of the range (exclusive).
     * @throws IOException when a write fails (ENOSPC: the file system is full); the range is then not committed.
     */
    public static void commitRange(
        final FileChannel channel,
        final long dataOffset,
        final UnsafeBuffer[] segments,
        final long segmentBytes,
        final long from,
        final long to) throws IOException
    {
        fillWithZeros(channel, dataOffset + from, to - from);
        touchRange(segments, segmentBytes, from, to);
    }

    /**
     * Maps every page of one range of a pool's mapped segments for reading and writing now; every byte stays as it
     * was. Only over pages the file already holds (a committed prefix of an on-demand pool, or any pool prepared
     * whole): on tmpfs, touching a hole allocates it, and a full file system then raises SIGBUS.
     *
     * @param segments     the data region's mapped segments, in order.
     * @param segmentBytes bytes of every segment but the last.
     * @param from         first byte of the range in the data region.
     * @param to           end of the range (exclusive).
     */
    public static void touchRange(
        final UnsafeBuffer[] segments, final long segmentBytes, final long from, final long to)
    {
        long offset = from;
        while (offset < to)
        {
            final int segment = (int)(offset / segmentBytes);
            final long segmentStart = segment * segmentBytes;
            final long end = Math.min(to, segmentStart + segmentBytes);
            touch(segments[segment], offset - segmentStart, end - segmentStart);
            offset = end;
        }
    }

    /**
     * Work on the range [from, to) of a pool's data region.
     */
    @FunctionalInterface
    private interface RangeTask
    {
        void run(long from, long to) throws IOException;
    }

    private static void split(final long dataBytes, final long segmentBytes, final int threads, final RangeTask task)
        throws IOException
    {
        if (0 != segmentBytes % FAULT_AROUND_BYTES)
        {
            throw new IllegalArgumentException("segment bytes not a multiple of " + FAULT_AROUND_BYTES + ": " +
                segmentBytes);
        }
        final int parts = (int)Math.max(1, Math.min(Math.min(threads, MAX_THREADS), dataBytes / FAULT_AROUND_BYTES));
        final long partBytes = (dataBytes / parts) / FAULT_AROUND_BYTES * FAULT_AROUND_BYTES;
        final Thread[] workers = new Thread[parts - 1];
        final Throwable[] failures = new Throwable[parts];
        for (int i = 0; i < parts; i++)
        {
            final int part = i;
            final long from = i * partBytes;
            final long to = i == parts - 1 ? dataBytes : from + partBytes;
            final Runnable run = () ->
            {
                try
                {
                    task.run(from, to);
                }
                catch (final Throwable t)
                {
                    failures[part] = t;
                }
            };
            if (i < parts - 1)
            {
                workers[i] = new Thread(run, "kvstash-pool-pages-" + i);
                workers[i].setDaemon(true);
                workers[i].start();
            }
            else
            {
                run.run();
            }
        }
        boolean interrupted = false;
        for (final Thread worker : workers)
        {
            while (true)
            {
                try
                {
                    worker.join();
                    break;
                }
                catch (final InterruptedException ex)
                {
                    interrupted = true;
                }
            }
        }
        if (interrupted)
        {
            Thread.currentThread().interrupt();
        }
        for (final Throwable failure : failures)
        {
            if (failure instanceof IOException)
            {
                throw (IOException)failure;
            }
            if (null != failure)
            {
                throw new IOException("preparing the pool's pages failed", failure);
            }
        }
    }

    private static void touch(final UnsafeBuffer region, final long from, final long to)
    {
        int sink = 0;
        for (long offset = from; offset < to; offset += FAULT_AROUND_BYTES)
        {
            sink += region.getByte((int)offset);
        }
        for (long offset = from; offset < to; offset += PAGE_BYTES)
        {
            // An atomic add of 0 writes the value it read: safe beside the server and other clients, and it takes
            // the write to each page now, so the first store into it later does not.
            region.getAndAddInt((int)offset, 0);
        }
        readSink = sink;
    }
}
