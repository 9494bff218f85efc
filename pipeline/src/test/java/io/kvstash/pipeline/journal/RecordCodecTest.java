package io.kvstash.pipeline.journal;

import io.kvstash.core.StoreCommand;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The journal's record encoding: every field of every request type survives a round trip, every cut of a
 * record is refused rather than misread, varints cover the whole 64-bit range, and a plain LOOKUP stays small.
 */
class RecordCodecTest
{
    private static final int MAX_CHUNKS = 64;
    private static final int MAX_INLINE = 4096;
    private static final int[] TYPES = {
        RequestType.REGISTER, RequestType.UNREGISTER, RequestType.LOOKUP, RequestType.LOOKUP_ALL_RANKS,
        RequestType.RELEASE, RequestType.PREPARE_STORE, RequestType.COMMIT_STORE, RequestType.ABORT_STORE,
        RequestType.PREPARE_RETRIEVE, RequestType.COMMIT_RETRIEVE, RequestType.WRITE_DATA, RequestType.READ_DATA,
        RequestType.STATS, RequestType.PING, 99, -7 };

    private final UnsafeBuffer buffer = new UnsafeBuffer(new byte[RecordCodec.maxBodyLength(MAX_CHUNKS, MAX_INLINE)]);
    private final UnsafeBuffer again = new UnsafeBuffer(new byte[RecordCodec.maxBodyLength(MAX_CHUNKS, MAX_INLINE)]);
    private final RecordCodec.Cursor cursor = new RecordCodec.Cursor();

    @Test
    void everyRequestTypeRoundTripsEveryField()
    {
        final SplittableRandom random = new SplittableRandom(20261202);
        for (int n = 0; n < 5_000; n++)
        {
            final StoreCommand original = randomRequest(random, TYPES[n % TYPES.length]);
            final int clientIndex = random.nextInt(3) == 0 ? 0 : random.nextInt(1, 1 << 20);
            final int decodeStatus = random.nextInt(4) == 0 ? Status.MALFORMED : Status.OK;
            final int end = RecordCodec.encodeRequest(original, clientIndex, decodeStatus, buffer, 3);

            final StoreCommand decoded = new StoreCommand(MAX_CHUNKS, MAX_INLINE).reset();
            assertEquals(end, RecordCodec.decodeRequest(buffer, 3, end, decoded, cursor), "request " + n);
            assertEquals(original.type, decoded.type);
            assertEquals(original.flags, decoded.flags);
            assertEquals(original.correlationId, decoded.correlationId);
            assertEquals(original.instanceId, decoded.instanceId);
            assertEquals(original.transferId, decoded.transferId);
            assertEquals(original.salt, decoded.salt);
            assertEquals(original.timestampNs, decoded.timestampNs);
            assertEquals(original.chunkCount, decoded.chunkCount);
            assertEquals(original.session, decoded.session);
            assertEquals(decodeStatus, decoded.status);
            for (int k = 0; k < Math.max(0, Math.min(original.chunkCount, MAX_CHUNKS)); k++)
            {
                assertEquals(original.keyHi[k], decoded.keyHi[k]);
                assertEquals(original.keyLo[k], decoded.keyLo[k]);
            }
            if (RequestType.REGISTER == original.type || RequestType.LOOKUP_ALL_RANKS == original.type)
            {
                assertEquals(original.modelLength, decoded.modelLength);
                assertArrayEquals(original.model, decoded.model);
                assertEquals(original.worldSize, decoded.worldSize);
                assertEquals(original.rank, decoded.rank);
                assertEquals(original.layers, decoded.layers);
                assertEquals(original.hidden, decoded.hidden);
                assertEquals(original.dtypeCode, decoded.dtypeCode);
                assertEquals(original.mla, decoded.mla);
            }
            if (RequestType.WRITE_DATA == original.type || RequestType.READ_DATA == original.type)
            {
                assertEquals(original.dataChunkIndex, decoded.dataChunkIndex);
                assertEquals(original.dataLength, decoded.dataLength);
                assertEquals(original.dataOffset, decoded.dataOffset);
            }
            // the decoded request encodes to the same bytes (data included)
            final int againEnd = RecordCodec.encodeRequest(decoded, clientIndex, decodeStatus, again, 3);
            assertEquals(end, againEnd);
            for (int i = 3; i < end; i++)
            {
                assertEquals(buffer.getByte(i), again.getByte(i), "request " + n + " byte " + i);
            }
        }
    }

