package io.kvstash.tools;

import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.CRC32C;

/**
 * Self-checking chunk bytes for replays: whoever reads a chunk can tell, without knowing who wrote it,
 * whether the bytes are those of the chunk it asked for and are intact. Little-endian:
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                     Chunk Key High (i64)                      |  0
 *  |                     Chunk Key Low (i64)                       |  8
 *  |  CRC-32C of bytes [24, length) then [0, 16) (u32) |  0 (u32) |  16
 *  |  Fill derived from the key ...                                |  24
 *  +---------------------------------------------------------------+
 * </pre>
 * The fill is an arithmetic sequence of longs seeded by a mix of the key: one add and one store per 8 bytes.
 * The checksum covers the fill and the key, so a chunk of the wrong key, a stale slot, a torn copy or a
 * header over another chunk's body fails the check. Instances are not thread safe
 * (one CRC state each); the buffers must be backed by a byte array or a {@link ByteBuffer}.
 */
public final class ChunkPattern
{
    /** Bytes of the header: key and checksum. */
    public static final int HEADER_LENGTH = 24;
    /** Smallest chunk the pattern fits. */
    public static final int MIN_LENGTH = 32;

    private static final int KEY_LENGTH = 16;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final long GOLDEN = 0x9E3779B97F4A7C15L;

    private final CRC32C crc = new CRC32C();

    /**
     * Writes the pattern of a key.
     *
     * @param buffer where to write, from its index 0.
     * @param length chunk bytes, at least {@link #MIN_LENGTH}.
     * @param hi     key high half.
     * @param lo     key low half.
     */
    public void fill(final UnsafeBuffer buffer, final int length, final long hi, final long lo)
    {
        checkLength(length);
        buffer.putLong(0, hi, LE);
        buffer.putLong(8, lo, LE);
        final long seed = mix(hi * GOLDEN ^ lo);
        final long step = mix(seed) | 1;
        long value = seed;
        int i = HEADER_LENGTH;
        final int limit = length - Long.BYTES;
        for (; i <= limit; i += Long.BYTES)
        {
            buffer.putLong(i, value);
            value += step;
        }
        for (; i < length; i++)
        {
            buffer.putByte(i, (byte)(value >>> ((i & 7) << 3)));
        }
        buffer.putLong(16, checksum(buffer, length), LE);
    }

    /**
     * Checks that bytes carry the pattern of a key.
     *
     * @param buffer chunk bytes from index 0.
     * @param length chunk bytes.
     * @param hi     expected key high half.
     * @param lo     expected key low half.
     * @return true when the key matches and the checksum holds.
     */
    public boolean verify(final UnsafeBuffer buffer, final int length, final long hi, final long lo)
    {
        checkLength(length);
        return buffer.getLong(0, LE) == hi && buffer.getLong(8, LE) == lo &&
            buffer.getLong(16, LE) == checksum(buffer, length);
    }

    private long checksum(final UnsafeBuffer buffer, final int length)
    {
        crc.reset();
        final ByteBuffer byteBuffer = buffer.byteBuffer();
        if (null != byteBuffer)
        {
            final ByteBuffer view = byteBuffer.duplicate();
            final int start = buffer.wrapAdjustment();
            view.limit(start + length).position(start + HEADER_LENGTH);
            crc.update(view);
            view.limit(start + KEY_LENGTH).position(start);
            crc.update(view);
        }
        else if (null != buffer.byteArray())
        {
            crc.update(buffer.byteArray(), buffer.wrapAdjustment() + HEADER_LENGTH, length - HEADER_LENGTH);
            crc.update(buffer.byteArray(), buffer.wrapAdjustment(), KEY_LENGTH);
        }
        else
        {
            throw new IllegalArgumentException("the buffer must be backed by a byte array or a ByteBuffer");
        }
        return crc.getValue();
    }

    private static void checkLength(final int length)
    {
        if (length < MIN_LENGTH)
        {
            throw new IllegalArgumentException("chunk of " + length + " bytes is shorter than " + MIN_LENGTH);
        }
    }

    private static long mix(final long x)
    {
        long z = x;
        z = (z ^ (z >>> 33)) * 0xFF51AFD7ED558CCDL;
        z = (z ^ (z >>> 33)) * 0xC4CEB9FE1A85EC53L;
        return z ^ (z >>> 33);
    }
}
