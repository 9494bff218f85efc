package io.kvstash.ipc.ring;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RingProducerTest
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

    private void send(final long value)
    {
        final int at = producer.tryClaim(1, PAYLOAD);
        assertTrue(at > 0, "ring full");
        ring.putLong(at, value);
        producer.commit(PAYLOAD);
    }
}
