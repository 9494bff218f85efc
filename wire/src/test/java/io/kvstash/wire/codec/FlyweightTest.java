package io.kvstash.wire.codec;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import static io.kvstash.wire.codec.WireDescriptor.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Each record encoded by its flyweight lands at the offsets the protocol documents (read back with plain
 * little-endian reads) and decodes to what was written; the length checks refuse records cut short.
 */
class FlyweightTest
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final int AT = 24;

    private final UnsafeBuffer buffer = new UnsafeBuffer(new byte[8192]);

    @Test
    void shouldPutTheHeaderWhereTheProtocolSays()
    {
        final RequestFlyweight r = new RequestFlyweight();
        r.wrapForEncode(buffer, AT, RequestFlyweight.HEADER_LENGTH).putHeader(7, 8, 9, 10, RequestFlags.PIN, KEY_MODE_HASHES);
        assertEquals(7, buffer.getLong(AT + CORRELATION_ID_OFFSET, LE));
        assertEquals(8, buffer.getLong(AT + INSTANCE_ID_OFFSET, LE));
        assertEquals(9, buffer.getLong(AT + TRANSFER_ID_OFFSET, LE));
        assertEquals(10, buffer.getLong(AT + SALT_OFFSET, LE));
        assertEquals(RequestFlags.PIN, buffer.getInt(AT + FLAGS_OFFSET, LE));
        assertEquals(KEY_MODE_HASHES, buffer.getInt(AT + KEY_MODE_OFFSET, LE));
        r.wrap(buffer, AT, RequestFlyweight.HEADER_LENGTH);
        assertTrue(r.hasHeader());
        assertEquals(7, r.correlationId());
        assertEquals(10, r.salt());
        assertFalse(new RequestFlyweight().wrap(buffer, AT, RequestFlyweight.HEADER_LENGTH - 1).hasHeader());
    }

    @Test
    void shouldRoundTripRegister()
    {
        final Layout layout = Layout.of("llama-3-8b", 8, 3, 32, 1024, Dtype.BFLOAT16, false);
        final int length = RegisterRequestFlyweight.length(layout.modelBytes().length);
        final RegisterRequestFlyweight w = new RegisterRequestFlyweight();
        w.wrapForEncode(buffer, AT, length).putHeader(1, 2, 0, 0, 0, KEY_MODE_NONE);
        w.putLayout(layout);
        assertEquals(8, buffer.getInt(AT + REQUEST_HEADER_LENGTH, LE));
        assertEquals(layout.modelBytes().length, buffer.getInt(AT + REQUEST_HEADER_LENGTH + 24, LE));

        final RegisterRequestFlyweight r = new RegisterRequestFlyweight().wrap(buffer, AT, length);
        assertTrue(r.hasBody());
        assertEquals(8, r.worldSize());
        assertEquals(3, r.rank());
        assertEquals(32, r.layers());
        assertEquals(1024, r.hidden());
        assertEquals(layout.dtypeCode(), r.dtypeCode());
        assertFalse(r.mla());
        assertTrue(r.modelFits(Layout.MAX_MODEL_LENGTH));
        final byte[] model = new byte[Layout.MAX_MODEL_LENGTH];
        assertEquals(10, r.getModel(model));
        assertEquals("llama-3-8b", new String(model, 0, 10, StandardCharsets.UTF_8));
        assertFalse(new RegisterRequestFlyweight().wrap(buffer, AT, length - 1).modelFits(Layout.MAX_MODEL_LENGTH));
        assertFalse(r.modelFits(9));
    }

    @Test
    void shouldRoundTripHashesAndAllRanks()
    {
        final ChunkKeys keys = ChunkKeys.ofIds(11, 12, 13).withSalt(99);
        final KeyedRequestFlyweight w = new KeyedRequestFlyweight();
        final byte[] model = "m".getBytes(StandardCharsets.UTF_8);
        final int length = KeyedRequestFlyweight.allRanksLength(model.length, keys.count());
        w.wrapForEncode(buffer, AT, length).putHeader(5, 0, 0, keys.salt(), 0, KEY_MODE_HASHES);
        w.putAllRanks(4, model).putHashes(keys);

        final KeyedRequestFlyweight r = new KeyedRequestFlyweight().wrap(buffer, AT, length);
        assertTrue(r.hasAllRanksHead());
        assertEquals(4, r.allRanksWorldSize());
        assertTrue(r.allRanksModelFits(255));
        assertEquals(1, r.getAllRanksModel(new byte[255]));
        assertTrue(r.hasHashesHeader());
        assertEquals(3, r.hashCount());
        assertTrue(r.hashesFit(3));
        assertFalse(r.hashesFit(4));
        for (int k = 0; k < 3; k++)
        {
            assertEquals(keys.hi(k), r.hashHi(k));
            assertEquals(keys.lo(k), r.hashLo(k));
        }
        // Plain keyed records start their range right after the header.
        final int plain = KeyedRequestFlyweight.hashesLength(keys.count());
        w.wrapForEncode(buffer, AT, plain).putHeader(6, 1, 0, 0, 0, KEY_MODE_HASHES);
        w.putHashes(keys);
        assertEquals(3, buffer.getInt(AT + REQUEST_HEADER_LENGTH, LE));
        assertEquals(keys.hi(0), buffer.getLong(AT + REQUEST_HEADER_LENGTH + HASHES_HEADER_LENGTH, LE));
    }

    @Test
    void shouldRoundTripTokensAndData()
    {
        final int[] tokens = { 5, 6, 7, 8, 9 };
        final KeyedRequestFlyweight w = new KeyedRequestFlyweight();
        final int length = KeyedRequestFlyweight.tokensLength(tokens.length);
        w.wrapForEncode(buffer, AT, length).putHeader(1, 1, 0, 0, 0, KEY_MODE_TOKENS);
        w.putTokens(tokens, tokens.length, 0, -1);
        final KeyedRequestFlyweight r = new KeyedRequestFlyweight().wrap(buffer, AT, length);
        assertTrue(r.hasTokensHeader());
        assertEquals(5, r.tokenCount());
        assertEquals(-1, r.toChunk());
        assertTrue(r.tokensFit());
        assertEquals(9, buffer.getInt(r.tokensOffset() + 16, LE));
        assertFalse(new KeyedRequestFlyweight().wrap(buffer, AT, length - 4).tokensFit());

        final UnsafeBuffer bytes = new UnsafeBuffer(new byte[] { 1, 2, 3 });
        final DataRequestFlyweight d = new DataRequestFlyweight();
        final int dataLength = DataRequestFlyweight.writeLength(3);
        d.wrapForEncode(buffer, AT, dataLength).putHeader(2, 1, 77, 0, 0, KEY_MODE_NONE);
        d.putData(4, 3, 4096).putBytes(bytes, 0, 3);
        final DataRequestFlyweight e = new DataRequestFlyweight().wrap(buffer, AT, dataLength);
        assertTrue(e.hasBody());
        assertTrue(e.bytesFit());
        assertEquals(4, e.slotIndex());
        assertEquals(4096, e.chunkOffset());
        assertEquals(3, buffer.getByte(e.bytesOffset() + 2));
        assertFalse(new DataRequestFlyweight().wrap(buffer, AT, dataLength - 1).bytesFit());
    }

    @Test
    void shouldRoundTripResponses()
    {
        final int length = ResponseFlyweight.length(2, 5);
        assertEquals(RESPONSE_HEADER_LENGTH + 2 * SLOT_ENTRY_LENGTH + 8, length);
        final ResponseFlyweight w = new ResponseFlyweight().wrap(buffer, AT, length);
        w.putHeader(3, 0, 4, 5, 6, 2, 7, 8, 9, 10, 5);
        w.putSlot(0, 0, 11, 4096).putSlot(1, 1, 12, 8192);
        w.mutableBuffer().putBytes(w.extraOffset(), new byte[] { 1, 2, 3, 4, 5 });
        assertEquals(12, buffer.getInt(AT + RESPONSE_HEADER_LENGTH + SLOT_ENTRY_LENGTH + 4, LE));

        final ResponseFlyweight r = new ResponseFlyweight().wrap(buffer, AT, length);
        assertTrue(r.hasHeader());
        assertTrue(r.slotsFit());
        assertEquals(3, r.correlationId());
        assertEquals(4, r.requestType());
        assertEquals(2, r.slotCount());
        assertEquals(10, r.slotCapacity());
        assertEquals(8192, r.slotOffset(1));
        final byte[] extra = new byte[r.extraLength()];
        buffer.getBytes(r.extraOffset(), extra);
        assertArrayEquals(new byte[] { 1, 2, 3, 4, 5 }, extra);
        assertFalse(new ResponseFlyweight().wrap(buffer, AT, RESPONSE_HEADER_LENGTH + SLOT_ENTRY_LENGTH).slotsFit());
    }

    @Test
    void shouldRefuseARecordOutsideItsBuffer()
    {
        assertThrows(IndexOutOfBoundsException.class, () -> new RequestFlyweight().wrap(buffer, 8190, 40));
        assertThrows(IndexOutOfBoundsException.class, () -> new ResponseFlyweight().wrap(buffer, -1, 64));
    }
}
