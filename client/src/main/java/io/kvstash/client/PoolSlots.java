package io.kvstash.client;

import io.kvstash.wire.PoolRegion;
import io.kvstash.wire.WireVersion;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.file.PoolFileDescriptor;
import io.kvstash.wire.file.PoolPages;
import io.kvstash.wire.file.SlotTableDescriptor;
import org.agrona.BufferUtil;
import org.agrona.DirectBuffer;
import org.agrona.IoUtil;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * The server's pool as this client maps it: the pool file's channel, its metadata page with the slot table, and
 * its data segments, from {@link #map} until {@link #close()}. Owns the chunk bytes' side of a transfer: views
 * of slots, the slot-table words that fence a store or a retrieve, and chunk bytes written or read in place.
 * With the copy transport nothing is mapped: {@link #isMapped()} is false and the fences always hold.
 * <p>
 * A pool its server commits on demand is sparse past the committed prefix (the counter {@code pool_bytes_committed}):
 * touching a page there would allocate it, and a full tmpfs then raises SIGBUS. So the pre-touch covers only the
 * committed prefix: all of it at connect, then, when a slot reaches past what was touched (every slot the server gives
 * lies in the prefix), up to {@link #TOUCH_STEP_BYTES} past the slot's end, so the faults spread over the stores
 * instead of landing on one store per region; a read per 64 KiB maps the pages with a sixteenth of the faults a chunk
 * copy would take.
 * <p>
 * Single-threaded: owned by one client, used on the client's thread.
 */
final class PoolSlots
{
    /** On a pool committed on demand: bytes touched past a slot that reaches pages not touched yet. */
    static final long TOUCH_STEP_BYTES = 1L << 20;

    private final long poolSizeBytes;
    private final long dataOffset;
    private final long segmentBytes;
    private final int alignment;
    private final List<MappedByteBuffer> segments = new ArrayList<>();
    private final UnsafeBuffer scratchView = new UnsafeBuffer(0, 0);
    private FileChannel channel;
    private MappedByteBuffer meta;
    private PoolRegion pool;
    private UnsafeBuffer slotTable;
    private UnsafeBuffer[] mapped;
    /** The server's counters when its pool is committed on demand and this client pre-touches; else null. */
    private AtomicBuffer onDemandCounters;
    /** Bytes of the data region from its start this client has touched (only with {@link #onDemandCounters}). */
    private long touchedBytes;

    /**
     * The pool of a server's configuration, not mapped yet.
     *
     * @param poolSizeBytes bytes of chunk data in the pool.
     * @param dataOffset    file offset of the first data segment.
     * @param segmentBytes  bytes of each data segment (the last may be shorter).
     * @param alignment     the pool's slot alignment: slot words are found by offset / alignment.
     */
    PoolSlots(final long poolSizeBytes, final long dataOffset, final long segmentBytes, final int alignment)
    {
        this.poolSizeBytes = poolSizeBytes;
        this.dataOffset = dataOffset;
        this.segmentBytes = segmentBytes;
        this.alignment = alignment;
    }

    /**
     * Maps the pool file of the server of {@code incarnation}. What is mapped before a failure stays mapped until
     * {@link #close()}.
     *
     * @param poolPath        the pool file.
     * @param incarnation     incarnation of the server connected to.
     * @param pretouch        touch every page now rather than on first use.
     * @param pretouchThreads threads that touch the pages.
     * @param serverCounters  the server's counters when it commits its pool on demand, else null: only the
     *                        committed prefix is then touched.
     * @throws IOException       when the file cannot be opened or mapped.
     * @throws KvStashException BAD_FILES when it is not this server's pool.
     */
    void map(
        final Path poolPath,
        final long incarnation,
        final boolean pretouch,
        final int pretouchThreads,
        final AtomicBuffer serverCounters) throws IOException
    {
        channel = FileChannel.open(poolPath, StandardOpenOption.READ, StandardOpenOption.WRITE);
        meta = channel.map(FileChannel.MapMode.READ_WRITE, 0, dataOffset);
        final UnsafeBuffer metaBuffer = new UnsafeBuffer(meta);
        if (metaBuffer.getLong(PoolFileDescriptor.MAGIC_OFFSET) != PoolFileDescriptor.MAGIC ||
            !WireVersion.isCompatible(metaBuffer.getIntAcquire(PoolFileDescriptor.VERSION_OFFSET)) ||
            metaBuffer.getLong(PoolFileDescriptor.INCARNATION_OFFSET) != incarnation)
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, poolPath + " is not this server's pool");
        }
        final long tableOffset = metaBuffer.getLong(PoolFileDescriptor.SLOT_TABLE_OFFSET_OFFSET);
        final long tableLength = metaBuffer.getLong(PoolFileDescriptor.SLOT_TABLE_LENGTH_OFFSET);
        slotTable = new UnsafeBuffer(metaBuffer, (int)tableOffset, (int)Math.max(8, tableLength));
        final int segmentCount = (int)((poolSizeBytes + segmentBytes - 1) / segmentBytes);
        final long[] addresses = new long[segmentCount];
        mapped = new UnsafeBuffer[segmentCount];
        for (int i = 0; i < segmentCount; i++)
        {
            final long start = i * segmentBytes;
            final long length = Math.min(segmentBytes, poolSizeBytes - start);
            final MappedByteBuffer segment = channel.map(FileChannel.MapMode.READ_WRITE, dataOffset + start, length);
            segments.add(segment);
            addresses[i] = BufferUtil.address(segment);
            mapped[i] = new UnsafeBuffer(segment);
        }
        if (pretouch && null != serverCounters)
        {
            onDemandCounters = serverCounters;
            touchCommitted(poolSizeBytes);
        }
        else if (pretouch)
        {
            PoolPages.touchSegments(poolSizeBytes, mapped, segmentBytes, pretouchThreads);
        }
        pool = PoolRegion.ofSegments(addresses, segmentBytes, poolSizeBytes, segments);
    }

    /**
     * Bytes of the data region, from its start, this client has touched; the whole pool unless its server commits
     * it on demand.
     *
     * @return bytes.
     */
    long touchedBytes()
    {
        return null == onDemandCounters ? poolSizeBytes : touchedBytes;
    }

    /**
     * On a pool committed on demand, touches the committed prefix not touched yet when a slot reaches past it.
     */
    private void touchUpTo(final long end)
    {
        if (end > touchedBytes && null != onDemandCounters)
        {
            touchCommitted(end + TOUCH_STEP_BYTES);
        }
    }

    private void touchCommitted(final long end)
    {
        final long committed = Math.min(Math.min(end, poolSizeBytes),
            onDemandCounters.getLongAcquire(CountersDescriptor.POOL_BYTES_COMMITTED * Long.BYTES));
        if (committed > touchedBytes)
        {
            PoolPages.touchRange(mapped, segmentBytes, touchedBytes, committed);
            touchedBytes = committed;
        }
    }

    /**
     * Whether the pool is mapped: false with the copy transport, and after {@link #close()}.
     *
     * @return true when chunk bytes move in place.
     */
    boolean isMapped()
    {
        return null != pool;
    }

    /**
     * See {@link Chunks#slotView(ClientResponse, int, UnsafeBuffer)}.
     *
     * @param r    the response.
     * @param i    slot entry.
     * @param view buffer to re-wrap.
     * @return the view.
     */
    UnsafeBuffer slotView(final ClientResponse r, final int i, final UnsafeBuffer view)
    {
        if (null == pool)
        {
            throw new IllegalStateException("the copy transport maps no pool: use writeChunk/readChunk");
        }
        touchUpTo(r.slotOffset(i) + r.chunkBytes());
        return pool.wrap(view, r.slotOffset(i), (int)r.chunkBytes());
    }

    /**
     * See {@link Chunks#slotView(long, int, UnsafeBuffer)}.
     *
     * @param slotOffset the slot's offset in the pool's data region.
     * @param length     bytes of the view.
     * @param view       buffer to re-wrap.
     * @return the view.
     */
    UnsafeBuffer slotView(final long slotOffset, final int length, final UnsafeBuffer view)
    {
        if (null == pool)
        {
            throw new IllegalStateException("the copy transport maps no pool: use writeChunk/readChunk");
        }
        touchUpTo(slotOffset + length);
        return pool.wrap(view, slotOffset, length);
    }

    /**
     * See {@link Chunks#slotBuffer(long, int)}.
     *
     * @param slotOffset the slot's offset in the pool's data region.
     * @param length     bytes of the view.
     * @return a new view of the slot's bytes.
     */
    ByteBuffer slotBuffer(final long slotOffset, final int length)
    {
        if (null == pool)
        {
            throw new IllegalStateException("the copy transport maps no pool: use writeChunk/readChunk");
        }
        final int segment = (int)(slotOffset / segmentBytes);
        final int within = (int)(slotOffset - segment * segmentBytes);
        if (slotOffset < 0 || slotOffset >= poolSizeBytes || length < 0 ||
            within + length > segments.get(segment).capacity())
        {
            throw new IllegalArgumentException("not a slot of the pool: offset " + slotOffset + ", " + length +
                " bytes");
        }
        touchUpTo(slotOffset + length);
        return segments.get(segment).slice(within, length);
    }

    /**
     * See {@link Chunks#isStillReserved(ClientResponse, int)}.
     *
     * @param r the response.
     * @param i slot entry.
     * @return true when still reserved for this transfer.
     */
    boolean isStillReserved(final ClientResponse r, final int i)
    {
        if (null == slotTable)
        {
            return true;
        }
        final long word = slotWord(r, i);
        return SlotTableDescriptor.STATE_RESERVED == SlotTableDescriptor.state(word) &&
            SlotTableDescriptor.generation(word) == r.slotGeneration(i);
    }

    /**
     * See {@link Chunks#isStillReadable(ClientResponse, int)}.
     *
     * @param r the response.
     * @param i slot entry.
     * @return true when still readable under the same generation.
     */
    boolean isStillReadable(final ClientResponse r, final int i)
    {
        if (null == slotTable)
        {
            return true;
        }
        // The chunk's bytes were read with plain loads before this check: an acquire load alone would let
        // them move after it, so fence loads first (a seqlock reader's second check).
        VarHandle.acquireFence();
        final long word = slotWord(r, i);
        return SlotTableDescriptor.STATE_READABLE == SlotTableDescriptor.state(word) &&
            SlotTableDescriptor.generation(word) == r.slotGeneration(i);
    }

    /**
     * Writes bytes {@code [from, from + length)} of a chunk straight into its slot. The pool must be mapped.
     *
     * @param slotOffset   the slot's offset in the pool's data region.
     * @param from         first byte of the chunk to write.
     * @param length       bytes to write.
     * @param source       the bytes.
     * @param sourceOffset offset in the source of the chunk's byte {@code from}.
     */
    void write(
        final long slotOffset, final int from, final int length, final DirectBuffer source, final int sourceOffset)
    {
        final UnsafeBuffer view = scratchView;
        touchUpTo(slotOffset + from + length);
        pool.wrap(view, slotOffset + from, length);
        view.putBytes(0, source, sourceOffset, length);
    }

    /**
     * Reads bytes {@code [from, from + length)} of a chunk straight from its slot. The pool must be mapped.
     *
     * @param slotOffset        the slot's offset in the pool's data region.
     * @param from              first byte of the chunk to read.
     * @param length            bytes to read.
     * @param destination       where the bytes go.
     * @param destinationOffset offset in the destination of the chunk's byte {@code from}.
     */
    void read(
        final long slotOffset,
        final int from,
        final int length,
        final MutableDirectBuffer destination,
        final int destinationOffset)
    {
        final UnsafeBuffer view = scratchView;
        touchUpTo(slotOffset + from + length);
        pool.wrap(view, slotOffset + from, length);
        destination.putBytes(destinationOffset, view, 0, length);
    }

    /**
     * Closes the pool file and unmaps what was mapped; the pool then counts as not mapped.
     */
    void close()
    {
        try
        {
            if (null != channel)
            {
                channel.close();
            }
        }
        catch (final IOException ignore)
        {
            // The mappings stay valid without the channel; they are unmapped below.
        }
        for (final MappedByteBuffer segment : segments)
        {
            IoUtil.unmap(segment);
        }
        segments.clear();
        if (null != meta)
        {
            IoUtil.unmap(meta);
            meta = null;
        }
        pool = null;
    }

    private long slotWord(final ClientResponse r, final int i)
    {
        return slotTable.getLongAcquire((int)SlotTableDescriptor.wordOffsetAt(r.slotOffset(i), alignment));
    }
}
