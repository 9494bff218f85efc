package io.kvstash.ipc.ring;

import org.agrona.concurrent.AtomicBuffer;

/**
 * The consuming side of an SPSC ring ({@link RingDescriptor}): {@link #next()} exposes the next record in
 * place, {@link #consume()} releases it. A record may be left unconsumed (back pressure) and is offered
 * again. Validates every length word, so garbage written into the ring is reported as {@link #isCorrupt()}
 * instead of being followed. Allocation-free.
 * <p>
 * Owner: the one consumer thread of this ring.
 */
public final class RingConsumer
{
    private final AtomicBuffer buffer;
    private final int capacity;
    private final int mask;
    private long head;
    private int recordOffset = -1;
    private int recordLength;
    private int recordType;
    private boolean corrupt;

    /**
     * A consumer over a ring region.
     *
     * @param buffer the ring: header plus a power-of-two capacity.
     */
    public RingConsumer(final AtomicBuffer buffer)
    {
        this.buffer = buffer;
        this.capacity = buffer.capacity() - RingDescriptor.HEADER_LENGTH;
        RingDescriptor.checkCapacity(capacity);
        this.mask = capacity - 1;
        this.head = buffer.getLongAcquire(RingDescriptor.HEAD_POSITION_OFFSET);
    }

    /**
     * Finds the next record, skipping and releasing padding.
     *
     * @return true when a record is available at {@link #payloadOffset()}.
     */
    public boolean next()
    {
        if (corrupt)
        {
            return false;
        }
        while (true)
        {
            final int index = (int)(head & mask);
            final int at = RingDescriptor.HEADER_LENGTH + index;
            final int length = buffer.getIntAcquire(at + RingDescriptor.RECORD_LENGTH_OFFSET);
            if (0 == length)
            {
                recordOffset = -1;
                return false;
            }
            if (length < RingDescriptor.RECORD_HEADER_LENGTH || length > capacity - index)
            {
                corrupt = true;
                recordOffset = -1;
                return false;
            }
            final int type = buffer.getInt(at + RingDescriptor.RECORD_TYPE_OFFSET);
            recordOffset = at;
            recordLength = length;
            recordType = type;
            if (RingDescriptor.PADDING_TYPE != type)
            {
                return true;
            }
            consume();
        }
    }

    /**
     * Releases the current record: zeroes it and advances the head.
     */
    public void consume()
    {
        final int at = recordOffset;
        if (at < 0)
        {
            return;
        }
        final int aligned = RingDescriptor.align(recordLength);
        buffer.setMemory(at, aligned, (byte)0);
        head += aligned;
        buffer.putLongRelease(RingDescriptor.HEAD_POSITION_OFFSET, head);
        recordOffset = -1;
    }

    /**
     * Type of the current record.
     *
     * @return type.
     */
    public int type()
    {
        return recordType;
    }

    /**
     * Buffer offset of the current record's payload.
     *
     * @return offset.
     */
    public int payloadOffset()
    {
        return recordOffset + RingDescriptor.RECORD_HEADER_LENGTH;
    }

    /**
     * Payload length of the current record.
     *
     * @return bytes.
     */
    public int payloadLength()
    {
        return recordLength - RingDescriptor.RECORD_HEADER_LENGTH;
    }

    /**
     * Whether a length word was impossible: the ring can no longer be parsed.
     *
     * @return true when corrupt.
     */
    public boolean isCorrupt()
    {
        return corrupt;
    }

    /**
     * The ring buffer, for reading payloads.
     *
     * @return buffer.
     */
    public AtomicBuffer buffer()
    {
        return buffer;
    }

    /**
     * Consumer position.
     *
     * @return bytes consumed since creation.
     */
    public long head()
    {
        return head;
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
}
