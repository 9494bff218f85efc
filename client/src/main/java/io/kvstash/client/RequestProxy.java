package io.kvstash.client;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.codec.DataRequestFlyweight;
import io.kvstash.wire.codec.KeyedRequestFlyweight;
import io.kvstash.wire.codec.RegisterRequestFlyweight;
import io.kvstash.wire.codec.RequestFlyweight;
import io.kvstash.wire.layout.Layout;
import io.kvstash.wire.ring.RingProducer;
import org.agrona.DirectBuffer;

import java.nio.charset.StandardCharsets;

import static io.kvstash.wire.codec.WireDescriptor.KEY_MODE_HASHES;
import static io.kvstash.wire.codec.WireDescriptor.KEY_MODE_NONE;
import static io.kvstash.wire.codec.WireDescriptor.KEY_MODE_TOKENS;

/**
 * Encodes requests into this client's request ring: each send claims the record's length, writes it in place
 * with the wire record's flyweight, and commits it, or returns -1 at once when the ring is full. Owns the
 * flyweights and the correlation ids (counted from 1, so a valid id is positive). Rings the server's doorbell, when
 * it has one, after each commit. Never waits; waiting for room is {@link ResponseAdapter#sendOrWait}'s.
 * <p>
 * The sending half of the client's non-blocking form ({@link KvStashClient#requests()}): each send returns a
 * correlation id at once, and the answers come through {@link KvStashClient#poll} or {@link KvStashClient#await}.
 * <p>
 * Single-threaded: owned by one client, used on the client's thread.
 */
public final class RequestProxy
{
    private final RingProducer requests;
    private final Doorbell doorbell;
    private final RequestFlyweight simpleRecord = new RequestFlyweight();
    private final KeyedRequestFlyweight keyedRecord = new KeyedRequestFlyweight();
    private final RegisterRequestFlyweight registerRecord = new RegisterRequestFlyweight();
    private final DataRequestFlyweight dataRecord = new DataRequestFlyweight();
    private long nextCorrelationId = 1;
    private boolean closed;

    /**
     * A proxy over a request ring.
     *
     * @param requests producer side of this client's request ring.
     * @param doorbell the server's doorbell, or null when it has none.
     */
    RequestProxy(final RingProducer requests, final Doorbell doorbell)
    {
        this.requests = requests;
        this.doorbell = doorbell;
    }

    /**
     * Refuses every later send with {@link IllegalStateException}: the ring is about to be unmapped.
     */
    void close()
    {
        closed = true;
    }

