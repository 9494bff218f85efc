package io.kvstash.wire.ring;

import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Two threads, one producer and one consumer, on one SPSC ring with records of random sizes (so padding
 * records and wraps happen constantly), some committed shorter than claimed and some aborted.
 * <p>
 * Forbidden outcomes: a record seen before its payload is complete (torn: its checksum fails), a record
 * lost or seen twice (a gap or repeat in the sequence), a record seen out of order, the consumer reading a
 * length word that is not a record (the ring reports corruption). Required: every committed record is seen.
 * Run longer with {@code -Dkvstash.stress.records=N}.
 */
@Tag("slow")
@Timeout(300)
class RingPublicationStressTest
{
    static final long RECORDS = Long.getLong("kvstash.stress.records", 2_000_000);

    @Test
    void shouldNeverShowATornLostRepeatedOrReorderedRecordWhenTwoThreadsRace() throws Exception
    {
        final int capacity = 64 * 1024;
        final UnsafeBuffer ring = new UnsafeBuffer(BufferUtil.allocateDirectAligned(RingDescriptor.totalLength(capacity), 64));
        final RingProducer producer = new RingProducer(ring);
        final RingConsumer consumer = new RingConsumer(ring);
        final AtomicReference<String> failure = new AtomicReference<>();
        final long[] committed = new long[1];

        final Thread producing = new Thread(() -> committed[0] = produce(producer, ring, failure), "producer");
        final Thread consuming = new Thread(() -> consume(consumer, ring, failure), "consumer");

        producing.start();
        consuming.start();
        producing.join();
        consuming.join();
        assertNull(failure.get());
        assertEquals(RECORDS, committed[0]);
        // The last record may have been committed shorter than claimed: the padding after it is still in the
        // ring (the consumer stopped at the last record). Passing it must find no further record.
        assertFalse(consumer.next(), "a record after the last one committed");
        assertFalse(consumer.isCorrupt());
        assertEquals(0, ring.getLongVolatile(RingDescriptor.TAIL_POSITION_OFFSET) -
            ring.getLongVolatile(RingDescriptor.HEAD_POSITION_OFFSET));
    }

    /** Claims, fills and commits (or aborts) records of random lengths until RECORDS are committed or one fails. */
    private static long produce(final RingProducer producer, final UnsafeBuffer ring, final AtomicReference<String> failure)
    {
        final SplittableRandom random = new SplittableRandom(3);
        long sequence = 0;
        while (sequence < RECORDS && null == failure.get())
        {
            final int claimLength = 16 + 8 * random.nextInt(200);
            final int at = producer.tryClaim(7, claimLength);
            if (at < 0)
            {
                Thread.onSpinWait();
                continue;
            }
            if (random.nextInt(50) == 0)
            {
                producer.abort();
                continue;
            }
            final int length = random.nextInt(8) == 0 ? 16 + 8 * random.nextInt((claimLength - 16) / 8 + 1) : claimLength;
            ring.putLong(at, sequence);
            ring.putLong(at + 8, length);
            for (int i = 16; i < length - 8; i += 8)
            {
                ring.putLong(at + i, sequence * 1_000_003L + i);
            }
            // The last word repeats the length: a tail still being written shows as a mismatch.
            ring.putLong(at + length - 8, length);
            producer.commit(length);
            sequence++;
        }
        return sequence;
    }

    /** Reads records in order, checking each is whole and the next one due, until RECORDS are read or one fails. */
    private static void consume(final RingConsumer consumer, final UnsafeBuffer ring, final AtomicReference<String> failure)
    {
        long expected = 0;
        while (expected < RECORDS && null == failure.get())
        {
            if (!consumer.next())
            {
                if (consumer.isCorrupt())
                {
                    failure.set("the consumer read an impossible length word at record " + expected);
                }
                Thread.onSpinWait();
                continue;
            }
            final int at = consumer.payloadOffset();
            final int length = consumer.payloadLength();
            final long sequence = ring.getLong(at);
            if (sequence != expected)
            {
                failure.set("record " + sequence + " seen where " + expected + " was due (lost, repeated or reordered)");
                break;
            }
            if (ring.getLong(at + length - 8) != length || (length > 16 && ring.getLong(at + 8) != length))
            {
                failure.set("record " + sequence + " of " + length + " bytes has a torn head or tail");
                break;
            }
            for (int i = 16; i < length - 8; i += 8)
            {
                if (ring.getLong(at + i) != sequence * 1_000_003L + i)
                {
                    failure.set("record " + sequence + " torn at byte " + i);
                    break;
                }
            }
            consumer.consume();
            expected++;
        }
    }
}
