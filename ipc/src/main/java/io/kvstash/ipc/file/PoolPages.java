package io.kvstash.ipc.file;

import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;

/**
 * Gets the pool's pages ready before the first chunk moves, so that no page fault lands on a chunk copy.
 * <p>
 * Touching a fresh mapping one page at a time takes one fault per 4 KiB page: 262,144 faults for a 1 GiB pool,
 * about 10 us each on a virtual machine with shadow page tables (2.9-3.2 s for the server, 2.5 s for each client
 * on this project's VMs). Two things cut that:
 * <ul>
 *     <li>The server fills a new pool file with zeros through {@code pwrite} first: the kernel allocates the
 *     file's pages without a fault (about 0.2 s for 1 GiB).</li>
 *     <li>A read fault on a page already in the file's page cache maps its neighbours too (the kernel's fault
 *     around, {@code fault_around_bytes}, 64 KiB by default): reading one byte every {@link #FAULT_AROUND_BYTES}
 *     maps the whole region with a sixteenth of the faults.</li>
 * </ul>
 * Then one atomic add of zero per page takes the first write to each page (which a virtual machine's shadow page
 * tables still charge for), and leaves every byte as it was: safe beside a running server and other clients.
 * Measured on a 1 GiB pool: the server 1.3 s instead of 3.0-3.2 s, a client 1.2 s instead of 2.5 s
 * (docs/BENCHMARKS.md, "Start-up").
 */
public final class PoolPages
{
    /** Page size the touch steps by. */
    public static final int PAGE_BYTES = 4096;
    /** Bytes one read fault maps when the pages are in the page cache (Linux's default fault-around). */
    public static final int FAULT_AROUND_BYTES = 64 * 1024;

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
     * Maps every page of a mapped region for reading and writing now, leaving its bytes as they are.
     *
     * @param region mapped region, page aligned.
     * @param length bytes of the region to touch.
     */
    public static void touch(final UnsafeBuffer region, final long length)
    {
        int sink = 0;
        for (long offset = 0; offset < length; offset += FAULT_AROUND_BYTES)
        {
            sink += region.getByte((int)offset);
        }
        for (long offset = 0; offset < length; offset += PAGE_BYTES)
        {
            // An atomic add of 0 writes the value it read: safe beside the server and other clients, and it takes
            // the write to each page now, so the first store into it later does not.
            region.getAndAddInt((int)offset, 0);
        }
        readSink = sink;
    }
}
