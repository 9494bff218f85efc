package io.kvstash.core.book;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.SlotTableDescriptor;
import io.kvstash.wire.hash.ChunkHasher;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.AtomicBuffer;

import java.util.Arrays;

/**
 * The chunk book: every decision of the store, made by one thread. It owns the key index, the chunk state
 * machine (absent, reserved, readable with pins, evicted), the LRU order, pins, pending transfers with
 * their leases, the registered instances, and the slot accounting (a chunk id is its slot index; all slots
 * have one size). It is the reserve stage of the pipeline.
 * <p>
 * Why one owner: whether a chunk is readable, whether a reservation fits, which chunk is evicted, and
 * whether a transfer id is still valid are all inputs to the next request's decision. If any of them were
 * written by a later stage, the reserve stage of request n+1 would read it while that stage writes it for
 * request n. So the book decides everything and hands later stages only the decisions, in the command:
 * slot ids with their generations ({@code SlotAssigner} turns them into offsets), copy-transport targets
 * ({@code DataMover} moves the bytes), and the status ({@code publish} answers).
 * <p>
 * Slots: the pool is cut into slots of one size, the largest registered chunk rounded up to the alignment
 * (or a fixed {@link StoreContext#slotBytes()}). Allocation and eviction are O(1) (a free-slot stack and an
 * LRU list), and a reservation never fails while enough free or evictable slots exist. Several layouts of
 * different chunk sizes share the pool: each chunk takes one slot, so smaller chunks waste the difference;
 * a layout needing bigger slots is accepted only while the pool holds no chunk (the slots are re-cut),
 * otherwise it gets INVALID_LAYOUT.
 * <p>
 * Time is the command's {@link StoreCommand#timestampNs}, never a clock read here, so a journal replays to
 * identical outcomes. Expected outcomes are status codes. Allocation-free per request after warm-up
 * (REGISTER allocates).
 * <p>
 * Owner: the reserve stage thread. Not thread safe.
 */
public final class ChunkBook
{

    /** Most (model, world size, rank) identities the layout registry remembers (REGISTER of a new one: BUSY). */
    public static final int MAX_LAYOUT_IDENTITIES = InstanceTable.MAX_IDENTITIES;

    private static final byte FREE = 0;
    private static final byte RESERVED = 1;
    private static final byte READABLE = 2;

    private static final int UNDO_EVICT = 1;
    private static final int UNDO_RESERVE = 2;

    private final StoreContext context;
    private final StoreCounters counters;
    private final AtomicBuffer slotTable;
    /** The gauges changed since they were last published; {@link #afterAnswer()} publishes them. */
    private boolean gaugesDue;
    /** The transfer of a COMMIT_STORE answered OK and not yet applied, or -1; {@link #afterAnswer()} applies it. */
    private int pendingCommit = -1;
    private int pendingCommitInstance;
    /** Chunks evicted by PREPARE_STOREs since the count was last added to {@link StoreCounters#EVICTIONS}. */
    private long pendingEvictions;
    private final ChunkHasher hasher = new ChunkHasher();
    private final InstanceTable instances;
    private final TransferTable transfers;
    private final ChunkIndex index;
    private final int maxSlots;

    private long slotBytes;
    private int slotCapacity;
    private byte[] state = new byte[0];
    private int[] pins = new int[0];
    private int[] generation = new int[0];
    private int[] owner = new int[0];
    private int[] lruPrev = new int[0];
    private int[] lruNext = new int[0];
    private int lruHead = -1;
    private int lruTail = -1;
    private int[] freeSlots = new int[0];
    private int freeTop;
    private int readableChunks;
    private int reservedChunks;
    private int pinnedChunks;
    private int evictableChunks;

    private final int[] undoKind;
    private final int[] undoChunk;
    private final int[] undoSuccessor;
    private final int[] undoGeneration;
    private final long[] undoNs;
    private final long[] undoHi;
    private final long[] undoLo;
    private final int[] scratchIds;

    /**
     * A book for a concluded configuration.
     *
     * @param context   store configuration.
     * @param counters  counters; the BOOK region is written by this book's thread.
     * @param slotTable slot words, at least {@link SlotTableDescriptor#tableLength(long, int)} bytes.
     */
    public ChunkBook(final StoreContext context, final StoreCounters counters, final AtomicBuffer slotTable)
    {
        if (!context.isConcluded())
        {
            throw new IllegalArgumentException("context not concluded");
        }
        this.context = context;
        this.counters = counters;
        this.slotTable = slotTable;
        this.maxSlots = (int)(context.poolSizeBytes() / context.alignment());
        if (slotTable.capacity() < SlotTableDescriptor.tableLength(context.poolSizeBytes(), context.alignment()))
        {
            throw new IllegalArgumentException("slot table too small for the pool");
        }
        instances = new InstanceTable(context.maxInstances());
        transfers = new TransferTable(context.maxTransfers(), context.maxInstances());
        index = new ChunkIndex(0, context.maxChunksPerRequest());
        final int undoLength = 2 * context.maxChunksPerRequest();
        undoKind = new int[undoLength];
        undoChunk = new int[undoLength];
        undoSuccessor = new int[undoLength];
        undoGeneration = new int[undoLength];
        undoNs = new long[undoLength];
        undoHi = new long[undoLength];
        undoLo = new long[undoLength];
        scratchIds = new int[context.maxChunksPerRequest()];
        if (context.slotBytes() > 0)
        {
            cutSlots(alignUp(context.slotBytes()));
        }
        publishGauges();
    }

