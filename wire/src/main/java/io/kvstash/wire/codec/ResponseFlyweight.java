package io.kvstash.wire.codec;

import org.agrona.DirectBuffer;

import static io.kvstash.wire.codec.WireDescriptor.*;

/**
 * A response record (see {@link WireDescriptor} for the bytes), encoded by the server and decoded by
 * clients through the same class: the fixed header, one entry per slot (range index, generation, offset),
 * then the extra bytes (an error's reason, READ_DATA's bytes, STATS's counters, REGISTER's answer, a waiting
 * LOOKUP's tier tickets).
 * <p>
 * {@link #wrap(DirectBuffer, int, int)} checks once that the record lies inside the buffer; the header and
 * slot accessors then go without per-field bounds checks (a decoder checks {@link #hasHeader()} and
 * {@link #slotsFit()} first). Not thread-safe; allocation-free.
 */
public final class ResponseFlyweight extends RecordFlyweight
{
    /** Bytes of the fixed header. */
    public static final int HEADER_LENGTH = RESPONSE_HEADER_LENGTH;

    /** REGISTER answer: the server's incarnation (i64). */
    public static final int REGISTER_INCARNATION_OFFSET = 0;
    /** REGISTER answer: bytes of the pool's data region (i64). */
    public static final int REGISTER_POOL_BYTES_OFFSET = 8;
    /** REGISTER answer: lease in nanoseconds (i64). */
    public static final int REGISTER_LEASE_NS_OFFSET = 16;
    /** REGISTER answer: tokens per chunk (i32). */
    public static final int REGISTER_CHUNK_TOKENS_OFFSET = 24;
    /** REGISTER answer: length of the pool file's name (i32). */
    public static final int REGISTER_NAME_LENGTH_OFFSET = 28;
    /** REGISTER answer: the pool file's name, ASCII. */
    public static final int REGISTER_NAME_OFFSET = 32;
    /** REGISTER answer: longest pool file name. */
    public static final int REGISTER_MAX_NAME_LENGTH = 128;
    /** Longest REGISTER answer. */
    public static final int REGISTER_MAX_EXTRA_LENGTH = REGISTER_NAME_OFFSET + REGISTER_MAX_NAME_LENGTH;

    /**
     * LOOKUP answer with {@link io.kvstash.wire.RequestFlags#L2_WAIT} or {@link io.kvstash.wire.RequestFlags#L2_POLL}
     * from a server that runs a second tier: the ticket of the read-through this LOOKUP started (i64), 0 for none.
     */
    public static final int LOOKUP_TIER_TICKET_OFFSET = 0;
    /** That LOOKUP answer: the highest ticket whose read-through was over when the answer was written (i64). */
    public static final int LOOKUP_TIER_COMPLETED_OFFSET = 8;
    /** That LOOKUP answer: bytes of its extra part. */
    public static final int LOOKUP_TIER_EXTRA_LENGTH = 16;

    /**
     * Bytes of a response record.
     *
     * @param slotCount   slot entries.
     * @param extraLength extra bytes (padded to 8 in the record).
     * @return record length.
     */
    public static int length(final int slotCount, final int extraLength)
    {
        return HEADER_LENGTH + slotCount * SLOT_ENTRY_LENGTH + pad8(extraLength);
    }

    /**
     * Bytes of a response record, without overflow, for admission checks on values read from a request.
     *
     * @param slotCount   slot entries.
     * @param extraLength extra bytes.
     * @return record length.
     */
    public static long lengthBound(final long slotCount, final long extraLength)
    {
        return HEADER_LENGTH + slotCount * SLOT_ENTRY_LENGTH + ((extraLength + 7) & ~7L);
    }

    /**
     * Bytes of the longest error answer.
     *
     * @return record length.
     */
    public static int errorLength()
    {
        return length(0, MAX_MESSAGE_LENGTH);
    }

    @Override
    public ResponseFlyweight wrap(final DirectBuffer buffer, final int offset, final int length)
    {
        super.wrap(buffer, offset, length);
        return this;
    }

    // ------------------------------------------------------------------------------------------ encoding

    /**
     * Writes the fixed header.
     *
     * @param correlationId the request's correlation id.
     * @param status        {@link io.kvstash.wire.Status} code.
     * @param requestType   the request's type.
     * @param transferId    transfer opened or acted on, 0 for none.
     * @param hitChunks     readable prefix (LOOKUP).
     * @param slotCount     slot entries that follow.
     * @param count         removed or reclaimed count.
     * @param chunkBytes    bytes of one chunk of the instance's layout.
     * @param slotBytes     bytes of one slot.
     * @param slotCapacity  slots in the pool.
     * @param extraLength   extra bytes after the slot entries.
     * @return this.
     */
    public ResponseFlyweight putHeader(
        final long correlationId,
        final int status,
        final int requestType,
        final long transferId,
        final int hitChunks,
        final int slotCount,
        final long count,
        final long chunkBytes,
        final long slotBytes,
        final int slotCapacity,
        final int extraLength)
    {
        putLong(RESPONSE_CORRELATION_ID_OFFSET, correlationId);
        putInt(RESPONSE_STATUS_OFFSET, status);
        putInt(RESPONSE_TYPE_OFFSET, requestType);
        putLong(RESPONSE_TRANSFER_ID_OFFSET, transferId);
        putInt(RESPONSE_HIT_CHUNKS_OFFSET, hitChunks);
        putInt(RESPONSE_SLOT_COUNT_OFFSET, slotCount);
        putLong(RESPONSE_COUNT_OFFSET, count);
        putLong(RESPONSE_CHUNK_BYTES_OFFSET, chunkBytes);
        putLong(RESPONSE_SLOT_BYTES_OFFSET, slotBytes);
        putInt(RESPONSE_SLOT_CAPACITY_OFFSET, slotCapacity);
        putInt(RESPONSE_EXTRA_LENGTH_OFFSET, extraLength);
        return this;
    }

