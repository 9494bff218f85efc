package io.kvstash.wire.layout;

import io.kvstash.wire.Status;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The KV-cache layout an instance registers: model, parallelism and shape. The chunk shape is
 * {@code [2, L, C, H]} (K and V), or {@code [L, C, H]} for MLA, where {@code C} is the server's chunk size in
 * tokens. Immutable; values are validated by {@link #validate(int, long)}, not by the constructor, so a bad
 * layout from the wire can be represented and answered with {@link Status#INVALID_LAYOUT}.
 */
public final class Layout
{
    /** Longest model name in UTF-8 bytes. */
    public static final int MAX_MODEL_LENGTH = 255;
    /** Largest world size accepted. */
    public static final int MAX_WORLD_SIZE = 4096;

    private final byte[] model;
    private final int worldSize;
    private final int rank;
    private final int layers;
    private final int hidden;
    private final int dtypeCode;
    private final boolean mla;

    /**
     * A layout from its fields.
     *
     * @param model     model name, UTF-8.
     * @param worldSize number of ranks.
     * @param rank      this worker's rank in {@code [0, worldSize)}.
     * @param layers    number of layers {@code L}.
     * @param hidden    hidden size {@code H} (heads x head size) of this rank's share.
     * @param dtypeCode {@link Dtype#code()}; unknown codes are representable and rejected by validation.
     * @param mla       true for multi-head latent attention (one tensor, no K/V split).
     */
    public Layout(
        final byte[] model,
        final int worldSize,
        final int rank,
        final int layers,
        final int hidden,
        final int dtypeCode,
        final boolean mla)
    {
        this.model = model.clone();
        this.worldSize = worldSize;
        this.rank = rank;
        this.layers = layers;
        this.hidden = hidden;
        this.dtypeCode = dtypeCode;
        this.mla = mla;
    }

    /**
     * A layout from a model name and a dtype.
     *
     * @param model     model name.
     * @param worldSize number of ranks.
     * @param rank      rank.
     * @param layers    layers.
     * @param hidden    hidden size.
     * @param dtype     element type.
     * @param mla       MLA flag.
     * @return the layout.
     */
    public static Layout of(
        final String model,
        final int worldSize,
        final int rank,
        final int layers,
        final int hidden,
        final Dtype dtype,
        final boolean mla)
    {
        return new Layout(model.getBytes(StandardCharsets.UTF_8), worldSize, rank, layers, hidden, dtype.code(), mla);
    }

    /**
     * Checks the layout against the server's chunk size and pool.
     *
     * @param chunkTokens tokens per chunk.
     * @param poolBytes   pool size in bytes.
     * @return {@link Status#OK} or {@link Status#INVALID_LAYOUT}.
     */
    public int validate(final int chunkTokens, final long poolBytes)
    {
        return null == invalidReason(chunkTokens, poolBytes) ? Status.OK : Status.INVALID_LAYOUT;
    }

    /**
     * Why the layout is invalid for the server's chunk size and pool: one constant sentence per reason, so that
     * an INVALID_LAYOUT answer says which field to fix.
     *
     * @param chunkTokens tokens per chunk.
     * @param poolBytes   pool size in bytes.
     * @return the reason, or null when the layout is valid.
     */
    public String invalidReason(final int chunkTokens, final long poolBytes)
    {
        if (model.length == 0 || model.length > MAX_MODEL_LENGTH)
        {
            return "model name must be 1 to 255 UTF-8 bytes";
        }
        if (worldSize <= 0 || worldSize > MAX_WORLD_SIZE)
        {
            return "world size must be 1 to 4096";
        }
        if (rank < 0 || rank >= worldSize)
        {
            return "rank must be at least 0 and below the world size";
        }
        if (layers <= 0)
        {
            return "layers must be at least 1";
        }
        if (hidden <= 0)
        {
            return "hidden size (heads x head size) must be at least 1";
        }
        if (null == Dtype.fromCode(dtypeCode))
        {
            return "unknown dtype code";
        }
        final long bytes = chunkBytes(chunkTokens);
        if (bytes <= 0)
        {
            return "chunk bytes (layers x chunk tokens x hidden x item size, x2 without MLA) overflow 2^63";
        }
        return bytes > poolBytes ? "one chunk of this layout is larger than the whole pool" : null;
    }

    /**
     * Bytes of one chunk: the product of the shape and the item size.
     *
     * @param chunkTokens tokens per chunk.
     * @return bytes, or -1 when a size is not positive, the dtype is unknown or the product overflows.
     */
    public long chunkBytes(final int chunkTokens)
    {
        final Dtype dtype = Dtype.fromCode(dtypeCode);
        if (null == dtype || layers <= 0 || hidden <= 0 || chunkTokens <= 0)
        {
            return -1;
        }
        try
        {
            long bytes = Math.multiplyExact((long)layers, (long)chunkTokens);
            bytes = Math.multiplyExact(bytes, (long)hidden);
            bytes = Math.multiplyExact(bytes, (long)dtype.itemSize());
            return mla ? bytes : Math.multiplyExact(bytes, 2L);
        }
        catch (final ArithmeticException ex)
        {
            return -1;
        }
    }

    /**
     * The chunk shape.
     *
     * @param chunkTokens tokens per chunk.
     * @return {@code [2, L, C, H]} or {@code [L, C, H]} for MLA.
     */
    public long[] shape(final int chunkTokens)
    {
        return mla ? new long[]{ layers, chunkTokens, hidden } : new long[]{ 2, layers, chunkTokens, hidden };
    }

    /**
     * Model name bytes (a copy).
     *
     * @return UTF-8 bytes.
     */
    public byte[] modelBytes()
    {
        return model.clone();
    }

    /**
     * Model name.
     *
     * @return the name decoded as UTF-8.
     */
    public String model()
    {
        return new String(model, StandardCharsets.UTF_8);
    }

    /**
     * Whether this layout's model equals some bytes.
     *
     * @param bytes  buffer.
     * @param length number of bytes used.
     * @return true when equal.
     */
    public boolean modelEquals(final byte[] bytes, final int length)
    {
        return Arrays.equals(model, 0, model.length, bytes, 0, length);
    }

    /**
     * World size.
     *
     * @return number of ranks.
     */
    public int worldSize()
    {
        return worldSize;
    }

    /**
     * Rank.
     *
     * @return rank in the world.
     */
    public int rank()
    {
        return rank;
    }

    /**
     * Layers.
     *
     * @return {@code L}.
     */
    public int layers()
    {
        return layers;
    }

    /**
     * Hidden size.
     *
     * @return {@code H}.
     */
    public int hidden()
    {
        return hidden;
    }

    /**
     * Dtype code as sent.
     *
     * @return wire code, possibly unknown.
     */
    public int dtypeCode()
    {
        return dtypeCode;
    }

    /**
     * MLA flag.
     *
     * @return true for MLA.
     */
    public boolean mla()
    {
        return mla;
    }

    /**
     * Same model, world size and rank: the identity the chunk key is built from.
     *
     * @param other layout.
     * @return true when both name the same (model, world size, rank).
     */
    public boolean sameIdentity(final Layout other)
    {
        return worldSize == other.worldSize && rank == other.rank && Arrays.equals(model, other.model);
    }

    /** {@inheritDoc} */
    @Override
    public boolean equals(final Object o)
    {
        if (this == o)
        {
            return true;
        }
        if (!(o instanceof Layout))
        {
            return false;
        }
        final Layout that = (Layout)o;
        return worldSize == that.worldSize && rank == that.rank && layers == that.layers &&
            hidden == that.hidden && dtypeCode == that.dtypeCode && mla == that.mla &&
            Arrays.equals(model, that.model);
    }

    /** {@inheritDoc} */
    @Override
    public int hashCode()
    {
        int result = Arrays.hashCode(model);
        result = 31 * result + worldSize;
        result = 31 * result + rank;
        result = 31 * result + layers;
        result = 31 * result + hidden;
        result = 31 * result + dtypeCode;
        return 31 * result + (mla ? 1 : 0);
    }

    /** {@inheritDoc} */
    @Override
    public String toString()
    {
        final Dtype dtype = Dtype.fromCode(dtypeCode);
        return "Layout{model=" + model() + ", worldSize=" + worldSize + ", rank=" + rank + ", layers=" + layers +
            ", hidden=" + hidden + ", dtype=" + (null == dtype ? "code " + dtypeCode : dtype.dtypeName()) +
            ", mla=" + mla + '}';
    }
}
