package io.kvstash.wire.codec;

import io.kvstash.wire.ChunkKeys;
import org.agrona.DirectBuffer;

import static io.kvstash.wire.codec.WireDescriptor.HASHES_HEADER_LENGTH;
import static io.kvstash.wire.codec.WireDescriptor.TOKENS_HEADER_LENGTH;
import static io.kvstash.wire.codec.WireDescriptor.pad8;

/**
 * The records that carry a key range: LOOKUP, PREPARE_STORE and PREPARE_RETRIEVE (the range follows the
 * common header) and LOOKUP_ALL_RANKS (a world size and a model name, padded to 8, come first). The range
 * is either chunk hashes (key mode 1: count, then each chunk's 128-bit hash) or token ids (key mode 2:
 * token count, from chunk, to chunk, then the ids, hashed by the server). See {@link WireDescriptor}.
 */
public final class KeyedRequestFlyweight extends RequestFlyweight
{
    private static final int ALL_RANKS_WORLD_SIZE_OFFSET = HEADER_LENGTH;
    private static final int ALL_RANKS_MODEL_LENGTH_OFFSET = HEADER_LENGTH + 4;
    private static final int ALL_RANKS_MODEL_OFFSET = HEADER_LENGTH + 8;
    /** Bytes of one chunk hash. */
    public static final int HASH_LENGTH = 16;

    private int keysAt = HEADER_LENGTH;

    /**
     * Bytes of a keyed record in hash mode.
     *
     * @param chunkCount chunks in the range.
     * @return record length.
     */
    public static int hashesLength(final int chunkCount)
    {
        return HEADER_LENGTH + HASHES_HEADER_LENGTH + chunkCount * HASH_LENGTH;
    }

    /**
     * Bytes of a keyed record in token mode.
     *
     * @param tokenCount token ids carried.
     * @return record length.
     */
    public static int tokensLength(final int tokenCount)
    {
        return HEADER_LENGTH + TOKENS_HEADER_LENGTH + tokenCount * Integer.BYTES;
    }

    /**
     * Bytes of a LOOKUP_ALL_RANKS record (hash mode).
     *
     * @param modelLength bytes of the model name.
     * @param chunkCount  chunks in the range.
     * @return record length.
     */
    public static int allRanksLength(final int modelLength, final int chunkCount)
    {
        return ALL_RANKS_MODEL_OFFSET + pad8(modelLength) + HASHES_HEADER_LENGTH + chunkCount * HASH_LENGTH;
    }

    @Override
    public KeyedRequestFlyweight wrap(final DirectBuffer buffer, final int offset, final int length)
    {
        super.wrap(buffer, offset, length);
        keysAt = HEADER_LENGTH;
        return this;
    }

    // ------------------------------------------------------------------------------------------ encoding

    /**
     * Writes LOOKUP_ALL_RANKS's world size and model name after {@link #putHeader}; the key range follows.
     *
     * @param worldSize world size of the ranks asked about.
     * @param model     model name, UTF-8.
     * @return this.
     */
    public KeyedRequestFlyweight putAllRanks(final int worldSize, final byte[] model)
    {
        putInt(ALL_RANKS_WORLD_SIZE_OFFSET, worldSize);
        putInt(ALL_RANKS_MODEL_LENGTH_OFFSET, model.length);
        putBytes(ALL_RANKS_MODEL_OFFSET, model, 0, model.length);
        keysAt = ALL_RANKS_MODEL_OFFSET + pad8(model.length);
        return this;
    }

    /**
     * Writes the key range in hash mode.
     *
     * @param keys chunk hashes.
     * @return this.
     */
    public KeyedRequestFlyweight putHashes(final ChunkKeys keys)
    {
        final int count = keys.count();
        putInt(keysAt, count);
        putInt(keysAt + 4, 0);
        int at = keysAt + HASHES_HEADER_LENGTH;
        for (int k = 0; k < count; k++)
        {
            putLong(at, keys.hi(k));
            putLong(at + 8, keys.lo(k));
            at += HASH_LENGTH;
        }
        return this;
    }

    /**
     * Writes the key range in token mode.
     *
     * @param tokens     token ids of the prompt from its start.
     * @param tokenCount ids used.
     * @param fromChunk  first chunk of the range.
     * @param toChunk    end of the range (exclusive), -1 for every full chunk.
     * @return this.
     */
    public KeyedRequestFlyweight putTokens(
        final int[] tokens, final int tokenCount, final int fromChunk, final int toChunk)
    {
        putInt(keysAt, tokenCount);
        putInt(keysAt + 4, fromChunk);
        putInt(keysAt + 8, toChunk);
        putInt(keysAt + 12, 0);
        final int at = keysAt + TOKENS_HEADER_LENGTH;
        for (int k = 0; k < tokenCount; k++)
        {
            putInt(at + k * Integer.BYTES, tokens[k]);
        }
        return this;
    }

