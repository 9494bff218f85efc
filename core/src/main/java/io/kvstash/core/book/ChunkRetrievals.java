package io.kvstash.core.book;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;

/**
 * The retrieve path and the data requests: PREPARE_RETRIEVE (the chunks of a range pinned under a retrieve
 * transfer, all readable or a MISS; with {@link RequestFlags#PREFIX} its readable leading chunks; or a pinning
 * LOOKUP's transfer taken over), COMMIT_RETRIEVE (the pins
 * released, the chunks used in the eviction order), and WRITE_DATA / READ_DATA (where one chunk of a pending
 * store or retrieve lies). Each answers slot ids with their generations; the bytes are moved by later stages.
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}). Not thread safe.
 */
final class ChunkRetrievals
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
    private final int[] scratchIds;

    ChunkRetrievals(
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
        this.scratchIds = new int[context.maxChunksPerRequest()];
    }

    /**
     * PREPARE_RETRIEVE: with RequestFlags.FROM_LOOKUP takes over the pins of the command's lookup transfer as a
     * retrieve with a new lease; else pins the command's range under a new retrieve transfer when every chunk of
     * it is readable (MISS otherwise), or with RequestFlags.PREFIX its readable leading chunks up to the first one
     * that is not (MISS when chunk 0 is not). Answers where the chunks lie. A range answered without all of its
     * chunks counts one retrieve miss: a MISS, or an OK of PREFIX that pins part of it.
     *
     * @param command the request; its outcome fields are written.
     */
    void onPrepareRetrieve(final StoreCommand command)
    {
        final int instance = registrar.instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final int t;
        if ((command.flags & RequestFlags.FROM_LOOKUP) != 0)
        {
            t = leases.resolveOrFail(command, instance, TransferTable.KIND_LOOKUP, TransferTable.KIND_LOOKUP);
            if (t < 0)
            {
                return;
            }
            transfers.renew(t, TransferTable.KIND_RETRIEVE, leases.deadlineNs(command));
        }
        else
        {
            final long ns = registrar.namespace(instance, command.salt);
            final int n = command.chunkCount;
            if (0 == n)
            {
                command.status = Status.OK;
                command.done = true;
                return;
            }
            final int readable = readablePrefix(ns, command, n);
            if (readable < n && (0 == readable || (command.flags & RequestFlags.PREFIX) == 0))
            {
                counters.increment(CountersDescriptor.RETRIEVE_MISSES);
                command.status = Status.MISS;
                command.message = "a chunk of the range is not readable";
                command.done = true;
                return;
            }
            t = leases.openPinned(
                scratchIds, readable, TransferTable.KIND_RETRIEVE, instance, leases.deadlineNs(command));
            if (t < 0)
            {
                command.fail(Status.BUSY, "pending transfer limit reached");
                return;
            }
            if (readable < n)
            {
                counters.increment(CountersDescriptor.RETRIEVE_MISSES);
            }
        }
        final int n = transfers.count(t);
        for (int i = 0; i < n; i++)
        {
            final int id = transfers.chunk(t, i);
            command.slotChunkId[i] = id;
            command.slotOffset[i] = slots.offset(id);
            command.slotRangeIndex[i] = i;
            command.slotGeneration[i] = slots.generation(id);
        }
        counters.add(CountersDescriptor.RETRIEVE_HIT_CHUNKS, n);
        command.status = Status.OK;
        command.outTransferId = transfers.id(t);
        command.slotCount = n;
        command.chunkBytes = instances.chunkBytes(instance);
        command.slotBytes = regions.classSlotBytes(instances.slotClass(instance));
    }

    /**
     * The readable leading chunks of the command's range, their slot ids in {@code scratchIds}.
     *
     * @param ns      the instance's namespace for the command's salt.
     * @param command the request, its keys decoded.
     * @param n       chunks in the range.
     * @return how many: the index of the first chunk that is absent or not readable, or {@code n}.
     */
    private int readablePrefix(final long ns, final StoreCommand command, final int n)
    {
        for (int i = 0; i < n; i++)
        {
            final int id = index.find(ns, command.keyHi[i], command.keyLo[i]);
            if (id < 0 || !slots.isReadable(id))
            {
                return i;
            }
            scratchIds[i] = id;
        }
        return n;
    }

    /**
     * COMMIT_RETRIEVE: the retrieve's chunks unpinned and, unless it is quiet, used ({@link ChainLearner#retrieved});
     * its counts; its transfer released.
     *
     * @param command the request; its outcome fields are written.
     */
    void onCommitRetrieve(final StoreCommand command)
    {
        final int instance = registrar.instanceOrFail(command);
        final int t = leases.resolveOrFail(command, instance, TransferTable.KIND_RETRIEVE, TransferTable.KIND_RETRIEVE);
        if (t < 0)
        {
            return;
        }
        final int n = transfers.count(t);
        learner.retrieved(t, (command.flags & RequestFlags.QUIET) != 0);
        counters.add(CountersDescriptor.RETRIEVED_CHUNKS, n);
        counters.add(CountersDescriptor.BYTES_OUT, n * instances.chunkBytes(instance));
        transfers.release(t);
        command.status = Status.OK;
        command.done = true;
    }

    /**
     * WRITE_DATA and READ_DATA: where one chunk of a pending store or retrieve transfer lies, for the bytes the
     * command carries or asks for; the data range must lie within the chunk and the message.
     *
     * @param command the request; its outcome fields are written.
     * @param kind    {@code TransferTable.KIND_STORE} (WRITE_DATA) or {@code KIND_RETRIEVE} (READ_DATA).
     */
    void onData(final StoreCommand command, final int kind)
    {
        final int instance = registrar.instanceOrFail(command);
        final int t = leases.resolveOrFail(command, instance, kind, kind);
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
        command.slotOffset[0] = slots.offset(id);
        command.slotRangeIndex[0] = command.dataChunkIndex;
        command.slotGeneration[0] = slots.generation(id);
        command.slotCount = 1;
        command.chunkBytes = chunkBytes;
        command.slotBytes = regions.classSlotBytes(instances.slotClass(instance));
        command.status = Status.OK;
    }
}
