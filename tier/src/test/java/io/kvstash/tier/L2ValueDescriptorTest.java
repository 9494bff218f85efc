package io.kvstash.tier;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;
import java.util.zip.CRC32C;

import static io.kvstash.tier.L2ValueDescriptor.BAD_CHECKSUM;
import static io.kvstash.tier.L2ValueDescriptor.BAD_HEADER_CHECKSUM;
import static io.kvstash.tier.L2ValueDescriptor.BAD_MAGIC;
import static io.kvstash.tier.L2ValueDescriptor.BAD_VERSION;
import static io.kvstash.tier.L2ValueDescriptor.HEADER_CRC_OFFSET;
import static io.kvstash.tier.L2ValueDescriptor.HEADER_LENGTH;
import static io.kvstash.tier.L2ValueDescriptor.OTHER_KEY;
import static io.kvstash.tier.L2ValueDescriptor.OTHER_LAYOUT;
import static io.kvstash.tier.L2ValueDescriptor.OTHER_LENGTH;
import static io.kvstash.tier.L2ValueDescriptor.OTHER_SALT;
import static io.kvstash.tier.L2ValueDescriptor.TRUNCATED;
import static io.kvstash.tier.L2ValueDescriptor.VALID;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The value header: a good value passes (heap or direct, either byte order), and each way a value can be wrong is
 * named by its own outcome. Values are built with the writer and then damaged one field at a time, with the
 * header checksum recomputed where the damage must get past it.
 */
class L2ValueDescriptorTest
{
    private static final long LAYOUT_HASH = 0x1122_3344_5566_7788L;
    private static final long SALT = 0x0BAD_CAFEL;
    private static final long HI = 0xA1A2_A3A4_A5A6_A7A8L;
    private static final long LO = 0xB1B2_B3B4_B5B6_B7B8L;
    private static final int CHUNK = 4_096 + 17;

    private final CRC32C crc = new CRC32C();