    /**
     * Runs what the reserve stage deferred past the answer of the request it decided. None of it changes an
     * answer: the index removals of the chunks a PREPARE_STORE evicted (they read table lines of keys no request
     * asked for), the bookkeeping of a COMMIT_STORE already answered OK (its chunks made readable in the book
     * and appended to the recency order, its transfer released, its counts; their slot words went READABLE
     * before the answer), the eviction count and the gauges.
     * {@link #reserve} runs it first, so every request is decided on the state all the earlier ones left; a
     * caller that runs every stage on this thread calls this once the answer is on its way, so the work happens
     * while the answer travels, and a reserve stage of its own calls it at the end of a batch. Owner: the reserve
     * stage thread.
     *
     * @return deferred operations run.
     */
    public int afterAnswer()
    {
        int ops = 0;
        if (pendingCommit >= 0)
        {
            final int t = pendingCommit;
            pendingCommit = -1;
            applyCommit(t, pendingCommitInstance);
            ops++;
        }
        if (0 != index.pendingRemovals())
        {
            ops += index.runPendingRemovals();
        }
        if (0 != pendingEvictions)
        {
            counters.add(StoreCounters.EVICTIONS, pendingEvictions);
            pendingEvictions = 0;
        }
        if (gaugesDue)
        {
            gaugesDue = false;
            publishGauges();
        }
        return ops;
    }

    /**
     * The reserve stage: decides the outcome of a command. Commands already failed by their decoder pass.
     *
     * @param command the request; its outcome fields are written.
     */
    public void reserve(final StoreCommand command)
    {
        afterAnswer();
        if (command.done)
        {
            return;
        }
        if ((command.flags & ~(RequestFlags.CLIENT_MASK | RequestFlags.REAPED)) != 0)
        {
            command.fail(Status.INVALID_REQUEST, "unknown flags");
            return;
        }
        if (command.chunkCount < 0 || command.chunkCount > command.maxChunks() ||
            command.chunkCount > context.maxChunksPerRequest())
        {
            command.fail(Status.INVALID_REQUEST, "chunk count out of range");
            return;
        }
        switch (command.type)
        {
            case RequestType.PING:
            case RequestType.STATS:
                command.done = true;
                break;
            case RequestType.REGISTER:
                onRegister(command);
                break;
            case RequestType.UNREGISTER:
                onUnregister(command);
                break;
            case RequestType.LOOKUP:
                onLookup(command);
                break;
            case RequestType.LOOKUP_ALL_RANKS:
                onLookupAllRanks(command);
                break;
            case RequestType.RELEASE:
                onRelease(command);
                break;
            case RequestType.PREPARE_STORE:
                onPrepareStore(command);
                break;
            case RequestType.COMMIT_STORE:
                onCommitStore(command);
                break;
            case RequestType.ABORT_STORE:
                onAbortStore(command);
                break;
            case RequestType.PREPARE_RETRIEVE:
                onPrepareRetrieve(command);
                break;
            case RequestType.COMMIT_RETRIEVE:
                onCommitRetrieve(command);
                break;
            case RequestType.CLEAR:
                onClear(command);
                break;
            case RequestType.WRITE_DATA:
                onData(command, TransferTable.KIND_STORE);
                break;
            case RequestType.READ_DATA:
                onData(command, TransferTable.KIND_RETRIEVE);
                break;
            case RequestType.REAP:
                onReap(command);
                break;
            case RequestType.SWEEP:
                onSweep(command);
                break;
            default:
                command.fail(Status.UNKNOWN_TYPE, "unknown request type");
                break;
        }
        gaugesDue = true;
    }

    // ------------------------------------------------------------------------------------------ requests

    private void onRegister(final StoreCommand command)
    {
        if (command.modelLength <= 0 || command.modelLength > Layout.MAX_MODEL_LENGTH)
        {
            command.fail(Status.INVALID_LAYOUT, "model name must be 1 to 255 UTF-8 bytes");
            return;
        }
        final Layout layout = new Layout(
            Arrays.copyOf(command.model, command.modelLength),
            command.worldSize,
            command.rank,
            command.layers,
            command.hidden,
            command.dtypeCode,
            command.mla);
        final String invalid = layout.invalidReason(context.chunkTokens(), context.poolSizeBytes());
        if (null != invalid)
        {
            command.fail(Status.INVALID_LAYOUT, invalid);
            return;
        }
        final long chunkBytes = layout.chunkBytes(context.chunkTokens());
        final int existing = instances.indexOf(command.instanceId);
        if (existing >= 0)
        {
            if (!instances.layout(existing).equals(layout))
            {
                command.fail(Status.LAYOUT_MISMATCH, "instance already registered with another layout");
                return;
            }
            // A worker that re-registers through a new session (it reconnected) takes its instance over.
            instances.owner(existing, command.session);
            answerRegister(command, chunkBytes);
            return;
        }
        final Layout registered = instances.registered(layout);
        if (null != registered && !registered.equals(layout))
        {
            command.fail(Status.LAYOUT_MISMATCH, "this model, world size and rank were registered with another layout");
            return;
        }
        if (null == registered && instances.isRegistryFull())
        {
            command.fail(Status.BUSY, "layout registry full (65,536 model, world size and rank identities)");
            return;
        }
        final long neededSlotBytes = alignUp(chunkBytes);
        if (neededSlotBytes > context.poolSizeBytes())
        {
            // The chunk fits the pool but its aligned slot does not: the pool would have no slot at all.
            command.fail(Status.INVALID_LAYOUT, "chunk slot (chunk rounded up to the alignment) larger than the pool");
            return;
        }
        if (neededSlotBytes > SlotGeometry.SEGMENT_BYTES)
        {
            command.fail(Status.INVALID_LAYOUT, "chunk slot larger than a pool segment (1 GiB): a chunk must fit one");
            return;
        }
        if (neededSlotBytes > slotBytes)
        {
            if (context.slotBytes() > 0)
            {
                command.fail(Status.INVALID_LAYOUT, "chunk larger than the fixed slot size (--slot-bytes)");
                return;
            }
            if (readableChunks + reservedChunks > 0)
            {
                command.fail(Status.INVALID_LAYOUT, "chunk larger than the slot size of the layouts registered first, and the pool is not empty");
                return;
            }
        }
        // Every refusal comes before the first change: a refused REGISTER leaves the slots as they were.
        if (instances.isFull())
        {
            command.fail(Status.BUSY, "instance limit reached");
            return;
        }
        if (neededSlotBytes > slotBytes)
        {
            cutSlots(neededSlotBytes);
        }
        final long ns = hasher.namespace(command.model, command.modelLength, command.worldSize, command.rank, 0);
        final int index = instances.add(command.instanceId, layout, chunkBytes, ns);
        instances.owner(index, command.session);
        answerRegister(command, chunkBytes);
    }

