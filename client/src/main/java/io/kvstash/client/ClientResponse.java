package io.kvstash.client;

import io.kvstash.wire.Status;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import static io.kvstash.wire.codec.WireDescriptor.*;

/**
 * A decoded response: a flyweight over a private copy of the response record, so the ring space is
 * released at once. Valid until the client reads its next response. Allocation-free except
 * {@link #message()}.
 */
public final class ClientResponse
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private final UnsafeBuffer buffer;
    private int length;

    ClientResponse(final int capacity)
    {
        buffer = new UnsafeBuffer(new byte[capacity]);
    }

    void copyFrom(final DirectBuffer source, final int offset, final int length)
    {
        if (length < RESPONSE_HEADER_LENGTH || length > buffer.capacity())
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, "response record of " + length + " bytes");
        }
        buffer.putBytes(0, source, offset, length);
        this.length = length;
    }

    int capacity()
    {
        return buffer.capacity();
    }

    /**
     * Correlation id of the request answered.
     *
     * @return id.
     */
    public long correlationId()
    {
        return buffer.getLong(RESPONSE_CORRELATION_ID_OFFSET, LE);
    }

    /**
     * Status code ({@link Status}).
     *
     * @return status.
     */
    public int status()
    {
        return buffer.getInt(RESPONSE_STATUS_OFFSET, LE);
    }

    /**
     * Whether the status is OK.
     *
     * @return true when OK.
     */
    public boolean isOk()
    {
        return Status.OK == status();
    }

    /**
     * Request type answered.
     *
     * @return type.
     */
    public int requestType()
    {
        return buffer.getInt(RESPONSE_TYPE_OFFSET, LE);
    }

    /**
     * Transfer issued, 0 for none.
     *
     * @return id.
     */
    public long transferId()
    {
        return buffer.getLong(RESPONSE_TRANSFER_ID_OFFSET, LE);
    }

    /**
     * Hit chunks of a lookup.
     *
     * @return count.
     */
    public int hitChunks()
    {
        return buffer.getInt(RESPONSE_HIT_CHUNKS_OFFSET, LE);
    }

    /**
     * Slots in the response.
     *
     * @return count.
     */
    public int slotCount()
    {
        return buffer.getInt(RESPONSE_SLOT_COUNT_OFFSET, LE);
    }

    /**
     * Chunks removed (CLEAR) or transfers reclaimed.
     *
     * @return count.
     */
    public long count()
    {
        return buffer.getLong(RESPONSE_COUNT_OFFSET, LE);
    }

    /**
     * Bytes of one chunk of the instance's layout.
     *
     * @return bytes.
     */
    public long chunkBytes()
    {
        return buffer.getLong(RESPONSE_CHUNK_BYTES_OFFSET, LE);
    }

    /**
     * Bytes of one pool slot.
     *
     * @return bytes.
     */
    public long slotBytes()
    {
        return buffer.getLong(RESPONSE_SLOT_BYTES_OFFSET, LE);
    }

    /**
     * Slots in the pool (REGISTER).
     *
     * @return count.
     */
    public int slotCapacity()
    {
        return buffer.getInt(RESPONSE_SLOT_CAPACITY_OFFSET, LE);
    }

    /**
     * Index in the request's key range of slot {@code i}.
     *
     * @param i slot entry.
     * @return range index.
     */
    public int slotRangeIndex(final int i)
    {
        return buffer.getInt(RESPONSE_HEADER_LENGTH + i * SLOT_ENTRY_LENGTH, LE);
    }

    /**
     * Generation of slot {@code i}, checked against the slot table for fencing.
     *
     * @param i slot entry.
     * @return generation.
     */
    public int slotGeneration(final int i)
    {
        return buffer.getInt(RESPONSE_HEADER_LENGTH + i * SLOT_ENTRY_LENGTH + 4, LE);
    }

    /**
     * File offset in the pool of slot {@code i}.
     *
     * @param i slot entry.
     * @return offset.
     */
    public long slotOffset(final int i)
    {
        return buffer.getLong(RESPONSE_HEADER_LENGTH + i * SLOT_ENTRY_LENGTH + 8, LE);
    }

    private int extraOffset()
    {
        return RESPONSE_HEADER_LENGTH + slotCount() * SLOT_ENTRY_LENGTH;
    }

    /**
     * Bytes of the extra part (message, data, counters).
     *
     * @return bytes.
     */
    public int extraLength()
    {
        return buffer.getInt(RESPONSE_EXTRA_LENGTH_OFFSET, LE);
    }

    /**
     * Reason of an error status.
     *
     * @return the message, empty when OK.
     */
    public String message()
    {
        if (isOk())
        {
            return "";
        }
        final int n = Math.min(extraLength(), length - extraOffset());
        final byte[] bytes = new byte[Math.max(0, n)];
        buffer.getBytes(extraOffset(), bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /**
     * Copies READ_DATA bytes out.
     *
     * @param destination where to copy.
     * @param offset      offset in the destination.
     * @return bytes copied.
     */
    public int copyData(final MutableDirectBuffer destination, final int offset)
    {
        final int n = extraLength();
        destination.putBytes(offset, buffer, extraOffset(), n);
        return n;
    }

    /**
     * Server incarnation, from a REGISTER answered OK.
     *
     * @return incarnation.
     */
    public long registeredIncarnation()
    {
        return buffer.getLong(extraOffset(), LE);
    }

    /**
     * Pool data bytes, from a REGISTER answered OK.
     *
     * @return bytes.
     */
    public long registeredPoolSizeBytes()
    {
        return buffer.getLong(extraOffset() + 8, LE);
    }

    /**
     * Lease, from a REGISTER answered OK.
     *
     * @return ns.
     */
    public long registeredLeaseNs()
    {
        return buffer.getLong(extraOffset() + 16, LE);
    }

    /**
     * Tokens per chunk, from a REGISTER answered OK.
     *
     * @return tokens.
     */
    public int registeredChunkTokens()
    {
        return buffer.getInt(extraOffset() + 24, LE);
    }

    /**
     * Pool file name in the server's directory, from a REGISTER answered OK.
     *
     * @return the name.
     */
    public String registeredPoolFileName()
    {
        final int n = buffer.getInt(extraOffset() + 28, LE);
        final byte[] bytes = new byte[Math.max(0, Math.min(n, 128))];
        buffer.getBytes(extraOffset() + 32, bytes);
        return new String(bytes, StandardCharsets.US_ASCII);
    }

    /**
     * Counter {@code id} of a STATS response.
     *
     * @param id counter id.
     * @return value.
     */
    public long counter(final int id)
    {
        return buffer.getLong(extraOffset() + id * Long.BYTES, LE);
    }

    /** {@inheritDoc} */
    @Override
    public String toString()
    {
        return "ClientResponse{correlationId=" + correlationId() + ", status=" + Status.name(status()) +
            ", transferId=" + Long.toHexString(transferId()) + ", hitChunks=" + hitChunks() + ", slots=" +
            slotCount() + (isOk() ? "" : ", message=" + message()) + '}';
    }
}
