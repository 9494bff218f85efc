package io.kvstash.wire.ring;

import org.agrona.concurrent.AtomicBuffer;

/**
 * The producing side of an SPSC ring ({@link RingDescriptor}): claim, write the payload in place, commit.
 * Never blocks: a claim that does not fit returns -1. Allocation-free.
 * <p>
 * Owner: the one producer thread of this ring.
 */
public final class RingProducer
{
    private final AtomicBuffer buffer;
    private final int capacity;
    private final int mask;
    private final int maxPayload;
    private long tail;
    private long headCache;
    private int claimedIndex = -1;
    private int claimedLength;

    /**
     * A producer over a ring region.
     *
     * @param buffer the ring: header plus a power-of-two capacity.
     */
    public RingProducer(final AtomicBuffer buffer)
    {
        this.buffer = buffer;
        this.capacity = buffer.capacity() - RingDescriptor.HEADER_LENGTH;
        RingDescriptor.checkCapacity(capacity);
        this.mask = capacity - 1;
        this.maxPayload = RingDescriptor.maxPayloadLength(capacity);
        this.tail = buffer.getLongAcquire(RingDescriptor.TAIL_POSITION_OFFSET);
        this.headCache = buffer.getLongAcquire(RingDescriptor.HEAD_POSITION_OFFSET);
    }

    /**
     * Claims room for a record.
     *
     * @param type          record type, not {@link RingDescriptor#PADDING_TYPE}.
     * @param payloadLength payload bytes.
     * @return buffer offset of the payload, or -1 when the ring lacks room now.
     * @throws IllegalArgumentException when the payload can never fit.
     */
    public int tryClaim(final int type, final int payloadLength)
    {
        if (payloadLength < 0 || payloadLength > maxPayload)
        {
            throw new IllegalArgumentException("payload " + payloadLength + " exceeds " + maxPayload);
        }
        final int recordLength = RingDescriptor.RECORD_HEADER_LENGTH + payloadLength;
        final int aligned = RingDescriptor.align(recordLength);
        int index = (int)(tail & mask);
        final int toEnd = capacity - index;
        final int padding = aligned > toEnd ? toEnd : 0;
        final int required = padding + aligned;
        if (required > capacity - (tail - headCache))
        {
            headCache = buffer.getLongAcquire(RingDescriptor.HEAD_POSITION_OFFSET);
            if (required > capacity - (tail - headCache))
            {
                return -1;
            }
        }
        if (0 != padding)
        {
            final int at = RingDescriptor.HEADER_LENGTH + index;
            buffer.putInt(at + RingDescriptor.RECORD_TYPE_OFFSET, RingDescriptor.PADDING_TYPE);
            buffer.putIntRelease(at + RingDescriptor.RECORD_LENGTH_OFFSET, padding);
            tail += padding;
            index = 0;
        }
        final int at = RingDescriptor.HEADER_LENGTH + index;
        buffer.putInt(at + RingDescriptor.RECORD_TYPE_OFFSET, type);
        claimedIndex = at;
        claimedLength = recordLength;
        return at + RingDescriptor.RECORD_HEADER_LENGTH;
    }

    /**
     * Publishes the claimed record: its length with release, then the tail.
     *
     * @param payloadLength bytes actually written, at most the claimed payload.
     */
    public void commit(final int payloadLength)
    {
        final int at = claimedIndex;
        if (at < 0)
        {
            throw new IllegalStateException("nothing claimed");
        }
        final int recordLength = RingDescriptor.RECORD_HEADER_LENGTH + payloadLength;
        if (recordLength > claimedLength)
        {
            throw new IllegalArgumentException("committed more than claimed");
        }
        final int claimedAligned = RingDescriptor.align(claimedLength);
        final int aligned = RingDescriptor.align(recordLength);
        if (aligned < claimedAligned)
        {
            // The unused tail of the claim becomes a padding record so the ring stays parseable.
            final int pad = at + aligned;
            buffer.putInt(pad + RingDescriptor.RECORD_TYPE_OFFSET, RingDescriptor.PADDING_TYPE);
            buffer.putIntRelease(pad + RingDescriptor.RECORD_LENGTH_OFFSET, claimedAligned - aligned);
        }
        buffer.putIntRelease(at + RingDescriptor.RECORD_LENGTH_OFFSET, recordLength);
        tail += claimedAligned;
        buffer.putLongRelease(RingDescriptor.TAIL_POSITION_OFFSET, tail);
        claimedIndex = -1;
    }

    /**
     * Abandons the claim: it is published as padding.
     */
    public void abort()
    {
        final int at = claimedIndex;
        if (at < 0)
        {
            return;
        }
        final int aligned = RingDescriptor.align(claimedLength);
        buffer.putInt(at + RingDescriptor.RECORD_TYPE_OFFSET, RingDescriptor.PADDING_TYPE);
        buffer.putIntRelease(at + RingDescriptor.RECORD_LENGTH_OFFSET, aligned);
        tail += aligned;
        buffer.putLongRelease(RingDescriptor.TAIL_POSITION_OFFSET, tail);
        claimedIndex = -1;
    }

    /**
     * Whether at least {@code bytes} are free, reading the consumer's head only when the last head read says
     * they are not. The head only moves forward, so the cached value can only under-count the free space.
     * The head shares its cache line with nothing else, but the consumer writes it on every record it takes:
     * reading it for every check would move that line between the two cores once per record.
     *
     * @param bytes bytes wanted.
     * @return true when that many bytes are free.
     */
    public boolean hasFreeBytes(final long bytes)
    {
        if (capacity - (tail - headCache) >= bytes)
        {
            return true;
        }
        headCache = buffer.getLongAcquire(RingDescriptor.HEAD_POSITION_OFFSET);
        return capacity - (tail - headCache) >= bytes;
    }

    /**
     * The ring buffer, for writing payloads at claimed offsets.
     *
     * @return buffer.
     */
    public AtomicBuffer buffer()
    {
        return buffer;
    }

    /**
     * Record capacity.
     *
     * @return bytes.
     */
    public int capacity()
    {
        return capacity;
    }

    /**
     * Largest payload of one record.
     *
     * @return bytes.
     */
    public int maxPayloadLength()
    {
        return maxPayload;
    }

    /**
     * Producer position.
     *
     * @return bytes produced since creation.
     */
    public long tail()
    {
        return tail;
    }
}
