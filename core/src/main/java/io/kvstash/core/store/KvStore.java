package io.kvstash.core.store;

import io.kvstash.core.CommandExecutor;
import io.kvstash.core.DataMover;
import io.kvstash.core.SlotAssigner;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.core.book.ChunkBook;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.PoolRegion;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.SlotTableDescriptor;
import io.kvstash.wire.layout.Layout;
import org.agrona.BufferUtil;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.NanoClock;
import org.agrona.concurrent.SystemNanoClock;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.charset.StandardCharsets;

/**
 * The synchronous store: one method per request of the protocol, each running the three state-owning
 * stages in order on the calling thread — {@link ChunkBook#reserve} (decisions), {@link SlotAssigner#assign}
 * (the slot check), {@link DataMover#commit} (data effects). The pipeline runs the same three calls from its
 * stages, so both give identical outcomes.
 * <p>
 * Each method returns the facade's one reusable {@link StoreCommand}; read the outcome before the next call.
 * Not thread safe: one caller thread.
 */
public final class KvStore
{
    private final StoreContext context;
    private final StoreCounters counters;
    private final PoolRegion pool;
    private final AtomicBuffer slotTable;
    private final ChunkBook book;
    private final SlotAssigner assigner;
    private final DataMover mover;
    private final NanoClock clock;
    private final StoreCommand command;
    private final CommandExecutor executor;
    private long nextCorrelationId = 1;

    /**
     * A store over fresh memory: a direct pool, slot table and counters.
     *
     * @param context configuration; concluded here if it was not.
     * @param clock   time source for leases.
     */
    public KvStore(final StoreContext context, final NanoClock clock)
    {
        this(conclude(context), PoolRegion.allocateDirect(context.poolSizeBytes()),
            newSlotTable(context), StoreCounters.allocate(), clock);
    }

    /**
     * A store over fresh memory with the system clock.
     *
     * @param context configuration.
     */
    public KvStore(final StoreContext context)
    {
        this(context, new SystemNanoClock());
    }

    /**
     * A store over given memory (a mapped pool, slot table and counters).
     *
     * @param context   concluded configuration.
     * @param pool      data region.
     * @param slotTable slot words.
     * @param counters  counters.
     * @param clock     time source for leases.
     */
    public KvStore(
        final StoreContext context,
        final PoolRegion pool,
        final AtomicBuffer slotTable,
        final StoreCounters counters,
        final NanoClock clock)
    {
        this.context = context;
        this.pool = pool;
        this.slotTable = slotTable;
        this.counters = counters;
        this.clock = clock;
        this.book = new ChunkBook(context, counters, slotTable);
        this.assigner = new SlotAssigner(context);
        this.mover = new DataMover(context, pool, counters);
        this.command = new StoreCommand(context);
        this.executor = this::executeInline;
    }

    /**
     * A store whose requests another engine runs (the pipeline), over that engine's state.
     *
     * @param context   concluded configuration.
     * @param pool      the engine's data region.
     * @param slotTable the engine's slot words.
     * @param counters  the engine's counters.
     * @param book      the engine's chunk book, for inspection only (read it while the engine is idle).
     * @param clock     time source stamped on requests.
     * @param executor  runs each command to its outcome.
     */
    public KvStore(
        final StoreContext context,
        final PoolRegion pool,
        final AtomicBuffer slotTable,
        final StoreCounters counters,
        final ChunkBook book,
        final NanoClock clock,
        final CommandExecutor executor)
    {
        this.context = context;
        this.pool = pool;
        this.slotTable = slotTable;
        this.counters = counters;
        this.clock = clock;
        this.book = book;
        this.assigner = null;
        this.mover = null;
        this.command = new StoreCommand(context);
        this.executor = executor;
    }