    @Test
    void shouldAcceptAValueItWroteInAnyBufferAndKeepItsPositionAndLimit()
    {
        for (final ByteBuffer value : new ByteBuffer[] {
            value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK)),
            value(ByteBuffer.allocateDirect(HEADER_LENGTH + CHUNK)),
            value(ByteBuffer.allocateDirect(HEADER_LENGTH + CHUNK).order(ByteOrder.LITTLE_ENDIAN)) })
        {
            assertEquals(VALID, check(value));
            assertEquals(0, value.position());
            assertEquals(HEADER_LENGTH + CHUNK, value.limit());
        }
    }

    @Test
    void shouldWriteTheSameHeaderForAPayloadKeptElsewhere()
    {
        final ByteBuffer whole = value(ByteBuffer.allocateDirect(HEADER_LENGTH + CHUNK));
        final ByteBuffer payload = whole.duplicate().position(HEADER_LENGTH).slice();
        final ByteBuffer header = ByteBuffer.allocateDirect(HEADER_LENGTH);
        L2ValueDescriptor.writeHeader(header, payload, crc, LAYOUT_HASH, SALT, HI, LO);
        assertEquals(whole.duplicate().limit(HEADER_LENGTH), header, "the header of the value the slot makes");
        assertEquals(0, payload.position());
        assertEquals(CHUNK, payload.limit());
        assertEquals(0, header.position());

        payload.put(CHUNK - 1, (byte)(payload.get(CHUNK - 1) + 1)); // the slot changed after the header was written
        final ByteBuffer sent = ByteBuffer.allocateDirect(HEADER_LENGTH + CHUNK);
        sent.put(header.duplicate()).put(payload.duplicate()).flip();
        assertEquals(BAD_CHECKSUM, check(sent), "a reader refuses it");
    }

    @Test
    void shouldAcceptAValueThatStartsPastTheBuffersStart()
    {
        final ByteBuffer outer = ByteBuffer.allocateDirect(100 + HEADER_LENGTH + CHUNK);
        final ByteBuffer value = value(ByteBuffer.allocateDirect(HEADER_LENGTH + CHUNK));
        outer.position(100);
        outer.put(value);
        outer.position(100);
        assertEquals(VALID, check(outer));
        assertEquals(100, outer.position());
    }

    @Test
    void shouldCallAValueShorterThanAHeaderTruncated()
    {
        assertEquals(TRUNCATED, check(ByteBuffer.allocate(HEADER_LENGTH - 1)));
        assertEquals(TRUNCATED, check(ByteBuffer.allocate(0)));
    }

    @Test
    void shouldCallAValueCutShortOrTooLongTruncated()
    {
        final ByteBuffer value = value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK));
        value.limit(HEADER_LENGTH + CHUNK - 1);
        assertEquals(TRUNCATED, check(value));
        final ByteBuffer longer = ByteBuffer.allocate(HEADER_LENGTH + CHUNK + 1);
        longer.put(value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK))).clear();
        assertEquals(TRUNCATED, check(longer));
    }

    @Test
    void shouldRefuseAnotherMagic()
    {
        final ByteBuffer value = value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK));
        putIntLe(value, L2ValueDescriptor.MAGIC_OFFSET, 0x3153564B); // "KVS1"
        resealHeader(value);
        assertEquals(BAD_MAGIC, check(value));
    }

    @Test
    void shouldRefuseAnotherVersion()
    {
        final ByteBuffer value = value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK));
        putIntLe(value, L2ValueDescriptor.VERSION_OFFSET, L2ValueDescriptor.VERSION + 1);
        resealHeader(value);
        assertEquals(BAD_VERSION, check(value));
    }

    @Test
    void shouldRefuseAHeaderWhoseChecksumDoesNotHold()
    {
        final ByteBuffer value = value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK));
        value.put(L2ValueDescriptor.KEY_LO_OFFSET, (byte)(value.get(L2ValueDescriptor.KEY_LO_OFFSET) ^ 1));
        assertEquals(BAD_HEADER_CHECKSUM, check(value));
        final ByteBuffer other = value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK));
        other.put(HEADER_CRC_OFFSET, (byte)(other.get(HEADER_CRC_OFFSET) ^ 0x80));
        assertEquals(BAD_HEADER_CHECKSUM, check(other));
    }

    @Test
    void shouldRefuseAnotherLayoutSaltOrKey()
    {
        final ByteBuffer value = value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK));
        assertEquals(OTHER_LAYOUT, L2ValueDescriptor.check(value, crc, LAYOUT_HASH + 1, SALT, HI, LO, CHUNK));
        assertEquals(OTHER_SALT, L2ValueDescriptor.check(value, crc, LAYOUT_HASH, SALT + 1, HI, LO, CHUNK));
        assertEquals(OTHER_KEY, L2ValueDescriptor.check(value, crc, LAYOUT_HASH, SALT, HI + 1, LO, CHUNK));
        assertEquals(OTHER_KEY, L2ValueDescriptor.check(value, crc, LAYOUT_HASH, SALT, HI, LO + 1, CHUNK));
    }

    @Test
    void shouldRefuseAPayloadLengthOtherThanTheLayoutsChunkBytes()
    {
        final ByteBuffer value = value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK));
        assertEquals(OTHER_LENGTH, L2ValueDescriptor.check(value, crc, LAYOUT_HASH, SALT, HI, LO, CHUNK - 1));
        final ByteBuffer shorter = ByteBuffer.allocate(HEADER_LENGTH + CHUNK - 8);
        fill(shorter, 3);
        L2ValueDescriptor.writeHeader(shorter, crc, LAYOUT_HASH, SALT, HI, LO, CHUNK - 8);
        assertEquals(OTHER_LENGTH, check(shorter), "a whole value of another length is still refused");
    }

    @Test
    void shouldRefuseAPayloadWhoseChecksumDoesNotHold()
    {
        for (final int at : new int[] { HEADER_LENGTH, HEADER_LENGTH + CHUNK / 2, HEADER_LENGTH + CHUNK - 1 })
        {
            final ByteBuffer value = value(ByteBuffer.allocate(HEADER_LENGTH + CHUNK));
            value.put(at, (byte)(value.get(at) ^ 0x10));
            assertEquals(BAD_CHECKSUM, check(value), "byte " + at);
        }
    }

    @Test
    void shouldNameEveryOutcome()
    {
        assertEquals("VALID", L2ValueDescriptor.outcomeName(VALID));
        assertEquals("BAD_CHECKSUM", L2ValueDescriptor.outcomeName(BAD_CHECKSUM));
        assertEquals("OTHER_LENGTH", L2ValueDescriptor.outcomeName(OTHER_LENGTH));
        assertEquals("UNKNOWN(99)", L2ValueDescriptor.outcomeName(99));
    }

    private int check(final ByteBuffer value)
    {
        return L2ValueDescriptor.check(value, crc, LAYOUT_HASH, SALT, HI, LO, CHUNK);
    }

    private ByteBuffer value(final ByteBuffer buffer)
    {
        fill(buffer, 7);
        L2ValueDescriptor.writeHeader(buffer, crc, LAYOUT_HASH, SALT, HI, LO, buffer.capacity() - HEADER_LENGTH);
        return buffer;
    }

    private static void fill(final ByteBuffer buffer, final long seed)
    {
        final SplittableRandom random = new SplittableRandom(seed);
        for (int i = HEADER_LENGTH; i < buffer.capacity(); i++)
        {
            buffer.put(i, (byte)random.nextInt());
        }
    }

    private void resealHeader(final ByteBuffer value)
    {
        crc.reset();
        crc.update(value.duplicate().position(0).limit(HEADER_CRC_OFFSET));
        putIntLe(value, HEADER_CRC_OFFSET, (int)crc.getValue());
    }

    private static void putIntLe(final ByteBuffer value, final int index, final int v)
    {
        value.duplicate().order(ByteOrder.LITTLE_ENDIAN).putInt(index, v);
    }
}
