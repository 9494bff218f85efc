package io.kvstash.tools;

import io.kvstash.wire.WireVersion;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.ControlFileFlyweight;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.IoUtil;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.errors.ErrorConsumer;
import org.agrona.concurrent.errors.ErrorLogReader;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A read-only view of a server's control file ({@code control}, or a {@code dead-control-*} a later server
 * kept): header facts, configuration, counters with the names the server wrote beside them, and the distinct-error
 * log, read without the server's help and whether or not it still runs. Sections are located through the offsets in the header. The mapping is
 * read-only and the server never truncates the file while mapped, so no read here can fault.
 */
public final class ControlFileReader implements AutoCloseable
{
    private final Path path;
    private final MappedByteBuffer mapped;
    private final AtomicBuffer buffer;
    private final ControlFileFlyweight controlFile;
    private final int countersOffset;
    private final int countersLength;
    private final int errorLogOffset;
    private final int errorLogLength;

    private ControlFileReader(final Path path, final MappedByteBuffer mapped, final ControlFileFlyweight controlFile)
    {
        this.path = path;
        this.mapped = mapped;
        this.controlFile = controlFile;
        this.buffer = controlFile.buffer();
        countersOffset = controlFile.countersOffset();
        countersLength = controlFile.countersLength();
        errorLogOffset = controlFile.errorLogOffset();
        errorLogLength = controlFile.errorLogLength();
        if (!controlFile.hasValidSections())
        {
            IoUtil.unmap(mapped);
            throw new IllegalArgumentException(path + ": section offsets out of range (corrupt control file)");
        }
    }