    /**
     * A zeroed slot table for a configuration.
     *
     * @param context concluded configuration.
     * @return buffer of {@link SlotTableDescriptor#tableLength(long, int)} bytes.
     */
    public static AtomicBuffer newSlotTable(final StoreContext context)
    {
        final long length = SlotTableDescriptor.tableLength(context.poolSizeBytes(), context.alignment());
        return new UnsafeBuffer(BufferUtil.allocateDirectAligned(Math.toIntExact(Math.max(8, length)), 64));
    }

    private static StoreContext conclude(final StoreContext context)
    {
        return context.isConcluded() ? context : context.conclude();
    }

    /**
     * Runs a filled command through the stages. The command's timestamp is taken from the clock when 0.
     *
     * @param request command with its request fields set.
     * @return the same command with its outcome.
     */
    public StoreCommand execute(final StoreCommand request)
    {
        if (0 == request.timestampNs)
        {
            request.timestampNs = clock.nanoTime();
        }
        executor.execute(request);
        return request;
    }

    private void executeInline(final StoreCommand request)
    {
        book.reserve(request);
        assigner.assign(request);
        mover.commit(request);
        book.afterAnswer();
    }

    private StoreCommand begin(final int type, final long instanceId)
    {
        command.reset();
        command.type = type;
        command.correlationId = nextCorrelationId++;
        command.instanceId = instanceId;
        command.timestampNs = clock.nanoTime();
        return command;
    }

    private StoreCommand withKeys(final StoreCommand request, final ChunkKeys keys)
    {
        if (!request.copyKeys(keys))
        {
            request.fail(Status.INVALID_REQUEST, "key range longer than the server's limit");
        }
        return request;
    }

    /**
     * REGISTER: records an instance and its layout.
     *
     * @param instanceId instance.
     * @param layout     layout.
     * @return outcome: chunk bytes, slot bytes and capacity on OK.
     */
    public StoreCommand register(final long instanceId, final Layout layout)
    {
        final StoreCommand c = begin(RequestType.REGISTER, instanceId);
        if (!c.copyLayout(layout))
        {
            c.fail(Status.INVALID_LAYOUT, "model name longer than 255 bytes");
            return c;
        }
        return execute(c);
    }

    /**
     * UNREGISTER: aborts the instance's stores, releases its pins, forgets it.
     *
     * @param instanceId instance.
     * @return outcome.
     */
    public StoreCommand unregister(final long instanceId)
    {
        return execute(begin(RequestType.UNREGISTER, instanceId));
    }

    /**
     * LOOKUP: the readable prefix of a range, optionally pinned.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @param pin        pin the prefix under a lease.
     * @return outcome: hit chunks and, when pinned, a transfer id.
     */
    public StoreCommand lookup(final long instanceId, final ChunkKeys keys, final boolean pin)
    {
        final StoreCommand c = withKeys(begin(RequestType.LOOKUP, instanceId), keys);
        c.flags = pin ? RequestFlags.PIN : 0;
        return execute(c);
    }

    /**
     * LOOKUP_ALL_RANKS: the prefix readable for every rank of a world size. Encodes the model name on
     * every call (allocates); see {@link #lookupAllRanks(byte[], int, int, ChunkKeys)}.
     *
     * @param model     model name.
     * @param worldSize world size.
     * @param keys      key range.
     * @return outcome: hit chunks.
     */
    public StoreCommand lookupAllRanks(final String model, final int worldSize, final ChunkKeys keys)
    {
        final byte[] bytes = model.getBytes(StandardCharsets.UTF_8);
        return lookupAllRanks(bytes, bytes.length, worldSize, keys);
    }