    /**
     * Writes one slot entry.
     *
     * @param i          entry index.
     * @param rangeIndex index of the chunk in the request's key range.
     * @param generation slot generation.
     * @param slotOffset slot offset in the data region.
     * @return this.
     */
    public ResponseFlyweight putSlot(final int i, final int rangeIndex, final int generation, final long slotOffset)
    {
        final int entry = HEADER_LENGTH + i * SLOT_ENTRY_LENGTH;
        putInt(entry, rangeIndex);
        putInt(entry + 4, generation);
        putLong(entry + 8, slotOffset);
        return this;
    }

    /**
     * Where the extra bytes start, in the wrapped buffer, after {@link #slotCount()} entries.
     *
     * @return buffer offset.
     */
    public int extraOffset()
    {
        return offset() + HEADER_LENGTH + slotCount() * SLOT_ENTRY_LENGTH;
    }

    // ------------------------------------------------------------------------------------------ decoding

    /**
     * Whether the record holds the fixed header.
     *
     * @return true when at least {@link #HEADER_LENGTH} bytes long.
     */
    public boolean hasHeader()
    {
        return length() >= HEADER_LENGTH;
    }

    /**
     * Whether the stated slot entries are inside the record.
     *
     * @return true when {@link #slotCount()} entries fit.
     */
    public boolean slotsFit()
    {
        final int n = slotCount();
        return n >= 0 && HEADER_LENGTH + (long)n * SLOT_ENTRY_LENGTH <= length();
    }

    /**
     * Correlation id.
     *
     * @return the request's correlation id.
     */
    public long correlationId()
    {
        return getLong(RESPONSE_CORRELATION_ID_OFFSET);
    }

    /**
     * Status.
     *
     * @return {@link io.kvstash.wire.Status} code.
     */
    public int status()
    {
        return getInt(RESPONSE_STATUS_OFFSET);
    }

    /**
     * Request type answered.
     *
     * @return {@link io.kvstash.wire.RequestType} code.
     */
    public int requestType()
    {
        return getInt(RESPONSE_TYPE_OFFSET);
    }

    /**
     * Transfer id.
     *
     * @return transfer opened or acted on.
     */
    public long transferId()
    {
        return getLong(RESPONSE_TRANSFER_ID_OFFSET);
    }

    /**
     * Hit chunks.
     *
     * @return readable prefix.
     */
    public int hitChunks()
    {
        return getInt(RESPONSE_HIT_CHUNKS_OFFSET);
    }

    /**
     * Slot entries.
     *
     * @return count as stated.
     */
    public int slotCount()
    {
        return getInt(RESPONSE_SLOT_COUNT_OFFSET);
    }

    /**
     * Removed or reclaimed count.
     *
     * @return count.
     */
    public long count()
    {
        return getLong(RESPONSE_COUNT_OFFSET);
    }

    /**
     * Chunk bytes.
     *
     * @return bytes of one chunk.
     */
    public long chunkBytes()
    {
        return getLong(RESPONSE_CHUNK_BYTES_OFFSET);
    }

    /**
     * Slot bytes.
     *
     * @return bytes of one slot.
     */
    public long slotBytes()
    {
        return getLong(RESPONSE_SLOT_BYTES_OFFSET);
    }

    /**
     * Slot capacity.
     *
     * @return slots in the pool.
     */
    public int slotCapacity()
    {
        return getInt(RESPONSE_SLOT_CAPACITY_OFFSET);
    }

    /**
     * Extra length.
     *
     * @return extra bytes after the slot entries.
     */
    public int extraLength()
    {
        return getInt(RESPONSE_EXTRA_LENGTH_OFFSET);
    }

    /**
     * Range index of a slot entry.
     *
     * @param i entry index.
     * @return index of the chunk in the request's key range.
     */
    public int slotRangeIndex(final int i)
    {
        return getInt(HEADER_LENGTH + i * SLOT_ENTRY_LENGTH);
    }

    /**
     * Generation of a slot entry.
     *
     * @param i entry index.
     * @return slot generation.
     */
    public int slotGeneration(final int i)
    {
        return getInt(HEADER_LENGTH + i * SLOT_ENTRY_LENGTH + 4);
    }

    /**
     * Offset of a slot entry.
     *
     * @param i entry index.
     * @return slot offset in the data region.
     */
    public long slotOffset(final int i)
    {
        return getLong(HEADER_LENGTH + i * SLOT_ENTRY_LENGTH + 8);
    }
}