    /**
     * Maps a control file read-only and checks its magic and major version.
     *
     * @param path control file.
     * @return the reader; close it to unmap.
     * @throws IOException when the file cannot be opened (e.g. no server ever ran or it shut down cleanly).
     * @throws IllegalArgumentException when it is not a complete control file of this major version.
     */
    public static ControlFileReader open(final Path path) throws IOException
    {
        final MappedByteBuffer mapped;
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ))
        {
            final long size = channel.size();
            if (size < ControlFileDescriptor.COUNTERS_OFFSET || size > Integer.MAX_VALUE)
            {
                throw new IllegalArgumentException(path + " is not a kvstash control file (" + size + " bytes)");
            }
            mapped = channel.map(FileChannel.MapMode.READ_ONLY, 0, size);
        }
        final ControlFileFlyweight controlFile = new ControlFileFlyweight().wrap(new UnsafeBuffer(mapped));
        final String problem = switch (controlFile.check())
        {
            case ControlFileFlyweight.NOT_A_CONTROL_FILE -> " is not a kvstash control file (bad magic)";
            case ControlFileFlyweight.NOT_WRITTEN -> " is not complete: its server never finished starting";
            case ControlFileFlyweight.INCOMPATIBLE -> " has version " +
                WireVersion.toString(controlFile.versionAcquire()) + ", this kvstash reads " + WireVersion.MAJOR + ".x";
            default -> null;
        };
        if (null != problem)
        {
            IoUtil.unmap(mapped);
            throw new IllegalArgumentException(path + problem);
        }
        return new ControlFileReader(path, mapped, controlFile);
    }

    /**
     * The file read.
     *
     * @return path.
     */
    public Path path()
    {
        return path;
    }

    /**
     * Packed version {@code 0x00MMmmpp}.
     *
     * @return version.
     */
    public int version()
    {
        return controlFile.versionAcquire();
    }

    /**
     * The server's process id.
     *
     * @return pid.
     */
    public long pid()
    {
        return controlFile.pid();
    }

    /**
     * The server's incarnation.
     *
     * @return incarnation.
     */
    public long incarnation()
    {
        return controlFile.incarnation();
    }

    /**
     * When the server started.
     *
     * @return epoch ms.
     */
    public long startTimeMs()
    {
        return controlFile.startTimeMs();
    }

    /**
     * The server's last heartbeat.
     *
     * @return epoch ms.
     */
    public long heartbeatMs()
    {
        return controlFile.heartbeatMsAcquire();
    }

    /**
     * State word: {@link ControlFileDescriptor#STATE_RUNNING} or {@link ControlFileDescriptor#STATE_CLOSED}.
     *
     * @return state.
     */
    public int state()
    {
        return controlFile.stateAcquire();
    }

    /**
     * State name.
     *
     * @return RUNNING, CLOSED or UNKNOWN(n).
     */
    public String stateName()
    {
        final int state = state();
        if (ControlFileDescriptor.STATE_RUNNING == state)
        {
            return "RUNNING";
        }
        return ControlFileDescriptor.STATE_CLOSED == state ? "CLOSED" : "UNKNOWN(" + state + ")";
    }

    /**
     * Heartbeat timeout the server published to its clients.
     *
     * @return ms.
     */
    public long heartbeatTimeoutMs()
    {
        return controlFile.config().heartbeatTimeoutMs();
    }

    /**
     * Whether the server is alive: state RUNNING, a heartbeat within the heartbeat timeout, and its process
     * alive; the same test clients apply.
     *
     * @param nowMs wall clock now.
     * @return true when alive.
     */
    public boolean isAlive(final long nowMs)
    {
        return ControlFileDescriptor.STATE_RUNNING == state() &&
            nowMs - heartbeatMs() <= Math.max(1, heartbeatTimeoutMs()) &&
            ProcessHandle.of(pid()).map(ProcessHandle::isAlive).orElse(false);
    }

    /**
     * A 32-bit value of the configuration section.
     *
     * @param offset offset in the section ({@code ControlFileDescriptor.*_OFFSET} of the config).
     * @return value.
     */
    public int configInt(final int offset)
    {
        return controlFile.config().configInt(offset);
    }

    /**
     * A 64-bit value of the configuration section.
     *
     * @param offset offset in the section.
     * @return value.
     */
    public long configLong(final int offset)
    {
        return controlFile.config().configLong(offset);
    }

    /**
     * The pool file's name.
     *
     * @return name, or empty when the section holds none.
     */
    public String poolFileName()
    {
        final String name = controlFile.config().poolFileName();
        return null == name ? "" : name;
    }

    /**
     * Number of counter ids in the file.
     *
     * @return count.
     */
    public int counterCount()
    {
        return countersLength / Long.BYTES;
    }

    /**
     * A counter, loaded with acquire semantics.
     *
     * @param id counter id ({@link CountersDescriptor}).
     * @return value, 0 for an id past the file's counters.
     */
    public long counter(final int id)
    {
        if (id < 0 || id >= counterCount())
        {
            return 0;
        }
        return buffer.getLongAcquire(countersOffset + id * Long.BYTES);
    }

    /**
     * A counter's name as the server that wrote the file labelled it, so that a file of a dead server, or of one of
     * another version, is read with its own names; {@link CountersDescriptor#name(int)} only where the file has no
     * label for the id.
     *
     * @param id counter id.
     * @return name, or null for an id neither the file nor this kvstash names.
     */
    public String counterName(final int id)
    {
        final String label = controlFile.counterLabel(id);
        return label.isEmpty() ? CountersDescriptor.name(id) : label;
    }

    /**
     * Reads the distinct-error log.
     *
     * @param consumer receives each distinct error: count, first and last epoch ms, the stack trace text.
     * @return number of distinct errors.
     */
    public int readErrors(final ErrorConsumer consumer)
    {
        if (0 == errorLogLength)
        {
            return 0;
        }
        return ErrorLogReader.read(new UnsafeBuffer(buffer, errorLogOffset, errorLogLength), consumer);
    }

    /**
     * Unmaps the file.
     */
    @Override
    public void close()
    {
        IoUtil.unmap(mapped);
    }
}
