package io.kvstash.core;

import java.util.concurrent.TimeUnit;

/**
 * Configuration of a store, validated once by {@link #conclude()}. Sizes carry their unit in the name.
 */
public final class StoreContext
{
    /** Default pool size: 1 GiB. */
    public static final long POOL_SIZE_BYTES_DEFAULT = 1L << 30;
    /** Default slot alignment: 4 KiB. */
    public static final int ALIGNMENT_DEFAULT = 4096;
    /** Default chunk size in tokens. */
    public static final int CHUNK_TOKENS_DEFAULT = 256;
    /** Default lease: 30 s. */
    public static final long LEASE_NS_DEFAULT = TimeUnit.SECONDS.toNanos(30);
    /** Default largest number of chunks in one request's key range. */
    public static final int MAX_CHUNKS_PER_REQUEST_DEFAULT = 1024;
    /** Default limit of pending transfers (stores in flight, pinned lookups and retrieves). */
    public static final int MAX_TRANSFERS_DEFAULT = 1 << 16;
    /** Default limit of registered instances. */
    public static final int MAX_INSTANCES_DEFAULT = 4096;
    /** Default limit of expired transfers reclaimed by one sweep. */
    public static final int SWEEP_LIMIT_DEFAULT = 4096;
    /** Default largest payload of one copy-transport message (WRITE_DATA / READ_DATA). */
    public static final int MAX_INLINE_BYTES_DEFAULT = 32 * 1024;

    private long poolSizeBytes = POOL_SIZE_BYTES_DEFAULT;
    private int alignment = ALIGNMENT_DEFAULT;
    private int chunkTokens = CHUNK_TOKENS_DEFAULT;
    private long leaseNs = LEASE_NS_DEFAULT;
    private long slotBytes = 0;
    private int maxChunksPerRequest = MAX_CHUNKS_PER_REQUEST_DEFAULT;
    private int maxTransfers = MAX_TRANSFERS_DEFAULT;
    private int maxInstances = MAX_INSTANCES_DEFAULT;
    private int sweepLimit = SWEEP_LIMIT_DEFAULT;
    private long dataOffset = 0;
    private int maxInlineBytes = MAX_INLINE_BYTES_DEFAULT;
    private EvictionPolicy eviction = EvictionPolicy.LRU;
    private PoolCommitment poolCommitment;
    private boolean concluded;

    /**
     * Validates the configuration; call once before use.
     *
     * @return this.
     * @throws IllegalArgumentException when a value is out of range.
     */
    public StoreContext conclude()
    {
        if (alignment <= 0 || Integer.bitCount(alignment) != 1)
        {
            throw new IllegalArgumentException("alignment " + alignment + " is not a power of two: give e.g. 4096");
        }
        if (poolSizeBytes < alignment)
        {
            throw new IllegalArgumentException("pool size " + poolSizeBytes + " bytes is smaller than one alignment unit: give at least " + alignment);
        }
        if ((long)Integer.MAX_VALUE * alignment < poolSizeBytes)
        {
            throw new IllegalArgumentException("pool size " + poolSizeBytes + " bytes has more than 2^31 alignment units of " + alignment +
                " bytes: give at most " + (long)Integer.MAX_VALUE * alignment + " or a larger alignment");
        }
        if (chunkTokens <= 0 || chunkTokens > (1 << 20))
        {
            throw new IllegalArgumentException("chunk tokens " + chunkTokens + " is out of range: give 1 to " + (1 << 20));
        }
        if (leaseNs <= 0)
        {
            throw new IllegalArgumentException("lease " + leaseNs + " ns is not positive: give e.g. 30s");
        }
        if (slotBytes < 0 || slotBytes > poolSizeBytes ||
            ((slotBytes + alignment - 1) & -(long)alignment) > poolSizeBytes)
        {
            throw new IllegalArgumentException(
                "slot bytes " + slotBytes + " rounded up to the alignment is larger than the pool (" + poolSizeBytes +
                " bytes): give 0 (sized by the first layout) to " + (poolSizeBytes & -(long)alignment));
        }
        if (maxChunksPerRequest <= 0 || maxChunksPerRequest > (1 << 20))
        {
            throw new IllegalArgumentException("max chunks per request " + maxChunksPerRequest + " is out of range: give 1 to " + (1 << 20));
        }
        if (maxTransfers <= 0 || maxTransfers > (1 << 30) || maxInstances <= 0 || maxInstances > (1 << 20))
        {
            throw new IllegalArgumentException("max transfers or instances out of range");
        }
        if (sweepLimit <= 0)
        {
            throw new IllegalArgumentException("sweep limit must be positive");
        }
        if (dataOffset < 0 || (dataOffset & (alignment - 1)) != 0)
        {
            throw new IllegalArgumentException("data offset must be a non-negative multiple of the alignment");
        }
        if (maxInlineBytes <= 0 || maxInlineBytes > (1 << 24))
        {
            throw new IllegalArgumentException("max inline bytes must be in [1, 16 MiB]");
        }
        concluded = true;
        return this;
    }

