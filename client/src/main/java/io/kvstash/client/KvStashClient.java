package io.kvstash.client;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.PoolRegion;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.WireVersion;
import io.kvstash.wire.codec.DataRequestFlyweight;
import io.kvstash.wire.codec.KeyedRequestFlyweight;
import io.kvstash.wire.codec.RegisterRequestFlyweight;
import io.kvstash.wire.codec.RequestFlyweight;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.PoolFileDescriptor;
import io.kvstash.wire.file.PoolPages;
import io.kvstash.wire.file.SecureDirectory;
import io.kvstash.wire.file.SlotTableDescriptor;
import io.kvstash.wire.layout.Layout;
import io.kvstash.wire.ring.RingConsumer;
import io.kvstash.wire.ring.RingDescriptor;
import io.kvstash.wire.ring.RingProducer;
import org.agrona.BufferUtil;
import org.agrona.DirectBuffer;
import org.agrona.IoUtil;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static io.kvstash.wire.codec.WireDescriptor.*;

/**
 * A worker's connection to a kvstash server over shared memory: its own client file with a request ring and
 * a response ring, the server's control file (heartbeat, incarnation, counters) and the pool, mapped so
 * chunk bytes are written and read in place. Synchronous calls return the client's one reusable
 * {@link ClientResponse}; the non-blocking form ({@code send*} returning a correlation id, then
 * {@link #poll(ResponseHandler, int)}) keeps many requests in flight. Expected outcomes are status codes;
 * a dead, restarted or unresponsive server raises {@link KvStashException}, never a crash: the files of a
 * server are never truncated while mapped, so no access here can fault.
 * <p>
 * Not thread safe: one client per worker thread.
 */
