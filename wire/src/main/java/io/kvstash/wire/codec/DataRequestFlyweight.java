package io.kvstash.wire.codec;

import org.agrona.DirectBuffer;

import static io.kvstash.wire.codec.WireDescriptor.DATA_HEADER_LENGTH;

/**
 * WRITE_DATA and READ_DATA (copy transport): the common header, then the slot index in the transfer's slot
 * list, the byte count and the offset in the chunk; WRITE_DATA's bytes follow. See {@link WireDescriptor}.
 */
public final class DataRequestFlyweight extends RequestFlyweight
{
    private static final int SLOT_INDEX_OFFSET = HEADER_LENGTH;
    private static final int DATA_LENGTH_OFFSET = HEADER_LENGTH + 4;
    private static final int CHUNK_OFFSET_OFFSET = HEADER_LENGTH + 8;
    private static final int BYTES_OFFSET = HEADER_LENGTH + DATA_HEADER_LENGTH;

    /** Bytes of a READ_DATA record. */
    public static final int READ_LENGTH = BYTES_OFFSET;

    /**
     * Bytes of a WRITE_DATA record.
     *
     * @param dataLength bytes carried.
     * @return record length.
     */
    public static int writeLength(final int dataLength)
    {
        return BYTES_OFFSET + dataLength;
    }

    @Override
    public DataRequestFlyweight wrap(final DirectBuffer buffer, final int offset, final int length)
    {
        super.wrap(buffer, offset, length);
        return this;
    }

    /**
     * Writes the body after {@link #putHeader}.
     *
     * @param slotIndex   index in the transfer's slot list.
     * @param dataLength  bytes written or read.
     * @param chunkOffset byte offset in the chunk.
     * @return this.
     */
    public DataRequestFlyweight putData(final int slotIndex, final int dataLength, final long chunkOffset)
    {
        putInt(SLOT_INDEX_OFFSET, slotIndex);
        putInt(DATA_LENGTH_OFFSET, dataLength);
        putLong(CHUNK_OFFSET_OFFSET, chunkOffset);
        return this;
    }

    /**
     * Writes WRITE_DATA's bytes after {@link #putData}.
     *
     * @param source bytes.
     * @param from   offset in the source.
     * @param count  bytes, as given to {@link #putData}.
     * @return this.
     */
    public DataRequestFlyweight putBytes(final DirectBuffer source, final int from, final int count)
    {
        putBytes(BYTES_OFFSET, source, from, count);
        return this;
    }

    /**
     * Whether the record holds the data header.
     *
     * @return true when the slot index, length and chunk offset are inside the record.
     */
    public boolean hasBody()
    {
        return length() >= BYTES_OFFSET;
    }

    /**
     * Whether WRITE_DATA's stated bytes are inside the record.
     *
     * @return true when {@link #dataLength()} bytes follow the data header.
     */
    public boolean bytesFit()
    {
        return BYTES_OFFSET + (long)dataLength() <= length();
    }

    /**
     * Slot index.
     *
     * @return index in the transfer's slot list.
     */
    public int slotIndex()
    {
        return getInt(SLOT_INDEX_OFFSET);
    }

    /**
     * Byte count.
     *
     * @return bytes written or read.
     */
    public int dataLength()
    {
        return getInt(DATA_LENGTH_OFFSET);
    }

    /**
     * Offset in the chunk.
     *
     * @return byte offset.
     */
    public long chunkOffset()
    {
        return getLong(CHUNK_OFFSET_OFFSET);
    }

    /**
     * Where WRITE_DATA's bytes start, in the wrapped buffer.
     *
     * @return buffer offset.
     */
    public int bytesOffset()
    {
        return offset() + BYTES_OFFSET;
    }
}
