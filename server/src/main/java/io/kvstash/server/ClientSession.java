package io.kvstash.server;

import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.ring.RingConsumer;
import io.kvstash.wire.ring.RingProducer;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * One attached client: its mapped file and rings. A session slot is reused by later clients; its
 * generation tells them apart, and the session id {@code index << 32 | generation} travels in every event
 * so a response never reaches a newer client in the same slot.
 * <p>
 * Threads: the {@link ClientConductor} attaches, closes and frees it, and the {@link ReceiverAgent} reads its
 * requests, both on the receiver thread; the publish stage writes responses. The mapping is released only after
 * the pipeline has passed every event of the session (see {@link #lastSequence}), so the publish stage never
 * writes into an unmapped ring.
 */
final class ClientSession
{
    static final int FREE = 0;
    static final int ATTACHED = 1;
    static final int CLOSING = 2;

    // Each of the two counters has one writer, so a release store is enough; a volatile store would put a full
    // fence (lock add) in every request's path, twice, which waits for the ring writes before it to drain.
    private static final VarHandle ADMITTED_BYTES;
    private static final VarHandle RELEASED_BYTES;

    static
    {
        try
        {
            final MethodHandles.Lookup lookup = MethodHandles.lookup();
            ADMITTED_BYTES = lookup.findVarHandle(ClientSession.class, "admittedBytes", long.class);
            RELEASED_BYTES = lookup.findVarHandle(ClientSession.class, "releasedBytes", long.class);
        }
        catch (final ReflectiveOperationException ex)
        {
            throw new ExceptionInInitializerError(ex);
        }
    }

    final int index;
    private volatile int state = FREE;
    private volatile long sessionId;
    private int generation;
    Path file;
    private FileChannel channel;
    private MappedByteBuffer mapped;
    UnsafeBuffer header;
    RingConsumer requests;
    RingProducer responses;
    long pid;
    /** Sequence of the last event the receiver published for this session (receiver thread). */
    long lastSequence = -1;
    /** Response bytes the receiver has admitted (receiver thread writes, release; read acquire). */
    private long admittedBytes;
    /** Response bytes the publish stage has finished (publish thread writes, release; read acquire). */
    private long releasedBytes;
    /** Whether the head request waits for response room; counted once per deferred request (receiver). */
    boolean backPressured;
    /** Why the session is closing: true when its process died. */
    boolean dead;

    ClientSession(final int index)
    {
        this.index = index;
    }

    int state()
    {
        return state;
    }

    long sessionId()
    {
        return sessionId;
    }

    void attach(
        final Path file,
        final FileChannel channel,
        final MappedByteBuffer mapped,
        final int requestCapacity,
        final int responseCapacity,
        final long pid)
    {
        this.file = file;
        this.channel = channel;
        this.mapped = mapped;
        this.pid = pid;
        header = new UnsafeBuffer(mapped, 0, ClientFileDescriptor.HEADER_LENGTH);
        requests = new RingConsumer(new UnsafeBuffer(mapped, ClientFileDescriptor.REQUEST_RING_OFFSET,
            io.kvstash.wire.ring.RingDescriptor.totalLength(requestCapacity)));
        responses = new RingProducer(new UnsafeBuffer(mapped, ClientFileDescriptor.responseRingOffset(requestCapacity),
            io.kvstash.wire.ring.RingDescriptor.totalLength(responseCapacity)));
        lastSequence = -1;
        ADMITTED_BYTES.setRelease(this, 0L);
        RELEASED_BYTES.setRelease(this, 0L);
        dead = false;
        backPressured = false;
        generation = generation + 1 == 0 ? 1 : generation + 1;
        sessionId = ((long)index << 32) | (generation & 0xFFFF_FFFFL);
        header.putLong(ClientFileDescriptor.SESSION_ID_OFFSET, sessionId);
        header.putIntRelease(ClientFileDescriptor.ATTACH_STATE_OFFSET, ClientFileDescriptor.ATTACH_ATTACHED);
        state = ATTACHED;
    }

    /**
     * Whether the client's process is gone: its lock can be taken. A client in this very process holds the
     * lock through the JVM, which reports an overlap: alive.
     */
    boolean isProcessGone()
    {
        try
        {
            return isLockFree(channel);
        }
        catch (final IOException ex)
        {
            return true;
        }
    }

    /**
     * Whether nobody holds a client file's lock: the probe takes it and lets it go at once. A client in this very
     * process holds the lock through the JVM, which reports an overlap: held.
     *
     * @param channel the client file, open for writing.
     * @return true when the lock could be taken.
     * @throws IOException when the probe fails.
     */
    static boolean isLockFree(final FileChannel channel) throws IOException
    {
        try
        {
            final FileLock probe = channel.tryLock();
            if (null == probe)
            {
                return false;
            }
            probe.release();
            return true;
        }
        catch (final OverlappingFileLockException ex)
        {
            return false;
        }
    }

    boolean isClosingRequested()
    {
        return 1 == header.getIntAcquire(ClientFileDescriptor.CLOSING_OFFSET);
    }

    void beginClosing(final boolean processDead)
    {
        dead = processDead;
        state = CLOSING;
    }

    void admit(final long bytes)
    {
        ADMITTED_BYTES.setRelease(this, admittedBytes + bytes);
    }

    void release(final long bytes)
    {
        RELEASED_BYTES.setRelease(this, releasedBytes + bytes);
    }

    long outstandingBytes()
    {
        return (long)ADMITTED_BYTES.getAcquire(this) - (long)RELEASED_BYTES.getAcquire(this);
    }

    /**
     * Unmaps, closes and deletes the client's file, then frees the slot.
     */
    void free()
    {
        try
        {
            header.putIntRelease(ClientFileDescriptor.ATTACH_STATE_OFFSET, ClientFileDescriptor.ATTACH_DETACHED);
        }
        catch (final RuntimeException ignore)
        {
            // The mapping is going away in any case.
        }
        state = FREE;
        requests = null;
        responses = null;
        header = null;
        if (null != mapped)
        {
            IoUtil.unmap(mapped);
            mapped = null;
        }
        try
        {
            if (null != channel)
            {
                channel.close();
            }
            if (null != file)
            {
                Files.deleteIfExists(file);
            }
        }
        catch (final IOException ignore)
        {
            // A leftover file is reclaimed at the next start.
        }
        channel = null;
        file = null;
    }
}
