package io.kvstash.testkit;

import org.agrona.concurrent.UnsafeBuffer;

import java.util.zip.CRC32C;

/**
 * Self-checking chunk bytes: the chunk's key and the slot generation it was written under, then a CRC-32C
 * of the whole chunk (with the CRC field as zero), then a fill derived from the key. A reader that knows the
 * key and the generation its retrieve returned detects a torn, stale or foreign write.
 * <pre>
 *   0  key hi (i64) | 8 key lo (i64) | 16 generation (i32) | 20 writer (i32) | 24 CRC-32C (i64) | 32 fill ...
 * </pre>
 */
public final class ChunkSeal
{
    /** Smallest chunk a seal fits in. */
    public static final int MIN_LENGTH = 64;

    private final byte[] scratch;
    private final UnsafeBuffer buffer;
    private final CRC32C crc = new CRC32C();

    /**
     * A seal for chunks of one length.
     *
     * @param length chunk bytes, at least {@link #MIN_LENGTH}.
     */
    public ChunkSeal(final int length)
    {
        if (length < MIN_LENGTH)
        {
            throw new IllegalArgumentException("chunk too small to seal: " + length);
        }
        scratch = new byte[length];
        buffer = new UnsafeBuffer(scratch);
    }

    /**
     * Fills the scratch with a sealed chunk.
     *
     * @param hi         key high half.
     * @param lo         key low half.
     * @param generation slot generation the chunk is written under.
     * @param writer     writer tag (process id).
     * @return the scratch buffer holding the chunk.
     */
    public UnsafeBuffer seal(final long hi, final long lo, final int generation, final int writer)
    {
        buffer.putLong(0, hi);
        buffer.putLong(8, lo);
        buffer.putInt(16, generation);
        buffer.putInt(20, writer);
        buffer.putLong(24, 0);
        long x = (lo ^ (hi * 0x9E3779B97F4A7C15L)) | 1;
        for (int i = 32; i + 8 <= scratch.length; i += 8)
        {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            buffer.putLong(i, x);
        }
        crc.reset();
        crc.update(scratch, 0, scratch.length);
        buffer.putLong(24, crc.getValue());
        return buffer;
    }

    /**
     * The scratch buffer, to read a chunk into before {@link #verify}.
     *
     * @return scratch.
     */
    public UnsafeBuffer scratch()
    {
        return buffer;
    }

    /**
     * Checks the chunk in the scratch.
     *
     * @param hi         expected key high half.
     * @param lo         expected key low half.
     * @param generation expected slot generation.
     * @return true when key, generation and checksum hold.
     */
    public boolean verify(final long hi, final long lo, final int generation)
    {
        if (buffer.getLong(0) != hi || buffer.getLong(8) != lo || buffer.getInt(16) != generation)
        {
            return false;
        }
        final long stored = buffer.getLong(24);
        buffer.putLong(24, 0);
        crc.reset();
        crc.update(scratch, 0, scratch.length);
        buffer.putLong(24, stored);
        return crc.getValue() == stored;
    }
}
