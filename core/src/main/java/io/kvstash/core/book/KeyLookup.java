package io.kvstash.core.book;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.hash.ChunkHasher;
import io.kvstash.wire.layout.Layout;

/**
 * LOOKUP and LOOKUP_ALL_RANKS: how many chunks of a range, from its start, are readable. A LOOKUP with
 * RequestFlags.PIN also pins the hits under a lookup transfer, so a PREPARE_RETRIEVE from it finds them still there.
 * A reserved chunk is not a hit: its bytes are not written yet. Both count their range's chunks as lookup hits and
 * misses, a LOOKUP_ALL_RANKS once whatever its world size (its hits: the prefix every rank holds).
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}). Not thread safe.
 */
final class KeyLookup
{
    private final StoreCounters counters;
    private final SlotStates slots;
    private final ChunkIndex index;
    private final TransferLeases leases;
    private final Registrar registrar;
    private final ChunkHasher hasher;
    private final ChainLearner learner;
    private final int[] hitIds;
    /**
     * Ranks of a LOOKUP_ALL_RANKS that teach the eviction policy: tensor-parallel groups are far smaller, and the
     * cap bounds what one request costs the book (its keys counted once per rank learned).
     */
    static final int LEARNED_RANKS = 64;

    private final long[] rankNs = new long[LEARNED_RANKS];

    KeyLookup(
        final StoreContext context,
        final StoreCounters counters,
        final SlotStates slots,
        final ChunkIndex index,
        final TransferLeases leases,
        final Registrar registrar,
        final ChunkHasher hasher,
        final ChainLearner learner)
    {
        this.learner = learner;
        this.counters = counters;
        this.slots = slots;
        this.index = index;
        this.leases = leases;
        this.registrar = registrar;
        this.hasher = hasher;
        this.hitIds = new int[context.maxChunksPerRequest()];
    }

    /**
     * LOOKUP of the command's instance.
     *
     * @param command the request; its outcome fields are written.
     */
    void onLookup(final StoreCommand command)
    {
        final int instance = registrar.instanceOrFail(command);
        if (instance < 0)
        {
            return;
        }
        final long ns = registrar.namespace(instance, command.salt);
        final int n = command.chunkCount;
        int hits = 0;
        while (hits < n)
        {
            final int id = index.find(ns, command.keyHi[hits], command.keyLo[hits]);
            if (id < 0 || !slots.isReadable(id))
            {
                break;
            }
            hitIds[hits++] = id;
        }
        learner.onLookup(ns, command, hits, hits > 0 ? hitIds[hits - 1] : -1);
        counters.add(CountersDescriptor.LOOKUP_HIT_CHUNKS, hits);
        counters.add(CountersDescriptor.LOOKUP_MISS_CHUNKS, n - hits);
        command.hitChunks = hits;
        command.status = Status.OK;
        command.done = true;
        if ((command.flags & RequestFlags.PIN) != 0 && hits > 0)
        {
            final long deadlineNs = leases.deadlineNs(command);
            final int t = leases.openPinned(hitIds, hits, TransferTable.KIND_LOOKUP, instance, deadlineNs);
            if (t < 0)
            {
                command.fail(Status.BUSY, "pending transfer limit reached");
                return;
            }
            command.outTransferId = leases.transferId(t);
        }
    }

    /**
     * LOOKUP_ALL_RANKS: the readable prefix common to every rank of a (model, world size); needs no
     * registered instance. Under a policy that learns from LOOKUPs each rank's part is one to it (its keys
     * counted in the rank's namespace, its hint left for the rank's store), since each rank stores its own chunks;
     * for the first {@link #LEARNED_RANKS} ranks.
     *
     * @param command the request.
     */
    void onLookupAllRanks(final StoreCommand command)
    {
        final int worldSize = command.worldSize;
        if (worldSize <= 0 || worldSize > Layout.MAX_WORLD_SIZE ||
            command.modelLength <= 0 || command.modelLength > Layout.MAX_MODEL_LENGTH)
        {
            command.fail(Status.INVALID_REQUEST, "world size or model name out of range");
            return;
        }
        final int learned = learner.learns() ? Math.min(worldSize, LEARNED_RANKS) : 0;
        int hits = command.chunkCount;
        for (int rank = 0; rank < worldSize && (hits > 0 || rank < learned); rank++)
        {
            final long ns = hasher.namespace(command.model, command.modelLength, worldSize, rank, command.salt);
            if (rank < learned)
            {
                rankNs[rank] = ns;
            }
            int rankHits = 0;
            while (rankHits < hits)
            {
                final int id = index.find(ns, command.keyHi[rankHits], command.keyLo[rankHits]);
                if (id < 0 || !slots.isReadable(id))
                {
                    break;
                }
                rankHits++;
            }
            hits = rankHits;
        }
        for (int rank = 0; rank < learned; rank++)
        {
            final long ns = rankNs[rank];
            // A hint is left only where the prefix stops short (ChainLearner.onLookup): its last hit, looked up.
            final int lastHit = hits > 0 && hits < command.chunkCount ?
                index.find(ns, command.keyHi[hits - 1], command.keyLo[hits - 1]) : -1;
            learner.onLookup(ns, command, hits, lastHit);
        }
        // An engine's scheduler asks this rather than LOOKUP: its hit rate is the one an operator reads.
        counters.add(CountersDescriptor.LOOKUP_HIT_CHUNKS, hits);
        counters.add(CountersDescriptor.LOOKUP_MISS_CHUNKS, command.chunkCount - hits);
        command.hitChunks = hits;
        command.status = Status.OK;
        command.done = true;
    }
}
