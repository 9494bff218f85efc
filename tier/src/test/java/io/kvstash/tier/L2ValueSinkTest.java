package io.kvstash.tier;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.zip.CRC32C;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The read-through sink's rule: a value lands in its slot only if the decoder got there before the tier gave up,
 * and once {@link L2ValueSink#settle()} returns nothing lands any more. Values are decoded here by calling the
 * sink as Lettuce's decoder does, from another thread where the race matters.
 */
class L2ValueSinkTest
{
    private static final long LAYOUT_HASH = 77;
    private static final long SALT = 5;
    private static final long HI = 0x1234;
    private static final long LO = 0x5678;
    private static final int CHUNK = 64 * 1024;

    private final CRC32C crc = new CRC32C();

    @Test
    void shouldCopyAGoodValuesPayloadIntoTheSlot()
    {
        final ByteBuffer value = value(1);
        final byte[] slot = new byte[CHUNK];
        final L2ValueSink sink = armed(slot);
        sink.set(value);
        assertEquals(L2ValueSink.STORED, sink.settle());
        assertArrayEquals(payload(value), slot);
    }

    @Test
    void shouldWriteNothingForAValueThatArrivesAfterTheTierGaveUp()
    {
        final byte[] slot = new byte[CHUNK];
        final L2ValueSink sink = armed(slot);
        assertEquals(L2ValueSink.ABANDONED, sink.settle());
        sink.set(value(2));
        assertEquals(L2ValueSink.ABANDONED, sink.state());
        assertArrayEquals(new byte[CHUNK], slot, "a late value never lands");
    }

    @Test
    void shouldRejectABadValueWithoutWritingAndSayWhy()
    {
        final ByteBuffer value = value(3);
        value.put(L2ValueDescriptor.HEADER_LENGTH + 10, (byte)(value.get(L2ValueDescriptor.HEADER_LENGTH + 10) ^ 1));
        final byte[] slot = new byte[CHUNK];
        final L2ValueSink sink = armed(slot);
        sink.set(value);
        assertEquals(L2ValueSink.REJECTED, sink.settle());
        assertEquals(L2ValueDescriptor.BAD_CHECKSUM, sink.rejection());
        assertArrayEquals(new byte[CHUNK], slot);
    }

    @Test
    void shouldCallNoValueAbsent()
    {
        final L2ValueSink sink = armed(new byte[CHUNK]);
        sink.set(null);
        assertEquals(L2ValueSink.ABSENT, sink.settle());
    }

    @Test
    void shouldLeaveTheSlotWholeOrUntouchedWhenTheDeadlineRacesTheDecoder() throws Exception
    {
        final ByteBuffer value = value(4);
        final byte[] expected = payload(value);
        int stored = 0;
        int abandoned = 0;
        for (int round = 0; round < 300; round++)
        {
            final byte[] slot = new byte[CHUNK];
            final L2ValueSink sink = armed(slot);
            final CountDownLatch go = new CountDownLatch(1);
            final Thread decoder = new Thread(() ->
            {
                try
                {
                    go.await();
                }
                catch (final InterruptedException ex)
                {
                    Thread.currentThread().interrupt();
                }
                sink.set(value.duplicate());
            });
            decoder.start();
            go.countDown();
            for (int spin = 0; spin < round * 20; spin++)
            {
                Thread.onSpinWait();
            }
            final int state = sink.settle();
            final byte[] atSettle = slot.clone();
            decoder.join();
            assertArrayEquals(atSettle, slot, "nothing is written after settle returns (round " + round + ")");
            if (L2ValueSink.STORED == state)
            {
                assertArrayEquals(expected, slot, "a stored value is whole");
                stored++;
            }
            else
            {
                assertEquals(L2ValueSink.ABANDONED, state);
                assertArrayEquals(new byte[CHUNK], slot, "an abandoned slot is untouched");
                abandoned++;
            }
        }
        assertEquals(300, stored + abandoned);
    }

    private static L2ValueSink armed(final byte[] slot)
    {
        final L2ValueSink sink = new L2ValueSink();
        sink.slot().wrap(new UnsafeBuffer(slot), 0, CHUNK);
        return sink.arm(LAYOUT_HASH, SALT, HI, LO, CHUNK);
    }

    private ByteBuffer value(final long seed)
    {
        final ByteBuffer value = ByteBuffer.allocateDirect(L2ValueDescriptor.HEADER_LENGTH + CHUNK);
        final SplittableRandom random = new SplittableRandom(seed);
        for (int i = L2ValueDescriptor.HEADER_LENGTH; i < value.capacity(); i++)
        {
            value.put(i, (byte)random.nextInt());
        }
        L2ValueDescriptor.writeHeader(value, crc, LAYOUT_HASH, SALT, HI, LO, CHUNK);
        return value;
    }

    private static byte[] payload(final ByteBuffer value)
    {
        final byte[] bytes = new byte[CHUNK];
        value.duplicate().position(L2ValueDescriptor.HEADER_LENGTH).get(bytes);
        return bytes;
    }
}
