package io.kvstash.wire.file;

import org.agrona.concurrent.AtomicBuffer;

import java.nio.charset.StandardCharsets;

/**
 * Reads and writes the config section of a control file ({@link ControlFileDescriptor#CONFIG_OFFSET}): what the
 * server was started with, which a client sizes its files, pool mapping and liveness checks by and the tools print.
 * The server writes it before the header's version; a reader trusts it once {@link ControlFileFlyweight#check()}
 * said OK. Reached through {@link ControlFileFlyweight#config()}; not thread safe.
 */
public final class ServerConfigFlyweight
{
    private static final int CONFIG = ControlFileDescriptor.CONFIG_OFFSET;

    private AtomicBuffer buffer;

    /**
     * Wraps a buffer that maps a control file from its first byte.
     *
     * @param buffer the mapped file.
     * @return this.
     */
    public ServerConfigFlyweight wrap(final AtomicBuffer buffer)
    {
        this.buffer = buffer;
        return this;
    }

    /**
     * A 32-bit word of the config section.
     *
     * @param offset offset in the section ({@code ControlFileDescriptor.*_OFFSET} of the config).
     * @return value.
     */
    public int configInt(final int offset)
    {
        return buffer.getInt(CONFIG + offset);
    }

    /**
     * A 64-bit word of the config section.
     *
     * @param offset offset in the section.
     * @return value.
     */
    public long configLong(final int offset)
    {
        return buffer.getLong(CONFIG + offset);
    }

    /**
     * The pool file's name, in the server's directory.
     *
     * @return the name, or null when the section holds no valid one.
     */
    public String poolFileName()
    {
        final int length = configInt(ControlFileDescriptor.POOL_NAME_LENGTH_OFFSET);
        if (length <= 0 || length > ControlFileDescriptor.POOL_NAME_MAX_LENGTH)
        {
            return null;
        }
        final byte[] bytes = new byte[length];
        buffer.getBytes(CONFIG + ControlFileDescriptor.POOL_NAME_OFFSET, bytes);
        return new String(bytes, StandardCharsets.US_ASCII);
    }

    /**
     * Writes the pool file's name.
     *
     * @param name ASCII, at most {@link ControlFileDescriptor#POOL_NAME_MAX_LENGTH} bytes.
     * @return this.
     */
    public ServerConfigFlyweight poolFileName(final String name)
    {
        final byte[] bytes = name.getBytes(StandardCharsets.US_ASCII);
        if (bytes.length > ControlFileDescriptor.POOL_NAME_MAX_LENGTH)
        {
            throw new IllegalArgumentException("pool file name longer than " +
                ControlFileDescriptor.POOL_NAME_MAX_LENGTH + " bytes: " + name);
        }
        buffer.putInt(CONFIG + ControlFileDescriptor.POOL_NAME_LENGTH_OFFSET, bytes.length);
        buffer.putBytes(CONFIG + ControlFileDescriptor.POOL_NAME_OFFSET, bytes);
        return this;
    }

    /**
     * Bytes of pool data.
     *
     * @return bytes.
     */
    public long poolSizeBytes()
    {
        return configLong(ControlFileDescriptor.POOL_SIZE_OFFSET);
    }

    /**
     * Writes the pool's data bytes and where its sections lie in the pool file.
     *
     * @param poolSizeBytes   bytes of pool data.
     * @param dataOffset      offset of the data in the pool file.
     * @param slotTableOffset offset of the slot table in the pool file.
     * @param slotTableLength bytes of the slot table.
     * @param segmentBytes    bytes of each mapping segment.
     * @param alignment       slot alignment.
     * @return this.
     */
    public ServerConfigFlyweight pool(
        final long poolSizeBytes,
        final long dataOffset,
        final long slotTableOffset,
        final long slotTableLength,
        final long segmentBytes,
        final int alignment)
    {
        buffer.putLong(CONFIG + ControlFileDescriptor.POOL_SIZE_OFFSET, poolSizeBytes);
        buffer.putLong(CONFIG + ControlFileDescriptor.DATA_OFFSET_OFFSET, dataOffset);
        buffer.putLong(CONFIG + ControlFileDescriptor.SLOT_TABLE_OFFSET_OFFSET, slotTableOffset);
        buffer.putLong(CONFIG + ControlFileDescriptor.SLOT_TABLE_LENGTH_OFFSET, slotTableLength);
        buffer.putLong(CONFIG + ControlFileDescriptor.SEGMENT_BYTES_OFFSET, segmentBytes);
        buffer.putInt(CONFIG + ControlFileDescriptor.ALIGNMENT_OFFSET, alignment);
        return this;
    }

    /**
     * Offset of the pool's data in the pool file.
     *
     * @return bytes.
     */
    public long dataOffset()
    {
        return configLong(ControlFileDescriptor.DATA_OFFSET_OFFSET);
    }

    /**
     * Bytes of each mapping segment of the pool.
     *
     * @return bytes.
     */
    public long segmentBytes()
    {
        return configLong(ControlFileDescriptor.SEGMENT_BYTES_OFFSET);
    }