    private void answerRegister(final StoreCommand command, final long chunkBytes)
    {
        command.status = Status.OK;
        command.chunkBytes = chunkBytes;
        command.slotBytes = slotBytes;
        command.slotCapacity = slotCapacity;
        command.done = true;
    }

    private void onUnregister(final StoreCommand command)
    {
        final int instance = instances.indexOf(command.instanceId);
        command.done = true;
        if (instance < 0)
        {
            counters.increment(StoreCounters.UNREGISTER_UNKNOWN);
            command.status = Status.OK;
            return;
        }
        final long ended = unregister(instance);
        if ((command.flags & RequestFlags.REAPED) != 0)
        {
            counters.increment(StoreCounters.DEAD_CLIENTS);
        }
        command.removedCount = ended;
        command.status = Status.OK;
    }

    /**
     * Ends every pending transfer of an instance (stores aborted, pins released) and forgets it.
     *
     * @return transfers ended.
     */
    private long unregister(final int instance)
    {
        long ended = 0;
        for (int t = transfers.instanceHead(instance); t >= 0; t = transfers.instanceHead(instance))
        {
            endTransfer(t);
            ended++;
        }
        instances.remove(instance);
        return ended;
    }

    /**
     * REAP: a client session ended; every instance it owns is unregistered as by UNREGISTER. With
     * RequestFlags.REAPED the session's process died, counted once as a dead client.
     */
    private void onReap(final StoreCommand command)
    {
        final long session = command.session;
        long reaped = 0;
        if (0 != session)
        {
            for (int index = instances.nextOwned(session, 0); index >= 0; index = instances.nextOwned(session, index))
            {
                unregister(index);
                reaped++;
            }
        }
        if ((command.flags & RequestFlags.REAPED) != 0)
        {
            counters.increment(StoreCounters.DEAD_CLIENTS);
        }
        command.removedCount = reaped;
        command.status = Status.OK;
        command.done = true;
    }

    private void onLookup(final StoreCommand command)
    {
        final int instance = instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final long ns = namespace(instance, command.salt);
        final int n = command.chunkCount;
        int hits = 0;
        while (hits < n)
        {
            final int id = index.find(ns, command.keyHi[hits], command.keyLo[hits]);
            if (id < 0 || READABLE != state[id])
            {
                break;
            }
            scratchIds[hits++] = id;
        }
        counters.add(StoreCounters.LOOKUP_HIT_CHUNKS, hits);
        counters.add(StoreCounters.LOOKUP_MISS_CHUNKS, n - hits);
        command.hitChunks = hits;
        command.status = Status.OK;
        command.done = true;
        if ((command.flags & RequestFlags.PIN) != 0 && hits > 0)
        {
            final int t = transfers.allocate();
            if (t < 0)
            {
                command.fail(Status.BUSY, "pending transfer limit reached");
                return;
            }
            for (int i = 0; i < hits; i++)
            {
                pin(scratchIds[i]);
                transfers.addChunk(t, scratchIds[i]);
            }
            transfers.activate(t, TransferTable.KIND_LOOKUP, instance, deadline(command));
            command.outTransferId = transfers.id(t);
        }
    }

    private void onLookupAllRanks(final StoreCommand command)
    {
        final int worldSize = command.worldSize;
        if (worldSize <= 0 || worldSize > Layout.MAX_WORLD_SIZE ||
            command.modelLength <= 0 || command.modelLength > Layout.MAX_MODEL_LENGTH)
        {
            command.fail(Status.INVALID_REQUEST, "world size or model name out of range");
            return;
        }
        int hits = command.chunkCount;
        for (int rank = 0; rank < worldSize && hits > 0; rank++)
        {
            final long ns = hasher.namespace(command.model, command.modelLength, worldSize, rank, command.salt);
            int rankHits = 0;
            while (rankHits < hits)
            {
                final int id = index.find(ns, command.keyHi[rankHits], command.keyLo[rankHits]);
                if (id < 0 || READABLE != state[id])
                {
                    break;
                }
                rankHits++;
            }
            hits = rankHits;
        }
        command.hitChunks = hits;
        command.status = Status.OK;
        command.done = true;
    }

