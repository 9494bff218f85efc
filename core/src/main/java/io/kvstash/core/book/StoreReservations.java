package io.kvstash.core.book;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.file.SlotTableDescriptor;

/**
 * The store path: PREPARE_STORE, COMMIT_STORE and ABORT_STORE. A PREPARE_STORE reserves the absent chunks of its
 * range one at a time, as an exact LRU cache would: a free slot of the instance's class, else a free region given
 * to the class, else the class's first unpinned chunk in eviction order is evicted; a class with none of these
 * empties a region of another class ({@link SlotRegions#reclaimableRegion}) and tries the range again. It is all or
 * nothing through its {@link StoreUndoLog}, and publishes its slot words only once it succeeds. A COMMIT_STORE
 * publishes its slot words READABLE before its answer; its chunks enter the eviction order
 * ({@link ChainLearner#commit}) after it, in {@link #afterAnswer()}, with the index removals and the eviction count
 * the PREPARE_STOREs deferred.
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}). Not thread safe.
 */
final class StoreReservations
{
    private final StoreCounters counters;
    private final InstanceTable instances;
    private final TransferTable transfers;
    private final ChunkIndex index;
    private final SlotRegions regions;
    private final SlotStates slots;
    private final TransferLeases leases;
    private final Registrar registrar;
    private final ChainLearner learner;
    private final StoreUndoLog undo;
    /** The transfer of a COMMIT_STORE answered OK and not yet applied, or -1; {@link #afterAnswer()} applies it. */
    private int pendingCommit = -1;
    private int pendingCommitInstance;
    /** Chunks evicted by PREPARE_STOREs since the count was last added to {@link CountersDescriptor#EVICTIONS}. */
    private long pendingEvictions;

    StoreReservations(
        final StoreContext context,
        final StoreCounters counters,
        final InstanceTable instances,
        final TransferTable transfers,
        final ChunkIndex index,
        final SlotRegions regions,
        final TransferLeases leases,
        final Registrar registrar,
        final ChainLearner learner)
    {
        this.counters = counters;
        this.instances = instances;
        this.transfers = transfers;
        this.index = index;
        this.regions = regions;
        this.slots = regions.slots();
        this.leases = leases;
        this.registrar = registrar;
        this.learner = learner;
        this.undo = new StoreUndoLog(context.maxChunksPerRequest());
    }

