package io.kvstash.tools;

import io.kvstash.core.StoreCounters;
import io.kvstash.wire.WireVersion;
import io.kvstash.wire.file.ControlFileDescriptor;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.errors.ErrorConsumer;
import org.agrona.concurrent.errors.ErrorLogReader;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A read-only view of a server's control file ({@code control}, or a {@code dead-control-*} a later server
 * kept): header facts, configuration, counters and the distinct-error log, read without the server's help
 * and whether or not it still runs. Sections are located through the offsets in the header. The mapping is
 * read-only and the server never truncates the file while mapped, so no read here can fault.
 */
public final class ControlFileReader implements AutoCloseable
{
    private final Path path;
    private final MappedByteBuffer mapped;
    private final UnsafeBuffer buffer;
    private final int countersOffset;
    private final int countersLength;
    private final int errorLogOffset;
    private final int errorLogLength;

    private ControlFileReader(final Path path, final MappedByteBuffer mapped)
    {
        this.path = path;
        this.mapped = mapped;
        this.buffer = new UnsafeBuffer(mapped);
        countersOffset = buffer.getInt(ControlFileDescriptor.COUNTERS_SECTION_OFFSET);
        countersLength = buffer.getInt(ControlFileDescriptor.COUNTERS_SECTION_OFFSET + 4);
        errorLogOffset = buffer.getInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET);
        errorLogLength = buffer.getInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET + 4);
        if (countersOffset < ControlFileDescriptor.HEADER_LENGTH || countersLength < 0 ||
            (long)countersOffset + countersLength > buffer.capacity() || (countersOffset & 7) != 0 ||
            errorLogOffset < ControlFileDescriptor.HEADER_LENGTH || errorLogLength < 0 ||
            (long)errorLogOffset + errorLogLength > buffer.capacity())
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
        final UnsafeBuffer header = new UnsafeBuffer(mapped);
        final String problem;
        if (header.getLong(ControlFileDescriptor.MAGIC_OFFSET) != ControlFileDescriptor.MAGIC)
        {
            problem = " is not a kvstash control file (bad magic)";
        }
        else if (!WireVersion.isWritten(header.getIntAcquire(ControlFileDescriptor.VERSION_OFFSET)))
        {
            problem = " is not complete: its server never finished starting";
        }
        else if (!WireVersion.isCompatible(header.getIntAcquire(ControlFileDescriptor.VERSION_OFFSET)))
        {
            problem = " has version " + WireVersion.toString(header.getIntAcquire(ControlFileDescriptor.VERSION_OFFSET)) +
                ", this kvstash reads " + WireVersion.MAJOR + ".x";
        }
        else
        {
            problem = null;
        }
        if (null != problem)
        {
            IoUtil.unmap(mapped);
            throw new IllegalArgumentException(path + problem);
        }
        return new ControlFileReader(path, mapped);
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
        return buffer.getIntAcquire(ControlFileDescriptor.VERSION_OFFSET);
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
     * The server's last heartbeat.
     *
     * @return epoch ms.
     */
    public long heartbeatMs()
    {
        return buffer.getLongAcquire(ControlFileDescriptor.HEARTBEAT_OFFSET);
    }

    /**
     * State word: {@link ControlFileDescriptor#STATE_RUNNING} or {@link ControlFileDescriptor#STATE_CLOSED}.
     *
     * @return state.
     */
    public int state()
    {
        return buffer.getIntAcquire(ControlFileDescriptor.STATE_OFFSET);
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
        return configInt(ControlFileDescriptor.HEARTBEAT_TIMEOUT_OFFSET);
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
        return buffer.getInt(ControlFileDescriptor.CONFIG_OFFSET + offset);
    }

    /**
     * A 64-bit value of the configuration section.
     *
     * @param offset offset in the section.
     * @return value.
     */
    public long configLong(final int offset)
    {
        return buffer.getLong(ControlFileDescriptor.CONFIG_OFFSET + offset);
    }

    /**
     * The pool file's name.
     *
     * @return name, or empty when the section holds none.
     */
    public String poolFileName()
    {
        final int length = configInt(ControlFileDescriptor.POOL_NAME_LENGTH_OFFSET);
        if (length <= 0 || length > ControlFileDescriptor.POOL_NAME_MAX_LENGTH)
        {
            return "";
        }
        final byte[] bytes = new byte[length];
        buffer.getBytes(ControlFileDescriptor.CONFIG_OFFSET + ControlFileDescriptor.POOL_NAME_OFFSET, bytes);
        return new String(bytes, StandardCharsets.US_ASCII);
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
     * @param id counter id ({@link StoreCounters}).
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