    /**
     * Whether {@link #conclude()} has run.
     *
     * @return true once concluded.
     */
    public boolean isConcluded()
    {
        return concluded;
    }

    /**
     * Pool size.
     *
     * @return bytes of the data region holding chunk slots.
     */
    public long poolSizeBytes()
    {
        return poolSizeBytes;
    }

    /**
     * Sets the pool size.
     *
     * @param poolSizeBytes bytes of the data region.
     * @return this.
     */
    public StoreContext poolSizeBytes(final long poolSizeBytes)
    {
        this.poolSizeBytes = poolSizeBytes;
        return this;
    }

    /**
     * Slot alignment.
     *
     * @return alignment in bytes, a power of two.
     */
    public int alignment()
    {
        return alignment;
    }

    /**
     * Sets the slot alignment.
     *
     * @param alignment bytes, a power of two.
     * @return this.
     */
    public StoreContext alignment(final int alignment)
    {
        this.alignment = alignment;
        return this;
    }

    /**
     * Chunk size.
     *
     * @return tokens per chunk.
     */
    public int chunkTokens()
    {
        return chunkTokens;
    }

    /**
     * Sets the chunk size.
     *
     * @param chunkTokens tokens per chunk.
     * @return this.
     */
    public StoreContext chunkTokens(final int chunkTokens)
    {
        this.chunkTokens = chunkTokens;
        return this;
    }

    /**
     * Lease of reservations and pins.
     *
     * @return lease in nanoseconds.
     */
    public long leaseNs()
    {
        return leaseNs;
    }

    /**
     * Sets the lease.
     *
     * @param leaseNs lease in nanoseconds.
     * @return this.
     */
    public StoreContext leaseNs(final long leaseNs)
    {
        this.leaseNs = leaseNs;
        return this;
    }

    /**
     * Fixed slot size, or 0 to size slots from the registered layouts.
     *
     * @return bytes per slot or 0.
     */
    public long slotBytes()
    {
        return slotBytes;
    }

    /**
     * Sets a fixed slot size; 0 sizes slots from the largest registered chunk.
     *
     * @param slotBytes bytes per slot (rounded up to the alignment) or 0.
     * @return this.
     */
    public StoreContext slotBytes(final long slotBytes)
    {
        this.slotBytes = slotBytes;
        return this;
    }

    /**
     * Largest key range.
     *
     * @return chunks per request at most.
     */
    public int maxChunksPerRequest()
    {
        return maxChunksPerRequest;
    }

    /**
     * Sets the largest key range.
     *
     * @param maxChunksPerRequest chunks per request at most.
     * @return this.
     */
    public StoreContext maxChunksPerRequest(final int maxChunksPerRequest)
    {
        this.maxChunksPerRequest = maxChunksPerRequest;
        return this;
    }

    /**
     * Pending transfer limit.
     *
     * @return transfers at most.
     */
    public int maxTransfers()
    {
        return maxTransfers;
    }

