package io.kvstash.server.codec;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.ResponseFlyweight;
import io.kvstash.wire.codec.WireDescriptor;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.ring.RingConsumer;
import io.kvstash.wire.ring.RingDescriptor;
import io.kvstash.wire.ring.RingProducer;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ResponseEncoderTest
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /** As many distinct reasons as the server has, answered in turn, as a fuzzer's mix of bad records does. */
    private static final String[] REASONS = reasons(48);

    private final UnsafeBuffer ring =
        new UnsafeBuffer(BufferUtil.allocateDirectAligned(RingDescriptor.totalLength(64 * 1024), 64));
    private final RingProducer producer = new RingProducer(ring);
    private final RingConsumer consumer = new RingConsumer(ring);
    private final ResponseEncoder encoder = new ResponseEncoder(
        new StoreCounters(new UnsafeBuffer(BufferUtil.allocateDirectAligned(CountersDescriptor.LENGTH, 64))), new byte[0]);
    private final StoreCommand command = new StoreCommand(4, 0);

    @Test
    void shouldAnswerEachErrorWithItsOwnReasonWhenReasonsAlternate()
    {
        for (int round = 0; round < 3; round++)
        {
            for (int i = 0; i < REASONS.length; i++)
            {
                final String reason = REASONS[(i * 7 + round) % REASONS.length];
                encodeError(i, reason);
                assertTrue(consumer.next());
                final int at = consumer.payloadOffset();
                assertEquals(i, ring.getLong(at + WireDescriptor.RESPONSE_CORRELATION_ID_OFFSET, LE));
                assertEquals(Status.INVALID_REQUEST, ring.getInt(at + WireDescriptor.RESPONSE_STATUS_OFFSET, LE));
                final int length = ring.getInt(at + WireDescriptor.RESPONSE_EXTRA_LENGTH_OFFSET, LE);
                final byte[] text = new byte[length];
                ring.getBytes(at + WireDescriptor.RESPONSE_HEADER_LENGTH, text);
                assertEquals(reason, new String(text, StandardCharsets.UTF_8));
                consumer.consume();
            }
        }
    }

    @Test
    void shouldWriteEveryFieldAndSlotEntryOfAPreparedStoreWhereTheWireSaysAcrossTheRingsEnd()
    {
        // Start each answer at a different place, so that some fall just before the ring's end and are padded.
        for (int round = 0; round < 900; round++)
        {
            command.reset();
            command.type = RequestType.PREPARE_STORE;
            command.correlationId = 1_000L + round;
            command.status = Status.OK;
            command.outTransferId = 0x0102_0304_0506_0708L + round;
            command.hitChunks = 5;
            command.removedCount = 6;
            command.chunkBytes = 4096;
            command.slotBytes = 8192;
            command.slotCapacity = 77;
            command.slotCount = 1 + round % 4;
            for (int k = 0; k < command.slotCount; k++)
            {
                command.slotRangeIndex[k] = 10 * k + 1;
                command.slotGeneration[k] = 20 * k + 2 + round;
                command.slotOffset[k] = (30L * k + 3) << 33;
            }
            assertTrue(encoder.encode(command, producer));
            assertTrue(consumer.next());
            final int at = consumer.payloadOffset();
            assertEquals(WireDescriptor.RESPONSE_HEADER_LENGTH + command.slotCount * WireDescriptor.SLOT_ENTRY_LENGTH,
                consumer.payloadLength());
            assertEquals(1_000L + round, ring.getLong(at + WireDescriptor.RESPONSE_CORRELATION_ID_OFFSET, LE));
            assertEquals(Status.OK, ring.getInt(at + WireDescriptor.RESPONSE_STATUS_OFFSET, LE));
            assertEquals(RequestType.PREPARE_STORE, ring.getInt(at + WireDescriptor.RESPONSE_TYPE_OFFSET, LE));
            assertEquals(0x0102_0304_0506_0708L + round, ring.getLong(at + WireDescriptor.RESPONSE_TRANSFER_ID_OFFSET, LE));
            assertEquals(5, ring.getInt(at + WireDescriptor.RESPONSE_HIT_CHUNKS_OFFSET, LE));
            assertEquals(command.slotCount, ring.getInt(at + WireDescriptor.RESPONSE_SLOT_COUNT_OFFSET, LE));
            assertEquals(6, ring.getLong(at + WireDescriptor.RESPONSE_COUNT_OFFSET, LE));
            assertEquals(4096, ring.getLong(at + WireDescriptor.RESPONSE_CHUNK_BYTES_OFFSET, LE));
            assertEquals(8192, ring.getLong(at + WireDescriptor.RESPONSE_SLOT_BYTES_OFFSET, LE));
            assertEquals(77, ring.getInt(at + WireDescriptor.RESPONSE_SLOT_CAPACITY_OFFSET, LE));
            assertEquals(0, ring.getInt(at + WireDescriptor.RESPONSE_EXTRA_LENGTH_OFFSET, LE));
            for (int k = 0; k < command.slotCount; k++)
            {
                final int entry = at + WireDescriptor.RESPONSE_HEADER_LENGTH + k * WireDescriptor.SLOT_ENTRY_LENGTH;
                assertEquals(10 * k + 1, ring.getInt(entry, LE));
                assertEquals(20 * k + 2 + round, ring.getInt(entry + 4, LE));
                assertEquals((30L * k + 3) << 33, ring.getLong(entry + 8, LE));
            }
            consumer.consume();
        }
    }

    @Test
    void shouldCarryTheTierTicketsOnlyInAWaitingLookupAnsweredOk()
    {
        final byte[] plain = encodeLookup(false, Status.OK);
        assertEquals(WireDescriptor.RESPONSE_HEADER_LENGTH, plain.length);

        final byte[] waiting = encodeLookup(true, Status.OK);
        assertEquals(ResponseFlyweight.length(0, ResponseFlyweight.LOOKUP_TIER_EXTRA_LENGTH), waiting.length);
        final ResponseFlyweight r = new ResponseFlyweight().wrap(new UnsafeBuffer(waiting), 0, waiting.length);
        assertEquals(3, r.hitChunks());
        assertEquals(0x55L, r.transferId());
        assertEquals(ResponseFlyweight.LOOKUP_TIER_EXTRA_LENGTH, r.extraLength());
        final UnsafeBuffer extra = new UnsafeBuffer(waiting);
        assertEquals(0x7766_5544_3322_1100L,
            extra.getLong(r.extraOffset() + ResponseFlyweight.LOOKUP_TIER_TICKET_OFFSET, LE));
        assertEquals(0x7766_5544_3322_10FFL,
            extra.getLong(r.extraOffset() + ResponseFlyweight.LOOKUP_TIER_COMPLETED_OFFSET, LE));
        // The header is the plain answer's but for the extra length.
        final UnsafeBuffer header = new UnsafeBuffer(waiting.clone());
        header.putInt(WireDescriptor.RESPONSE_EXTRA_LENGTH_OFFSET, 0, LE);
        assertArrayEquals(plain, java.util.Arrays.copyOf(header.byteArray(), plain.length));

        final byte[] failed = encodeLookup(true, Status.UNKNOWN_INSTANCE);
        assertEquals(Status.UNKNOWN_INSTANCE, new UnsafeBuffer(failed).getInt(WireDescriptor.RESPONSE_STATUS_OFFSET, LE));
        final int reasonLength = new UnsafeBuffer(failed).getInt(WireDescriptor.RESPONSE_EXTRA_LENGTH_OFFSET, LE);
        assertEquals("instance not registered", new String(failed, WireDescriptor.RESPONSE_HEADER_LENGTH, reasonLength,
            StandardCharsets.UTF_8), "an error answer carries its reason, not tickets");

        command.reset();
        command.type = RequestType.PREPARE_STORE;
        command.status = Status.OK;
        assertTrue(encoder.encode(command, producer, true, 9, 9));
        assertTrue(consumer.next());
        assertEquals(0, ring.getInt(consumer.payloadOffset() + WireDescriptor.RESPONSE_EXTRA_LENGTH_OFFSET, LE),
            "only a LOOKUP carries tickets");
        consumer.consume();
    }

    private byte[] encodeLookup(final boolean tierAnswer, final int status)
    {
        command.reset();
        command.type = RequestType.LOOKUP;
        command.correlationId = 41;
        command.chunkCount = 8;
        if (Status.OK == status)
        {
            command.status = Status.OK;
            command.hitChunks = 3;
            command.outTransferId = 0x55L;
        }
        else
        {
            command.fail(status, "instance not registered");
        }
        assertTrue(tierAnswer ?
            encoder.encode(command, producer, true, 0x7766_5544_3322_1100L, 0x7766_5544_3322_10FFL) :
            encoder.encode(command, producer));
        assertTrue(consumer.next());
        final byte[] bytes = new byte[consumer.payloadLength()];
        ring.getBytes(consumer.payloadOffset(), bytes);
        consumer.consume();
        return bytes;
    }

    @Test
    void shouldCutAReasonLongerThanTheWireAllows()
    {
        encodeError(1, "x".repeat(WireDescriptor.MAX_MESSAGE_LENGTH + 50));
        assertTrue(consumer.next());
        assertEquals(WireDescriptor.MAX_MESSAGE_LENGTH,
            ring.getInt(consumer.payloadOffset() + WireDescriptor.RESPONSE_EXTRA_LENGTH_OFFSET, LE));
    }

    @Test
    void shouldAllocateNothingAnsweringAlternatingReasonsOnceEachWasSeen()
    {
        final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        final long thread = Thread.currentThread().getId();
        final int answers = 200_000;
        answerInTurn(answers);
        final long before = threads.getThreadAllocatedBytes(thread);
        answerInTurn(answers);
        final long allocated = threads.getThreadAllocatedBytes(thread) - before;
        // A one-entry cache re-encodes the reason on every change: about 100 bytes per answer, 20 MB here.
        assertTrue(allocated < 64 * 1024, "allocated " + allocated + " bytes for " + answers + " answers");
    }

    private void answerInTurn(final int answers)
    {
        for (int i = 0; i < answers; i++)
        {
            encodeError(i, REASONS[i % REASONS.length]);
            consumer.next();
            consumer.consume();
        }
    }

    private void encodeError(final long correlationId, final String reason)
    {
        command.reset();
        command.type = RequestType.COMMIT_STORE;
        command.correlationId = correlationId;
        command.fail(Status.INVALID_REQUEST, reason);
        assertTrue(encoder.encode(command, producer));
    }

    private static String[] reasons(final int count)
    {
        final String[] reasons = new String[count];
        for (int i = 0; i < count; i++)
        {
            reasons[i] = ("reason " + i + ": a request the server cannot serve").intern();
        }
        return reasons;
    }
}
