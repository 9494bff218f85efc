package io.kvstash.wire;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;

/**
 * The pool's data region as raw memory, possibly larger than 2 GiB: one or more segments, each a base
 * address of up to {@link SlotGeometry#SEGMENT_BYTES} (a mapped file in the server and its clients, a direct
 * buffer in tests). Slots never straddle segments ({@link SlotGeometry}), so a chunk is always one range of
 * one segment. Views onto a chunk are {@link UnsafeBuffer}s re-wrapped in place: handing one out allocates
 * nothing.
 */
public final class PoolRegion
{
    private final long[] addresses;
    private final long segmentBytes;
    private final long length;
    @SuppressWarnings({ "unused", "FieldCanBeLocal" })
    private final Object keepAlive;

    private PoolRegion(final long[] addresses, final long segmentBytes, final long length, final Object keepAlive)
    {
        this.addresses = addresses;
        this.segmentBytes = segmentBytes;
        this.length = length;
        this.keepAlive = keepAlive;
    }

    /**
     * A contiguous region over memory owned by someone else, who keeps it alive for the region's lifetime.
     *
     * @param address   base address.
     * @param length    bytes, at most {@link SlotGeometry#SEGMENT_BYTES}.
     * @param keepAlive object whose reachability keeps the memory alive (a buffer, a mapping), or null.
     * @return the region.
     */
    public static PoolRegion wrap(final long address, final long length, final Object keepAlive)
    {
        if (length > SlotGeometry.SEGMENT_BYTES)
        {
            throw new IllegalArgumentException("a contiguous region holds one segment at most: use ofSegments");
        }
        return new PoolRegion(new long[]{ address }, SlotGeometry.SEGMENT_BYTES, length, keepAlive);
    }

    /**
     * A region of several mapped segments.
     *
     * @param addresses    base address of each segment, in order.
     * @param segmentBytes bytes of every segment but the last.
     * @param length       total bytes.
     * @param keepAlive    object whose reachability keeps the mappings alive, or null.
     * @return the region.
     */
    public static PoolRegion ofSegments(
        final long[] addresses, final long segmentBytes, final long length, final Object keepAlive)
    {
        if (segmentBytes != SlotGeometry.SEGMENT_BYTES)
        {
            throw new IllegalArgumentException("segments must be " + SlotGeometry.SEGMENT_BYTES + " bytes");
        }
        if ((length + segmentBytes - 1) / segmentBytes != addresses.length)
        {
            throw new IllegalArgumentException(addresses.length + " segments do not cover " + length + " bytes");
        }
        return new PoolRegion(addresses.clone(), segmentBytes, length, keepAlive);
    }

    /**
     * A region on a fresh zeroed direct buffer, page aligned.
     *
     * @param length bytes, at most {@link SlotGeometry#SEGMENT_BYTES}.
     * @return the region.
     */
    public static PoolRegion allocateDirect(final long length)
    {
        if (length <= 0 || length > SlotGeometry.SEGMENT_BYTES)
        {
            throw new IllegalArgumentException("direct pool length out of range: " + length);
        }
        final ByteBuffer buffer = BufferUtil.allocateDirectAligned((int)length, 4096);
        return new PoolRegion(new long[]{ BufferUtil.address(buffer) }, SlotGeometry.SEGMENT_BYTES, length, buffer);
    }

    /**
     * Base address of the first segment.
     *
     * @return address of byte 0.
     */
    public long address()
    {
        return addresses[0];
    }

    /**
     * Number of segments.
     *
     * @return count.
     */
    public int segmentCount()
    {
        return addresses.length;
    }

    /**
     * Length.
     *
     * @return bytes.
     */
    public long length()
    {
        return length;
    }

    /**
     * Points a view at a range of the region, which must lie inside one segment.
     *
     * @param view   buffer to re-wrap.
     * @param offset byte offset in the region.
     * @param bytes  length of the range.
     * @return the view.
     * @throws IndexOutOfBoundsException when the range is outside the region or crosses a segment end.
     */
    public UnsafeBuffer wrap(final UnsafeBuffer view, final long offset, final int bytes)
    {
        if (offset < 0 || bytes < 0 || offset + bytes > length)
        {
            throw new IndexOutOfBoundsException("range [" + offset + ", +" + bytes + ") outside " + length);
        }
        final int segment = (int)(offset / segmentBytes);
        final long within = offset - segment * segmentBytes;
        if (within + bytes > segmentBytes)
        {
            throw new IndexOutOfBoundsException("range [" + offset + ", +" + bytes + ") crosses a segment end");
        }
        view.wrap(addresses[segment] + within, bytes);
        return view;
    }
}