    private void onRelease(final StoreCommand command)
    {
        endTransferOf(command, TransferTable.KIND_LOOKUP, TransferTable.KIND_RETRIEVE);
    }

    /**
     * RELEASE and ABORT_STORE: ends the command's transfer when it belongs to the command's instance and is
     * of one of two kinds (its pins released, its reservations freed and never published), answering OK;
     * otherwise the command is failed as {@link #instanceOrFail} or {@link #transferOrFail} failed it.
     */
    private void endTransferOf(final StoreCommand command, final int kindA, final int kindB)
    {
        final int instance = instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final int t = transferOrFail(command, instance, kindA, kindB);
        if (t < 0)
        {
            return;
        }
        endTransfer(t);
        command.status = Status.OK;
        command.done = true;
    }

    private void onPrepareStore(final StoreCommand command)
    {
        final int instance = instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final long ns = namespace(instance, command.salt);
        final int n = command.chunkCount;
        int firstAbsent = -1;
        for (int i = 0; i < n; i++)
        {
            if (index.find(ns, command.keyHi[i], command.keyLo[i]) < 0)
            {
                firstAbsent = i;
                break;
            }
        }
        if (firstAbsent < 0)
        {
            // Early return: nothing to reserve, so nothing is recorded and no transfer id exists.
            counters.increment(StoreCounters.EMPTY_PREPARES);
            command.status = Status.OK;
            command.done = true;
            return;
        }
        final int t = transfers.allocate();
        if (t < 0)
        {
            command.fail(Status.BUSY, "pending transfer limit reached");
            return;
        }

        // Range order, one chunk at a time, as an exact LRU cache of N slots would: a present chunk is
        // skipped; an absent one takes a free slot or evicts the least recently used unpinned chunk, which
        // may be a chunk of this same range that is then found absent and reserved when its turn comes. The
        // chunks before the first absent one are present and nothing changes before its turn, so the loop starts
        // there without looking that one up again.
        int undoTop = 0;
        int reserved = 0;
        int evicted = 0;
        for (int i = firstAbsent; i < n; i++)
        {
            final long hi = command.keyHi[i];
            final long lo = command.keyLo[i];
            if (i > firstAbsent && index.find(ns, hi, lo) >= 0)
            {
                continue;
            }
            if (0 == freeTop)
            {
                final int victim = firstEvictable();
                if (victim < 0)
                {
                    rollback(undoTop);
                    transfers.discard(t);
                    counters.increment(StoreCounters.NO_SPACE);
                    command.fail(Status.NO_SPACE, "not enough space even after evicting every unpinned chunk");
                    return;
                }
                undoKind[undoTop] = UNDO_EVICT;
                undoChunk[undoTop] = victim;
                undoSuccessor[undoTop] = lruNext[victim];
                undoGeneration[undoTop] = generation[victim];
                undoNs[undoTop] = index.ns(victim);
                undoHi[undoTop] = index.hi(victim);
                undoLo[undoTop] = index.lo(victim);
                undoTop++;
                // The victim's slot is popped right below and its key overwritten by this chunk's: its index
                // entry can go after the answer (see ChunkIndex.removeLater).
                evict(victim, true);
                evicted++;
            }
            final int id = freeSlots[--freeTop];
            generation[id] = nextGeneration(generation[id]);
            state[id] = RESERVED;
            owner[id] = t;
            index.insert(id, ns, hi, lo);
            reservedChunks++;
            undoKind[undoTop] = UNDO_RESERVE;
            undoChunk[undoTop] = id;
            undoTop++;
            transfers.addChunk(t, id);
            command.slotChunkId[reserved] = id;
            command.slotRangeIndex[reserved] = i;
            command.slotGeneration[reserved] = generation[id];
            reserved++;
        }

        for (int u = 0; u < undoTop; u++)
        {
            final int id = undoChunk[u];
            if (UNDO_EVICT == undoKind[u])
            {
                putSlotWord(id, SlotTableDescriptor.STATE_FREE, undoGeneration[u]);
            }
            else
            {
                putSlotWord(id, SlotTableDescriptor.STATE_RESERVED, generation[id]);
            }
        }
        pendingEvictions += evicted;
        transfers.activate(t, TransferTable.KIND_STORE, instance, deadline(command));
        command.status = Status.OK;
        command.outTransferId = transfers.id(t);
        command.slotCount = reserved;
        command.chunkBytes = instances.chunkBytes(instance);
        command.slotBytes = slotBytes;
    }

    private void onCommitStore(final StoreCommand command)
    {
        final int instance = instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final int t = transferOrFail(command, instance, TransferTable.KIND_STORE, TransferTable.KIND_STORE);
        if (t < 0)
        {
            return;
        }
        // The answer is OK from here on. The slot words say READABLE before it, since a worker that saw the answer
        // may read its slot's word (PROTOCOL: a writer fences itself on it); the book's own state follows after
        // the answer, before the next request is decided.
        final int n = transfers.count(t);
        for (int i = 0; i < n; i++)
        {
            final int id = transfers.chunk(t, i);
            putSlotWord(id, SlotTableDescriptor.STATE_READABLE, generation[id]);
        }
        pendingCommit = t;
        pendingCommitInstance = instance;
        command.status = Status.OK;
        command.done = true;
    }

