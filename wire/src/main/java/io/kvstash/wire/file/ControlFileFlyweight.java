package io.kvstash.wire.file;

import io.kvstash.wire.WireVersion;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Reads and writes the fields of a control file ({@link ControlFileDescriptor}) over a buffer that maps it: the one
 * place that knows the header's and the config's offsets, used by the server that writes the file, the client that
 * connects through it and the tools that read it (a live file or a {@code dead-control-*}). Not thread safe; wrap
 * a buffer once per thread.
 * <p>
 * The server writes the config, then {@link #header(long, long, long)} and {@link #sections(int, int)}, then each
 * counter's label through {@link #counterLabels()}, then the version with {@link #versionRelease(int)}, last. A
 * reader calls {@link #check()} before trusting any other field.
 */
public final class ControlFileFlyweight
{
    /** {@link #check()}: a complete control file of this major version. */
    public static final int OK = 0;
    /** {@link #check()}: shorter than its header and config, or not a control file (bad magic). */
    public static final int NOT_A_CONTROL_FILE = 1;
    /** {@link #check()}: its version is not written yet: the server has not finished creating it. */
    public static final int NOT_WRITTEN = 2;
    /** {@link #check()}: another major version. */
    public static final int INCOMPATIBLE = 3;

    private static final int CONFIG = ControlFileDescriptor.CONFIG_OFFSET;

    private AtomicBuffer buffer;
    private final UnsafeBuffer labelsBuffer = new UnsafeBuffer(0, 0);
    private final CounterLabelsFlyweight labels = new CounterLabelsFlyweight();

    /**
     * The incarnation of the server that wrote a control file, read from its header without mapping it: a client
     * asks whether the server restarted, a starting server names the control file of the one before.
     *
     * @param controlFile a control file ({@code control} or a {@code dead-control-*}).
     * @return the incarnation, or 0 when the file cannot be read or its version is not written.
     */
    public static long readIncarnation(final Path controlFile)
    {
        try (FileChannel channel = FileChannel.open(controlFile, StandardOpenOption.READ))
        {
            final UnsafeBuffer header =
                new UnsafeBuffer(ByteBuffer.allocateDirect(ControlFileDescriptor.HEADER_LENGTH));
            channel.read(header.byteBuffer(), 0);
            final ControlFileFlyweight flyweight = new ControlFileFlyweight().wrap(header);
            return WireVersion.isWritten(flyweight.versionAcquire()) ? flyweight.incarnation() : 0;
        }
        catch (final IOException ex)
        {
            return 0;
        }
    }

    /**
     * Wraps a buffer that maps a control file from its first byte.
     *
     * @param buffer the mapped file (a header-length buffer is enough for the header's fields).
     * @return this.
     */
    public ControlFileFlyweight wrap(final AtomicBuffer buffer)
    {
        this.buffer = buffer;
        return this;
    }

    /**
     * The buffer wrapped.
     *
     * @return buffer.
     */
    public AtomicBuffer buffer()
    {
        return buffer;
    }

    /**
     * Whether the file is a complete control file of this major version: long enough for header and config, the
     * magic, the version written (acquire load) and its major version.
     *
     * @return {@link #OK}, {@link #NOT_A_CONTROL_FILE}, {@link #NOT_WRITTEN} or {@link #INCOMPATIBLE}.
     */
    public int check()
    {
        if (buffer.capacity() < ControlFileDescriptor.COUNTERS_OFFSET ||
            buffer.getLong(ControlFileDescriptor.MAGIC_OFFSET) != ControlFileDescriptor.MAGIC)
        {
            return NOT_A_CONTROL_FILE;
        }
        final int version = versionAcquire();
        if (!WireVersion.isWritten(version))
        {
            return NOT_WRITTEN;
        }
        return WireVersion.isCompatible(version) ? OK : INCOMPATIBLE;
    }

    /**
     * Whether the section table of the header stays inside the buffer: counters (8-byte aligned), labels (4-byte
     * aligned) and error log after the header, each within the file.
     *
     * @return true when every section can be read.
     */
    public boolean hasValidSections()
    {
        return isSection(countersOffset(), countersLength(), 7) && hasValidLabels() &&
            isSection(errorLogOffset(), errorLogLength(), 0);
    }

    private boolean hasValidLabels()
    {
        return isSection(buffer.getInt(ControlFileDescriptor.LABELS_SECTION_OFFSET),
            buffer.getInt(ControlFileDescriptor.LABELS_SECTION_OFFSET + 4), 3);
    }

    private boolean isSection(final int offset, final int length, final int alignmentMask)
    {
        return offset >= ControlFileDescriptor.HEADER_LENGTH && length >= 0 &&
            (long)offset + length <= buffer.capacity() && 0 == (offset & alignmentMask);
    }

    // ------------------------------------------------------------------------------------------------- header

    /**
     * Packed version {@code 0x00MMmmpp}, acquire load: 0 until the server has written the whole file.
     *
     * @return version.
     */
    public int versionAcquire()
    {
        return buffer.getIntAcquire(ControlFileDescriptor.VERSION_OFFSET);
    }

    /**
     * Publishes the file: the version, with a release store, after every other field.
     *
     * @param version packed version ({@link ControlFileDescriptor#VERSION}).
     * @return this.
     */
    public ControlFileFlyweight versionRelease(final int version)
    {
        buffer.putIntRelease(ControlFileDescriptor.VERSION_OFFSET, version);
        return this;
    }

    /**
     * Writes the header's fixed fields: magic, header length, the server's pid, incarnation and start time.
     *
     * @param pid         the server's process id.
     * @param incarnation the server's incarnation.
     * @param startTimeMs when the server started, epoch ms.
     * @return this.
     */
    public ControlFileFlyweight header(final long pid, final long incarnation, final long startTimeMs)
    {
        buffer.putLong(ControlFileDescriptor.MAGIC_OFFSET, ControlFileDescriptor.MAGIC);
        buffer.putInt(ControlFileDescriptor.HEADER_LENGTH_OFFSET, ControlFileDescriptor.HEADER_LENGTH);
        buffer.putLong(ControlFileDescriptor.PID_OFFSET, pid);
        buffer.putLong(ControlFileDescriptor.INCARNATION_OFFSET, incarnation);
        buffer.putLong(ControlFileDescriptor.START_TIME_OFFSET, startTimeMs);
        return this;
    }

    /**
     * Writes the section table: the config, the counters at {@link ControlFileDescriptor#COUNTERS_OFFSET}, their
     * labels and the error log, each section after the one before (see {@link ControlFileDescriptor}).
     *
     * @param countersLength bytes the counters use.
     * @param errorLogLength bytes of the error log.
     * @return this.
     */
    public ControlFileFlyweight sections(final int countersLength, final int errorLogLength)
    {
        buffer.putInt(ControlFileDescriptor.CONFIG_SECTION_OFFSET, ControlFileDescriptor.CONFIG_OFFSET);
        buffer.putInt(ControlFileDescriptor.CONFIG_SECTION_OFFSET + 4, ControlFileDescriptor.CONFIG_LENGTH);
        buffer.putInt(ControlFileDescriptor.COUNTERS_SECTION_OFFSET, ControlFileDescriptor.COUNTERS_OFFSET);
        buffer.putInt(ControlFileDescriptor.COUNTERS_SECTION_OFFSET + 4, countersLength);
        buffer.putInt(ControlFileDescriptor.LABELS_SECTION_OFFSET, ControlFileDescriptor.labelsOffset(countersLength));
        buffer.putInt(ControlFileDescriptor.LABELS_SECTION_OFFSET + 4, ControlFileDescriptor.labelsLength(countersLength));
        buffer.putInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET, ControlFileDescriptor.errorLogOffset(countersLength));
        buffer.putInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET + 4, errorLogLength);
        return this;
    }

    /**
     * The server's process id.
     *
     * @return pid.
     */
    public long pid()
    {
        return buffer.getLong(ControlFileDescriptor.PID_OFFSET);
    }

    /**
     * The server's incarnation.
     *
     * @return incarnation.
     */
    public long incarnation()
    {
        return buffer.getLong(ControlFileDescriptor.INCARNATION_OFFSET);
    }

    /**
     * When the server started.
     *
     * @return epoch ms.
     */
    public long startTimeMs()
    {
        return buffer.getLong(ControlFileDescriptor.START_TIME_OFFSET);
    }

    /**
     * The server's last heartbeat, acquire load.
     *
     * @return epoch ms.
     */
    public long heartbeatMsAcquire()
    {
        return buffer.getLongAcquire(ControlFileDescriptor.HEARTBEAT_OFFSET);
    }

    /**
     * Beats: stores the heartbeat with release semantics (the server's receiver thread).
     *
     * @param nowMs epoch ms.
     * @return this.
     */
    public ControlFileFlyweight heartbeatMsRelease(final long nowMs)
    {
        buffer.putLongRelease(ControlFileDescriptor.HEARTBEAT_OFFSET, nowMs);
        return this;
    }

    /**
     * The state word, acquire load.
     *
     * @return {@link ControlFileDescriptor#STATE_RUNNING}, {@link ControlFileDescriptor#STATE_CLOSED} or another value
     * from a damaged file.
     */
    public int stateAcquire()
    {
        return buffer.getIntAcquire(ControlFileDescriptor.STATE_OFFSET);
    }

    /**
     * Stores the state word with release semantics.
     *
     * @param state {@link ControlFileDescriptor#STATE_RUNNING} or {@link ControlFileDescriptor#STATE_CLOSED}.
     * @return this.
     */
    public ControlFileFlyweight stateRelease(final int state)
    {
        buffer.putIntRelease(ControlFileDescriptor.STATE_OFFSET, state);
        return this;
    }

    /**
     * Offset of the counters section, from the header.
     *
     * @return bytes from the start of the file.
     */
    public int countersOffset()
    {
        return buffer.getInt(ControlFileDescriptor.COUNTERS_SECTION_OFFSET);
    }

    /**
     * Bytes the counters use, from the header.
     *
     * @return length.
     */
    public int countersLength()
    {
        return buffer.getInt(ControlFileDescriptor.COUNTERS_SECTION_OFFSET + 4);
    }

    /**
     * Offset of the error log, from the header.
     *
     * @return bytes from the start of the file.
     */
    public int errorLogOffset()
    {
        return buffer.getInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET);
    }

    /**
     * Length of the error log, from the header.
     *
     * @return bytes.
     */
    public int errorLogLength()
    {
        return buffer.getInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET + 4);
    }

    /**
     * The labels section where the header places it (one without labels when that is outside the buffer): the same
     * flyweight at every call, rewrapped without allocating.
     *
     * @return the labels flyweight over this file.
     */
    public CounterLabelsFlyweight counterLabels()
    {
        final int offset = ControlFileDescriptor.LABELS_SECTION_OFFSET;
        final boolean valid = hasValidLabels();
        labelsBuffer.wrap(buffer, valid ? buffer.getInt(offset) : 0, valid ? buffer.getInt(offset + 4) : 0);
        return labels.wrap(labelsBuffer);
    }

    /**
     * A counter's label, as the server that wrote the file named it: what a reader prints (allocates the string;
     * {@code counterLabels().label(id, dst, offset)} copies the bytes without allocating).
     *
     * @param id counter id.
     * @return the label; empty for an unused id, an id past the section, or a damaged record.
     */
    public String counterLabel(final int id)
    {
        return counterLabels().label(id);
    }

    // ------------------------------------------------------------------------------------------------- config

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
    public ControlFileFlyweight poolFileName(final String name)
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
    public ControlFileFlyweight pool(
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
    public ControlFileFlyweight store(
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
    public ControlFileFlyweight clients(
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
    public ControlFileFlyweight features(final int features, final int evictionPolicyCode)
    {
        buffer.putInt(CONFIG + ControlFileDescriptor.FEATURES_OFFSET, features);
        buffer.putInt(CONFIG + ControlFileDescriptor.EVICTION_POLICY_OFFSET, evictionPolicyCode);
        return this;
    }

    /**
     * The Features word: {@code ControlFileDescriptor.FEATURE_*} bits, 0 from a server older than minor version 1.
     *
     * @return bits.
     */
    public int features()
    {
        return configInt(ControlFileDescriptor.FEATURES_OFFSET);
    }
}