    /**
     * Slot alignment.
     *
     * @return bytes.
     */
    public int alignment()
    {
        return configInt(ControlFileDescriptor.ALIGNMENT_OFFSET);
    }

    /**
     * Writes the store's limits.
     *
     * @param chunkTokens         tokens per chunk.
     * @param leaseNs             lease of a transfer.
     * @param maxChunksPerRequest most chunks one request may name.
     * @param maxInlineBytes      most bytes of an inline (copy-transport) message.
     * @return this.
     */
    public ServerConfigFlyweight store(
        final int chunkTokens, final long leaseNs, final int maxChunksPerRequest, final int maxInlineBytes)
    {
        buffer.putInt(CONFIG + ControlFileDescriptor.CHUNK_TOKENS_OFFSET, chunkTokens);
        buffer.putLong(CONFIG + ControlFileDescriptor.LEASE_NS_OFFSET, leaseNs);
        buffer.putInt(CONFIG + ControlFileDescriptor.MAX_CHUNKS_OFFSET, maxChunksPerRequest);
        buffer.putInt(CONFIG + ControlFileDescriptor.MAX_INLINE_OFFSET, maxInlineBytes);
        return this;
    }

    /**
     * Tokens per chunk.
     *
     * @return tokens.
     */
    public int chunkTokens()
    {
        return configInt(ControlFileDescriptor.CHUNK_TOKENS_OFFSET);
    }

    /**
     * Most chunks one request may name.
     *
     * @return chunks.
     */
    public int maxChunksPerRequest()
    {
        return configInt(ControlFileDescriptor.MAX_CHUNKS_OFFSET);
    }

    /**
     * Most bytes of an inline message.
     *
     * @return bytes.
     */
    public int maxInlineBytes()
    {
        return configInt(ControlFileDescriptor.MAX_INLINE_OFFSET);
    }

    /**
     * Writes what clients size their files and their liveness checks by.
     *
     * @param requestRingCapacity  capacity of a client's request ring.
     * @param responseRingCapacity capacity of a client's response ring.
     * @param maxClients           most clients attached at once.
     * @param heartbeatIntervalMs  how often the server beats.
     * @param heartbeatTimeoutMs   after how long without a beat clients consider the server dead.
     * @return this.
     */
    public ServerConfigFlyweight clients(
        final int requestRingCapacity,
        final int responseRingCapacity,
        final int maxClients,
        final int heartbeatIntervalMs,
        final int heartbeatTimeoutMs)
    {
        buffer.putInt(CONFIG + ControlFileDescriptor.REQUEST_RING_CAPACITY_OFFSET, requestRingCapacity);
        buffer.putInt(CONFIG + ControlFileDescriptor.RESPONSE_RING_CAPACITY_OFFSET, responseRingCapacity);
        buffer.putInt(CONFIG + ControlFileDescriptor.MAX_CLIENTS_OFFSET, maxClients);
        buffer.putInt(CONFIG + ControlFileDescriptor.HEARTBEAT_INTERVAL_OFFSET, heartbeatIntervalMs);
        buffer.putInt(CONFIG + ControlFileDescriptor.HEARTBEAT_TIMEOUT_OFFSET, heartbeatTimeoutMs);
        return this;
    }

    /**
     * Capacity of a client's request ring.
     *
     * @return bytes.
     */
    public int requestRingCapacity()
    {
        return configInt(ControlFileDescriptor.REQUEST_RING_CAPACITY_OFFSET);
    }

    /**
     * Capacity of a client's response ring.
     *
     * @return bytes.
     */
    public int responseRingCapacity()
    {
        return configInt(ControlFileDescriptor.RESPONSE_RING_CAPACITY_OFFSET);
    }

    /**
     * How often the server beats.
     *
     * @return ms.
     */
    public int heartbeatIntervalMs()
    {
        return configInt(ControlFileDescriptor.HEARTBEAT_INTERVAL_OFFSET);
    }

    /**
     * After how long without a beat clients consider the server dead.
     *
     * @return ms.
     */
    public int heartbeatTimeoutMs()
    {
        return configInt(ControlFileDescriptor.HEARTBEAT_TIMEOUT_OFFSET);
    }

    /**
     * Writes the Features word and the eviction policy.
     *
     * @param features             {@code ControlFileDescriptor.FEATURE_*} bits.
     * @param evictionPolicyCode   the policy's code plus one ({@link ControlFileDescriptor#EVICTION_POLICY_OFFSET}).
     * @return this.
     */
    public ServerConfigFlyweight features(final int features, final int evictionPolicyCode)
    {
        buffer.putInt(CONFIG + ControlFileDescriptor.FEATURES_OFFSET, features);
        buffer.putInt(CONFIG + ControlFileDescriptor.EVICTION_POLICY_OFFSET, evictionPolicyCode);
        return this;
    }

    /**
     * The Features word: {@code ControlFileDescriptor.FEATURE_*} bits.
     *
     * @return bits.
     */
    public int features()
    {
        return configInt(ControlFileDescriptor.FEATURES_OFFSET);
    }
}