    /**
     * Sets the pending transfer limit.
     *
     * @param maxTransfers transfers at most.
     * @return this.
     */
    public StoreContext maxTransfers(final int maxTransfers)
    {
        this.maxTransfers = maxTransfers;
        return this;
    }

    /**
     * Instance limit.
     *
     * @return instances at most.
     */
    public int maxInstances()
    {
        return maxInstances;
    }

    /**
     * Sets the instance limit.
     *
     * @param maxInstances instances at most.
     * @return this.
     */
    public StoreContext maxInstances(final int maxInstances)
    {
        this.maxInstances = maxInstances;
        return this;
    }

    /**
     * Expired transfers reclaimed per sweep at most.
     *
     * @return limit.
     */
    public int sweepLimit()
    {
        return sweepLimit;
    }

    /**
     * Sets the sweep limit.
     *
     * @param sweepLimit transfers per sweep at most.
     * @return this.
     */
    public StoreContext sweepLimit(final int sweepLimit)
    {
        this.sweepLimit = sweepLimit;
        return this;
    }

    /**
     * Offset of the data region inside the pool file; slot offsets handed to clients include it.
     *
     * @return bytes, a multiple of the alignment.
     */
    public long dataOffset()
    {
        return dataOffset;
    }

    /**
     * Sets the data region offset.
     *
     * @param dataOffset bytes, a multiple of the alignment.
     * @return this.
     */
    public StoreContext dataOffset(final long dataOffset)
    {
        this.dataOffset = dataOffset;
        return this;
    }

    /**
     * Largest payload of one copy-transport message.
     *
     * @return bytes.
     */
    public int maxInlineBytes()
    {
        return maxInlineBytes;
    }

    /**
     * Sets the largest payload of one copy-transport message.
     *
     * @param maxInlineBytes bytes.
     * @return this.
     */
    public StoreContext maxInlineBytes(final int maxInlineBytes)
    {
        this.maxInlineBytes = maxInlineBytes;
        return this;
    }

    /**
     * Eviction policy of the book.
     *
     * @return policy; {@link EvictionPolicy#LRU} unless set.
     */
    public EvictionPolicy eviction()
    {
        return eviction;
    }

    /**
     * Sets the eviction policy of the book.
     *
     * @param eviction policy, not null.
     * @return this.
     */
    public StoreContext eviction(final EvictionPolicy eviction)
    {
        if (null == eviction)
        {
            throw new IllegalArgumentException("eviction policy is null: give one of " + EvictionPolicy.names());
        }
        this.eviction = eviction;
        return this;
    }

    /**
     * What of the pool is committed, for a pool committed on demand.
     *
     * @return the commitment, or null when the whole pool is committed (the default).
     */
    public PoolCommitment poolCommitment()
    {
        return poolCommitment;
    }

    /**
     * Sets the commitment of a pool committed on demand: the store then gives a size class only free regions that
     * lie wholly in the committed prefix ({@link PoolCommitment}). Set before the store is built.
     *
     * @param poolCommitment the commitment, or null when the whole pool is committed.
     * @return this.
     */
    public StoreContext poolCommitment(final PoolCommitment poolCommitment)
    {
        this.poolCommitment = poolCommitment;
        return this;
    }

    /** {@inheritDoc} */
    @Override
    public String toString()
    {
        return "StoreContext{poolSizeBytes=" + poolSizeBytes + ", alignment=" + alignment +
            ", chunkTokens=" + chunkTokens + ", leaseNs=" + leaseNs + ", slotBytes=" + slotBytes +
            ", maxChunksPerRequest=" + maxChunksPerRequest + ", maxTransfers=" + maxTransfers +
            ", maxInstances=" + maxInstances + ", sweepLimit=" + sweepLimit + ", dataOffset=" + dataOffset +
            ", maxInlineBytes=" + maxInlineBytes +
            (EvictionPolicy.LRU == eviction ? "" : ", eviction=" + eviction.label()) + '}';
    }
}