    private void applyCommit(final int t, final int instance)
    {
        final int n = transfers.count(t);
        for (int i = 0; i < n; i++)
        {
            final int id = transfers.chunk(t, i);
            state[id] = READABLE;
            pins[id] = 0;
            reservedChunks--;
            readableChunks++;
            evictableChunks++;
            lruAppend(id);
        }
        counters.add(StoreCounters.STORED_CHUNKS, n);
        counters.add(StoreCounters.BYTES_IN, n * instances.chunkBytes(instance));
        transfers.release(t);
    }

    private void onAbortStore(final StoreCommand command)
    {
        endTransferOf(command, TransferTable.KIND_STORE, TransferTable.KIND_STORE);
    }

    private void onPrepareRetrieve(final StoreCommand command)
    {
        final int instance = instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final int t;
        if ((command.flags & RequestFlags.FROM_LOOKUP) != 0)
        {
            t = transferOrFail(command, instance, TransferTable.KIND_LOOKUP, TransferTable.KIND_LOOKUP);
            if (t < 0)
            {
                return;
            }
            transfers.renew(t, TransferTable.KIND_RETRIEVE, deadline(command));
        }
        else
        {
            final long ns = namespace(instance, command.salt);
            final int n = command.chunkCount;
            if (0 == n)
            {
                command.status = Status.OK;
                command.done = true;
                return;
            }
            for (int i = 0; i < n; i++)
            {
                final int id = index.find(ns, command.keyHi[i], command.keyLo[i]);
                if (id < 0 || READABLE != state[id])
                {
                    counters.increment(StoreCounters.RETRIEVE_MISSES);
                    command.status = Status.MISS;
                    command.message = "a chunk of the range is not readable";
                    command.done = true;
                    return;
                }
                scratchIds[i] = id;
            }
            t = transfers.allocate();
            if (t < 0)
            {
                command.fail(Status.BUSY, "pending transfer limit reached");
                return;
            }
            for (int i = 0; i < n; i++)
            {
                pin(scratchIds[i]);
                transfers.addChunk(t, scratchIds[i]);
            }
            transfers.activate(t, TransferTable.KIND_RETRIEVE, instance, deadline(command));
        }
        final int n = transfers.count(t);
        for (int i = 0; i < n; i++)
        {
            final int id = transfers.chunk(t, i);
            command.slotChunkId[i] = id;
            command.slotRangeIndex[i] = i;
            command.slotGeneration[i] = generation[id];
        }
        counters.add(StoreCounters.RETRIEVE_HIT_CHUNKS, n);
        command.status = Status.OK;
        command.outTransferId = transfers.id(t);
        command.slotCount = n;
        command.chunkBytes = instances.chunkBytes(instance);
        command.slotBytes = slotBytes;
    }

    private void onCommitRetrieve(final StoreCommand command)
    {
        final int instance = instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final int t = transferOrFail(command, instance, TransferTable.KIND_RETRIEVE, TransferTable.KIND_RETRIEVE);
        if (t < 0)
        {
            return;
        }
        final int n = transfers.count(t);
        for (int i = 0; i < n; i++)
        {
            final int id = transfers.chunk(t, i);
            unpin(id);
            lruUnlink(id);
            lruAppend(id);
        }
        counters.add(StoreCounters.RETRIEVED_CHUNKS, n);
        counters.add(StoreCounters.BYTES_OUT, n * instances.chunkBytes(instance));
        transfers.release(t);
        command.status = Status.OK;
        command.done = true;
    }

    private void onClear(final StoreCommand command)
    {
        if ((command.flags & RequestFlags.FORCE) != 0)
        {
            for (int t = transfers.leaseHead(); t >= 0; t = transfers.leaseHead())
            {
                endTransfer(t);
            }
        }
        long removed = 0;
        int id = lruHead;
        while (id >= 0)
        {
            final int next = lruNext[id];
            if (0 == pins[id])
            {
                evict(id, false);
                putSlotWord(id, SlotTableDescriptor.STATE_FREE, generation[id]);
                removed++;
            }
            id = next;
        }
        counters.add(StoreCounters.CLEARED_CHUNKS, removed);
        command.removedCount = removed;
        command.status = Status.OK;
        command.done = true;
    }

    private void onData(final StoreCommand command, final int kind)
    {
        final int instance = instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final int t = transferOrFail(command, instance, kind, kind);
        if (t < 0)
        {
            return;
        }
        final long chunkBytes = instances.chunkBytes(instance);
        if (command.dataChunkIndex < 0 || command.dataChunkIndex >= transfers.count(t) ||
            command.dataOffset < 0 || command.dataLength < 0 || command.dataLength > command.data.capacity() ||
            command.dataOffset + command.dataLength > chunkBytes)
        {
            command.fail(Status.INVALID_REQUEST, "data range outside the chunk or the message");
            return;
        }
        final int id = transfers.chunk(t, command.dataChunkIndex);
        command.slotChunkId[0] = id;
        command.slotRangeIndex[0] = command.dataChunkIndex;
        command.slotGeneration[0] = generation[id];
        command.slotCount = 1;
        command.chunkBytes = chunkBytes;
        command.slotBytes = slotBytes;
        command.status = Status.OK;
    }

    private void onSweep(final StoreCommand command)
    {
        final long now = command.timestampNs;
        final int limit = context.sweepLimit();
        int reclaimed = 0;
        for (int t = transfers.leaseHead(); t >= 0 && reclaimed < limit; t = transfers.leaseHead())
        {
            if (transfers.deadlineNs(t) - now >= 0)
            {
                break;
            }
            endTransfer(t);
            reclaimed++;
        }
        counters.add(StoreCounters.RECLAIMED_LEASES, reclaimed);
        command.removedCount = reclaimed;
        command.status = Status.OK;
        command.done = true;
    }

