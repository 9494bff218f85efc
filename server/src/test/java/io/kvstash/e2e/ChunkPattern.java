package io.kvstash.e2e;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.util.zip.CRC32C;

/**
 * Self-checking chunk bytes for tests: the key and a writer tag in the first 16 bytes, a CRC-32C of the
 * rest at 16, then a fill derived from the key.
 */
final class ChunkPattern
{
    private ChunkPattern()
    {
    }

    static void fill(final MutableDirectBuffer buffer, final int length, final long key, final long tag)
    {
        buffer.putLong(0, key);
        buffer.putLong(8, tag);
        long x = key * 0x9E3779B97F4A7C15L + 1;
        for (int i = 24; i + 8 <= length; i += 8)
        {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            buffer.putLong(i, x);
        }
        buffer.putLong(16, crc(buffer, length));
    }

    /**
     * Whether bytes carry a key's pattern intact.
     */
    static boolean verify(final DirectBuffer buffer, final int length, final long key)
    {
        return buffer.getLong(0) == key && buffer.getLong(16) == crc(buffer, length);
    }

    private static long crc(final DirectBuffer buffer, final int length)
    {
        final CRC32C crc = new CRC32C();
        final byte[] bytes = new byte[length - 24];
        buffer.getBytes(24, bytes);
        crc.update(bytes);
        final byte[] head = new byte[16];
        buffer.getBytes(0, head);
        crc.update(head);
        return crc.getValue();
    }
}
