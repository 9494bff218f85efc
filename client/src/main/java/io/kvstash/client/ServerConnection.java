package io.kvstash.client;

import io.kvstash.wire.WireVersion;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.ControlFileFlyweight;
import io.kvstash.wire.file.SecureDirectory;
import io.kvstash.wire.ring.RingConsumer;
import io.kvstash.wire.ring.RingDescriptor;
import io.kvstash.wire.ring.RingProducer;
import org.agrona.IoUtil;
import org.agrona.SemanticVersion;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A client's files on a server's directory, from connect to close: the server's control file (mapped read-only,
 * with the configuration read from it once), the pool ({@link PoolSlots}, mapped unless the copy transport is
 * used), and this client's own file, created and locked here, with its request and response rings. Connecting
 * checks the directory and the control file's version, seeds the {@link ServerLiveness}, publishes the client
 * file and waits until the server attaches it, then connects to the server's doorbell when it offers one
 * ({@link Doorbell}); closing tells the server the client leaves and releases every mapping, lock and channel.
 * <p>
 * Single-threaded: owned by one client, used on the client's thread.
 */
final class ServerConnection
{
    private final Path directory;
    private final MappedByteBuffer controlMapped;
    private final UnsafeBuffer control;
    private final long incarnation;
    private final int chunkTokens;
    private final int maxChunks;
    private final int maxInlineBytes;
    private final boolean secondTier;
    private final boolean completedTicketGauge;
    private final boolean noReply;
    private final int responseCapacity;
    private final ServerLiveness liveness;
    private final PoolSlots slots;
    private final Path clientPath;
    private final FileChannel clientChannel;
    private final FileLock clientLock;
    private final MappedByteBuffer clientMapped;
    private final UnsafeBuffer clientHeader;
    private final RingProducer requests;
    private final RingConsumer responses;
    private final long sessionId;
    private Doorbell doorbell;
    private boolean closed;

    /**
     * Connects to the server of the context's directory and waits until it attaches this client.
     *
     * @param context concluded configuration.
     * @throws KvStashException when no live server answers or it refuses the client; nothing stays mapped.
     */
    ServerConnection(final ClientContext context)
    {
        this.directory = context.directory();
        final Path controlPath = directory.resolve(ControlFileDescriptor.FILE_NAME);
        controlMapped = mapControl(directory, controlPath);
        control = new UnsafeBuffer(controlMapped);
        final ControlFileFlyweight controlFile = new ControlFileFlyweight().wrap(control);
        try
        {
            checkControl(controlFile, controlPath);
            incarnation = controlFile.incarnation();
            final long serverPid = controlFile.pid();
            chunkTokens = controlFile.config().chunkTokens();
            maxChunks = controlFile.config().maxChunksPerRequest();
            maxInlineBytes = controlFile.config().maxInlineBytes();
            secondTier = secondTier(controlFile);
            completedTicketGauge = secondTier &&
                (controlFile.config().features() & ControlFileDescriptor.FEATURE_COMPLETED_TICKET) != 0;
            noReply = SemanticVersion.minor(controlFile.versionAcquire()) >= WireVersion.NO_REPLY_MINOR;
            final int requestCapacity = controlFile.config().requestRingCapacity();
            responseCapacity = controlFile.config().responseRingCapacity();
            slots = new PoolSlots(controlFile.config().poolSizeBytes(), controlFile.config().dataOffset(), controlFile.config().segmentBytes(),
                controlFile.config().alignment());
            liveness = new ServerLiveness(controlFile, directory, incarnation, serverPid,
                controlFile.config().heartbeatTimeoutMs());
            if (!liveness.aliveAtConnect(controlFile.config().heartbeatIntervalMs()))
            {
                throw new KvStashException(KvStashException.Reason.SERVER_GONE, "the server on " + directory +
                    " is not running (pid " + serverPid + ")");
            }
            if (!context.copyTransport())
            {
                final String poolFileName = controlFile.config().poolFileName();
                if (null == poolFileName)
                {
                    throw new IllegalStateException("control file has no valid pool file name");
                }
                slots.map(directory.resolve(poolFileName), incarnation, context.pretouchPool(),
                    context.pretouchThreads(), onDemandCounters(controlFile));
            }

            final long pid = ProcessHandle.current().pid();
            clientPath = directory.resolve(ClientFileDescriptor.fileName(pid, ThreadLocalRandom.current().nextLong()));
            SecureDirectory.createFile(clientPath);
            final int fileLength = ClientFileDescriptor.fileLength(requestCapacity, responseCapacity);
            clientChannel = FileChannel.open(clientPath, StandardOpenOption.READ, StandardOpenOption.WRITE);
            clientLock = clientChannel.lock();
            clientChannel.write(ByteBuffer.wrap(new byte[1]), fileLength - 1);
            clientMapped = clientChannel.map(FileChannel.MapMode.READ_WRITE, 0, fileLength);
            clientHeader = new UnsafeBuffer(clientMapped, 0, ClientFileDescriptor.HEADER_LENGTH);
            requests = new RingProducer(new UnsafeBuffer(clientMapped, ClientFileDescriptor.REQUEST_RING_OFFSET,
                RingDescriptor.totalLength(requestCapacity)));
            responses = new RingConsumer(new UnsafeBuffer(clientMapped,
                ClientFileDescriptor.responseRingOffset(requestCapacity), RingDescriptor.totalLength(responseCapacity)));
            liveness.clientHeader(clientHeader);
            ClientFileDescriptor.writeHeader(clientHeader, pid, incarnation, requestCapacity, responseCapacity,
                context.copyTransport() ? ClientFileDescriptor.FLAG_COPY_TRANSPORT : 0);
            long attachedSession;
            try
            {
                attachedSession = awaitAttach(context.timeoutNs(), context.idleStrategy());
            }
            catch (final KvStashException ex)
            {
                // Refused or never attached: the file is this client's to remove.
                Files.deleteIfExists(clientPath);
                throw ex;
            }
            sessionId = attachedSession;
            doorbell = Doorbell.connect(directory, control);
        }
        catch (final IOException ex)
        {
            release();
            throw new KvStashException(KvStashException.Reason.BAD_FILES, "cannot create a client file in " +
                directory, ex);
        }
        catch (final RuntimeException ex)
        {
            release();
            throw ex;
        }
    }

