package io.kvstash.core;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;

/**
 * The pool's data region as raw memory: a base address and a length that may exceed 2 GiB (a mapped file
 * in the server, a direct buffer in tests). Views onto one chunk are {@link UnsafeBuffer}s re-wrapped in
 * place, so handing one out allocates nothing.
 */
public final class PoolRegion
{
    private final long address;
    private final long length;
    @SuppressWarnings({ "unused", "FieldCanBeLocal" })
    private final Object keepAlive;

    private PoolRegion(final long address, final long length, final Object keepAlive)
    {
        this.address = address;
        this.length = length;
        this.keepAlive = keepAlive;
    }

    /**
     * A region over memory owned by someone else, who keeps it mapped for the region's lifetime.
     *
     * @param address   base address.
     * @param length    bytes.
     * @param keepAlive object whose reachability keeps the memory alive (a buffer, a mapping), or null.
     * @return the region.
     */
    public static PoolRegion wrap(final long address, final long length, final Object keepAlive)
    {
        return new PoolRegion(address, length, keepAlive);
    }

    /**
     * A region on a fresh zeroed direct buffer, page aligned.
     *
     * @param length bytes, at most 2 GiB minus one page.
     * @return the region.
     */
    public static PoolRegion allocateDirect(final long length)
    {
        if (length <= 0 || length > Integer.MAX_VALUE - 4096)
        {
            throw new IllegalArgumentException("direct pool length out of range: " + length);
        }
        final ByteBuffer buffer = BufferUtil.allocateDirectAligned((int)length, 4096);
        return new PoolRegion(BufferUtil.address(buffer), length, buffer);
    }

    /**
     * Base address.
     *
     * @return address of byte 0.
     */
    public long address()
    {
        return address;
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
     * Points a view at a range of the region.
     *
     * @param view   buffer to re-wrap.
     * @param offset byte offset in the region.
     * @param bytes  length of the range.
     * @return the view.
     * @throws IndexOutOfBoundsException when the range is outside the region.
     */
    public UnsafeBuffer wrap(final UnsafeBuffer view, final long offset, final int bytes)
    {
        if (offset < 0 || bytes < 0 || offset + bytes > length)
        {
            throw new IndexOutOfBoundsException("range [" + offset + ", +" + bytes + ") outside " + length);
        }
        view.wrap(address + offset, bytes);
        return view;
    }
}
