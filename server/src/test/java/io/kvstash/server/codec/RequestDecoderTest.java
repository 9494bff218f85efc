package io.kvstash.server.codec;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.ResponseFlyweight;
import io.kvstash.wire.codec.WireDescriptor;
import io.kvstash.wire.ring.RingDescriptor;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteOrder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The decoder reads the common header and the chunk hashes without per-field bounds checks, once it has checked
 * that the record lies in the buffer and that its length holds them: every field must land where the wire says,
 * and no read may go past the record or the buffer.
 */
class RequestDecoderTest
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final int MAX_CHUNKS = 8;

    private final RequestDecoder decoder = new RequestDecoder(16, MAX_CHUNKS, 4096);
    private final RequestEvent event =
        new RequestEvent(new StoreContext().maxChunksPerRequest(MAX_CHUNKS).maxInlineBytes(4096));
    private final UnsafeBuffer buffer = new UnsafeBuffer(BufferUtil.allocateDirectAligned(1024, 64));

    @Test
    void shouldReadEveryHeaderFieldAndHashOfAPrepareStoreAtAnyOffset()
    {
        for (int offset = 0; offset <= 64; offset += 8)
        {
            final int length = writePrepare(offset, 3, 3);
            final StoreCommand c = event.reset();
            assertTrue(decoder.decode(RequestType.PREPARE_STORE, buffer, offset, length, event));

            assertEquals(0, event.decodeStatus, c.message);
            assertEquals(RequestType.PREPARE_STORE, c.type);
            assertEquals(0x1111_2222_3333_4444L + offset, c.correlationId);
            assertEquals(7, c.instanceId);
            assertEquals(0x0A0B_0C0D_0E0F_1011L, c.transferId);
            assertEquals(-5, c.salt);
            assertEquals(RequestFlags.CLIENT_MASK & 1, c.flags);
            assertEquals(3, c.chunkCount);
            for (int k = 0; k < 3; k++)
            {
                assertEquals(hi(k), c.keyHi[k]);
                assertEquals(lo(k), c.keyLo[k]);
            }
        }
    }

    @Test
    void shouldRejectHashesCutShortWithoutReadingPastTheRecord()
    {
        // The record says three hashes and holds two; the bytes after it hold a third that must not be read.
        final int length = writePrepare(0, 3, 3) - 16;
        final StoreCommand c = event.reset();
        assertTrue(decoder.decode(RequestType.PREPARE_STORE, buffer, 0, length, event));

        assertEquals(Status.MALFORMED, event.decodeStatus);
        assertEquals(Status.MALFORMED, c.status);
        assertEquals(0, c.chunkCount);
        assertEquals(0, c.keyHi[2]);
    }

    @Test
    void shouldRejectAHeaderCutShort()
    {
        final int length = WireDescriptor.REQUEST_HEADER_LENGTH - 8;
        writePrepare(0, 0, 0);
        final StoreCommand c = event.reset();
        assertTrue(decoder.decode(RequestType.PREPARE_STORE, buffer, 0, length, event));

        assertEquals(Status.MALFORMED, event.decodeStatus);
        assertEquals(0x1111_2222_3333_4444L, c.correlationId);
        assertEquals(0, c.instanceId);
    }

    @Test
    void shouldRefuseARecordThatRunsPastTheBuffer()
    {
        final int offset = buffer.capacity() - 64;
        writePrepare(offset, 1, 1);
        event.reset();

        assertThrows(IndexOutOfBoundsException.class,
            () -> decoder.decode(RequestType.PREPARE_STORE, buffer, offset, 72, event));
        assertThrows(IndexOutOfBoundsException.class,
            () -> decoder.decode(RequestType.PREPARE_STORE, buffer, -8, 64, event));
    }

    @Test
    void shouldTakeTheTierFlagsOnALookupAndRefuseThemOnEveryOtherTypeOrTogether()
    {
        for (final int flag : new int[]{ RequestFlags.L2_WAIT, RequestFlags.L2_POLL })
        {
            final int length = writePrepare(0, 2, 2);
            buffer.putInt(WireDescriptor.FLAGS_OFFSET, flag | RequestFlags.PIN, LE);
            StoreCommand c = event.reset();
            assertTrue(decoder.decode(RequestType.LOOKUP, buffer, 0, length, event));
            assertEquals(0, event.decodeStatus, c.message);
            assertEquals(flag | RequestFlags.PIN, c.flags);
            assertEquals(2, c.chunkCount);

            for (int type = 0; type < RequestType.COUNT; type++)
            {
                if (RequestType.LOOKUP == type || RequestType.SWEEP == type || RequestType.REAP == type)
                {
                    continue;
                }
                c = event.reset();
                assertTrue(decoder.decode(type, buffer, 0, length, event));
                assertEquals(Status.INVALID_REQUEST, event.decodeStatus, RequestType.name(type));
                assertEquals(Status.INVALID_REQUEST, c.status, RequestType.name(type));
            }
        }
        final int length = writePrepare(0, 2, 2);
        buffer.putInt(WireDescriptor.FLAGS_OFFSET, RequestFlags.L2_WAIT | RequestFlags.L2_POLL, LE);
        final StoreCommand c = event.reset();
        assertTrue(decoder.decode(RequestType.LOOKUP, buffer, 0, length, event));
        assertEquals(Status.INVALID_REQUEST, event.decodeStatus);
        assertEquals(Status.INVALID_REQUEST, c.status);
    }

    @Test
    void shouldTakeQuietOnACommitRetrieveOrALookupAndRefuseItOnEveryOtherType()
    {
        final int length = writePrepare(0, 2, 2);
        buffer.putInt(WireDescriptor.FLAGS_OFFSET, RequestFlags.QUIET, LE);
        for (final int type : new int[]{ RequestType.COMMIT_RETRIEVE, RequestType.LOOKUP })
        {
            final StoreCommand c = event.reset();
            assertTrue(decoder.decode(type, buffer, 0, length, event));
            assertEquals(0, event.decodeStatus, c.message);
            assertEquals(RequestFlags.QUIET, c.flags);
        }
        for (int type = 0; type < RequestType.COUNT; type++)
        {
            if (RequestType.COMMIT_RETRIEVE == type || RequestType.LOOKUP == type ||
                RequestType.LOOKUP_ALL_RANKS == type || RequestType.SWEEP == type || RequestType.REAP == type)
            {
                continue;
            }
            final StoreCommand c = event.reset();
            assertTrue(decoder.decode(type, buffer, 0, length, event));
            assertEquals(Status.INVALID_REQUEST, event.decodeStatus, RequestType.name(type));
            assertEquals("QUIET is a COMMIT_RETRIEVE, LOOKUP and LOOKUP_ALL_RANKS flag", c.message,
                RequestType.name(type));
        }
    }

    @Test
    void shouldTakePrefixOnAPrepareRetrieveByKeysAndRefuseItOnEveryOtherTypeOrWithFromLookup()
    {
        final int length = writePrepare(0, 2, 2);
        buffer.putInt(WireDescriptor.FLAGS_OFFSET, RequestFlags.PREFIX, LE);
        StoreCommand c = event.reset();
        assertTrue(decoder.decode(RequestType.PREPARE_RETRIEVE, buffer, 0, length, event));
        assertEquals(0, event.decodeStatus, c.message);
        assertEquals(RequestFlags.PREFIX, c.flags);
        assertEquals(2, c.chunkCount, "the keys are decoded");
        for (int type = 0; type < RequestType.COUNT; type++)
        {
            if (RequestType.PREPARE_RETRIEVE == type || RequestType.SWEEP == type || RequestType.REAP == type)
            {
                continue;
            }
            c = event.reset();
            assertTrue(decoder.decode(type, buffer, 0, length, event));
            assertEquals(Status.INVALID_REQUEST, event.decodeStatus, RequestType.name(type));
            assertEquals("PREFIX is a PREPARE_RETRIEVE flag", c.message, RequestType.name(type));
        }
        buffer.putInt(WireDescriptor.FLAGS_OFFSET, RequestFlags.PREFIX | RequestFlags.FROM_LOOKUP, LE);
        c = event.reset();
        assertTrue(decoder.decode(RequestType.PREPARE_RETRIEVE, buffer, 0, length, event));
        assertEquals(Status.INVALID_REQUEST, event.decodeStatus);
        assertEquals("PREFIX and FROM_LOOKUP together", c.message);
    }

    @Test
    void shouldTakeNoReplyOnACommitRetrieveAndReleaseAndRefuseItOnEveryOtherType()
    {
        final int length = writePrepare(0, 2, 2);
        buffer.putInt(WireDescriptor.FLAGS_OFFSET, RequestFlags.NO_REPLY, LE);
        for (final int type : new int[]{ RequestType.COMMIT_RETRIEVE, RequestType.RELEASE })
        {
            final StoreCommand c = event.reset();
            assertTrue(decoder.decode(type, buffer, 0, length, event));
            assertEquals(0, event.decodeStatus, c.message);
            assertEquals(RequestFlags.NO_REPLY, c.flags);
            assertFalse(RequestFlags.isAnswered(type, c.flags), RequestType.name(type));
            assertEquals(0, decoder.peekResponseBound(type, buffer, 0, length, 0), "takes no response ring room");
        }
        assertTrue(decoder.peekResponseBound(RequestType.PING, buffer, 0, length, 0) > 0,
            "a refused NO_REPLY is answered: its bound is an error response's");
        for (int type = 0; type < RequestType.COUNT; type++)
        {
            if (RequestType.COMMIT_RETRIEVE == type || RequestType.RELEASE == type || RequestType.SWEEP == type ||
                RequestType.REAP == type)
            {
                continue;
            }
            final StoreCommand c = event.reset();
            assertTrue(decoder.decode(type, buffer, 0, length, event));
            assertEquals(Status.INVALID_REQUEST, event.decodeStatus, RequestType.name(type));
            assertEquals("NO_REPLY is a COMMIT_RETRIEVE and RELEASE flag", c.message, RequestType.name(type));
            assertTrue(RequestFlags.isAnswered(type, c.flags), "the refusal is answered: " + RequestType.name(type));
        }
        buffer.putInt(WireDescriptor.FLAGS_OFFSET, 0, LE);
        assertTrue(decoder.peekResponseBound(RequestType.COMMIT_RETRIEVE, buffer, 0, length, 0) > 0, "answered");
    }

    @Test
    void shouldReserveRoomForTheTierTicketsOfAWaitingLookup()
    {
        final int length = writePrepare(0, MAX_CHUNKS, MAX_CHUNKS);
        buffer.putInt(WireDescriptor.FLAGS_OFFSET, RequestFlags.L2_WAIT | RequestFlags.PIN, LE);
        final long bound = decoder.peekResponseBound(RequestType.LOOKUP, buffer, 0, length, 0);
        assertTrue(bound >= RingDescriptor.RECORD_HEADER_LENGTH +
            ResponseFlyweight.length(0, ResponseFlyweight.LOOKUP_TIER_EXTRA_LENGTH), "bound " + bound);
        assertTrue(bound >= RingDescriptor.RECORD_HEADER_LENGTH + ResponseFlyweight.errorLength(), "bound " + bound);
    }

    /**
     * Writes a PREPARE_STORE record whose range header says {@code declared} hashes and holds {@code written}.
     *
     * @return the record's length.
     */
    private int writePrepare(final int offset, final int declared, final int written)
    {
        buffer.setMemory(0, buffer.capacity(), (byte)0);
        buffer.putLong(offset + WireDescriptor.CORRELATION_ID_OFFSET, 0x1111_2222_3333_4444L + offset, LE);
        if (WireDescriptor.REQUEST_HEADER_LENGTH + 8 + 16 * written > buffer.capacity() - offset)
        {
            return 0;
        }
        buffer.putLong(offset + WireDescriptor.INSTANCE_ID_OFFSET, 7, LE);
        buffer.putLong(offset + WireDescriptor.TRANSFER_ID_OFFSET, 0x0A0B_0C0D_0E0F_1011L, LE);
        buffer.putLong(offset + WireDescriptor.SALT_OFFSET, -5, LE);
        buffer.putInt(offset + WireDescriptor.FLAGS_OFFSET, RequestFlags.CLIENT_MASK & 1, LE);
        buffer.putInt(offset + WireDescriptor.KEY_MODE_OFFSET, WireDescriptor.KEY_MODE_HASHES, LE);
        int at = offset + WireDescriptor.REQUEST_HEADER_LENGTH;
        buffer.putInt(at, declared, LE);
        at += WireDescriptor.HASHES_HEADER_LENGTH;
        for (int k = 0; k < written; k++)
        {
            buffer.putLong(at, hi(k), LE);
            buffer.putLong(at + 8, lo(k), LE);
            at += 16;
        }
        return at - offset;
    }

    private static long hi(final int k)
    {
        return 0x0102_0304_0506_0708L * (k + 1);
    }

    private static long lo(final int k)
    {
        return -0x1112_1314_1516_1718L * (k + 3);
    }
}