    // ------------------------------------------------------------------------------------------ helpers

    private int instanceOrFail(final StoreCommand command)
    {
        final int instance = instances.indexOf(command.instanceId);
        if (instance < 0)
        {
            command.fail(Status.UNKNOWN_INSTANCE, "instance not registered");
        }
        return instance;
    }

    /**
     * Resolves the command's transfer for an instance and one of two kinds. An expired transfer found here
     * (before its sweep) is reclaimed now and answered as unknown, so a late commit never acts.
     */
    private int transferOrFail(final StoreCommand command, final int instance, final int kindA, final int kindB)
    {
        final int t = transfers.resolve(command.transferId);
        if (t < 0 || transfers.instance(t) != instance ||
            (transfers.kind(t) != kindA && transfers.kind(t) != kindB))
        {
            command.fail(Status.UNKNOWN_TRANSFER, "transfer not pending for this instance");
            return -1;
        }
        if (transfers.deadlineNs(t) - command.timestampNs < 0)
        {
            endTransfer(t);
            counters.increment(StoreCounters.RECLAIMED_LEASES);
            command.fail(Status.UNKNOWN_TRANSFER, "transfer lease expired");
            return -1;
        }
        return t;
    }

    /**
     * Ends a pending transfer without completing it: a store's reserved chunks are freed (never published),
     * a lookup's or retrieve's pins are released with recency unchanged.
     */
    private void endTransfer(final int t)
    {
        final int n = transfers.count(t);
        if (TransferTable.KIND_STORE == transfers.kind(t))
        {
            for (int i = 0; i < n; i++)
            {
                final int id = transfers.chunk(t, i);
                index.remove(id);
                state[id] = FREE;
                reservedChunks--;
                freeSlots[freeTop++] = id;
                putSlotWord(id, SlotTableDescriptor.STATE_FREE, generation[id]);
            }
            counters.add(StoreCounters.ABORTED_CHUNKS, n);
        }
        else
        {
            for (int i = 0; i < n; i++)
            {
                unpin(transfers.chunk(t, i));
            }
        }
        transfers.release(t);
    }

    private void rollback(final int undoTop)
    {
        for (int u = undoTop - 1; u >= 0; u--)
        {
            final int id = undoChunk[u];
            if (UNDO_RESERVE == undoKind[u])
            {
                index.remove(id);
                state[id] = FREE;
                reservedChunks--;
                freeSlots[freeTop++] = id;
            }
            else
            {
                final int popped = freeSlots[--freeTop];
                if (popped != id)
                {
                    throw new IllegalStateException("rollback out of order: " + popped + " != " + id);
                }
                generation[id] = undoGeneration[u];
                index.insert(id, undoNs[u], undoHi[u], undoLo[u]);
                state[id] = READABLE;
                pins[id] = 0;
                readableChunks++;
                evictableChunks++;
                lruInsertBefore(id, undoSuccessor[u]);
            }
        }
    }

    private int firstEvictable()
    {
        int id = lruHead;
        while (id >= 0 && pins[id] > 0)
        {
            id = lruNext[id];
        }
        return id;
    }

    private void evict(final int id, final boolean reusedAtOnce)
    {
        lruUnlink(id);
        if (reusedAtOnce)
        {
            index.removeLater(id);
        }
        else
        {
            index.remove(id);
        }
        state[id] = FREE;
        readableChunks--;
        evictableChunks--;
        freeSlots[freeTop++] = id;
    }

    private void pin(final int id)
    {
        if (0 == pins[id]++)
        {
            pinnedChunks++;
            evictableChunks--;
        }
    }

    private void unpin(final int id)
    {
        if (0 == --pins[id])
        {
            pinnedChunks--;
            evictableChunks++;
        }
    }

    private void lruAppend(final int id)
    {
        lruPrev[id] = lruTail;
        lruNext[id] = -1;
        if (lruTail >= 0)
        {
            lruNext[lruTail] = id;
        }
        else
        {
            lruHead = id;
        }
        lruTail = id;
    }

    private void lruInsertBefore(final int id, final int successor)
    {
        if (successor < 0)
        {
            lruAppend(id);
            return;
        }
        final int prev = lruPrev[successor];
        lruPrev[id] = prev;
        lruNext[id] = successor;
        lruPrev[successor] = id;
        if (prev >= 0)
        {
            lruNext[prev] = id;
        }
        else
        {
            lruHead = id;
        }
    }

    private void lruUnlink(final int id)
    {
        final int prev = lruPrev[id];
        final int next = lruNext[id];
        if (prev >= 0)
        {
            lruNext[prev] = next;
        }
        else
        {
            lruHead = next;
        }
        if (next >= 0)
        {
            lruPrev[next] = prev;
        }
        else
        {
            lruTail = prev;
        }
    }

    private long namespace(final int instance, final long salt)
    {
        if (0 == salt)
        {
            return instances.namespace(instance);
        }
        if (instances.lastSalt(instance) == salt)
        {
            return instances.lastSaltNamespace(instance);
        }
        // The table's own copy of the model name: Layout.modelBytes() would allocate a copy per request.
        final Layout layout = instances.layout(instance);
        final byte[] model = instances.model(instance);
        final long ns = hasher.namespace(model, model.length, layout.worldSize(), layout.rank(), salt);
        instances.lastSalt(instance, salt, ns);
        return ns;
    }

    private long deadline(final StoreCommand command)
    {
        return command.timestampNs + context.leaseNs();
    }