    /**
     * LOOKUP_ALL_RANKS with the model name as UTF-8 bytes; unlike the {@code String} form it allocates nothing.
     *
     * @param model       model name bytes (UTF-8).
     * @param modelLength bytes used from index 0.
     * @param worldSize   world size.
     * @param keys        key range.
     * @return outcome: hit chunks.
     */
    public StoreCommand lookupAllRanks(
        final byte[] model, final int modelLength, final int worldSize, final ChunkKeys keys)
    {
        final StoreCommand c = withKeys(begin(RequestType.LOOKUP_ALL_RANKS, 0), keys);
        if (modelLength < 0 || modelLength > c.model.length || modelLength > model.length)
        {
            c.fail(Status.INVALID_REQUEST, "model name longer than 255 bytes");
            return c;
        }
        System.arraycopy(model, 0, c.model, 0, modelLength);
        c.modelLength = modelLength;
        c.worldSize = worldSize;
        return execute(c);
    }

    /**
     * RELEASE: releases a lookup's (or retrieve's) pins.
     *
     * @param instanceId instance.
     * @param transferId transfer.
     * @return outcome.
     */
    public StoreCommand release(final long instanceId, final long transferId)
    {
        final StoreCommand c = begin(RequestType.RELEASE, instanceId);
        c.transferId = transferId;
        return execute(c);
    }

    /**
     * PREPARE_STORE: reserves the absent chunks of a range.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @return outcome: transfer id and slots, or no transfer when nothing was absent.
     */
    public StoreCommand prepareStore(final long instanceId, final ChunkKeys keys)
    {
        return execute(withKeys(begin(RequestType.PREPARE_STORE, instanceId), keys));
    }

    /**
     * COMMIT_STORE: makes a store's chunks readable.
     *
     * @param instanceId instance.
     * @param transferId transfer.
     * @return outcome.
     */
    public StoreCommand commitStore(final long instanceId, final long transferId)
    {
        final StoreCommand c = begin(RequestType.COMMIT_STORE, instanceId);
        c.transferId = transferId;
        return execute(c);
    }

    /**
     * ABORT_STORE: frees a store's reserved slots.
     *
     * @param instanceId instance.
     * @param transferId transfer.
     * @return outcome.
     */
    public StoreCommand abortStore(final long instanceId, final long transferId)
    {
        final StoreCommand c = begin(RequestType.ABORT_STORE, instanceId);
        c.transferId = transferId;
        return execute(c);
    }

    /**
     * PREPARE_RETRIEVE by key range: pins every chunk (all or nothing) and returns slots.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @return outcome: transfer id and slots, or MISS.
     */
    public StoreCommand prepareRetrieve(final long instanceId, final ChunkKeys keys)
    {
        return prepareRetrieve(instanceId, keys, 0);
    }

    /**
     * PREPARE_RETRIEVE by key range with flags: with {@link io.kvstash.wire.RequestFlags#PREFIX} it pins the
     * readable leading chunks of the range (MISS only when chunk 0 is not readable).
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @param flags      request flags.
     * @return outcome: transfer id and slots, or MISS.
     */
    public StoreCommand prepareRetrieve(final long instanceId, final ChunkKeys keys, final int flags)
    {
        final StoreCommand c = withKeys(begin(RequestType.PREPARE_RETRIEVE, instanceId), keys);
        c.flags = flags;
        return execute(c);
    }

    /**
     * PREPARE_RETRIEVE of a pinned lookup: takes over its pins under a new transfer id.
     *
     * @param instanceId       instance.
     * @param lookupTransferId transfer of a LOOKUP with pin.
     * @return outcome: transfer id and slots.
     */
    public StoreCommand prepareRetrieveFromLookup(final long instanceId, final long lookupTransferId)
    {
        final StoreCommand c = begin(RequestType.PREPARE_RETRIEVE, instanceId);
        c.transferId = lookupTransferId;
        c.flags = RequestFlags.FROM_LOOKUP;
        return execute(c);
    }

    /**
     * COMMIT_RETRIEVE: releases a retrieve's pins; its chunks become most recently used.
     *
     * @param instanceId instance.
     * @param transferId transfer.
     * @return outcome.
     */
    public StoreCommand commitRetrieve(final long instanceId, final long transferId)
    {
        return commitRetrieve(instanceId, transferId, 0);
    }

