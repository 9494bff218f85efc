package io.kvstash.wire.ring;

import org.agrona.concurrent.AtomicBuffer;

/**
 * The consuming side of an SPSC ring ({@link RingDescriptor}): {@link #next()} exposes the next record in
 * place, {@link #consume()} releases it. A record may be left unconsumed (back pressure) and is offered
 * again. Validates every length word, so garbage written into the ring is reported as {@link #isCorrupt()}
 * instead of being followed. Allocation-free.
 * <p>
 * Releasing may also be deferred, as Agrona's ring buffers release a whole batch after its handlers ran:
 * {@link #take()} moves past the current record and {@link #release()} later zeroes everything taken and
 * publishes the head. The records were written by the other process, so zeroing them makes this core take
 * their cache lines back from it; stores become visible in program order, so a reply written after that
 * zeroing waits for it. Taking the records, replying, then releasing keeps the zeroing off the reply's way.
 * <p>
 * Owner: the one consumer thread of this ring.
 */
public final class RingConsumer
{
    private final AtomicBuffer buffer;
    private final int capacity;
    private final int mask;
    /** Published position: every byte before it is zeroed and free for the producer. */
    private long head;
    /** Read position: the next record; the records between {@link #head} and here are taken, not released. */
    private long position;
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
        this.position = head;
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
            final int index = (int)(position & mask);
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
            // Padding is released at once unless records taken before it wait for a release of their own: a
            // consumer that only calls consume() must not leave padding taken while it waits for the next
            // record, since the producer may need those very bytes to write it.
            final boolean nothingTaken = position == head;
            take();
            if (nothingTaken)
            {
                release();
            }
        }
    }

    /**
     * Releases the current record, and any taken before it: zeroes them and advances the head.
     */
    public void consume()
    {
        take();
        release();
    }

    /**
     * Moves past the current record without releasing it: {@link #next()} goes on with the record after it,
     * and the producer cannot reuse its bytes until {@link #release()}.
     */
    public void take()
    {
        final int at = recordOffset;
        if (at < 0)
        {
            return;
        }
        position += RingDescriptor.align(recordLength);
        recordOffset = -1;
    }

    /**
     * Releases every record taken since the last release: zeroes their bytes and publishes the head.
     *
     * @return bytes released, 0 when nothing was taken.
     */
    public int release()
    {
        final int bytes = (int)(position - head);
        if (0 == bytes)
        {
            return 0;
        }
        // Records never wrap, but the taken ones may run past the end of the ring and on from its start.
        final int index = (int)(head & mask);
        final int toEnd = capacity - index;
        if (bytes <= toEnd)
        {
            buffer.setMemory(RingDescriptor.HEADER_LENGTH + index, bytes, (byte)0);
        }
        else
        {
            buffer.setMemory(RingDescriptor.HEADER_LENGTH + index, toEnd, (byte)0);
            buffer.setMemory(RingDescriptor.HEADER_LENGTH, bytes - toEnd, (byte)0);
        }
        head = position;
        buffer.putLongRelease(RingDescriptor.HEAD_POSITION_OFFSET, head);
        return bytes;
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
     * Consumer position as the producer sees it.
     *
     * @return bytes released since creation.
     */
    public long head()
    {
        return head;
    }

    /**
     * Bytes taken and not yet released.
     *
     * @return bytes.
     */
    public int takenBytes()
    {
        return (int)(position - head);
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