    // ------------------------------------------------------------------------------------------ decoding

    /**
     * Whether LOOKUP_ALL_RANKS's world size and model length are inside the record.
     *
     * @return true when {@link #allRanksWorldSize()} and {@link #allRanksModelLength()} may be read.
     */
    public boolean hasAllRanksHead()
    {
        return length() >= ALL_RANKS_MODEL_OFFSET;
    }

    /**
     * LOOKUP_ALL_RANKS's world size.
     *
     * @return world size.
     */
    public int allRanksWorldSize()
    {
        return getInt(ALL_RANKS_WORLD_SIZE_OFFSET);
    }

    /**
     * LOOKUP_ALL_RANKS's model name length as stated.
     *
     * @return bytes.
     */
    public int allRanksModelLength()
    {
        return getInt(ALL_RANKS_MODEL_LENGTH_OFFSET);
    }

    /**
     * Whether the stated model name (padded) is well-formed and inside the record.
     *
     * @param room bytes the caller can take.
     * @return true when {@link #getAllRanksModel(byte[])} may be called.
     */
    public boolean allRanksModelFits(final int room)
    {
        final int n = allRanksModelLength();
        return n >= 0 && n <= room && ALL_RANKS_MODEL_OFFSET + (long)pad8(n) <= length();
    }

    /**
     * Copies LOOKUP_ALL_RANKS's model name out and moves the key range past it.
     *
     * @param destination receives the name from index 0.
     * @return bytes copied.
     */
    public int getAllRanksModel(final byte[] destination)
    {
        final int n = allRanksModelLength();
        getBytes(ALL_RANKS_MODEL_OFFSET, destination, n);
        keysAt = ALL_RANKS_MODEL_OFFSET + pad8(n);
        return n;
    }

    /**
     * Whether the hash-mode range header is inside the record.
     *
     * @return true when {@link #hashCount()} may be read.
     */
    public boolean hasHashesHeader()
    {
        return keysAt + HASHES_HEADER_LENGTH <= length();
    }

    /**
     * Chunks in a hash-mode range, as stated.
     *
     * @return count.
     */
    public int hashCount()
    {
        return getInt(keysAt);
    }

    /**
     * Whether a number of hashes is inside the record.
     *
     * @param count hashes.
     * @return true when {@link #hashHi(int)} and {@link #hashLo(int)} may be read below {@code count}.
     */
    public boolean hashesFit(final int count)
    {
        return keysAt + HASHES_HEADER_LENGTH + (long)count * HASH_LENGTH <= length();
    }

    /**
     * High half of a chunk hash.
     *
     * @param k index in the range.
     * @return bits 127..64.
     */
    public long hashHi(final int k)
    {
        return getLong(keysAt + HASHES_HEADER_LENGTH + k * HASH_LENGTH);
    }

    /**
     * Low half of a chunk hash.
     *
     * @param k index in the range.
     * @return bits 63..0.
     */
    public long hashLo(final int k)
    {
        return getLong(keysAt + HASHES_HEADER_LENGTH + k * HASH_LENGTH + 8);
    }

    /**
     * Whether the token-mode range header is inside the record.
     *
     * @return true when {@link #tokenCount()}, {@link #fromChunk()} and {@link #toChunk()} may be read.
     */
    public boolean hasTokensHeader()
    {
        return keysAt + TOKENS_HEADER_LENGTH <= length();
    }

    /**
     * Token ids carried, as stated.
     *
     * @return count.
     */
    public int tokenCount()
    {
        return getInt(keysAt);
    }

    /**
     * First chunk of a token-mode range.
     *
     * @return chunk index.
     */
    public int fromChunk()
    {
        return getInt(keysAt + 4);
    }

    /**
     * End of a token-mode range.
     *
     * @return chunk index (exclusive), -1 for every full chunk.
     */
    public int toChunk()
    {
        return getInt(keysAt + 8);
    }

    /**
     * Whether the stated token ids are inside the record.
     *
     * @return true when {@link #tokenCount()} ids follow the header.
     */
    public boolean tokensFit()
    {
        final int n = tokenCount();
        return n >= 0 && keysAt + TOKENS_HEADER_LENGTH + (long)n * Integer.BYTES <= length();
    }

    /**
     * Where the token ids start, in the wrapped buffer.
     *
     * @return buffer offset.
     */
    public int tokensOffset()
    {
        return offset() + keysAt + TOKENS_HEADER_LENGTH;
    }
}