    /**
     * COMMIT_RETRIEVE with flags: with {@link io.kvstash.wire.RequestFlags#QUIET} it only releases the pins, and
     * the chunks keep their place in the eviction order.
     *
     * @param instanceId instance.
     * @param transferId transfer.
     * @param flags      request flags.
     * @return outcome.
     */
    public StoreCommand commitRetrieve(final long instanceId, final long transferId, final int flags)
    {
        final StoreCommand c = begin(RequestType.COMMIT_RETRIEVE, instanceId);
        c.transferId = transferId;
        c.flags = flags;
        return execute(c);
    }

    /**
     * CLEAR: evicts every unpinned readable chunk; force also aborts reservations and drops pins first.
     *
     * @param force abort and unpin everything first.
     * @return outcome: chunks removed.
     */
    public StoreCommand clear(final boolean force)
    {
        final StoreCommand c = begin(RequestType.CLEAR, 0);
        c.flags = force ? RequestFlags.FORCE : 0;
        return execute(c);
    }

    /**
     * Reclaims transfers whose lease ended before the clock's now.
     *
     * @return outcome: transfers reclaimed.
     */
    public StoreCommand sweep()
    {
        return execute(begin(RequestType.SWEEP, 0));
    }

    /**
     * WRITE_DATA (copy transport): writes bytes into a chunk of a pending store.
     *
     * @param instanceId instance.
     * @param transferId store transfer.
     * @param slotIndex  index in the transfer's slot list.
     * @param offset     byte offset inside the chunk.
     * @param source     bytes to write.
     * @param sourceOffset offset in {@code source}.
     * @param length     bytes, at most {@link StoreContext#maxInlineBytes()}.
     * @return outcome.
     */
    public StoreCommand writeData(
        final long instanceId,
        final long transferId,
        final int slotIndex,
        final long offset,
        final DirectBuffer source,
        final int sourceOffset,
        final int length)
    {
        final StoreCommand c = begin(RequestType.WRITE_DATA, instanceId);
        c.transferId = transferId;
        c.dataChunkIndex = slotIndex;
        c.dataOffset = offset;
        c.dataLength = length;
        if (length < 0 || length > c.data.capacity())
        {
            c.fail(Status.INVALID_REQUEST, "data longer than a message holds");
            return c;
        }
        c.data.putBytes(0, source, sourceOffset, length);
        return execute(c);
    }

    /**
     * READ_DATA (copy transport): reads bytes of a chunk of a pending retrieve into the command's data.
     *
     * @param instanceId instance.
     * @param transferId retrieve transfer.
     * @param slotIndex  index in the transfer's slot list.
     * @param offset     byte offset inside the chunk.
     * @param length     bytes, at most {@link StoreContext#maxInlineBytes()}.
     * @return outcome; the bytes are in {@link StoreCommand#data} on OK.
     */
    public StoreCommand readData(
        final long instanceId, final long transferId, final int slotIndex, final long offset, final int length)
    {
        final StoreCommand c = begin(RequestType.READ_DATA, instanceId);
        c.transferId = transferId;
        c.dataChunkIndex = slotIndex;
        c.dataOffset = offset;
        c.dataLength = length;
        return execute(c);
    }

    /**
     * STATS: the counters.
     *
     * @return counters, live.
     */
    public StoreCounters counters()
    {
        return counters;
    }

    /**
     * The book, for inspection in tests and diagnostics.
     *
     * @return the book.
     */
    public ChunkBook book()
    {
        return book;
    }

    /**
     * The pool's data region.
     *
     * @return pool.
     */
    public PoolRegion pool()
    {
        return pool;
    }

    /**
     * The slot table.
     *
     * @return slot words.
     */
    public AtomicBuffer slotTable()
    {
        return slotTable;
    }

    /**
     * The configuration.
     *
     * @return context.
     */
    public StoreContext context()
    {
        return context;
    }
}
