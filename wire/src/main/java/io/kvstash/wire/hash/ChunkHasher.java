package io.kvstash.wire.hash;

import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * Prefix-chained chunk hashes and key namespaces, stable across processes, machines and languages.
 * <p>
 * The chunk hash is 128 bits: the first 16 bytes of a SHA-256 digest. Chunk {@code i} of a token sequence
 * hashes {@code h(i) = SHA-256(h(i-1) || tokens of chunk i)[0..16)}, where {@code h(-1)} is 16 zero bytes
 * and every token id is a 32-bit little-endian integer. Only full chunks are hashed. The two halves of the
 * digest are read big-endian into {@code hi} (bytes 0..7) and {@code lo} (bytes 8..15). SHA-256 is chosen
 * over a faster non-cryptographic hash because chunk keys come from user prompts: a collision would serve
 * one request's KV cache to another (vLLM moved to SHA-256 prefix hashes for the same reason), every
 * language has it in its standard library, and with SHA-NI it costs well under a microsecond per chunk.
 * <p>
 * The namespace separates models, world sizes, ranks and cache salts:
 * {@code ns = SHA-256(u16le len(model) || model || u32le worldSize || u32le rank || u64le salt)[0..8)}
 * read big-endian. A salt string maps to {@code salt = SHA-256(utf8(salt))[0..8)} read big-endian; no salt
 * is 0. Test vectors are in {@code wire/src/test/resources/hash-vectors.txt} and docs/PROTOCOL.md.
 * <p>
 * Not thread safe: one instance per thread. Allocation-free after construction.
 */
public final class ChunkHasher
{
    /** Length of a chunk hash in bytes. */
    public static final int HASH_LENGTH = 16;
    /** Largest number of tokens per chunk the hasher accepts. */
    public static final int MAX_CHUNK_TOKENS = 1 << 20;

    private final MessageDigest digest;
    private final byte[] digestOut = new byte[32];
    private final byte[] prefix = new byte[HASH_LENGTH];
    private final UnsafeBuffer prefixBuffer = new UnsafeBuffer(prefix);
    private byte[] tokenBytes = new byte[0];
    private final UnsafeBuffer tokenBuffer = new UnsafeBuffer(tokenBytes);
    private java.nio.IntBuffer tokenInts = java.nio.ByteBuffer.wrap(tokenBytes).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
    private final byte[] nsBytes = new byte[2 + 255 + 4 + 4 + 8];
    private final UnsafeBuffer nsBuffer = new UnsafeBuffer(nsBytes);

    /**
     * A hasher with its own digest instance.
     */
    public ChunkHasher()
    {
        try
        {
            digest = MessageDigest.getInstance("SHA-256");
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException("SHA-256 is required by every Java platform", ex);
        }
    }

    /**
     * Hashes chunks {@code [fromChunk, toChunk)} of a token sequence held as 32-bit integers in a buffer.
     * The chain runs from chunk 0, so every token before {@code toChunk} is read; only the window is written.
     *
     * @param tokens      buffer holding the token ids.
     * @param offset      byte offset of the first token.
     * @param byteOrder   byte order of the token ids in the buffer.
     * @param tokenCount  number of tokens in the buffer.
     * @param chunkTokens tokens per chunk.
     * @param fromChunk   first chunk of the window.
     * @param toChunk     end of the window (exclusive), at most {@code tokenCount / chunkTokens}.
     * @param hi          receives the high halves of the window from index 0.
     * @param lo          receives the low halves of the window from index 0.
     * @return number of chunks written ({@code toChunk - fromChunk}), or -1 when the arguments are out of
     * range (a window past the last full chunk, a negative range, arrays too short).
     */
    public int hashTokens(
        final DirectBuffer tokens,
        final int offset,
        final ByteOrder byteOrder,
        final int tokenCount,
        final int chunkTokens,
        final int fromChunk,
        final int toChunk,
        final long[] hi,
        final long[] lo)
    {
        if (chunkTokens <= 0 || chunkTokens > MAX_CHUNK_TOKENS || tokenCount < 0 || fromChunk < 0 ||
            toChunk < fromChunk || toChunk > tokenCount / chunkTokens || toChunk - fromChunk > hi.length ||
            toChunk - fromChunk > lo.length || offset < 0 ||
            (long)offset + (long)tokenCount * Integer.BYTES > tokens.capacity())
        {
            return -1;
        }
        ensureTokenCapacity(chunkTokens);
        final boolean little = byteOrder == ByteOrder.LITTLE_ENDIAN;
        final int chunkBytes = chunkTokens * Integer.BYTES;
        long prevHi = 0;
        long prevLo = 0;
        for (int c = 0; c < toChunk; c++)
        {
            final int base = offset + c * chunkBytes;
            if (little)
            {
                tokens.getBytes(base, tokenBytes, 0, chunkBytes);
            }
            else
            {
                for (int t = 0; t < chunkTokens; t++)
                {
                    tokenBuffer.putInt(t * Integer.BYTES, tokens.getInt(base + t * Integer.BYTES, byteOrder),
                        ByteOrder.LITTLE_ENDIAN);
                }
            }
            chain(prevHi, prevLo, chunkBytes);
            prevHi = readLongBigEndian(digestOut, 0);
            prevLo = readLongBigEndian(digestOut, 8);
            if (c >= fromChunk)
            {
                hi[c - fromChunk] = prevHi;
                lo[c - fromChunk] = prevLo;
            }
        }
        return toChunk - fromChunk;
    }