    /**
     * Maps the server's control file read-only, after checking that the directory is one a server made.
     *
     * @param directory   the server's directory.
     * @param controlPath its control file.
     * @return the mapping.
     * @throws KvStashException SERVER_GONE without a directory or a control file, BAD_FILES when either is unsafe or
     *                          cannot be read.
     */
    private static MappedByteBuffer mapControl(final Path directory, final Path controlPath)
    {
        try
        {
            SecureDirectory.check(directory);
        }
        catch (final NoSuchFileException ex)
        {
            throw new KvStashException(KvStashException.Reason.SERVER_GONE, "no kvstash server on " + directory);
        }
        catch (final IOException ex)
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, ex.getMessage(), ex);
        }
        try (FileChannel channel = FileChannel.open(controlPath, StandardOpenOption.READ))
        {
            return channel.map(FileChannel.MapMode.READ_ONLY, 0, channel.size());
        }
        catch (final NoSuchFileException ex)
        {
            throw new KvStashException(KvStashException.Reason.SERVER_GONE, "no kvstash server on " + directory);
        }
        catch (final IOException ex)
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, "cannot map " + controlPath, ex);
        }
    }

    private static void checkControl(final ControlFileFlyweight controlFile, final Path path)
    {
        switch (controlFile.check())
        {
            case ControlFileFlyweight.NOT_A_CONTROL_FILE:
                throw new KvStashException(KvStashException.Reason.BAD_FILES, path + " is not a kvstash control file");
            case ControlFileFlyweight.NOT_WRITTEN:
                throw new KvStashException(KvStashException.Reason.SERVER_GONE, "the server on " + path.getParent() +
                    " is still starting");
            case ControlFileFlyweight.INCOMPATIBLE:
                throw new KvStashException(KvStashException.Reason.BAD_FILES,
                    WireVersion.incompatible(path.toString(), controlFile.versionAcquire()));
            default:
                break;
        }
    }

    private long awaitAttach(final long timeoutNs, final IdleStrategy idleStrategy)
    {
        final long deadline = System.nanoTime() + timeoutNs;
        idleStrategy.reset();
        while (true)
        {
            final int state = clientHeader.getIntAcquire(ClientFileDescriptor.ATTACH_STATE_OFFSET);
            if (ClientFileDescriptor.ATTACH_ATTACHED == state)
            {
                return clientHeader.getLong(ClientFileDescriptor.SESSION_ID_OFFSET);
            }
            if (ClientFileDescriptor.ATTACH_REJECTED == state)
            {
                throw new KvStashException(KvStashException.Reason.REJECTED, "the server refused the client (reason " +
                    clientHeader.getInt(ClientFileDescriptor.REJECT_REASON_OFFSET) + ")");
            }
            if (System.nanoTime() - deadline > 0)
            {
                throw new KvStashException(liveness.alive() ? KvStashException.Reason.TIMEOUT :
                    KvStashException.Reason.SERVER_GONE, "the server did not attach the client in time");
            }
            idleStrategy.idle();
        }
    }

    /**
     * The liveness of the server connected to.
     *
     * @return liveness.
     */
    ServerLiveness liveness()
    {
        return liveness;
    }

    /**
     * The pool, mapped unless the copy transport is used.
     *
     * @return pool slots.
     */
    PoolSlots slots()
    {
        return slots;
    }

    /**
     * The server's doorbell, which the request proxy rings after each request.
     *
     * @return the doorbell, or null when the server offers none.
     */
    Doorbell doorbell()
    {
        return doorbell;
    }

    /**
     * The request ring of this client's file, written by this client.
     *
     * @return producer side.
     */
    RingProducer requests()
    {
        return requests;
    }

    /**
     * The response ring of this client's file, read by this client.
     *
     * @return consumer side.
     */
    RingConsumer responses()
    {
        return responses;
    }

    /**
     * Longest response record the response ring carries.
     *
     * @return bytes.
     */
    int maxResponseLength()
    {
        return RingDescriptor.maxPayloadLength(responseCapacity);
    }

    long incarnation()
    {
        return incarnation;
    }

    long sessionId()
    {
        return sessionId;
    }

    int chunkTokens()
    {
        return chunkTokens;
    }

    int maxChunksPerRequest()
    {
        return maxChunks;
    }

    int maxInlineBytes()
    {
        return maxInlineBytes;
    }

    boolean secondTier()
    {
        return secondTier;
    }

    /**
     * Whether the server takes {@link io.kvstash.wire.RequestFlags#NO_REPLY}: its control file's minor version is
     * {@link WireVersion#NO_REPLY_MINOR} or later (the major is this client's, checked at connect).
     *
     * @return true when a COMMIT_RETRIEVE or RELEASE may go without an answer.
     */
    boolean noReply()
    {
        return noReply;
    }

    /**
     * The server's counters when it commits its pool on demand (its Features bit), so that this client touches only
     * the committed prefix; null otherwise.
     */
    private UnsafeBuffer onDemandCounters(final ControlFileFlyweight controlFile)
    {
        return (controlFile.config().features() & ControlFileDescriptor.FEATURE_POOL_ON_DEMAND) == 0 ? null :
            new UnsafeBuffer(control, controlFile.countersOffset(), controlFile.countersLength());
    }

    /**
     * Whether the server keeps the highest completed read-through ticket in the control file's counters
     * ({@link ControlFileDescriptor#FEATURE_COMPLETED_TICKET}).
     *
     * @return true when a waiting LOOKUP can watch the counter instead of asking again.
     */
    boolean completedTicketGauge()
    {
        return completedTicketGauge;
    }

    /**
     * Whether a server's control file says it runs a second tier that answers waiting LOOKUPs:
     * {@link ControlFileDescriptor#FEATURE_SECOND_TIER} in its Features word (every version this client reads has
     * the word).
     *
     * @param controlFile the mapped control file, its version written.
     * @return true when a LOOKUP may carry the tier's flags.
     */
    static boolean secondTier(final ControlFileFlyweight controlFile)
    {
        return (controlFile.config().features() & ControlFileDescriptor.FEATURE_SECOND_TIER) != 0;
    }

    Path clientFile()
    {
        return clientPath;
    }

    /**
     * Reads a counter from the control file.
     *
     * @param id counter id.
     * @return value.
     */
    long counter(final int id)
    {
        return control.getLongAcquire(ControlFileDescriptor.COUNTERS_OFFSET + id * Long.BYTES);
    }

    /**
     * See {@link KvStashClient#close()}. Idempotent.
     */
    void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        final boolean serverAlive = liveness.alive();
        clientHeader.putIntRelease(ClientFileDescriptor.CLOSING_OFFSET, 1);
        release();
        if (!serverAlive)
        {
            try
            {
                Files.deleteIfExists(clientPath);
            }
            catch (final IOException ignore)
            {
                // Reclaimed at the next server start.
            }
        }
    }

    private void release()
    {
        if (null != doorbell)
        {
            doorbell.close();
        }
        try
        {
            if (null != clientLock && clientLock.isValid())
            {
                clientLock.release();
            }
            if (null != clientChannel)
            {
                clientChannel.close();
            }
        }
        catch (final IOException ignore)
        {
            // Closing the channel released the lock.
        }
        if (null != slots)
        {
            slots.close();
        }
        if (null != clientMapped)
        {
            IoUtil.unmap(clientMapped);
        }
        if (null != controlMapped)
        {
            IoUtil.unmap(controlMapped);
        }
    }
}
