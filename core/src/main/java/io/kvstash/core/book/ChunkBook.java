package io.kvstash.core.book;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.file.SlotTableDescriptor;
import io.kvstash.wire.hash.ChunkHasher;
import org.agrona.concurrent.AtomicBuffer;

/**
 * The chunk book: every decision of the store, made by one thread. It owns the key index, the chunk state
 * machine (absent, reserved, readable with pins, evicted), the eviction order, pins, pending transfers with
 * their leases, the registered instances, and the slot accounting (a chunk id is its slot index; all slots
 * have one size). It is the reserve stage of the pipeline.
 * <p>
 * Why one owner: whether a chunk is readable, whether a reservation fits, which chunk is evicted, and
 * whether a transfer id is still valid are all inputs to the next request's decision. If any of them were
 * written by a later stage, the reserve stage of request n+1 would read it while that stage writes it for
 * request n. So the book decides everything and hands later stages only the decisions, in the command:
 * slot ids with their generations and offsets in the data region ({@code SlotAssigner} checks them),
 * copy-transport targets ({@code DataMover} moves the bytes), and the status ({@code publish} answers).
 * <p>
 * Slots: each layout's chunks take slots of its size class, its chunk rounded up to the alignment (or, with a
 * fixed {@link StoreContext#slotBytes()}, one class for every layout). The pool's regions are given to a class
 * on first use ({@link SlotRegions}), so layouts of any sizes register in any order. A store takes a free slot
 * of its class, else a free region, else evicts its class's first unpinned chunk in eviction order (the least
 * recently used under {@code lru}; {@link ChainLearner} says where other policies enter chunks); a class with
 * none of these empties a region of another class whose chunks are all free or evictable (they count as
 * evictions) and tries again; only when no region can be emptied is the answer NO_SPACE. Allocation and
 * eviction are O(1) (a free-slot stack and an LRU list per class); giving or reclaiming a region is O(its
 * slots), once per region. With one class the slots, offsets and eviction order are exactly those of a pool
 * cut whole at that slot size.
 * <p>
 * Time is the command's {@link StoreCommand#timestampNs}, never a clock read here, so a journal replays to
 * identical outcomes. Expected outcomes are status codes. Allocation-free per request after warm-up
 * (REGISTER allocates).
 * <p>
 * The book dispatches each request and publishes the gauges; the requests are decided in package-private
 * collaborators it owns and runs on its own thread: {@link Registrar} (REGISTER, UNREGISTER, REAP),
 * {@link KeyLookup} (LOOKUP, LOOKUP_ALL_RANKS), {@link StoreReservations} (PREPARE_STORE, COMMIT_STORE,
 * ABORT_STORE, with {@link StoreUndoLog} making a PREPARE_STORE all or nothing), {@link ChunkRetrievals}
 * (PREPARE_RETRIEVE, COMMIT_RETRIEVE, WRITE_DATA, READ_DATA) and {@link TransferLeases} (resolving, ending and
 * sweeping pending transfers: RELEASE, SWEEP); over the mechanics of {@link SlotRegions} (the regions and size
 * classes, and the slots cut in them), {@link SlotStates} (slot states, pins, the free stack, the LRU list and the
 * slot words) and {@link ChainLearner} (where the eviction policy enters chunks). {@link BookInvariants} is the
 * slow structural check for tests.
 * <p>
 * Owner: the reserve stage thread. Not thread safe.
 */
public final class ChunkBook
{
    /** Most (model, world size, rank) identities the layout registry remembers (REGISTER of a new one: BUSY). */
    public static final int MAX_LAYOUT_IDENTITIES = InstanceTable.MAX_IDENTITIES;

