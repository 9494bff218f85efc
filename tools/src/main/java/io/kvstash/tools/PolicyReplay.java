package io.kvstash.tools;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.store.KvStore;
import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;

import java.util.List;

/**
 * The offline hit chunks of a Mooncake trace under an eviction policy: its requests replayed in file order, in
 * process, through the store core with room for exactly N chunks and the replay semantics of traces/README.md
 * (LOOKUP the prefix, RETRIEVE the hit prefix, STORE the rest), as one worker's replay through a server does. Under
 * {@code lru} it is the exact-LRU reference figure a replay reports beside its own; under any policy a one-worker
 * {@code kvstash replay --eviction NAME} counts the same hits: it registers the replay workers' model, so its keys
 * have their namespace (the policies' key history hashes it). Slots are 64 bytes, so a large capacity costs little
 * memory. With {@code allRanks} each LOOKUP goes as a LOOKUP_ALL_RANKS of the worker's world (of one), the way the
 * vLLM connector asks, and the retrieve by keys; a policy learns the same from it, so the hits are the same.
 */
public final class PolicyReplay
{
    private static final int SLOT_BYTES = 64;

    private PolicyReplay()
    {
    }

    /**
     * Hit chunks of an ordered replay under a policy.
     *
     * @param requests       trace requests in file order.
     * @param capacityChunks capacity in chunks.
     * @param policy         eviction policy.
     * @return chunks LOOKUP counted as hits.
     * @throws IllegalStateException when the core answers a request unexpectedly.
     */
    public static long hitChunks(
        final List<MooncakeTrace.Request> requests, final int capacityChunks, final EvictionPolicy policy)
    {
        return hitChunks(requests, capacityChunks, policy, false);
    }

    /**
     * Hit chunks of an ordered replay under a policy, its lookups asked of one rank or of all ranks.
     *
     * @param requests       trace requests in file order.
     * @param capacityChunks capacity in chunks.
     * @param policy         eviction policy.
     * @param allRanks       LOOKUP_ALL_RANKS (world size 1) instead of LOOKUP.
     * @return chunks the lookups counted as hits.
     * @throws IllegalStateException when the core answers a request unexpectedly.
     */
    public static long hitChunks(
        final List<MooncakeTrace.Request> requests,
        final int capacityChunks,
        final EvictionPolicy policy,
        final boolean allRanks)
    {
        int maxChunks = StoreContext.MAX_CHUNKS_PER_REQUEST_DEFAULT;
        for (final MooncakeTrace.Request request : requests)
        {
            maxChunks = Math.max(maxChunks, request.blockCount());
        }
        final StoreContext context = new StoreContext()
            .poolSizeBytes((long)capacityChunks * SLOT_BYTES)
            .alignment(SLOT_BYTES)
            .slotBytes(SLOT_BYTES)
            .chunkTokens(SLOT_BYTES)
            .maxChunksPerRequest(maxChunks)
            .eviction(policy)
            .conclude();
        final KvStore store = new KvStore(context);
        final long instance = 1;
        check(store.register(instance, Layout.of(TraceWorker.MODEL, 1, 0, 1, 1, Dtype.UINT8, true)));
        long hits = 0;
        for (final MooncakeTrace.Request request : requests)
        {
            if (0 == request.blockCount())
            {
                continue;
            }
            final ChunkKeys keys = ChunkKeys.ofIds(request.hashIds());
            final int k = check(allRanks ? store.lookupAllRanks(TraceWorker.MODEL, 1, keys) :
                store.lookup(instance, keys, false)).hitChunks;
            hits += k;
            if (k > 0)
            {
                final long retrieve = check(store.prepareRetrieve(instance, keys.range(0, k))).outTransferId;
                check(store.commitRetrieve(instance, retrieve));
            }
            final long transfer = check(store.prepareStore(instance, keys.range(k, keys.count()))).outTransferId;
            if (0 != transfer)
            {
                check(store.commitStore(instance, transfer));
            }
        }
        return hits;
    }

    private static StoreCommand check(final StoreCommand command)
    {
        if (Status.OK != command.status)
        {
            throw new IllegalStateException("offline replay: " + Status.name(command.status) + " " + command.message);
        }
        return command;
    }
}