    /**
     * Sends a request that carries only the common header.
     *
     * @param type       request type.
     * @param instanceId instance.
     * @param transferId transfer or 0.
     * @param flags      flags.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendSimple(final int type, final long instanceId, final long transferId, final int flags)
    {
        final int length = RequestFlyweight.HEADER_LENGTH;
        final int at = claim(type, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(simpleRecord, at, length, instanceId, transferId, 0, flags, KEY_MODE_NONE);
        commit(length);
        return correlationId;
    }

    /**
     * Sends a keyed request (LOOKUP, PREPARE_STORE, PREPARE_RETRIEVE) with precomputed chunk hashes.
     *
     * @param type       request type.
     * @param instanceId instance.
     * @param keys       key range.
     * @param flags      flags.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendKeyed(final int type, final long instanceId, final ChunkKeys keys, final int flags)
    {
        final int length = KeyedRequestFlyweight.hashesLength(keys.count());
        final int at = claim(type, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(keyedRecord, at, length, instanceId, 0, keys.salt(), flags, KEY_MODE_HASHES);
        keyedRecord.putHashes(keys);
        commit(length);
        return correlationId;
    }

    /**
     * Sends a keyed request with token ids, hashed by the server.
     *
     * @param type       request type.
     * @param instanceId instance.
     * @param tokens     token ids of the prompt from its start.
     * @param tokenCount tokens used.
     * @param fromChunk  first chunk of the range.
     * @param toChunk    end of the range (exclusive), -1 for every full chunk.
     * @param salt       cache salt value, 0 for none.
     * @param flags      flags.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendTokens(
        final int type,
        final long instanceId,
        final int[] tokens,
        final int tokenCount,
        final int fromChunk,
        final int toChunk,
        final long salt,
        final int flags)
    {
        final int length = KeyedRequestFlyweight.tokensLength(tokenCount);
        final int at = claim(type, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(keyedRecord, at, length, instanceId, 0, salt, flags, KEY_MODE_TOKENS);
        keyedRecord.putTokens(tokens, tokenCount, fromChunk, toChunk);
        commit(length);
        return correlationId;
    }

    /**
     * Sends REGISTER.
     *
     * @param instanceId instance.
     * @param layout     layout.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendRegister(final long instanceId, final Layout layout)
    {
        final int length = RegisterRequestFlyweight.length(layout.modelBytes().length);
        final int at = claim(RequestType.REGISTER, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(registerRecord, at, length, instanceId, 0, 0, 0, KEY_MODE_NONE);
        registerRecord.putLayout(layout);
        commit(length);
        return correlationId;
    }

    /**
     * Sends LOOKUP_ALL_RANKS.
     *
     * @param model     model name.
     * @param worldSize world size.
     * @param keys      key range.
     * @param flags     flags (QUIET the only one the server allows on it).
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendLookupAllRanks(final String model, final int worldSize, final ChunkKeys keys, final int flags)
    {
        final byte[] name = model.getBytes(StandardCharsets.UTF_8);
        final int length = KeyedRequestFlyweight.allRanksLength(name.length, keys.count());
        final int at = claim(RequestType.LOOKUP_ALL_RANKS, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(keyedRecord, at, length, 0, 0, keys.salt(), flags, KEY_MODE_HASHES);
        keyedRecord.putAllRanks(worldSize, name).putHashes(keys);
        commit(length);
        return correlationId;
    }

    /**
     * Sends WRITE_DATA (copy transport).
     *
     * @param instanceId   instance.
     * @param transferId   pending store.
     * @param slotIndex    index in the store's slot list.
     * @param offset       byte offset in the chunk.
     * @param source       bytes.
     * @param sourceOffset offset in the source.
     * @param length       bytes, at most {@link KvStashClient#maxInlineBytes()}.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendWriteData(
        final long instanceId,
        final long transferId,
        final int slotIndex,
        final long offset,
        final DirectBuffer source,
        final int sourceOffset,
        final int length)
    {
        final int recordLength = DataRequestFlyweight.writeLength(length);
        final int at = claim(RequestType.WRITE_DATA, recordLength);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(dataRecord, at, recordLength, instanceId, transferId, 0, 0, KEY_MODE_NONE);
        dataRecord.putData(slotIndex, length, offset).putBytes(source, sourceOffset, length);
        commit(recordLength);
        return correlationId;
    }

    /**
     * Sends READ_DATA (copy transport).
     *
     * @param instanceId instance.
     * @param transferId pending retrieve.
     * @param slotIndex  index in the retrieve's slot list.
     * @param offset     byte offset in the chunk.
     * @param length     bytes, at most {@link KvStashClient#maxInlineBytes()}.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendReadData(
        final long instanceId, final long transferId, final int slotIndex, final long offset, final int length)
    {
        final int recordLength = DataRequestFlyweight.READ_LENGTH;
        final int at = claim(RequestType.READ_DATA, recordLength);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(dataRecord, at, recordLength, instanceId, transferId, 0, 0, KEY_MODE_NONE);
        dataRecord.putData(slotIndex, length, offset);
        commit(recordLength);
        return correlationId;
    }

    private int claim(final int type, final int length)
    {
        if (closed)
        {
            throw new IllegalStateException("client closed");
        }
        return requests.tryClaim(type, length);
    }

    private long header(
        final RequestFlyweight record,
        final int at,
        final int length,
        final long instanceId,
        final long transferId,
        final long salt,
        final int flags,
        final int keyMode)
    {
        final long correlationId = nextCorrelationId++;
        record.wrapForEncode(requests.buffer(), at, length);
        record.putHeader(correlationId, instanceId, transferId, salt, flags, keyMode);
        return correlationId;
    }

    private void commit(final int length)
    {
        requests.commit(length);
        if (null != doorbell)
        {
            doorbell.ring();
        }
    }
}