    private final StoreContext context;
    private final StoreCounters counters;
    /** The gauges changed since they were last published; {@link #afterAnswer()} publishes them. */
    private boolean gaugesDue;
    private final InstanceTable instances;
    private final TransferTable transfers;
    private final ChunkIndex index;
    private final SlotRegions regions;
    private final SlotStates slots;
    private final TransferLeases leases;
    private final Registrar registrar;
    private final KeyLookup lookup;
    private final StoreReservations stores;
    private final ChunkRetrievals retrievals;

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
        if (slotTable.capacity() < SlotTableDescriptor.tableLength(context.poolSizeBytes(), context.alignment()))
        {
            throw new IllegalArgumentException("slot table too small for the pool");
        }
        final ChunkHasher hasher = new ChunkHasher();
        instances = new InstanceTable(context.maxInstances());
        transfers = new TransferTable(context.maxTransfers(), context.maxInstances());
        index = new ChunkIndex(0, context.maxChunksPerRequest());
        regions = new SlotRegions(
            slotTable, context.poolSizeBytes(), context.alignment(), context.eviction(), context.poolCommitment());
        slots = regions.slots();
        leases = new TransferLeases(transfers, slots, index, counters, context.leaseNs());
        final ChainLearner learner = new ChainLearner(context, slots, regions, index, transfers);
        registrar = new Registrar(context, counters, instances, regions, index, leases, hasher, learner);
        lookup = new KeyLookup(context, counters, slots, index, leases, registrar, hasher, learner);
        stores = new StoreReservations(
            context, counters, instances, transfers, index, regions, leases, registrar, learner);
        retrievals = new ChunkRetrievals(
            context, counters, instances, transfers, index, regions, leases, registrar, learner);
        if (context.slotBytes() > 0)
        {
            registrar.classFor(registrar.alignUp(context.slotBytes()));
        }
        publishGauges();
    }

    /**
     * Runs what the reserve stage deferred past the answer of the request it decided. None of it changes an
     * answer: the index removals of the chunks a PREPARE_STORE evicted (they read table lines of keys no request
     * asked for), the bookkeeping of a COMMIT_STORE already answered OK (its chunks made readable in the book
     * and appended to the recency order, its transfer released, its counts; their slot words went READABLE
     * before the answer), the eviction count (those three kept by {@link StoreReservations}) and the gauges.
     * {@link #reserve} runs it first, so every request is decided on the state all the earlier ones left; a
     * caller that runs every stage on this thread calls this once the answer is on its way, so the work happens
     * while the answer travels, and a reserve stage of its own calls it at the end of a batch. Owner: the reserve
     * stage thread.
     *
     * @return deferred operations run.
     */
    public int afterAnswer()
    {
        final int ops = stores.afterAnswer();
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
        final String invalid = invalidRequest(command);
        if (null != invalid)
        {
            command.fail(Status.INVALID_REQUEST, invalid);
            return;
        }
        dispatch(command);
        gaugesDue = true;
    }

    /**
     * Why a request is refused whatever its type: flags it may not carry, or a chunk count out of range.
     *
     * @return the reason, or null when the request may go to its type's handler.
     */
    private String invalidRequest(final StoreCommand command)
    {
        if ((command.flags & ~(RequestFlags.CLIENT_MASK | RequestFlags.REAPED)) != 0)
        {
            return "unknown flags";
        }
        final String misplaced = RequestFlags.misplaced(command.type, command.flags);
        if (null != misplaced)
        {
            return misplaced;
        }
        if (command.chunkCount < 0 || command.chunkCount > command.maxChunks() ||
            command.chunkCount > context.maxChunksPerRequest())
        {
            return "chunk count out of range";
        }
        return null;
    }

    private void dispatch(final StoreCommand command)
    {
        switch (command.type)
        {
            case RequestType.PING:
            case RequestType.STATS:
                command.done = true;
                break;
            case RequestType.REGISTER:
                registrar.onRegister(command);
                break;
            case RequestType.UNREGISTER:
                registrar.onUnregister(command);
                break;
            case RequestType.LOOKUP:
                lookup.onLookup(command);
                break;
            case RequestType.LOOKUP_ALL_RANKS:
                lookup.onLookupAllRanks(command);
                break;
            case RequestType.RELEASE:
                onRelease(command);
                break;
            case RequestType.PREPARE_STORE:
                stores.onPrepareStore(command);
                break;
            case RequestType.COMMIT_STORE:
                stores.onCommitStore(command);
                break;
            case RequestType.ABORT_STORE:
                stores.onAbortStore(command);
                break;
            case RequestType.PREPARE_RETRIEVE:
                retrievals.onPrepareRetrieve(command);
                break;
            case RequestType.COMMIT_RETRIEVE:
                retrievals.onCommitRetrieve(command);
                break;
            case RequestType.CLEAR:
                onClear(command);
                break;
            case RequestType.WRITE_DATA:
                retrievals.onData(command, TransferTable.KIND_STORE);
                break;
            case RequestType.READ_DATA:
                retrievals.onData(command, TransferTable.KIND_RETRIEVE);
                break;
            case RequestType.REAP:
                registrar.onReap(command);
                break;
            case RequestType.SWEEP:
                onSweep(command);
                break;
            default:
                command.fail(Status.UNKNOWN_TYPE, "unknown request type");
                break;
        }
    }

    // ------------------------------------------------------------------------------------------ requests

    private void onRelease(final StoreCommand command)
    {
        leases.endOrFail(
            command, registrar.instanceOrFail(command), TransferTable.KIND_LOOKUP, TransferTable.KIND_RETRIEVE);
    }

    private void onClear(final StoreCommand command)
    {
        if ((command.flags & RequestFlags.FORCE) != 0)
        {
            leases.endAll();
        }
        long removed = 0;
        for (int c = 0; c < regions.classCount(); c++)
        {
            int id = slots.lruHead(c);
            while (id >= 0)
            {
                final int next = slots.lruNext(id);
                if (0 == slots.pins(id))
                {
                    slots.evict(id);
                    index.remove(id);
                    slots.putSlotWord(id, SlotTableDescriptor.STATE_FREE, slots.generation(id));
                    removed++;
                }
                id = next;
            }
        }
        counters.add(CountersDescriptor.CLEARED_CHUNKS, removed);
        command.removedCount = removed;
        command.status = Status.OK;
        command.done = true;
    }

    private void onSweep(final StoreCommand command)
    {
        final int reclaimed = leases.sweep(command.timestampNs, context.sweepLimit());
        counters.add(CountersDescriptor.RECLAIMED_LEASES, reclaimed);
        command.removedCount = reclaimed;
        command.status = Status.OK;
        command.done = true;
    }

    // ------------------------------------------------------------------------------------------ helpers

    private void publishGauges()
    {
        counters.set(CountersDescriptor.READABLE_CHUNKS, slots.readableChunks());
        counters.set(CountersDescriptor.RESERVED_CHUNKS, slots.reservedChunks());
        counters.set(CountersDescriptor.PINNED_CHUNKS, slots.pinnedChunks());
        counters.set(CountersDescriptor.FREE_SLOTS, regions.freeSlots());
        counters.set(CountersDescriptor.SLOT_CAPACITY, regions.slotCapacity());
        counters.set(CountersDescriptor.PENDING_TRANSFERS, transfers.active());
        counters.set(CountersDescriptor.INSTANCES, instances.size());
    }

    // ------------------------------------------------------------------------------------------ inspection

    /**
     * Bytes of the largest slot size the pool holds; 0 until the first layout registers (unless fixed by
     * configuration). With one size class (one chunk size, or --slot-bytes) the pool's one slot size.
     *
     * @return slot size.
     */
    public long slotBytes()
    {
        long largest = 0;
        for (int c = 0; c < regions.classCount(); c++)
        {
            largest = Math.max(largest, regions.classSlotBytes(c));
        }
        return largest;
    }

    /**
     * Size classes (slot sizes) the pool holds.
     *
     * @return class count.
     */
    public int sizeClasses()
    {
        return regions.classCount();
    }

    /**
     * Slots: the cut ones and those the free regions hold (with one size class, the pool cut whole at its
     * slot size).
     *
     * @return slot count.
     */
    public int slotCapacity()
    {
        return regions.slotCapacity();
    }

    /**
     * Free slots.
     *
     * @return count.
     */
    public int freeSlots()
    {
        return regions.freeSlots();
    }

    /**
     * Readable chunks.
     *
     * @return count.
     */
    public int readableChunks()
    {
        return slots.readableChunks();
    }

    /**
     * Reserved chunks.
     *
     * @return count.
     */
    public int reservedChunks()
    {
        return slots.reservedChunks();
    }

    /**
     * Readable chunks with at least one pin.
     *
     * @return count.
     */
    public int pinnedChunks()
    {
        return slots.pinnedChunks();
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
        return id >= 0 && slots.isReadable(id) ? slots.pins(id) : -1;
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
     * Readable chunk keys from least to most recently used, as {@code [hi, lo]} pairs, size class by size class
     * in the order the classes were created, for tests.
     *
     * @return the LRU order.
     */
    public long[][] lruOrder()
    {
        return BookInvariants.lruOrder(regions, index);
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
        return BookInvariants.verify(regions, index, transfers, instances);
    }
}