    private void putSlotWord(final int id, final int slotState, final int slotGeneration)
    {
        slotTable.putLongRelease(id * SlotTableDescriptor.WORD_LENGTH, SlotTableDescriptor.word(slotState, slotGeneration));
    }

    private static int nextGeneration(final int current)
    {
        final int next = current + 1;
        return 0 == next ? 1 : next;
    }

    private long alignUp(final long bytes)
    {
        final long mask = context.alignment() - 1L;
        return (bytes + mask) & ~mask;
    }

    /**
     * Cuts the (empty) pool into slots of a new size. Only called while no chunk is reserved or readable.
     */
    private void cutSlots(final long newSlotBytes)
    {
        slotBytes = newSlotBytes;
        slotCapacity = (int)Math.min(maxSlots, SlotGeometry.capacity(context.poolSizeBytes(), newSlotBytes));
        if (state.length < slotCapacity)
        {
            state = new byte[slotCapacity];
            pins = new int[slotCapacity];
            generation = Arrays.copyOf(generation, slotCapacity);
            owner = new int[slotCapacity];
            lruPrev = new int[slotCapacity];
            lruNext = new int[slotCapacity];
            freeSlots = new int[slotCapacity];
        }
        index.resize(slotCapacity);
        lruHead = -1;
        lruTail = -1;
        freeTop = 0;
        // Push in reverse so slot 0 is taken first: offsets are deterministic for a request order.
        for (int id = slotCapacity - 1; id >= 0; id--)
        {
            state[id] = FREE;
            pins[id] = 0;
            freeSlots[freeTop++] = id;
        }
    }

    private void publishGauges()
    {
        counters.set(StoreCounters.READABLE_CHUNKS, readableChunks);
        counters.set(StoreCounters.RESERVED_CHUNKS, reservedChunks);
        counters.set(StoreCounters.PINNED_CHUNKS, pinnedChunks);
        counters.set(StoreCounters.FREE_SLOTS, freeTop);
        counters.set(StoreCounters.SLOT_CAPACITY, slotCapacity);
        counters.set(StoreCounters.PENDING_TRANSFERS, transfers.active());
        counters.set(StoreCounters.INSTANCES, instances.size());
    }

    // ------------------------------------------------------------------------------------------ inspection

    /**
     * Bytes of one slot; 0 until the first layout registers (unless fixed by configuration).
     *
     * @return slot size.
     */
    public long slotBytes()
    {
        return slotBytes;
    }

    /**
     * Slots at the current slot size.
     *
     * @return slot count.
     */
    public int slotCapacity()
    {
        return slotCapacity;
    }

    /**
     * Free slots.
     *
     * @return count.
     */
    public int freeSlots()
    {
        return freeTop;
    }

    /**
     * Readable chunks.
     *
     * @return count.
     */
    public int readableChunks()
    {
        return readableChunks;
    }

    /**
     * Reserved chunks.
     *
     * @return count.
     */
    public int reservedChunks()
    {
        return reservedChunks;
    }

    /**
     * Readable chunks with at least one pin.
     *
     * @return count.
     */
    public int pinnedChunks()
    {
        return pinnedChunks;
    }

    /**
     * Pending transfers.
     *
     * @return count.
     */
    public int pendingTransfers()
    {
        return transfers.active();
    }

    /**
     * Registered instances.
     *
     * @return count.
     */
    public int instanceCount()
    {
        return instances.size();
    }

    /**
     * Pins held on a chunk, for tests and diagnostics.
     *
     * @param ns namespace of the key.
     * @param hi hash high half.
     * @param lo hash low half.
     * @return pin count, or -1 when the chunk is not readable.
     */
    public int pinsOf(final long ns, final long hi, final long lo)
    {
        final int id = index.find(ns, hi, lo);
        return id >= 0 && READABLE == state[id] ? pins[id] : -1;
    }

    /**
     * Whether a transfer id is pending (issued, not finished, not reclaimed), for tests and diagnostics.
     * A transfer whose lease ended but that no request or sweep has reclaimed yet is still pending.
     *
     * @param transferId transfer id.
     * @return true when the id resolves to a pending transfer.
     */
    public boolean isPending(final long transferId)
    {
        return transfers.resolve(transferId) >= 0;
    }

    /**
     * Owner of a pending transfer, for tests and diagnostics.
     *
     * @param transferId transfer id.
     * @return the owning instance id; undefined when the transfer is not {@link #isPending(long) pending}.
     */
    public long transferOwner(final long transferId)
    {
        final int t = transfers.resolve(transferId);
        return t < 0 ? 0 : instances.instanceId(transfers.instance(t));
    }

    /**
     * Lease deadline of a pending transfer on the command clock, for tests and diagnostics.
     *
     * @param transferId transfer id.
     * @return deadline in nanoseconds; undefined when the transfer is not {@link #isPending(long) pending}.
     */
    public long transferDeadlineNs(final long transferId)
    {
        final int t = transfers.resolve(transferId);
        return t < 0 ? 0 : transfers.deadlineNs(t);
    }

    /**
     * Namespace of a registered instance's keys with no salt, for tests and diagnostics.
     *
     * @param instanceId instance.
     * @return namespace, or 0 when not registered.
     */
    public long namespaceOf(final long instanceId)
    {
        final int instance = instances.indexOf(instanceId);
        return instance < 0 ? 0 : instances.namespace(instance);
    }