    @Test
    void everyCutOfARequestIsRefused()
    {
        final SplittableRandom random = new SplittableRandom(7);
        for (final int type : TYPES)
        {
            final StoreCommand original = randomRequest(random, type);
            final int end = RecordCodec.encodeRequest(original, 5, Status.OK, buffer, 0);
            final StoreCommand decoded = new StoreCommand(MAX_CHUNKS, MAX_INLINE);
            for (int cut = 0; cut < end; cut++)
            {
                decoded.reset();
                assertEquals(-1, RecordCodec.decodeRequest(buffer, 0, cut, decoded, cursor),
                    RequestType.name(type) + " cut at " + cut + " of " + end);
            }
        }
    }

    @Test
    void outcomeEncodingIsCanonical()
    {
        final SplittableRandom random = new SplittableRandom(11);
        for (int n = 0; n < 1_000; n++)
        {
            final StoreCommand c = randomRequest(random, TYPES[n % TYPES.length]);
            c.status = random.nextInt(3) == 0 ? Status.NO_SPACE : Status.OK;
            c.outTransferId = random.nextLong();
            c.hitChunks = random.nextInt(MAX_CHUNKS);
            c.slotCount = random.nextInt(MAX_CHUNKS);
            for (int k = 0; k < c.slotCount; k++)
            {
                c.slotRangeIndex[k] = k;
                c.slotGeneration[k] = random.nextInt();
                c.slotOffset[k] = random.nextLong(1L << 40);
            }
            // the same outcome encoded over different leftovers (zeros, then random bytes) gives the same bytes:
            // nothing of what the buffer held before leaks into a record
            buffer.setMemory(0, buffer.capacity(), (byte)0);
            final int end = RecordCodec.encodeOutcome(c, buffer, 0);
            for (int i = 0; i < again.capacity(); i++)
            {
                again.putByte(i, (byte)random.nextInt(256));
            }
            assertEquals(end, RecordCodec.encodeOutcome(c, again, 0));
            for (int i = 0; i < end; i++)
            {
                assertEquals(buffer.getByte(i), again.getByte(i));
            }
            // a different generation is a different outcome
            if (c.slotCount > 0)
            {
                c.slotGeneration[0]++;
                final int changedEnd = RecordCodec.encodeOutcome(c, again, 0);
                boolean differs = changedEnd != end;
                for (int i = 0; i < Math.min(end, changedEnd) && !differs; i++)
                {
                    differs = buffer.getByte(i) != again.getByte(i);
                }
                assertTrue(differs, "outcome " + n);
            }
        }
    }

    @Test
    void varintsCoverTheWholeRange()
    {
        final long[] values = { 0, 1, -1, 63, 64, -64, -65, 127, 128, Integer.MAX_VALUE, Integer.MIN_VALUE,
            Long.MAX_VALUE, Long.MIN_VALUE, 1L << 62, -(1L << 62), (1L << 55) - 1, 1L << 55, -(1L << 55),
            -(1L << 55) - 1 };
        int end = 0;
        for (final long value : values)
        {
            end = RecordCodec.putVarLong(buffer, end, value);
        }
        cursor.reset(buffer, 0, end);
        for (final long value : values)
        {
            assertEquals(value, cursor.next());
        }
        assertFalse(cursor.isMalformed());
        assertEquals(0, cursor.next(), "past the limit reads zero");
        assertTrue(cursor.isMalformed(), "and marks the record malformed");
        // every length from 1 to 10 bytes, both signs, against a byte-at-a-time reference encoding
        final SplittableRandom random = new SplittableRandom(3);
        for (int n = 0; n < 100_000; n++)
        {
            final long value = random.nextLong() >> random.nextInt(64);
            final int fast = RecordCodec.putVarLong(buffer, 0, value);
            long zigzag = (value << 1) ^ (value >> 63);
            int i = 0;
            while ((zigzag & ~0x7FL) != 0)
            {
                again.putByte(i++, (byte)((zigzag & 0x7F) | 0x80));
                zigzag >>>= 7;
            }
            again.putByte(i++, (byte)zigzag);
            assertEquals(i, fast, "length of " + value);
            for (int k = 0; k < i; k++)
            {
                assertEquals(again.getByte(k), buffer.getByte(k), "byte " + k + " of " + value);
            }
            cursor.reset(buffer, 0, fast);
            assertEquals(value, cursor.next());
        }
        // eleven continuation bytes are not a varint
        for (int i = 0; i < 11; i++)
        {
            buffer.putByte(i, (byte)0x80);
        }
        cursor.reset(buffer, 0, 11);
        cursor.next();
        assertTrue(cursor.isMalformed());
        // a value too big for an int field
        end = RecordCodec.putVarLong(buffer, 0, 1L << 40);
        cursor.reset(buffer, 0, end);
        cursor.nextInt();
        assertTrue(cursor.isMalformed());
    }

