package io.kvstash.client;

import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.ResponseFlyweight;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import static io.kvstash.wire.codec.WireDescriptor.RESPONSE_HEADER_LENGTH;

/**
 * A decoded response: a flyweight over a private copy of the response record, so the ring space is
 * released at once. Valid until the client reads its next response. Allocation-free except
 * {@link #message()}.
 */
public final class ClientResponse
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private final UnsafeBuffer buffer;
    private final ResponseFlyweight record = new ResponseFlyweight();
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
        record.wrap(buffer, 0, length);
        if (!record.slotsFit())
        {
            throw new KvStashException(
                KvStashException.Reason.BAD_FILES, "response of " + length + " bytes with " + record.slotCount() + " slots");
        }
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
        return record.correlationId();
    }

    /**
     * Status code ({@link Status}).
     *
     * @return status.
     */
    public int status()
    {
        return record.status();
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
        return record.requestType();
    }

    /**
     * Transfer issued, 0 for none.
     *
     * @return id.
     */
    public long transferId()
    {
        return record.transferId();
    }

    /**
     * Hit chunks of a lookup.
     *
     * @return count.
     */
    public int hitChunks()
    {
        return record.hitChunks();
    }

    /**
     * Slots in the response.
     *
     * @return count.
     */
    public int slotCount()
    {
        return record.slotCount();
    }

    /**
     * Chunks removed (CLEAR) or transfers reclaimed.
     *
     * @return count.
     */
    public long count()
    {
        return record.count();
    }

    /**
     * Bytes of one chunk of the instance's layout.
     *
     * @return bytes.
     */
    public long chunkBytes()
    {
        return record.chunkBytes();
    }

    /**
     * Bytes of one pool slot.
     *
     * @return bytes.
     */
    public long slotBytes()
    {
        return record.slotBytes();
    }

    /**
     * Slots in the pool (REGISTER).
     *
     * @return count.
     */
    public int slotCapacity()
    {
        return record.slotCapacity();
    }

    /**
     * Index in the request's key range of slot {@code i}.
     *
     * @param i slot entry.
     * @return range index.
     */
    public int slotRangeIndex(final int i)
    {
        return record.slotRangeIndex(slot(i));
    }

    /**
     * Generation of slot {@code i}, checked against the slot table for fencing.
     *
     * @param i slot entry.
     * @return generation.
     */
    public int slotGeneration(final int i)
    {
        return record.slotGeneration(slot(i));
    }

    /**
     * File offset in the pool of slot {@code i}.
     *
     * @param i slot entry.
     * @return offset.
     */
    public long slotOffset(final int i)
    {
        return record.slotOffset(slot(i));
    }

    private int slot(final int i)
    {
        if (i < 0 || i >= record.slotCount())
        {
            throw new IndexOutOfBoundsException("slot " + i + " of " + record.slotCount());
        }
        return i;
    }

    private int extraOffset()
    {
        return record.extraOffset();
    }

    /**
     * Bytes of the extra part (message, data, counters).
     *
     * @return bytes.
     */
    public int extraLength()
    {
        return record.extraLength();
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
        return buffer.getLong(extraOffset() + ResponseFlyweight.REGISTER_POOL_BYTES_OFFSET, LE);
    }

    /**
     * Lease, from a REGISTER answered OK.
     *
     * @return ns.
     */
    public long registeredLeaseNs()
    {
        return buffer.getLong(extraOffset() + ResponseFlyweight.REGISTER_LEASE_NS_OFFSET, LE);
    }

    /**
     * Tokens per chunk, from a REGISTER answered OK.
     *
     * @return tokens.
     */
    public int registeredChunkTokens()
    {
        return buffer.getInt(extraOffset() + ResponseFlyweight.REGISTER_CHUNK_TOKENS_OFFSET, LE);
    }

    /**
     * Pool file name in the server's directory, from a REGISTER answered OK.
     *
     * @return the name.
     */
    public String registeredPoolFileName()
    {
        final int n = buffer.getInt(extraOffset() + ResponseFlyweight.REGISTER_NAME_LENGTH_OFFSET, LE);
        final byte[] bytes = new byte[Math.max(0, Math.min(n, ResponseFlyweight.REGISTER_MAX_NAME_LENGTH))];
        buffer.getBytes(extraOffset() + ResponseFlyweight.REGISTER_NAME_OFFSET, bytes);
        return new String(bytes, StandardCharsets.US_ASCII);
    }

    /**
     * Whether this is a LOOKUP answered OK with the second tier's tickets (it carried
     * {@link io.kvstash.wire.RequestFlags#L2_WAIT} or {@link io.kvstash.wire.RequestFlags#L2_POLL} to a server that
     * runs a tier).
     *
     * @return true when {@link #tierTicket()} and {@link #tierCompletedTicket()} are the server's.
     */
    public boolean hasTierTickets()
    {
        return isOk() && RequestType.LOOKUP == requestType() &&
            extraLength() >= ResponseFlyweight.LOOKUP_TIER_EXTRA_LENGTH &&
            length - extraOffset() >= ResponseFlyweight.LOOKUP_TIER_EXTRA_LENGTH;
    }

    /**
     * The ticket of the read-through a waiting LOOKUP started.
     *
     * @return ticket, 0 when it started none (or the answer has no tickets).
     */
    public long tierTicket()
    {
        return hasTierTickets() ? buffer.getLong(extraOffset() + ResponseFlyweight.LOOKUP_TIER_TICKET_OFFSET, LE) : 0;
    }

    /**
     * The highest ticket whose read-through was over when a waiting LOOKUP was answered.
     *
     * @return ticket, 0 when none (or the answer has no tickets).
     */
    public long tierCompletedTicket()
    {
        return hasTierTickets() ? buffer.getLong(extraOffset() + ResponseFlyweight.LOOKUP_TIER_COMPLETED_OFFSET, LE) : 0;
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
