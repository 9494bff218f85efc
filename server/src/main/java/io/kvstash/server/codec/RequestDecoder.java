package io.kvstash.server.codec;

import io.kvstash.core.StoreCommand;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.hash.ChunkHasher;
import org.agrona.DirectBuffer;
import org.agrona.UnsafeApi;

import java.nio.ByteOrder;

import static io.kvstash.wire.codec.WireDescriptor.*;

/**
 * Decodes a request record from a client ring into a pipeline event, validating every length before it
 * reads a field. Token ranges are hashed here, on the receiver's thread, so the pipeline only sees chunk
 * hashes. A record that cannot be decoded is answered when its correlation id is readable: MALFORMED for
 * short or inconsistent records, UNKNOWN_TYPE for types a client may not send, INVALID_REQUEST for values
 * out of range. Allocation-free.
 * <p>
 * Owner: the receiver thread.
 */
public final class RequestDecoder
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private final ChunkHasher hasher = new ChunkHasher();
    private final int chunkTokens;
    private final int maxChunks;
    private final int maxInlineBytes;

    /**
     * A decoder for a server configuration.
     *
     * @param chunkTokens    tokens per chunk.
     * @param maxChunks      max chunks per request.
     * @param maxInlineBytes max copy-transport bytes per message.
     */
    public RequestDecoder(final int chunkTokens, final int maxChunks, final int maxInlineBytes)
    {
        this.chunkTokens = chunkTokens;
        this.maxChunks = maxChunks;
        this.maxInlineBytes = maxInlineBytes;
    }

    /**
     * Decodes one record into an event that was reset by the caller.
     *
     * @param type   ring record type (the request type).
     * @param buffer ring buffer.
     * @param offset payload offset.
     * @param length payload length.
     * @param event  event to fill; rejected with a status when the record is bad.
     * @return false when the record is too short to carry a correlation id (it cannot be answered).
     */
    public boolean decode(
        final int type, final DirectBuffer buffer, final int offset, final int length, final RequestEvent event)
    {
        final StoreCommand c = event.command;
        if (length < 8)
        {
            return false;
        }
        if (offset < 0 || offset + (long)length > buffer.capacity())
        {
            throw new IndexOutOfBoundsException("record at " + offset + " of " + length + " bytes outside the buffer");
        }
        // The record lies inside the buffer (checked above), and every field below is read only once the length
        // says the record holds it: the common header and the chunk hashes are read without Agrona's per-field
        // bounds checks, which cost the answer's way about as much as the reads themselves.
        final Object base = buffer.byteArray();
        final long address = buffer.addressOffset() + offset;
        c.correlationId = le(UnsafeApi.getLong(base, address + CORRELATION_ID_OFFSET));
        c.type = type;
        if (!RequestType.isValid(type) || RequestType.SWEEP == type || RequestType.REAP == type)
        {
            event.rejectAtDecode(Status.UNKNOWN_TYPE, "unknown request type");
            return true;
        }
        if (length < REQUEST_HEADER_LENGTH)
        {
            event.rejectAtDecode(Status.MALFORMED, "record shorter than the request header");
            return true;
        }
        c.instanceId = le(UnsafeApi.getLong(base, address + INSTANCE_ID_OFFSET));
        c.transferId = le(UnsafeApi.getLong(base, address + TRANSFER_ID_OFFSET));
        c.salt = le(UnsafeApi.getLong(base, address + SALT_OFFSET));
        c.flags = le(UnsafeApi.getInt(base, address + FLAGS_OFFSET));
        if ((c.flags & ~RequestFlags.CLIENT_MASK) != 0)
        {
            event.rejectAtDecode(Status.INVALID_REQUEST, "unknown flags");
            return true;
        }
        final int keyMode = le(UnsafeApi.getInt(base, address + KEY_MODE_OFFSET));
        int i = offset + REQUEST_HEADER_LENGTH;
        final int end = offset + length;
        switch (type)
        {
            case RequestType.REGISTER:
            {
                if (i + REGISTER_BODY_LENGTH > end)
                {
                    event.rejectAtDecode(Status.MALFORMED, "REGISTER body cut short");
                    return true;
                }
                c.worldSize = buffer.getInt(i, LE);
                c.rank = buffer.getInt(i + 4, LE);
                c.layers = buffer.getInt(i + 8, LE);
                c.hidden = buffer.getInt(i + 12, LE);
                c.dtypeCode = buffer.getInt(i + 16, LE);
                c.mla = 0 != buffer.getInt(i + 20, LE);
                final int modelLength = buffer.getInt(i + 24, LE);
                i += REGISTER_BODY_LENGTH;
                if (modelLength < 0 || modelLength > c.model.length || i + modelLength > end)
                {
                    event.rejectAtDecode(Status.MALFORMED, "model name length out of range");
                    return true;
                }
                buffer.getBytes(i, c.model, 0, modelLength);
                c.modelLength = modelLength;
                return true;
            }
            case RequestType.LOOKUP_ALL_RANKS:
            {
                if (i + 8 > end)
                {
                    event.rejectAtDecode(Status.MALFORMED, "LOOKUP_ALL_RANKS body cut short");
                    return true;
                }
                c.worldSize = buffer.getInt(i, LE);
                final int modelLength = buffer.getInt(i + 4, LE);
                i += 8;
                if (modelLength < 0 || modelLength > c.model.length || i + pad8(modelLength) > end)
                {
                    event.rejectAtDecode(Status.MALFORMED, "model name length out of range");
                    return true;
                }
                buffer.getBytes(i, c.model, 0, modelLength);
                c.modelLength = modelLength;
                i += pad8(modelLength);
                decodeKeys(keyMode, buffer, i, end, event);
                return true;
            }
            case RequestType.LOOKUP:
            case RequestType.PREPARE_STORE:
                decodeKeys(keyMode, buffer, i, end, event);
                return true;
            case RequestType.PREPARE_RETRIEVE:
                if ((c.flags & RequestFlags.FROM_LOOKUP) == 0)
                {
                    decodeKeys(keyMode, buffer, i, end, event);
                }
                return true;
            case RequestType.WRITE_DATA:
            case RequestType.READ_DATA:
            {
                if (i + DATA_HEADER_LENGTH > end)
                {
                    event.rejectAtDecode(Status.MALFORMED, "data header cut short");
                    return true;
                }
                c.dataChunkIndex = buffer.getInt(i, LE);
                c.dataLength = buffer.getInt(i + 4, LE);
                c.dataOffset = buffer.getLong(i + 8, LE);
                i += DATA_HEADER_LENGTH;
                if (c.dataLength < 0 || c.dataLength > maxInlineBytes)
                {
                    event.rejectAtDecode(Status.INVALID_REQUEST, "data length out of range");
                    return true;
                }
                if (RequestType.WRITE_DATA == type)
                {
                    if (i + c.dataLength > end)
                    {
                        event.rejectAtDecode(Status.MALFORMED, "data cut short");
                        return true;
                    }
                    c.data.putBytes(0, buffer, i, c.dataLength);
                }
                return true;
            }
            default:
                return true;
        }
    }

    private void decodeKeys(
        final int keyMode, final DirectBuffer buffer, final int start, final int end, final RequestEvent event)
    {
        final StoreCommand c = event.command;
        int i = start;
        if (KEY_MODE_HASHES == keyMode)
        {
            if (i + HASHES_HEADER_LENGTH > end)
            {
                event.rejectAtDecode(Status.MALFORMED, "key range header cut short");
                return;
            }
            final int count = buffer.getInt(i, LE);
            i += HASHES_HEADER_LENGTH;
            if (count < 0 || count > maxChunks || count > c.maxChunks())
            {
                event.rejectAtDecode(Status.INVALID_REQUEST, "chunk count out of range");
                return;
            }
            if (i + (long)count * 16 > end)
            {
                event.rejectAtDecode(Status.MALFORMED, "chunk hashes cut short");
                return;
            }
            // Inside the record: checked just above (decode checked that the record lies inside the buffer).
            final Object base = buffer.byteArray();
            long address = buffer.addressOffset() + i;
            for (int k = 0; k < count; k++)
            {
                c.keyHi[k] = le(UnsafeApi.getLong(base, address));
                c.keyLo[k] = le(UnsafeApi.getLong(base, address + 8));
                address += 16;
            }
            c.chunkCount = count;
        }
        else if (KEY_MODE_TOKENS == keyMode)
        {
            if (i + TOKENS_HEADER_LENGTH > end)
            {
                event.rejectAtDecode(Status.MALFORMED, "token range header cut short");
                return;
            }
            final int tokenCount = buffer.getInt(i, LE);
            final int from = buffer.getInt(i + 4, LE);
            int to = buffer.getInt(i + 8, LE);
            i += TOKENS_HEADER_LENGTH;
            if (tokenCount < 0 || i + (long)tokenCount * Integer.BYTES > end)
            {
                event.rejectAtDecode(Status.MALFORMED, "token ids cut short");
                return;
            }
            final int fullChunks = tokenCount / chunkTokens;
            if (-1 == to)
            {
                to = fullChunks;
            }
            if (from < 0 || to < from || to > fullChunks || to - from > maxChunks || to - from > c.maxChunks())
            {
                event.rejectAtDecode(Status.INVALID_REQUEST, "token range out of range");
                return;
            }
            final int hashed = hasher.hashTokens(
                buffer, i, LE, tokenCount, chunkTokens, from, to, c.keyHi, c.keyLo);
            if (hashed < 0)
            {
                event.rejectAtDecode(Status.INVALID_REQUEST, "token range out of range");
                return;
            }
            c.chunkCount = hashed;
        }
        else if (KEY_MODE_NONE == keyMode)
        {
            c.chunkCount = 0;
        }
        else
        {
            event.rejectAtDecode(Status.MALFORMED, "unknown key mode");
        }
    }

    /**
     * Upper bound of the response to a request record, read from the record before decoding it (a few
     * fields, each length-checked), for the response ring's admission check. A record too inconsistent to
     * bound gets the bound of an error response, which is all it will get.
     *
     * @param type           record type.
     * @param buffer         ring buffer.
     * @param offset         payload offset.
     * @param length         payload length.
     * @param countersLength bytes of a STATS answer.
     * @return bytes of the response record at most.
     */
    public long peekResponseBound(
        final int type, final DirectBuffer buffer, final int offset, final int length, final int countersLength)
    {
        final int base = 8 + RESPONSE_HEADER_LENGTH + MAX_MESSAGE_LENGTH + 8;
        if (length < REQUEST_HEADER_LENGTH)
        {
            return base;
        }
        switch (type)
        {
            case RequestType.PREPARE_STORE:
            case RequestType.PREPARE_RETRIEVE:
            {
                final int flags = buffer.getInt(offset + FLAGS_OFFSET, LE);
                if (RequestType.PREPARE_RETRIEVE == type && (flags & RequestFlags.FROM_LOOKUP) != 0)
                {
                    return base + (long)SLOT_ENTRY_LENGTH * maxChunks;
                }
                return base + (long)SLOT_ENTRY_LENGTH * peekChunks(buffer, offset, length);
            }
            case RequestType.READ_DATA:
            {
                if (length < REQUEST_HEADER_LENGTH + DATA_HEADER_LENGTH)
                {
                    return base;
                }
                final int dataLength = buffer.getInt(offset + REQUEST_HEADER_LENGTH + 4, LE);
                return base + SLOT_ENTRY_LENGTH + pad8(Math.max(0, Math.min(dataLength, maxInlineBytes)));
            }
            case RequestType.WRITE_DATA:
                return base + SLOT_ENTRY_LENGTH;
            case RequestType.STATS:
                return base + countersLength;
            case RequestType.REGISTER:
                return base + 32 + 128;
            default:
                return base;
        }
    }

    private int peekChunks(final DirectBuffer buffer, final int offset, final int length)
    {
        final int keyMode = buffer.getInt(offset + KEY_MODE_OFFSET, LE);
        final int at = offset + REQUEST_HEADER_LENGTH;
        if (KEY_MODE_HASHES == keyMode && length >= REQUEST_HEADER_LENGTH + HASHES_HEADER_LENGTH)
        {
            return Math.max(0, Math.min(buffer.getInt(at, LE), maxChunks));
        }
        if (KEY_MODE_TOKENS == keyMode && length >= REQUEST_HEADER_LENGTH + TOKENS_HEADER_LENGTH)
        {
            final int tokenCount = buffer.getInt(at, LE);
            final int from = buffer.getInt(at + 4, LE);
            final int to = buffer.getInt(at + 8, LE);
            final long end = -1 == to ? Math.max(0, tokenCount) / chunkTokens : to;
            return (int)Math.max(0, Math.min(end - from, maxChunks));
        }
        return 0;
    }
}
