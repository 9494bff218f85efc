package io.kvstash.wire.ring;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The two sides of an SPSC ring on one buffer: the producer's view of free space, and the consumer's deferred
 * release (take now, release later).
 */
class RingTest
{
    private static final int CAPACITY = 4096;
    private static final int PAYLOAD = 56;
    private static final int RECORD = RingDescriptor.align(RingDescriptor.RECORD_HEADER_LENGTH + PAYLOAD);

    private final UnsafeBuffer ring =
        new UnsafeBuffer(BufferUtil.allocateDirectAligned(RingDescriptor.totalLength(CAPACITY), 64));
    private final RingProducer producer = new RingProducer(ring);
    private final RingConsumer consumer = new RingConsumer(ring);

    @Test
    void shouldCountTheWholeRingFreeWhenNothingWasWritten()
    {
        assertTrue(producer.hasFreeBytes(CAPACITY));
        assertFalse(producer.hasFreeBytes(CAPACITY + 1));
    }

    @Test
    void shouldCountWhatTheConsumerHasNotTakenAsUsed()
    {
        final int records = 10;
        for (int i = 0; i < records; i++)
        {
            send(i);
        }
        final long used = (long)records * RECORD;
        assertTrue(producer.hasFreeBytes(CAPACITY - used));
        assertFalse(producer.hasFreeBytes(CAPACITY - used + 1));
    }

    @Test
    void shouldSeeTheSpaceTheConsumerFreedOnceTheCachedHeadFallsShort()
    {
        int sent = 0;
        while (producer.hasFreeBytes(RECORD))
        {
            send(sent++);
        }
        assertFalse(producer.hasFreeBytes(RECORD));
        for (int i = 0; i < sent; i++)
        {
            assertTrue(consumer.next());
            assertEquals(i, ring.getLong(consumer.payloadOffset()));
            consumer.consume();
        }
        // The producer's cached head still says full: the check must read the consumer's head to say free.
        assertTrue(producer.hasFreeBytes(CAPACITY));
        assertTrue(producer.tryClaim(1, PAYLOAD) > 0);
    }

    @Test
    void shouldOfferTheNextRecordAfterATakeButKeepTheTakenBytesUntilReleased()
    {
        send(5);
        send(6);
        send(7);
        assertTrue(consumer.next());
        final int first = consumer.payloadOffset();
        consumer.take();
        assertTrue(consumer.next());
        assertEquals(6, ring.getLong(consumer.payloadOffset()));
        consumer.take();

        assertEquals(2 * RECORD, consumer.takenBytes());
        assertEquals(0, consumer.head());
        assertEquals(0, ring.getLongVolatile(RingDescriptor.HEAD_POSITION_OFFSET));
        assertEquals(5, ring.getLong(first), "a taken record is left as it was");
        assertFalse(producer.hasFreeBytes(CAPACITY - 3 * RECORD + 1));

        assertEquals(2 * RECORD, consumer.release());
        assertEquals(2 * RECORD, ring.getLongVolatile(RingDescriptor.HEAD_POSITION_OFFSET));
        assertEquals(0, consumer.takenBytes());
        assertZero(0, 2 * RECORD);
        assertTrue(producer.hasFreeBytes(CAPACITY - RECORD));
        assertEquals(0, consumer.release(), "nothing left to release");

        assertTrue(consumer.next());
        assertEquals(7, ring.getLong(consumer.payloadOffset()));
    }

    @Test
    void shouldReleaseTakenRecordsTooWhenTheNextOneIsConsumed()
    {
        send(0);
        send(1);
        assertTrue(consumer.next());
        consumer.take();
        assertTrue(consumer.next());
        consumer.consume();

        assertEquals(2 * RECORD, ring.getLongVolatile(RingDescriptor.HEAD_POSITION_OFFSET));
        assertZero(0, 2 * RECORD);
        assertFalse(consumer.next());
    }

    @Test
    void shouldZeroBothPartsWhenTheTakenRecordsRunPastTheEndOfTheRing()
    {
        // Move both positions to two records before the end; the next records wrap behind a padding record.
        final int lead = CAPACITY - 2 * RECORD - 24;
        advance(lead);
        final int records = 4;
        for (int i = 0; i < records; i++)
        {
            send(10 + i);
        }
        for (int i = 0; i < records; i++)
        {
            assertTrue(consumer.next());
            assertEquals(10 + i, ring.getLong(consumer.payloadOffset()));
            consumer.take();
        }
        assertFalse(consumer.next());

        // Two records before the end, 24 bytes of padding, two records from the start.
        assertEquals(records * RECORD + 24, consumer.release());
        assertZero(0, CAPACITY);
        assertEquals(lead + records * RECORD + 24, ring.getLongVolatile(RingDescriptor.HEAD_POSITION_OFFSET));
        assertTrue(producer.hasFreeBytes(CAPACITY));
    }

    @Test
    void shouldReleasePaddingAtOnceWhenNothingWasTakenBeforeIt()
    {
        advance(CAPACITY - 24);
        send(7);

        assertTrue(consumer.next());
        assertEquals(CAPACITY, ring.getLongVolatile(RingDescriptor.HEAD_POSITION_OFFSET), "the padding is released");
        assertEquals(0, consumer.takenBytes());
    }

    /** Sends and consumes records of {@code bytes} in all. */
    private void advance(final int bytes)
    {
        int left = bytes;
        while (left > 0)
        {
            final int length = left > 2000 ? 1000 : left;
            final int payload = length - RingDescriptor.RECORD_HEADER_LENGTH;
            assertTrue(producer.tryClaim(1, payload) > 0);
            producer.commit(payload);
            assertTrue(consumer.next());
            consumer.consume();
            left -= length;
        }
        assertEquals(bytes, consumer.head());
    }

    private void assertZero(final int from, final int length)
    {
        for (int i = from; i < from + length; i += 8)
        {
            assertEquals(0, ring.getLong(RingDescriptor.HEADER_LENGTH + i), "byte " + i + " of the ring");
        }
    }

    private void send(final long value)
    {
        final int at = producer.tryClaim(1, PAYLOAD);
        assertTrue(at > 0, "ring full");
        ring.putLong(at, value);
        producer.commit(PAYLOAD);
    }
}