    /**
     * Hashes the full chunks of a token sequence held in an array.
     *
     * @param tokens      token ids.
     * @param tokenCount  number of tokens used from index 0.
     * @param chunkTokens tokens per chunk.
     * @param hi          receives the high halves from index 0.
     * @param lo          receives the low halves from index 0.
     * @return number of full chunks hashed ({@code tokenCount / chunkTokens}), or -1 on bad arguments.
     */
    public int hashTokens(
        final int[] tokens, final int tokenCount, final int chunkTokens, final long[] hi, final long[] lo)
    {
        if (chunkTokens <= 0 || chunkTokens > MAX_CHUNK_TOKENS || tokenCount < 0 || tokenCount > tokens.length)
        {
            return -1;
        }
        final int chunkCount = tokenCount / chunkTokens;
        if (chunkCount > hi.length || chunkCount > lo.length)
        {
            return -1;
        }
        ensureTokenCapacity(chunkTokens);
        long prevHi = 0;
        long prevLo = 0;
        for (int c = 0; c < chunkCount; c++)
        {
            tokenInts.put(0, tokens, c * chunkTokens, chunkTokens);
            chain(prevHi, prevLo, chunkTokens * Integer.BYTES);
            prevHi = readLongBigEndian(digestOut, 0);
            prevLo = readLongBigEndian(digestOut, 8);
            hi[c] = prevHi;
            lo[c] = prevLo;
        }
        return chunkCount;
    }

    /**
     * Namespace of a key: separates models, world sizes, ranks and cache salts.
     *
     * @param model       model name bytes (UTF-8).
     * @param modelLength bytes used, at most 255.
     * @param worldSize   world size.
     * @param rank        rank.
     * @param salt        salt value from {@link #salt(String)}, 0 for none.
     * @return the 64-bit namespace.
     */
    public long namespace(
        final byte[] model, final int modelLength, final int worldSize, final int rank, final long salt)
    {
        if (modelLength < 0 || modelLength > 255)
        {
            throw new IllegalArgumentException("model name length " + modelLength + " not in [0, 255]");
        }
        int i = 0;
        nsBuffer.putShort(i, (short)modelLength, ByteOrder.LITTLE_ENDIAN);
        i += 2;
        nsBuffer.putBytes(i, model, 0, modelLength);
        i += modelLength;
        nsBuffer.putInt(i, worldSize, ByteOrder.LITTLE_ENDIAN);
        i += 4;
        nsBuffer.putInt(i, rank, ByteOrder.LITTLE_ENDIAN);
        i += 4;
        nsBuffer.putLong(i, salt, ByteOrder.LITTLE_ENDIAN);
        i += 8;
        digest.update(nsBytes, 0, i);
        finish();
        return readLongBigEndian(digestOut, 0);
    }

    /**
     * The salt value of a cache salt string (vLLM's {@code cache_salt}).
     *
     * @param salt the salt, null or empty for none.
     * @return {@code SHA-256(utf8(salt))[0..8)} big-endian, or 0 for none.
     */
    public static long salt(final String salt)
    {
        if (null == salt || salt.isEmpty())
        {
            return 0;
        }
        try
        {
            final byte[] d = MessageDigest.getInstance("SHA-256").digest(salt.getBytes(StandardCharsets.UTF_8));
            return readLongBigEndian(d, 0);
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    private void chain(final long prevHi, final long prevLo, final int tokenByteLength)
    {
        prefixBuffer.putLong(0, prevHi, ByteOrder.BIG_ENDIAN);
        prefixBuffer.putLong(8, prevLo, ByteOrder.BIG_ENDIAN);
        digest.update(prefix, 0, HASH_LENGTH);
        digest.update(tokenBytes, 0, tokenByteLength);
        finish();
    }

    private void finish()
    {
        try
        {
            digest.digest(digestOut, 0, digestOut.length);
        }
        catch (final DigestException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    private void ensureTokenCapacity(final int chunkTokens)
    {
        final int needed = chunkTokens * Integer.BYTES;
        if (tokenBytes.length < needed)
        {
            tokenBytes = new byte[needed];
            tokenBuffer.wrap(tokenBytes);
            tokenInts = java.nio.ByteBuffer.wrap(tokenBytes).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
        }
    }

    private static long readLongBigEndian(final byte[] bytes, final int offset)
    {
        long value = 0;
        for (int i = 0; i < 8; i++)
        {
            value = (value << 8) | (bytes[offset + i] & 0xFFL);
        }
        return value;
    }
}