    @Test
    void aOneChunkLookupIsSmall()
    {
        final StoreCommand c = new StoreCommand(MAX_CHUNKS, MAX_INLINE).reset();
        c.type = RequestType.LOOKUP;
        c.correlationId = 123_456;
        c.instanceId = 1;
        c.session = 3;
        c.timestampNs = 86_400L * 1_000_000_000L; // a day of uptime on the monotonic clock
        c.chunkCount = 1;
        c.keyHi[0] = 0x8a5c_21f3_9b4e_7d10L;
        c.keyLo[0] = 0x1f2e_3d4c_5b6a_7988L;
        c.status = Status.OK;
        c.hitChunks = 1;
        final int request = RecordCodec.encodeRequest(c, 1, Status.OK, buffer, 0);
        final int body = RecordCodec.encodeOutcome(c, buffer, request);
        // 16 bytes of key, about 20 of everything else: a 56-byte record with its header and alignment
        assertTrue(body <= 40, "body of " + body + " bytes");
    }

    private static StoreCommand randomRequest(final SplittableRandom random, final int type)
    {
        final StoreCommand c = new StoreCommand(MAX_CHUNKS, MAX_INLINE).reset();
        c.type = type;
        c.flags = random.nextBoolean() ? 0 : random.nextInt(RequestFlags.CLIENT_MASK + 1);
        c.correlationId = random.nextBoolean() ? random.nextLong(1, 1_000_000) : random.nextLong();
        c.instanceId = random.nextInt(4) == 0 ? 0 : random.nextLong();
        c.transferId = random.nextInt(3) == 0 ? 0 : random.nextLong();
        c.salt = random.nextBoolean() ? 0 : random.nextLong();
        c.timestampNs = random.nextLong(1L << 50);
        c.chunkCount = random.nextInt(8) == 0 ? -random.nextInt(1, 5) : random.nextInt(MAX_CHUNKS + 1);
        c.session = random.nextInt(1 << 16);
        for (int k = 0; k < MAX_CHUNKS; k++)
        {
            c.keyHi[k] = random.nextLong();
            c.keyLo[k] = random.nextLong();
        }
        c.modelLength = random.nextInt(c.model.length + 1);
        for (int i = 0; i < c.modelLength; i++)
        {
            c.model[i] = (byte)random.nextInt(256);
        }
        c.worldSize = random.nextInt(1, 9);
        c.rank = random.nextInt(c.worldSize);
        c.layers = random.nextInt(1, 128);
        c.hidden = random.nextInt(1, 1 << 16);
        c.dtypeCode = random.nextInt(-1, 12);
        c.mla = random.nextBoolean();
        c.dataChunkIndex = random.nextInt(-2, MAX_CHUNKS);
        c.dataLength = random.nextInt(MAX_INLINE + 1);
        c.dataOffset = random.nextLong(1L << 36);
        for (int i = 0; i < c.dataLength; i++)
        {
            c.data.putByte(i, (byte)random.nextInt(256));
        }
        return c;
    }
}
