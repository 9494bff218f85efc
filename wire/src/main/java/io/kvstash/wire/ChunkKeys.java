package io.kvstash.wire;

import io.kvstash.wire.hash.ChunkHasher;

import java.util.Arrays;

/**
 * A key range for the synchronous facade: chunk hashes in range order and a cache salt. Built from
 * precomputed hashes or from token ids (hashed with {@link ChunkHasher}, full chunks only). Immutable.
 */
public final class ChunkKeys
{
    private final long[] hi;
    private final long[] lo;
    private final long salt;

    private ChunkKeys(final long[] hi, final long[] lo, final long salt)
    {
        this.hi = hi;
        this.lo = lo;
        this.salt = salt;
    }

    /**
     * Keys from precomputed 128-bit chunk hashes.
     *
     * @param hi high halves.
     * @param lo low halves, same length.
     * @return the range.
     */
    public static ChunkKeys ofHashes(final long[] hi, final long[] lo)
    {
        if (hi.length != lo.length)
        {
            throw new IllegalArgumentException("hi and lo differ in length");
        }
        return new ChunkKeys(hi.clone(), lo.clone(), 0);
    }

    /**
     * Keys from the full chunks of a token sequence.
     *
     * @param tokens      token ids.
     * @param chunkTokens tokens per chunk.
     * @return the range of {@code tokens.length / chunkTokens} chunks.
     */
    public static ChunkKeys ofTokens(final int[] tokens, final int chunkTokens)
    {
        final int n = tokens.length / chunkTokens;
        final long[] hi = new long[n];
        final long[] lo = new long[n];
        new ChunkHasher().hashTokens(tokens, tokens.length, chunkTokens, hi, lo);
        return new ChunkKeys(hi, lo, 0);
    }

    /**
     * Keys from small integer ids, as the Mooncake trace names its blocks: {@code hi = 0, lo = id}.
     *
     * @param ids block ids.
     * @return the range.
     */
    public static ChunkKeys ofIds(final long... ids)
    {
        return new ChunkKeys(new long[ids.length], ids.clone(), 0);
    }

    /**
     * The same keys under a cache salt.
     *
     * @param salt salt value from {@link ChunkHasher#salt(String)}.
     * @return a new range.
     */
    public ChunkKeys withSalt(final long salt)
    {
        return new ChunkKeys(hi, lo, salt);
    }

    /**
     * A sub-range.
     *
     * @param from first chunk.
     * @param to   end (exclusive).
     * @return a new range.
     */
    public ChunkKeys range(final int from, final int to)
    {
        return new ChunkKeys(Arrays.copyOfRange(hi, from, to), Arrays.copyOfRange(lo, from, to), salt);
    }

    /**
     * Number of chunks.
     *
     * @return count.
     */
    public int count()
    {
        return hi.length;
    }

    /**
     * High half of chunk {@code i}.
     *
     * @param i chunk index.
     * @return hash high half.
     */
    public long hi(final int i)
    {
        return hi[i];
    }

    /**
     * Low half of chunk {@code i}.
     *
     * @param i chunk index.
     * @return hash low half.
     */
    public long lo(final int i)
    {
        return lo[i];
    }

    /**
     * Salt value.
     *
     * @return salt, 0 for none.
     */
    public long salt()
    {
        return salt;
    }

    /**
     * Copies the keys into the caller's arrays, from index 0.
     *
     * @param hiOut receives the high halves; at least {@link #count()} long.
     * @param loOut receives the low halves; at least {@link #count()} long.
     */
    public void copyTo(final long[] hiOut, final long[] loOut)
    {
        System.arraycopy(hi, 0, hiOut, 0, hi.length);
        System.arraycopy(lo, 0, loOut, 0, lo.length);
    }
}