    /**
     * Runs what the store path deferred past its answers, in this order: the bookkeeping of a COMMIT_STORE
     * answered OK, the index removals of the chunks PREPARE_STOREs evicted, and their eviction count.
     *
     * @return deferred operations run.
     */
    int afterAnswer()
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
            counters.add(CountersDescriptor.EVICTIONS, pendingEvictions);
            pendingEvictions = 0;
        }
        return ops;
    }

    /**
     * PREPARE_STORE: reserves slots for the absent chunks of the command's range under a store transfer, all or
     * nothing, evicting in the class's eviction order and reclaiming a region of another class when the class
     * has no room; the slot words are published only once the whole range is reserved.
     *
     * @param command the request; its outcome fields are written.
     */
    void onPrepareStore(final StoreCommand command)
    {
        final int instance = registrar.instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final long ns = registrar.namespace(instance, command.salt);
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
            counters.increment(CountersDescriptor.EMPTY_PREPARES);
            command.status = Status.OK;
            command.done = true;
            return;
        }
        final int slotClass = instances.slotClass(instance);
        int t;
        int reserved;
        while (true)
        {
            t = transfers.allocate();
            if (t < 0)
            {
                command.fail(Status.BUSY, "pending transfer limit reached");
                return;
            }
            reserved = reserveRange(command, ns, firstAbsent, t, slotClass);
            if (reserved >= 0)
            {
                break;
            }
            // Out of room in the class: undone whole, then a region of another class whose chunks can all go is
            // emptied and the range tried again; nothing left to reclaim is NO_SPACE.
            undo.rollback(slots, index);
            transfers.discard(t);
            final int region = regions.reclaimableRegion(slotClass);
            if (region < 0)
            {
                counters.increment(CountersDescriptor.NO_SPACE);
                command.fail(Status.NO_SPACE, "not enough space even after evicting every unpinned chunk");
                return;
            }
            pendingEvictions += regions.reclaim(region, index);
        }

        undo.publish(slots);
        learner.onReserved(t, ns, command, firstAbsent, reserved);
        transfers.activate(t, TransferTable.KIND_STORE, instance, leases.deadlineNs(command));
        command.status = Status.OK;
        command.outTransferId = transfers.id(t);
        command.slotCount = reserved;
        command.chunkBytes = instances.chunkBytes(instance);
        command.slotBytes = regions.classSlotBytes(slotClass);
    }

    /**
     * Reserves the absent chunks of a range for a transfer, in range order, one chunk at a time, as an exact LRU
     * cache would: a present chunk is skipped; an absent one takes a free slot of its class (a free region is
     * given to the class when it has none), or evicts the class's least recently used unpinned chunk, which may
     * be a chunk of this same range that is then found absent and reserved when its turn comes. The chunks
     * before the first absent one are present and nothing changes before its turn, so the loop starts there
     * without looking that one up again.
     *
     * @return chunks reserved, or -1 when the class ran out of room (the changes are in the undo log).
     */
    private int reserveRange(
        final StoreCommand command, final long ns, final int firstAbsent, final int t, final int slotClass)
    {
        undo.clear();
        final int n = command.chunkCount;
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
            if (0 == slots.freeSlots(slotClass) && !regions.acquireFreeRegions(slotClass))
            {
                final int victim = slots.firstEvictable(slotClass);
                if (victim < 0)
                {
                    return -1;
                }
                undo.recordEvict(slots, index, victim);
                // The victim's slot is popped right below and its key overwritten by this chunk's: its index
                // entry can go after the answer (see ChunkIndex.removeLater).
                slots.evict(victim);
                index.removeLater(victim);
                evicted++;
            }
            final int id = slots.reserve(slotClass, t);
            index.insert(id, ns, hi, lo);
            undo.recordReserve(id);
            transfers.addChunk(t, id);
            command.slotChunkId[reserved] = id;
            command.slotOffset[reserved] = slots.offset(id);
            command.slotRangeIndex[reserved] = i;
            command.slotGeneration[reserved] = slots.generation(id);
            reserved++;
        }
        pendingEvictions += evicted;
        return reserved;
    }

    /**
     * COMMIT_STORE: publishes the transfer's slot words READABLE and answers OK; the book's own state follows in
     * {@link #afterAnswer()}.
     *
     * @param command the request; its outcome fields are written.
     */
    void onCommitStore(final StoreCommand command)
    {
        final int instance = registrar.instanceOrFail(command);
        final int t = leases.resolveOrFail(command, instance, TransferTable.KIND_STORE, TransferTable.KIND_STORE);
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
            slots.putSlotWord(id, SlotTableDescriptor.STATE_READABLE, slots.generation(id));
        }
        pendingCommit = t;
        pendingCommitInstance = instance;
        command.status = Status.OK;
        command.done = true;
    }

    /**
     * ABORT_STORE: ends the store transfer, its reservations freed and never published.
     *
     * @param command the request; its outcome fields are written.
     */
    void onAbortStore(final StoreCommand command)
    {
        leases.endOrFail(
            command, registrar.instanceOrFail(command), TransferTable.KIND_STORE, TransferTable.KIND_STORE);
    }

    /**
     * The bookkeeping of a COMMIT_STORE answered OK: its chunks made readable where the policy enters them, its
     * counts, its transfer released.
     */
    private void applyCommit(final int t, final int instance)
    {
        final int n = transfers.count(t);
        final int cold = learner.commit(t);
        counters.add(CountersDescriptor.STORED_CHUNKS, n);
        if (cold > 0)
        {
            counters.add(CountersDescriptor.COLD_CHUNKS, cold);
        }
        counters.add(CountersDescriptor.BYTES_IN, n * instances.chunkBytes(instance));
        transfers.release(t);
    }
}