    /**
     * Readable chunk keys from least to most recently used, as {@code [hi, lo]} pairs, for tests.
     *
     * @return the LRU order.
     */
    public long[][] lruOrder()
    {
        final long[][] order = new long[readableChunks][];
        int i = 0;
        for (int id = lruHead; id >= 0; id = lruNext[id])
        {
            order[i++] = new long[]{ index.hi(id), index.lo(id) };
        }
        return order;
    }

    /**
     * Checks every structural invariant; slow, for tests. Free + reserved + readable slots equal the
     * capacity; the index holds exactly the reserved and readable chunks, each once; the LRU list holds
     * exactly the readable chunks; pins equal the references of pending lookup and retrieve transfers;
     * reserved chunks belong to exactly one pending store of a live instance; every pending transfer has a
     * registered owner and a deadline; the slot table agrees with the states (a free slot's word says FREE).
     *
     * @return null when every invariant holds, else a description of the first violation.
     */
    public String verifyInvariants()
    {
        if (freeTop + reservedChunks + readableChunks != slotCapacity)
        {
            return "free " + freeTop + " + reserved " + reservedChunks + " + readable " + readableChunks +
                " != capacity " + slotCapacity;
        }
        if (index.size() != reservedChunks + readableChunks)
        {
            return "index size " + index.size() + " != reserved + readable";
        }
        if (index.occupiedEntries() != index.size() + index.pendingRemovals())
        {
            return "index table holds " + index.occupiedEntries() + " entries for " + index.size() + " chunks and " +
                index.pendingRemovals() + " pending removals";
        }
        final boolean[] seenFree = new boolean[slotCapacity];
        for (int i = 0; i < freeTop; i++)
        {
            final int id = freeSlots[i];
            if (seenFree[id] || FREE != state[id])
            {
                return "slot " + id + " on the free stack twice or not free";
            }
            seenFree[id] = true;
        }
        int readable = 0;
        int reserved = 0;
        int pinned = 0;
        int evictable = 0;
        for (int id = 0; id < slotCapacity; id++)
        {
            if (FREE != state[id])
            {
                if (index.find(index.ns(id), index.hi(id), index.lo(id)) != id)
                {
                    return "chunk " + id + " not found under its own key";
                }
                if (READABLE == state[id])
                {
                    readable++;
                    pinned += pins[id] > 0 ? 1 : 0;
                    evictable += 0 == pins[id] ? 1 : 0;
                }
                else
                {
                    reserved++;
                }
            }
            final long word = slotTable.getLongAcquire(id * SlotTableDescriptor.WORD_LENGTH);
            final int expected = READABLE == state[id] ? SlotTableDescriptor.STATE_READABLE :
                RESERVED == state[id] ? SlotTableDescriptor.STATE_RESERVED : SlotTableDescriptor.STATE_FREE;
            if (FREE != state[id] && (SlotTableDescriptor.state(word) != expected ||
                SlotTableDescriptor.generation(word) != generation[id]))
            {
                return "slot word of " + id + " disagrees with its state";
            }
            if (FREE == state[id] && SlotTableDescriptor.STATE_FREE != SlotTableDescriptor.state(word))
            {
                return "slot word of free slot " + id + " is not FREE";
            }
        }
        if (readable != readableChunks || reserved != reservedChunks || pinned != pinnedChunks ||
            evictable != evictableChunks)
        {
            return "state counts disagree: readable " + readable + "/" + readableChunks + " reserved " + reserved +
                "/" + reservedChunks + " pinned " + pinned + "/" + pinnedChunks + " evictable " + evictable + "/" +
                evictableChunks;
        }
        int inLru = 0;
        int prev = -1;
        for (int id = lruHead; id >= 0; id = lruNext[id])
        {
            if (READABLE != state[id] || lruPrev[id] != prev || ++inLru > readableChunks)
            {
                return "LRU list broken at " + id;
            }
            prev = id;
        }
        if (inLru != readableChunks || lruTail != prev)
        {
            return "LRU list holds " + inLru + " of " + readableChunks + " readable chunks";
        }
        final int[] pinRefs = new int[slotCapacity];
        final int[] reservedBy = new int[slotCapacity];
        Arrays.fill(reservedBy, -1);
        int active = 0;
        for (int t = transfers.leaseHead(); t >= 0; t = transfers.leaseNext(t))
        {
            active++;
            final int instance = transfers.instance(t);
            if (null == instances.layout(instance))
            {
                return "transfer " + t + " has no registered owner";
            }
            if (0 == transfers.count(t))
            {
                return "transfer " + t + " is pending with no chunk";
            }
            for (int i = 0; i < transfers.count(t); i++)
            {
                final int id = transfers.chunk(t, i);
                if (TransferTable.KIND_STORE == transfers.kind(t))
                {
                    if (RESERVED != state[id] || owner[id] != t || reservedBy[id] >= 0)
                    {
                        return "store transfer " + t + " holds chunk " + id + " that it does not reserve";
                    }
                    reservedBy[id] = t;
                }
                else
                {
                    pinRefs[id]++;
                }
            }
        }
        if (active != transfers.active())
        {
            return "lease list holds " + active + " of " + transfers.active() + " pending transfers";
        }
        for (int id = 0; id < slotCapacity; id++)
        {
            if (RESERVED == state[id] && reservedBy[id] < 0)
            {
                return "reserved chunk " + id + " belongs to no pending store";
            }
            if (pinRefs[id] != (READABLE == state[id] ? pins[id] : 0))
            {
                return "chunk " + id + " has " + pins[id] + " pins but " + pinRefs[id] + " references";
            }
        }
        return null;
    }
}
