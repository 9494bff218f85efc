package io.kvstash.server.codec;

import io.kvstash.core.StoreCommand;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.DataRequestFlyweight;
import io.kvstash.wire.codec.KeyedRequestFlyweight;
import io.kvstash.wire.codec.RegisterRequestFlyweight;
import io.kvstash.wire.codec.RequestFlyweight;
import io.kvstash.wire.codec.ResponseFlyweight;
import io.kvstash.wire.hash.ChunkHasher;
import io.kvstash.wire.ring.RingDescriptor;
import org.agrona.DirectBuffer;

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
    private final RequestFlyweight simple = new RequestFlyweight();
    private final RegisterRequestFlyweight register = new RegisterRequestFlyweight();
    private final KeyedRequestFlyweight keyed = new KeyedRequestFlyweight();
    private final DataRequestFlyweight data = new DataRequestFlyweight();
    private final KeyedRequestFlyweight peek = new KeyedRequestFlyweight();
    private final DataRequestFlyweight peekData = new DataRequestFlyweight();
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
        if (length < Long.BYTES)
        {
            return false;
        }
        // wrap checks once that the record lies inside the buffer; every field below is read only once the
        // record's length says it holds it, without per-field bounds checks.
        final RequestFlyweight header = simple.wrap(buffer, offset, length);
        c.correlationId = header.correlationId();
        c.type = type;
        if (!RequestType.isValid(type) || RequestType.SWEEP == type || RequestType.REAP == type)
        {
            event.rejectAtDecode(Status.UNKNOWN_TYPE, "unknown request type");
            return true;
        }
        if (!header.hasHeader())
        {
            event.rejectAtDecode(Status.MALFORMED, "record shorter than the request header");
            return true;
        }
        c.instanceId = header.instanceId();
        c.transferId = header.transferId();
        c.salt = header.salt();
        c.flags = header.flags();
        if ((c.flags & ~RequestFlags.CLIENT_MASK) != 0)
        {
            event.rejectAtDecode(Status.INVALID_REQUEST, "unknown flags");
            return true;
        }
        final String misplaced = RequestFlags.misplaced(type, c.flags);
        if (null != misplaced)
        {
            event.rejectAtDecode(Status.INVALID_REQUEST, misplaced);
            return true;
        }
        switch (type)
        {
            case RequestType.REGISTER:
                decodeRegister(buffer, offset, length, c, event);
                return true;
            case RequestType.LOOKUP_ALL_RANKS:
            {
                final KeyedRequestFlyweight r = keyed.wrap(buffer, offset, length);
                if (!r.hasAllRanksHead())
                {
                    event.rejectAtDecode(Status.MALFORMED, "LOOKUP_ALL_RANKS body cut short");
                    return true;
                }
                c.worldSize = r.allRanksWorldSize();
                if (!r.allRanksModelFits(c.model.length))
                {
                    event.rejectAtDecode(Status.MALFORMED, "model name length out of range");
                    return true;
                }
                c.modelLength = r.getAllRanksModel(c.model);
                decodeKeys(r, event);
                return true;
            }
            case RequestType.LOOKUP:
            case RequestType.PREPARE_STORE:
                decodeKeys(keyed.wrap(buffer, offset, length), event);
                return true;
            case RequestType.PREPARE_RETRIEVE:
                if ((c.flags & RequestFlags.FROM_LOOKUP) == 0)
                {
                    decodeKeys(keyed.wrap(buffer, offset, length), event);
                }
                return true;
            case RequestType.WRITE_DATA:
            case RequestType.READ_DATA:
                decodeData(type, data.wrap(buffer, offset, length), c, event);
                return true;
            default:
                return true;
        }
    }

    private void decodeRegister(
        final DirectBuffer buffer, final int offset, final int length, final StoreCommand c, final RequestEvent event)
    {
        final RegisterRequestFlyweight r = register.wrap(buffer, offset, length);
        if (!r.hasBody())
        {
            event.rejectAtDecode(Status.MALFORMED, "REGISTER body cut short");
            return;
        }
        c.worldSize = r.worldSize();
        c.rank = r.rank();
        c.layers = r.layers();
        c.hidden = r.hidden();
        c.dtypeCode = r.dtypeCode();
        c.mla = r.mla();
        if (!r.modelFits(c.model.length))
        {
            event.rejectAtDecode(Status.MALFORMED, "model name length out of range");
            return;
        }
        c.modelLength = r.getModel(c.model);
    }

    private void decodeData(
        final int type, final DataRequestFlyweight r, final StoreCommand c, final RequestEvent event)
    {
        if (!r.hasBody())
        {
            event.rejectAtDecode(Status.MALFORMED, "data header cut short");
            return;
        }
        c.dataChunkIndex = r.slotIndex();
        c.dataLength = r.dataLength();
        c.dataOffset = r.chunkOffset();
        if (c.dataLength < 0 || c.dataLength > maxInlineBytes)
        {
            event.rejectAtDecode(Status.INVALID_REQUEST, "data length out of range");
            return;
        }
        if (RequestType.WRITE_DATA == type)
        {
            if (!r.bytesFit())
            {
                event.rejectAtDecode(Status.MALFORMED, "data cut short");
                return;
            }
            c.data.putBytes(0, r.buffer(), r.bytesOffset(), c.dataLength);
        }
    }

    private void decodeKeys(final KeyedRequestFlyweight r, final RequestEvent event)
    {
        final StoreCommand c = event.command;
        final int keyMode = r.keyMode();
        if (KEY_MODE_HASHES == keyMode)
        {
            if (!r.hasHashesHeader())
            {
                event.rejectAtDecode(Status.MALFORMED, "key range header cut short");
                return;
            }
            final int count = r.hashCount();
            if (count < 0 || count > maxChunks || count > c.maxChunks())
            {
                event.rejectAtDecode(Status.INVALID_REQUEST, "chunk count out of range");
                return;
            }
            if (!r.hashesFit(count))
            {
                event.rejectAtDecode(Status.MALFORMED, "chunk hashes cut short");
                return;
            }
            final long[] hi = c.keyHi;
            final long[] lo = c.keyLo;
            for (int k = 0; k < count; k++)
            {
                hi[k] = r.hashHi(k);
                lo[k] = r.hashLo(k);
            }
            c.chunkCount = count;
        }
        else if (KEY_MODE_TOKENS == keyMode)
        {
            if (!r.hasTokensHeader())
            {
                event.rejectAtDecode(Status.MALFORMED, "token range header cut short");
                return;
            }
            final int tokenCount = r.tokenCount();
            final int from = r.fromChunk();
            int to = r.toChunk();
            if (!r.tokensFit())
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
                r.buffer(), r.tokensOffset(), LE, tokenCount, chunkTokens, from, to, c.keyHi, c.keyLo);
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
     * bound gets the bound of an error response, which is all it will get. A request that is answered to no one
     * ({@link RequestFlags#NO_REPLY}) is bound by 0.
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
        final long error = RingDescriptor.HEADER_LENGTH + ResponseFlyweight.errorLength() + 8;
        if (length < RequestFlyweight.HEADER_LENGTH)
        {
            return error;
        }
        switch (type)
        {
            case RequestType.PREPARE_STORE:
            case RequestType.PREPARE_RETRIEVE:
            {
                final KeyedRequestFlyweight r = peek.wrap(buffer, offset, length);
                if (RequestType.PREPARE_RETRIEVE == type && (r.flags() & RequestFlags.FROM_LOOKUP) != 0)
                {
                    return error + ResponseFlyweight.lengthBound(maxChunks, 0);
                }
                return error + ResponseFlyweight.lengthBound(peekChunks(r), 0);
            }
            case RequestType.READ_DATA:
            {
                final DataRequestFlyweight r = peekData.wrap(buffer, offset, length);
                if (!r.hasBody())
                {
                    return error;
                }
                return error + ResponseFlyweight.lengthBound(1, Math.max(0, Math.min(r.dataLength(), maxInlineBytes)));
            }
            case RequestType.WRITE_DATA:
                return error + ResponseFlyweight.lengthBound(1, 0);
            case RequestType.STATS:
                return error + countersLength;
            case RequestType.REGISTER:
                return error + ResponseFlyweight.REGISTER_MAX_EXTRA_LENGTH;
            case RequestType.LOOKUP:
                // No slot entries; a waiting LOOKUP's tier tickets are shorter than the longest error reason.
                return error;
            case RequestType.COMMIT_RETRIEVE:
            case RequestType.RELEASE:
                // Answered to no one with NO_REPLY, whatever its outcome: it takes no room in the response ring.
                return RequestFlags.isAnswered(type, peek.wrap(buffer, offset, length).flags()) ? error : 0;
            default:
                return error;
        }
    }

    private int peekChunks(final KeyedRequestFlyweight r)
    {
        final int keyMode = r.keyMode();
        if (KEY_MODE_HASHES == keyMode && r.hasHashesHeader())
        {
            return Math.max(0, Math.min(r.hashCount(), maxChunks));
        }
        if (KEY_MODE_TOKENS == keyMode && r.hasTokensHeader())
        {
            final int tokenCount = r.tokenCount();
            final int from = r.fromChunk();
            final int to = r.toChunk();
            final long end = -1 == to ? Math.max(0, tokenCount) / chunkTokens : to;
            return (int)Math.max(0, Math.min(end - from, maxChunks));
        }
        return 0;
    }
}
