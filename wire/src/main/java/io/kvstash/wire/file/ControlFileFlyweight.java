package io.kvstash.wire.file;

import io.kvstash.wire.WireVersion;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Reads and writes the fields of a control file ({@link ControlFileDescriptor}) over a buffer that maps it: the one
 * place that knows the header's and the config's offsets, used by the server that writes the file, the client that
 * connects through it and the tools that read it (a live file or a {@code dead-control-*}). Not thread safe; wrap
 * a buffer once per thread.
 * <p>
 * The server writes the config ({@link #config()}), then {@link #header(long, long, long)} and {@link #sections(int, int)}, then each
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

    private AtomicBuffer buffer;
    private final UnsafeBuffer labelsBuffer = new UnsafeBuffer(0, 0);
    private final CounterLabelsFlyweight labels = new CounterLabelsFlyweight();
    private final ServerConfigFlyweight config = new ServerConfigFlyweight();

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
        config.wrap(buffer);
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
     * The config section: what the server was started with (pool, store limits, client sizes, features).
     *
     * @return the section's flyweight over the same buffer.
     */
    public ServerConfigFlyweight config()
    {
        return config;
    }
}
