package io.kvstash.ipc.codec;

import io.kvstash.core.RequestType;
import io.kvstash.core.Status;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.ipc.ring.RingConsumer;
import io.kvstash.ipc.ring.RingDescriptor;
import io.kvstash.ipc.ring.RingProducer;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

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
        new StoreCounters(new UnsafeBuffer(BufferUtil.allocateDirectAligned(StoreCounters.LENGTH, 64))), new byte[0]);
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