public final class KvStashClient implements AutoCloseable
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /**
     * Receives responses of the non-blocking form.
     */
    @FunctionalInterface
    public interface ResponseHandler
    {
        /**
         * One response; valid only during the call.
         *
         * @param response the response.
         */
        void onResponse(ClientResponse response);
    }

    /** Idle passes of {@link #await} between two clock reads, a power of two. */
    static final int CLOCK_IDLES = 64;

    private final ClientContext context;
    private final Path directory;
    private final IdleStrategy idleStrategy;
    private final MappedByteBuffer controlMapped;
    private final UnsafeBuffer control;
    private final long incarnation;
    private final long serverPid;
    private final long heartbeatTimeoutMs;
    private final int chunkTokens;
    private final int maxChunks;
    private final int maxInlineBytes;
    private final long poolSizeBytes;
    private final long dataOffset;
    private final long segmentBytes;
    private final int alignment;
    private final Path clientPath;
    private final FileChannel clientChannel;
    private final FileLock clientLock;
    private final MappedByteBuffer clientMapped;
    private final UnsafeBuffer clientHeader;
    private final RingProducer requests;
    private final RingConsumer responses;
    private final RequestFlyweight simpleRecord = new RequestFlyweight();
    private final KeyedRequestFlyweight keyedRecord = new KeyedRequestFlyweight();
    private final RegisterRequestFlyweight registerRecord = new RegisterRequestFlyweight();
    private final DataRequestFlyweight dataRecord = new DataRequestFlyweight();
    private final ClientResponse response;
    private final ClientResponse dataResponse;
    private final long sessionId;
    private FileChannel poolChannel;
    private MappedByteBuffer poolMeta;
    private final List<MappedByteBuffer> poolSegments = new ArrayList<>();
    private PoolRegion pool;
    private UnsafeBuffer slotTable;
    private ResponseHandler asyncHandler;
    private long nextCorrelationId = 1;
    private long orphanResponses;
    private long lastHeartbeat;
    private long lastHeartbeatChangeNs;
    private boolean closed;

    private KvStashClient(final ClientContext context)
    {
        this.context = context.conclude();
        this.directory = context.directory();
        this.idleStrategy = context.idleStrategy();
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
        final Path controlPath = directory.resolve(ControlFileDescriptor.FILE_NAME);
        try (FileChannel channel = FileChannel.open(controlPath, StandardOpenOption.READ))
        {
            controlMapped = channel.map(FileChannel.MapMode.READ_ONLY, 0, channel.size());
        }
        catch (final NoSuchFileException ex)
        {
            throw new KvStashException(KvStashException.Reason.SERVER_GONE, "no kvstash server on " + directory);
        }
        catch (final IOException ex)
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, "cannot map " + controlPath, ex);
        }
        control = new UnsafeBuffer(controlMapped);
        try
        {
            checkControl(control, controlPath);
            incarnation = control.getLong(ControlFileDescriptor.INCARNATION_OFFSET);
            serverPid = control.getLong(ControlFileDescriptor.PID_OFFSET);
            final int c = ControlFileDescriptor.CONFIG_OFFSET;
            heartbeatTimeoutMs = control.getInt(c + ControlFileDescriptor.HEARTBEAT_TIMEOUT_OFFSET);
            chunkTokens = control.getInt(c + ControlFileDescriptor.CHUNK_TOKENS_OFFSET);
            maxChunks = control.getInt(c + ControlFileDescriptor.MAX_CHUNKS_OFFSET);
            maxInlineBytes = control.getInt(c + ControlFileDescriptor.MAX_INLINE_OFFSET);
            poolSizeBytes = control.getLong(c + ControlFileDescriptor.POOL_SIZE_OFFSET);
            dataOffset = control.getLong(c + ControlFileDescriptor.DATA_OFFSET_OFFSET);
            segmentBytes = control.getLong(c + ControlFileDescriptor.SEGMENT_BYTES_OFFSET);
            alignment = control.getInt(c + ControlFileDescriptor.ALIGNMENT_OFFSET);
            final int requestCapacity = control.getInt(c + ControlFileDescriptor.REQUEST_RING_CAPACITY_OFFSET);
            final int responseCapacity = control.getInt(c + ControlFileDescriptor.RESPONSE_RING_CAPACITY_OFFSET);
            if (!aliveAtConnect(control.getInt(c + ControlFileDescriptor.HEARTBEAT_INTERVAL_OFFSET)))
            {
                throw new KvStashException(KvStashException.Reason.SERVER_GONE, "the server on " + directory +
                    " is not running (pid " + serverPid + ")");
            }
            if (!context.copyTransport())
            {
                mapPool(ControlFileDescriptor.poolFileName(control));
            }

            final long pid = ProcessHandle.current().pid();
            clientPath = directory.resolve(ClientFileDescriptor.fileName(pid, ThreadLocalRandom.current().nextLong()));
            SecureDirectory.createFile(clientPath);
            final int fileLength = ClientFileDescriptor.fileLength(requestCapacity, responseCapacity);
            clientChannel = FileChannel.open(clientPath, StandardOpenOption.READ, StandardOpenOption.WRITE);
            clientLock = clientChannel.lock();
            clientChannel.write(java.nio.ByteBuffer.wrap(new byte[1]), fileLength - 1);
            clientMapped = clientChannel.map(FileChannel.MapMode.READ_WRITE, 0, fileLength);
            clientHeader = new UnsafeBuffer(clientMapped, 0, ClientFileDescriptor.HEADER_LENGTH);
            clientHeader.putLong(ClientFileDescriptor.MAGIC_OFFSET, ClientFileDescriptor.MAGIC);
            clientHeader.putInt(ClientFileDescriptor.HEADER_LENGTH_OFFSET, ClientFileDescriptor.HEADER_LENGTH);
            clientHeader.putLong(ClientFileDescriptor.PID_OFFSET, pid);
            clientHeader.putLong(ClientFileDescriptor.INCARNATION_OFFSET, incarnation);
            clientHeader.putInt(ClientFileDescriptor.REQUEST_CAPACITY_OFFSET, requestCapacity);
            clientHeader.putInt(ClientFileDescriptor.RESPONSE_CAPACITY_OFFSET, responseCapacity);
            clientHeader.putInt(ClientFileDescriptor.FLAGS_OFFSET,
                context.copyTransport() ? ClientFileDescriptor.FLAG_COPY_TRANSPORT : 0);
            requests = new RingProducer(new UnsafeBuffer(clientMapped, ClientFileDescriptor.REQUEST_RING_OFFSET,
                RingDescriptor.totalLength(requestCapacity)));
            responses = new RingConsumer(new UnsafeBuffer(clientMapped,
                ClientFileDescriptor.responseRingOffset(requestCapacity), RingDescriptor.totalLength(responseCapacity)));
            response = new ClientResponse(RingDescriptor.maxPayloadLength(responseCapacity));
            // The copy transport's data answers land here, so the prepare's response stays readable.
            dataResponse = new ClientResponse(RingDescriptor.maxPayloadLength(responseCapacity));
            clientHeader.putIntRelease(ClientFileDescriptor.VERSION_OFFSET, ClientFileDescriptor.VERSION);
            long attachedSession;
            try
            {
                attachedSession = awaitAttach();
            }
            catch (final KvStashException ex)
            {
                // Refused or never attached: the file is this client's to remove.
                Files.deleteIfExists(clientPath);
                throw ex;
            }
            sessionId = attachedSession;
        }
        catch (final IOException ex)
        {
            releaseMappings();
            throw new KvStashException(KvStashException.Reason.BAD_FILES, "cannot create a client file in " +
                directory, ex);
        }
        catch (final RuntimeException ex)
        {
            releaseMappings();
            throw ex;
        }
    }

    /**
     * Connects to the server of a directory.
     *
     * @param context configuration.
     * @return a connected client.
     * @throws KvStashException when no live server answers or it refuses the client.
     */
    public static KvStashClient connect(final ClientContext context)
    {
        return new KvStashClient(context);
    }

    private static void checkControl(final UnsafeBuffer control, final Path path)
    {
        if (control.capacity() < ControlFileDescriptor.COUNTERS_OFFSET ||
            control.getLong(ControlFileDescriptor.MAGIC_OFFSET) != ControlFileDescriptor.MAGIC)
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, path + " is not a kvstash control file");
        }
        final int version = control.getIntAcquire(ControlFileDescriptor.VERSION_OFFSET);
        if (!WireVersion.isWritten(version))
        {
            throw new KvStashException(KvStashException.Reason.SERVER_GONE, "the server on " + path.getParent() +
                " is still starting");
        }
        if (!WireVersion.isCompatible(version))
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, WireVersion.incompatible(path.toString(), version));
        }
    }

    private void mapPool(final String poolName) throws IOException
    {
        final Path poolPath = directory.resolve(poolName);
        poolChannel = FileChannel.open(poolPath, StandardOpenOption.READ, StandardOpenOption.WRITE);
        poolMeta = poolChannel.map(FileChannel.MapMode.READ_WRITE, 0, dataOffset);
        final UnsafeBuffer meta = new UnsafeBuffer(poolMeta);
        if (meta.getLong(PoolFileDescriptor.MAGIC_OFFSET) != PoolFileDescriptor.MAGIC ||
            !WireVersion.isCompatible(meta.getIntAcquire(PoolFileDescriptor.VERSION_OFFSET)) ||
            meta.getLong(PoolFileDescriptor.INCARNATION_OFFSET) != incarnation)
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, poolPath + " is not this server's pool");
        }
        final long tableOffset = meta.getLong(PoolFileDescriptor.SLOT_TABLE_OFFSET_OFFSET);
        final long tableLength = meta.getLong(PoolFileDescriptor.SLOT_TABLE_LENGTH_OFFSET);
        slotTable = new UnsafeBuffer(meta, (int)tableOffset, (int)Math.max(8, tableLength));
        final int segments = (int)((poolSizeBytes + segmentBytes - 1) / segmentBytes);
        final long[] addresses = new long[segments];
        final UnsafeBuffer[] mapped = new UnsafeBuffer[segments];
        for (int i = 0; i < segments; i++)
        {
            final long start = i * segmentBytes;
            final long length = Math.min(segmentBytes, poolSizeBytes - start);
            final MappedByteBuffer segment = poolChannel.map(FileChannel.MapMode.READ_WRITE, dataOffset + start, length);
            poolSegments.add(segment);
            addresses[i] = BufferUtil.address(segment);
            mapped[i] = new UnsafeBuffer(segment);
        }
        if (context.pretouchPool())
        {
            PoolPages.touchSegments(poolSizeBytes, mapped, segmentBytes, context.pretouchThreads());
        }
        pool = PoolRegion.ofSegments(addresses, segmentBytes, poolSizeBytes, poolSegments);
    }

    private long awaitAttach()
    {
        final long deadline = System.nanoTime() + context.timeoutNs();
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
                throw new KvStashException(alive() ? KvStashException.Reason.TIMEOUT : KvStashException.Reason.SERVER_GONE,
                    "the server did not attach the client in time");
            }
            idleStrategy.idle();
        }
    }

    // ------------------------------------------------------------------------------------------ liveness

    /**
     * Whether the server this client connected to still runs: running state, a heartbeat that has moved
     * within the heartbeat timeout, and its process alive.
     * <p>
     * The heartbeat is the server's wall clock, but it is not compared with this machine's wall clock once
     * connected: the client notes when (on its own monotonic clock) it last saw the value change. A step of
     * either wall clock (NTP, a resumed VM) then neither makes a live server look dead nor a dead one alive.
     *
     * @return true when alive.
     */
    public boolean alive()
    {
        if (ControlFileDescriptor.STATE_RUNNING != control.getIntAcquire(ControlFileDescriptor.STATE_OFFSET))
        {
            return false;
        }
        final long heartbeat = control.getLongAcquire(ControlFileDescriptor.HEARTBEAT_OFFSET);
        final long nowNs = System.nanoTime();
        if (heartbeat != lastHeartbeat)
        {
            lastHeartbeat = heartbeat;
            lastHeartbeatChangeNs = nowNs;
        }
        else if (nowNs - lastHeartbeatChangeNs > TimeUnit.MILLISECONDS.toNanos(heartbeatTimeoutMs))
        {
            return false;
        }
        return serverProcessAlive();
    }

    /**
     * The first liveness check, with no heartbeat seen before. It only seeds what {@link #alive()} judges by:
     * a heartbeat within the timeout of this machine's wall clock (either way) counts as seen changing that
     * long ago; any other (a server whose wall clock stands apart from this one's, or a dead server) counts as
     * stale, and is watched for up to three heartbeat intervals while the server's process lives, so that it
     * is fresh only if it moves.
     */
    private boolean aliveAtConnect(final long heartbeatIntervalMs)
    {
        final long heartbeat = control.getLongAcquire(ControlFileDescriptor.HEARTBEAT_OFFSET);
        final long ageMs = System.currentTimeMillis() - heartbeat;
        final boolean nearThisClock = Math.abs(ageMs) <= heartbeatTimeoutMs;
        lastHeartbeat = heartbeat;
        lastHeartbeatChangeNs = System.nanoTime() -
            TimeUnit.MILLISECONDS.toNanos(nearThisClock ? Math.max(0, ageMs) : heartbeatTimeoutMs + 1);
        final long deadlineNs =
            System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(3 * Math.max(1, heartbeatIntervalMs));
        while (!nearThisClock && System.nanoTime() - deadlineNs < 0 && serverProcessAlive() &&
            control.getLongAcquire(ControlFileDescriptor.HEARTBEAT_OFFSET) == heartbeat)
        {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
        return alive();
    }

    private boolean serverProcessAlive()
    {
        return ProcessHandle.of(serverPid).map(ProcessHandle::isAlive).orElse(false);
    }

    /**
     * Raises the right exception when the server is gone: restarted (a newer control file on the directory)
     * or simply gone; or when it detached this client.
     */
    private void checkServer()
    {
        if (ClientFileDescriptor.ATTACH_DETACHED == clientHeader.getIntAcquire(ClientFileDescriptor.ATTACH_STATE_OFFSET))
        {
            throw new KvStashException(KvStashException.Reason.DETACHED, "the server detached this client");
        }
        if (alive())
        {
            return;
        }
        final long current = currentIncarnation(directory);
        if (0 != current && current != incarnation)
        {
            throw new KvStashException(KvStashException.Reason.SERVER_RESTARTED, "the server restarted (incarnation " +
                Long.toHexString(incarnation) + " -> " + Long.toHexString(current) + "): reconnect");
        }
        throw new KvStashException(KvStashException.Reason.SERVER_GONE, "the server (pid " + serverPid + ") is gone");
    }

    /**
     * Incarnation of the server currently on a directory.
     *
     * @param directory server directory.
     * @return incarnation, or 0 when no control file is readable.
     */
    public static long currentIncarnation(final Path directory)
    {
        try (FileChannel channel = FileChannel.open(directory.resolve(ControlFileDescriptor.FILE_NAME),
            StandardOpenOption.READ))
        {
            final java.nio.ByteBuffer bytes = java.nio.ByteBuffer.allocate(ControlFileDescriptor.HEADER_LENGTH).order(LE);
            channel.read(bytes, 0);
            return !WireVersion.isWritten(bytes.getInt(ControlFileDescriptor.VERSION_OFFSET)) ? 0 :
                bytes.getLong(ControlFileDescriptor.INCARNATION_OFFSET);
        }
        catch (final IOException ex)
        {
            return 0;
        }
    }

    // ------------------------------------------------------------------------------------------ sending

    private int claim(final int type, final int length)
    {
        if (closed)
        {
            throw new IllegalStateException("client closed");
        }
        return requests.tryClaim(type, length);
    }

    private long header(
        final RequestFlyweight record,
        final int at,
        final int length,
        final long instanceId,
        final long transferId,
        final long salt,
        final int flags,
        final int keyMode)
    {
        final long correlationId = nextCorrelationId++;
        record.wrapForEncode(requests.buffer(), at, length);
        record.putHeader(correlationId, instanceId, transferId, salt, flags, keyMode);
        return correlationId;
    }

    /**
     * Sends a request that carries only the common header.
     *
     * @param type       request type.
     * @param instanceId instance.
     * @param transferId transfer or 0.
     * @param flags      flags.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendSimple(final int type, final long instanceId, final long transferId, final int flags)
    {
        final int length = RequestFlyweight.HEADER_LENGTH;
        final int at = claim(type, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(simpleRecord, at, length, instanceId, transferId, 0, flags, KEY_MODE_NONE);
        requests.commit(length);
        return correlationId;
    }

    /**
     * Sends a keyed request (LOOKUP, PREPARE_STORE, PREPARE_RETRIEVE) with precomputed chunk hashes.
     *
     * @param type       request type.
     * @param instanceId instance.
     * @param keys       key range.
     * @param flags      flags.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendKeyed(final int type, final long instanceId, final ChunkKeys keys, final int flags)
    {
        final int length = KeyedRequestFlyweight.hashesLength(keys.count());
        final int at = claim(type, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(keyedRecord, at, length, instanceId, 0, keys.salt(), flags, KEY_MODE_HASHES);
        keyedRecord.putHashes(keys);
        requests.commit(length);
        return correlationId;
    }

    /**
     * Sends a keyed request with token ids, hashed by the server.
     *
     * @param type       request type.
     * @param instanceId instance.
     * @param tokens     token ids of the prompt from its start.
     * @param tokenCount tokens used.
     * @param fromChunk  first chunk of the range.
     * @param toChunk    end of the range (exclusive), -1 for every full chunk.
     * @param salt       cache salt value, 0 for none.
     * @param flags      flags.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendTokens(
        final int type,
        final long instanceId,
        final int[] tokens,
        final int tokenCount,
        final int fromChunk,
        final int toChunk,
        final long salt,
        final int flags)
    {
        final int length = KeyedRequestFlyweight.tokensLength(tokenCount);
        final int at = claim(type, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(keyedRecord, at, length, instanceId, 0, salt, flags, KEY_MODE_TOKENS);
        keyedRecord.putTokens(tokens, tokenCount, fromChunk, toChunk);
        requests.commit(length);
        return correlationId;
    }

    private long sendRegister(final long instanceId, final Layout layout)
    {
        final int length = RegisterRequestFlyweight.length(layout.modelBytes().length);
        final int at = claim(RequestType.REGISTER, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(registerRecord, at, length, instanceId, 0, 0, 0, KEY_MODE_NONE);
        registerRecord.putLayout(layout);
        requests.commit(length);
        return correlationId;
    }

    private long sendLookupAllRanks(final String model, final int worldSize, final ChunkKeys keys)
    {
        final byte[] name = model.getBytes(StandardCharsets.UTF_8);
        final int length = KeyedRequestFlyweight.allRanksLength(name.length, keys.count());
        final int at = claim(RequestType.LOOKUP_ALL_RANKS, length);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(keyedRecord, at, length, 0, 0, keys.salt(), 0, KEY_MODE_HASHES);
        keyedRecord.putAllRanks(worldSize, name).putHashes(keys);
        requests.commit(length);
        return correlationId;
    }

    /**
     * Sends WRITE_DATA (copy transport).
     *
     * @param instanceId   instance.
     * @param transferId   pending store.
     * @param slotIndex    index in the store's slot list.
     * @param offset       byte offset in the chunk.
     * @param source       bytes.
     * @param sourceOffset offset in the source.
     * @param length       bytes, at most {@link #maxInlineBytes()}.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendWriteData(
        final long instanceId,
        final long transferId,
        final int slotIndex,
        final long offset,
        final DirectBuffer source,
        final int sourceOffset,
        final int length)
    {
        final int recordLength = DataRequestFlyweight.writeLength(length);
        final int at = claim(RequestType.WRITE_DATA, recordLength);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(dataRecord, at, recordLength, instanceId, transferId, 0, 0, KEY_MODE_NONE);
        dataRecord.putData(slotIndex, length, offset).putBytes(source, sourceOffset, length);
        requests.commit(recordLength);
        return correlationId;
    }

    /**
     * Sends READ_DATA (copy transport).
     *
     * @param instanceId instance.
     * @param transferId pending retrieve.
     * @param slotIndex  index in the retrieve's slot list.
     * @param offset     byte offset in the chunk.
     * @param length     bytes, at most {@link #maxInlineBytes()}.
     * @return correlation id, or -1 when the request ring is full.
     */
    public long sendReadData(
        final long instanceId, final long transferId, final int slotIndex, final long offset, final int length)
    {
        final int recordLength = DataRequestFlyweight.READ_LENGTH;
        final int at = claim(RequestType.READ_DATA, recordLength);
        if (at < 0)
        {
            return -1;
        }
        final long correlationId = header(dataRecord, at, recordLength, instanceId, transferId, 0, 0, KEY_MODE_NONE);
        dataRecord.putData(slotIndex, length, offset);
        requests.commit(recordLength);
        return correlationId;
    }

    // ------------------------------------------------------------------------------------------ receiving

    /**
     * Delivers the responses available now to a handler (the non-blocking form).
     *
     * @param handler receives each response.
     * @param limit   responses at most.
     * @return responses delivered.
     */
    public int poll(final ResponseHandler handler, final int limit)
    {
        int n = 0;
        while (n < limit && responses.next())
        {
            if (RESPONSE_TYPE == responses.type())
            {
                response.copyFrom(responses.buffer(), responses.payloadOffset(), responses.payloadLength());
                responses.consume();
                handler.onResponse(response);
                n++;
            }
            else
            {
                responses.consume();
            }
        }
        if (responses.isCorrupt())
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, "corrupt response ring");
        }
        return n;
    }

    /**
     * Sets the handler that receives responses of the non-blocking form that arrive while a synchronous
     * call waits for its own.
     *
     * @param handler handler or null (such responses are then counted and dropped).
     * @return this.
     */
    public KvStashClient asyncHandler(final ResponseHandler handler)
    {
        this.asyncHandler = handler;
        return this;
    }

    /**
     * Waits for the response of a correlation id; other responses go to the async handler.
     *
     * @param correlationId id returned by a send.
     * @return the response, valid until the next receive.
     * @throws KvStashException when the server is gone, restarted, or silent past the timeout.
     */
    public ClientResponse await(final long correlationId)
    {
        return await(correlationId, response);
    }

    /**
     * A response flyweight sized for this client's response ring, for a caller that keeps several responses
     * at once: a worker that sends the next chunk's prepare before it writes the current chunk (so the
     * server decides while the bytes move) holds both prepares' slots. Allocate it once, outside the loop.
     *
     * @return a new flyweight.
     */
    public ClientResponse newResponse()
    {
        return new ClientResponse(response.capacity());
    }

    /**
     * Waits for the response of a correlation id into the caller's flyweight (see {@link #newResponse()});
     * other responses go to the async handler.
     *
     * @param correlationId id returned by a send.
     * @param target        where the response is copied; valid until the caller reuses it.
     * @return {@code target}.
     * @throws KvStashException when the server is gone, restarted, or silent past the timeout.
     */
    public ClientResponse await(final long correlationId, final ClientResponse target)
    {
        // No clock read while the answer may be on its way: a read costs about as much as a hand-off between
        // two cores (28 ns on this project's VM), so the clock is read once every CLOCK_IDLES idle passes and
        // the liveness check and the timeout count from the first such read.
        long start = 0;
        long nextCheck = 0;
        boolean clockStarted = false;
        int idles = 0;
        idleStrategy.reset();
        while (true)
        {
            while (responses.next())
            {
                if (RESPONSE_TYPE != responses.type())
                {
                    responses.consume();
                    continue;
                }
                final boolean ours = responses.payloadLength() >= 8 && correlationId ==
                    responses.buffer().getLong(responses.payloadOffset() + RESPONSE_CORRELATION_ID_OFFSET, LE);
                final ClientResponse into = ours ? target : response;
                into.copyFrom(responses.buffer(), responses.payloadOffset(), responses.payloadLength());
                responses.consume();
                if (ours)
                {
                    return target;
                }
                if (null != asyncHandler)
                {
                    asyncHandler.onResponse(response);
                }
                else
                {
                    orphanResponses++;
                }
            }
            if (responses.isCorrupt())
            {
                throw new KvStashException(KvStashException.Reason.BAD_FILES, "corrupt response ring");
            }
            if (0 == (++idles & (CLOCK_IDLES - 1)))
            {
                final long now = System.nanoTime();
                if (!clockStarted)
                {
                    clockStarted = true;
                    start = now;
                    nextCheck = now + context.livenessCheckNs();
                }
                else if (now - nextCheck > 0)
                {
                    checkServer();
                    if (now - start > context.timeoutNs())
                    {
                        throw new KvStashException(KvStashException.Reason.TIMEOUT, "no response to correlation " +
                            correlationId + " in " + context.timeoutNs() / 1_000_000 + " ms");
                    }
                    nextCheck = now + context.livenessCheckNs();
                }
            }
            idleStrategy.idle();
        }
    }

    private long sendOrWait(final java.util.function.LongSupplier send)
    {
        long correlationId = send.getAsLong();
        if (correlationId > 0)
        {
            return correlationId;
        }
        final long start = System.nanoTime();
        idleStrategy.reset();
        while ((correlationId = send.getAsLong()) < 0)
        {
            // The server reads a request only when the response ring has room for its answer: keep reading.
            drainResponses();
            if (System.nanoTime() - start > context.livenessCheckNs())
            {
                checkServer();
            }
            if (System.nanoTime() - start > context.timeoutNs())
            {
                throw new KvStashException(KvStashException.Reason.TIMEOUT, "request ring stayed full");
            }
            idleStrategy.idle();
        }
        return correlationId;
    }

    private void drainResponses()
    {
        while (responses.next())
        {
            if (RESPONSE_TYPE == responses.type())
            {
                response.copyFrom(responses.buffer(), responses.payloadOffset(), responses.payloadLength());
                responses.consume();
                if (null != asyncHandler)
                {
                    asyncHandler.onResponse(response);
                }
                else
                {
                    orphanResponses++;
                }
            }
            else
            {
                responses.consume();
            }
        }
    }

    private ClientResponse simple(final int type, final long instanceId, final long transferId, final int flags)
    {
        long correlationId = sendSimple(type, instanceId, transferId, flags);
        if (correlationId < 0)
        {
            correlationId = sendOrWait(() -> sendSimple(type, instanceId, transferId, flags));
        }
        return await(correlationId);
    }

    private ClientResponse keyed(final int type, final long instanceId, final ChunkKeys keys, final int flags)
    {
        long correlationId = sendKeyed(type, instanceId, keys, flags);
        if (correlationId < 0)
        {
            correlationId = sendOrWait(() -> sendKeyed(type, instanceId, keys, flags));
        }
        return await(correlationId);
    }

    // ------------------------------------------------------------------------------------------ calls

    /**
     * REGISTER.
     *
     * @param instanceId instance.
     * @param layout     layout.
     * @return response: chunk bytes, slot bytes, slot capacity on OK.
     */
    public ClientResponse register(final long instanceId, final Layout layout)
    {
        return await(sendOrWait(() -> sendRegister(instanceId, layout)));
    }

    /**
     * UNREGISTER.
     *
     * @param instanceId instance.
     * @return response.
     */
    public ClientResponse unregister(final long instanceId)
    {
        return simple(RequestType.UNREGISTER, instanceId, 0, 0);
    }

    /**
     * LOOKUP.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @param pin        pin the hit prefix.
     * @return response: hit chunks, and a transfer when pinned.
     */
    public ClientResponse lookup(final long instanceId, final ChunkKeys keys, final boolean pin)
    {
        return keyed(RequestType.LOOKUP, instanceId, keys, pin ? RequestFlags.PIN : 0);
    }

    /**
     * LOOKUP by token ids.
     *
     * @param instanceId instance.
     * @param tokens     token ids from the prompt's start.
     * @param tokenCount tokens used.
     * @param salt       cache salt value, 0 for none.
     * @param pin        pin the hit prefix.
     * @return response.
     */
    public ClientResponse lookupTokens(
        final long instanceId, final int[] tokens, final int tokenCount, final long salt, final boolean pin)
    {
        final int flags = pin ? RequestFlags.PIN : 0;
        return await(sendOrWait(() -> sendTokens(RequestType.LOOKUP, instanceId, tokens, tokenCount, 0, -1, salt, flags)));
    }

    /**
     * LOOKUP_ALL_RANKS.
     *
     * @param model     model name.
     * @param worldSize world size.
     * @param keys      key range.
     * @return response: hit chunks.
     */
    public ClientResponse lookupAllRanks(final String model, final int worldSize, final ChunkKeys keys)
    {
        return await(sendOrWait(() -> sendLookupAllRanks(model, worldSize, keys)));
    }

    /**
     * RELEASE.
     *
     * @param instanceId instance.
     * @param transferId lookup (or retrieve) transfer.
     * @return response.
     */
    public ClientResponse release(final long instanceId, final long transferId)
    {
        return simple(RequestType.RELEASE, instanceId, transferId, 0);
    }

    /**
     * PREPARE_STORE.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @return response: transfer and slots, or no transfer when everything is present.
     */
    public ClientResponse prepareStore(final long instanceId, final ChunkKeys keys)
    {
        return keyed(RequestType.PREPARE_STORE, instanceId, keys, 0);
    }

    /**
     * PREPARE_STORE by token ids.
     *
     * @param instanceId instance.
     * @param tokens     token ids from the prompt's start.
     * @param tokenCount tokens used (a trailing partial chunk is not stored).
     * @param salt       cache salt value, 0 for none.
     * @return response.
     */
    public ClientResponse prepareStoreTokens(
        final long instanceId, final int[] tokens, final int tokenCount, final long salt)
    {
        return await(sendOrWait(() ->
            sendTokens(RequestType.PREPARE_STORE, instanceId, tokens, tokenCount, 0, -1, salt, 0)));
    }

    /**
     * COMMIT_STORE.
     *
     * @param instanceId instance.
     * @param transferId store.
     * @return response.
     */
    public ClientResponse commitStore(final long instanceId, final long transferId)
    {
        return simple(RequestType.COMMIT_STORE, instanceId, transferId, 0);
    }

    /**
     * ABORT_STORE.
     *
     * @param instanceId instance.
     * @param transferId store.
     * @return response.
     */
    public ClientResponse abortStore(final long instanceId, final long transferId)
    {
        return simple(RequestType.ABORT_STORE, instanceId, transferId, 0);
    }

    /**
     * PREPARE_RETRIEVE by key range.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @return response: transfer and slots, or MISS.
     */
    public ClientResponse prepareRetrieve(final long instanceId, final ChunkKeys keys)
    {
        return keyed(RequestType.PREPARE_RETRIEVE, instanceId, keys, 0);
    }

    /**
     * PREPARE_RETRIEVE taking over a pinned lookup.
     *
     * @param instanceId       instance.
     * @param lookupTransferId lookup transfer.
     * @return response: transfer and slots.
     */
    public ClientResponse prepareRetrieveFromLookup(final long instanceId, final long lookupTransferId)
    {
        return simple(RequestType.PREPARE_RETRIEVE, instanceId, lookupTransferId, RequestFlags.FROM_LOOKUP);
    }

    /**
     * COMMIT_RETRIEVE.
     *
     * @param instanceId instance.
     * @param transferId retrieve.
     * @return response.
     */
    public ClientResponse commitRetrieve(final long instanceId, final long transferId)
    {
        return simple(RequestType.COMMIT_RETRIEVE, instanceId, transferId, 0);
    }

    /**
     * CLEAR.
     *
     * @param force also abort reservations and drop pins.
     * @return response: chunks removed.
     */
    public ClientResponse clear(final boolean force)
    {
        return simple(RequestType.CLEAR, 0, 0, force ? RequestFlags.FORCE : 0);
    }

    /**
     * STATS.
     *
     * @return response carrying every counter.
     */
    public ClientResponse stats()
    {
        return simple(RequestType.STATS, 0, 0, 0);
    }

    /**
     * PING.
     *
     * @return response.
     */
    public ClientResponse ping()
    {
        return simple(RequestType.PING, 0, 0, 0);
    }

    // ------------------------------------------------------------------------------------------ chunk bytes

    /**
     * Points a view at slot {@code i} of a PREPARE_STORE or PREPARE_RETRIEVE response: the chunk's bytes in
     * the mapped pool, {@link ClientResponse#chunkBytes()} long. Writes through it are the store; reads are
     * the retrieve. Check {@link #isStillReserved} / {@link #isStillReadable} around them for fencing.
     *
     * @param r    the response.
     * @param i    slot entry.
     * @param view buffer to re-wrap.
     * @return the view.
     */
    public UnsafeBuffer slotView(final ClientResponse r, final int i, final UnsafeBuffer view)
    {
        if (null == pool)
        {
            throw new IllegalStateException("the copy transport maps no pool: use writeChunk/readChunk");
        }
        return pool.wrap(view, r.slotOffset(i) - dataOffset, (int)r.chunkBytes());
    }

    /**
     * Points a view at a slot by its pool offset (as a PREPARE response gave it).
     *
     * @param slotOffset file offset of the slot in the pool.
     * @param length     bytes of the view (the chunk's length).
     * @param view       buffer to re-wrap.
     * @return the view.
     */
    public UnsafeBuffer slotView(final long slotOffset, final int length, final UnsafeBuffer view)
    {
        if (null == pool)
        {
            throw new IllegalStateException("the copy transport maps no pool: use writeChunk/readChunk");
        }
        return pool.wrap(view, slotOffset - dataOffset, length);
    }

    private long slotWord(final ClientResponse r, final int i)
    {
        return slotTable.getLongAcquire((int)SlotTableDescriptor.wordOffsetAt(r.slotOffset(i) - dataOffset, alignment));
    }

    /**
     * Whether slot {@code i} of a PREPARE_STORE is still reserved under its generation (the lease holds):
     * check before writing.
     *
     * @param r the response.
     * @param i slot entry.
     * @return true when still reserved for this transfer.
     */
    public boolean isStillReserved(final ClientResponse r, final int i)
    {
        if (null == slotTable)
        {
            return true;
        }
        final long word = slotWord(r, i);
        return SlotTableDescriptor.STATE_RESERVED == SlotTableDescriptor.state(word) &&
            SlotTableDescriptor.generation(word) == r.slotGeneration(i);
    }

    /**
     * Whether slot {@code i} of a PREPARE_RETRIEVE is still readable under its generation: check after
     * reading; false means the pin was reclaimed while reading and the bytes may be torn.
     *
     * @param r the response.
     * @param i slot entry.
     * @return true when still readable under the same generation.
     */
    public boolean isStillReadable(final ClientResponse r, final int i)
    {
        if (null == slotTable)
        {
            return true;
        }
        // The chunk's bytes were read with plain loads before this check: an acquire load alone would let
        // them move after it, so fence loads first (a seqlock reader's second check).
        VarHandle.acquireFence();
        final long word = slotWord(r, i);
        return SlotTableDescriptor.STATE_READABLE == SlotTableDescriptor.state(word) &&
            SlotTableDescriptor.generation(word) == r.slotGeneration(i);
    }

    /**
     * Writes a chunk's bytes for slot {@code i} of a PREPARE_STORE: straight into the mapped pool, or in
     * WRITE_DATA messages with the copy transport (whose answers never overwrite the prepare's response).
     *
     * @param instanceId   instance.
     * @param transferId   the store.
     * @param slotIndex    slot entry in the prepare response.
     * @param chunkBytes   the chunk's length.
     * @param slotOffset   the slot's pool offset (from the prepare response).
     * @param source       the chunk's bytes.
     * @param sourceOffset offset in the source.
     * @return OK, or the status of the failed WRITE_DATA (UNKNOWN_TRANSFER when the lease ended).
     */
    public int writeChunk(
        final long instanceId,
        final long transferId,
        final int slotIndex,
        final int chunkBytes,
        final long slotOffset,
        final DirectBuffer source,
        final int sourceOffset)
    {
        return writeChunk(instanceId, transferId, slotIndex, 0, chunkBytes, slotOffset, source, sourceOffset);
    }

    /**
     * Writes bytes {@code [from, from + length)} of a chunk for slot {@code i} of a PREPARE_STORE (a chunk written
     * in parts, a layer at a time for example): straight into the mapped pool, or in WRITE_DATA messages with the
     * copy transport. The chunk becomes readable only at COMMIT_STORE, whatever parts were written.
     *
     * @param instanceId   instance.
     * @param transferId   the store.
     * @param slotIndex    slot entry in the prepare response.
     * @param from         first byte of the chunk to write.
     * @param length       bytes to write.
     * @param slotOffset   the slot's pool offset (from the prepare response).
     * @param source       the bytes.
     * @param sourceOffset offset in the source of the chunk's byte {@code from}.
     * @return OK, or the status of the failed WRITE_DATA (UNKNOWN_TRANSFER when the lease ended).
     */
    public int writeChunk(
        final long instanceId,
        final long transferId,
        final int slotIndex,
        final int from,
        final int length,
        final long slotOffset,
        final DirectBuffer source,
        final int sourceOffset)
    {
        if (null != pool)
        {
            final UnsafeBuffer view = scratchView;
            pool.wrap(view, slotOffset - dataOffset + from, length);
            view.putBytes(0, source, sourceOffset, length);
            return Status.OK;
        }
        for (int done = 0; done < length; )
        {
            final int n = Math.min(maxInlineBytes, length - done);
            final int at = done;
            final ClientResponse r = await(sendOrWait(() -> sendWriteData(
                instanceId, transferId, slotIndex, from + at, source, sourceOffset + at, n)), dataResponse);
            if (!r.isOk())
            {
                return r.status();
            }
            done += n;
        }
        return Status.OK;
    }

    /**
     * Reads a chunk's bytes for slot {@code i} of a PREPARE_RETRIEVE: straight from the mapped pool, or in
     * READ_DATA messages with the copy transport.
     *
     * @param instanceId        instance.
     * @param transferId        the retrieve.
     * @param slotIndex         slot entry in the prepare response.
     * @param chunkBytes        the chunk's length.
     * @param slotOffset        the slot's pool offset (from the prepare response).
     * @param destination       where the bytes go.
     * @param destinationOffset offset in the destination.
     * @return OK, or the status of the failed READ_DATA.
     */
    public int readChunk(
        final long instanceId,
        final long transferId,
        final int slotIndex,
        final int chunkBytes,
        final long slotOffset,
        final MutableDirectBuffer destination,
        final int destinationOffset)
    {
        return readChunk(instanceId, transferId, slotIndex, 0, chunkBytes, slotOffset, destination, destinationOffset);
    }

    /**
     * Reads bytes {@code [from, from + length)} of a chunk for slot {@code i} of a PREPARE_RETRIEVE: straight from
     * the mapped pool, or in READ_DATA messages with the copy transport.
     *
     * @param instanceId        instance.
     * @param transferId        the retrieve.
     * @param slotIndex         slot entry in the prepare response.
     * @param from              first byte of the chunk to read.
     * @param length            bytes to read.
     * @param slotOffset        the slot's pool offset (from the prepare response).
     * @param destination       where the bytes go.
     * @param destinationOffset offset in the destination of the chunk's byte {@code from}.
     * @return OK, or the status of the failed READ_DATA.
     */
    public int readChunk(
        final long instanceId,
        final long transferId,
        final int slotIndex,
        final int from,
        final int length,
        final long slotOffset,
        final MutableDirectBuffer destination,
        final int destinationOffset)
    {
        if (null != pool)
        {
            final UnsafeBuffer view = scratchView;
            pool.wrap(view, slotOffset - dataOffset + from, length);
            destination.putBytes(destinationOffset, view, 0, length);
            return Status.OK;
        }
        for (int done = 0; done < length; )
        {
            final int n = Math.min(maxInlineBytes, length - done);
            final int at = done;
            final ClientResponse r = await(sendOrWait(() -> sendReadData(
                instanceId, transferId, slotIndex, from + at, n)), dataResponse);
            if (!r.isOk())
            {
                return r.status();
            }
            r.copyData(destination, destinationOffset + at);
            done += n;
        }
        return Status.OK;
    }

    private final UnsafeBuffer scratchView = new UnsafeBuffer(0, 0);

    // ------------------------------------------------------------------------------------------ facts

    /**
     * Incarnation of the server this client is connected to.
     *
     * @return incarnation.
     */
    public long incarnation()
    {
        return incarnation;
    }

    /**
     * Session id the server gave this client.
     *
     * @return session id.
     */
    public long sessionId()
    {
        return sessionId;
    }

    /**
     * Tokens per chunk of the server.
     *
     * @return tokens.
     */
    public int chunkTokens()
    {
        return chunkTokens;
    }

    /**
     * Largest key range of the server.
     *
     * @return chunks.
     */
    public int maxChunksPerRequest()
    {
        return maxChunks;
    }

    /**
     * Largest copy-transport payload.
     *
     * @return bytes.
     */
    public int maxInlineBytes()
    {
        return maxInlineBytes;
    }

    /**
     * Whether this client uses the copy transport.
     *
     * @return true without a pool mapping.
     */
    public boolean isCopyTransport()
    {
        return null == pool;
    }

    /**
     * Responses that arrived for nobody (no async handler set).
     *
     * @return count.
     */
    public long orphanResponses()
    {
        return orphanResponses;
    }

    /**
     * Path of this client's file.
     *
     * @return path.
     */
    public Path clientFile()
    {
        return clientPath;
    }

    /**
     * Reads a counter from the server's control file (no request needed).
     *
     * @param id counter id.
     * @return value.
     */
    public long counter(final int id)
    {
        return control.getLongAcquire(ControlFileDescriptor.COUNTERS_OFFSET + id * Long.BYTES);
    }

    /**
     * Tells the server this client leaves (it reaps what the client held), releases the lock and unmaps.
     * The server deletes the client file; if the server is gone, the client deletes it.
     */
    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        final boolean serverAlive = alive();
        clientHeader.putIntRelease(ClientFileDescriptor.CLOSING_OFFSET, 1);
        releaseMappings();
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

    private void releaseMappings()
    {
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
            if (null != poolChannel)
            {
                poolChannel.close();
            }
        }
        catch (final IOException ignore)
        {
            // Closing the channel released the lock.
        }
        for (final MappedByteBuffer segment : poolSegments)
        {
            IoUtil.unmap(segment);
        }
        poolSegments.clear();
        if (null != poolMeta)
        {
            IoUtil.unmap(poolMeta);
            poolMeta = null;
        }
        if (null != clientMapped)
        {
            IoUtil.unmap(clientMapped);
        }
        if (null != controlMapped)
        {
            IoUtil.unmap(controlMapped);
        }
        pool = null;
    }
}
