package io.kvstash.core.book;

import io.kvstash.wire.file.SlotTableDescriptor;

/**
 * The changes one PREPARE_STORE made while it reserved its range, in order: each eviction (with what it needs
 * to be undone: the victim's key, generation and place in the eviction order) and each reservation. A PREPARE_STORE
 * that runs out of space part way is all or nothing: {@link #rollback} undoes the changes newest first, so
 * slots return to the free stack in the order they left it. One that succeeds {@link #publish}es the slot
 * words of every changed slot, only then, so a worker never sees a word of a refused reservation.
 * <p>
 * Pre-sized for two entries per chunk of the largest request (an eviction and a reservation each), so
 * recording never allocates. Owner: the reserve stage thread (via {@link ChunkBook}). Not thread safe.
 */
final class StoreUndoLog
{
    private static final int EVICT = 1;
    private static final int RESERVE = 2;

    private final int[] kind;
    private final int[] chunk;
    private final int[] successor;
    private final int[] generation;
    private final long[] ns;
    private final long[] hi;
    private final long[] lo;
    private int top;

    /**
     * A log for requests of up to a number of chunks.
     *
     * @param maxChunksPerRequest most chunks of one request.
     */
    StoreUndoLog(final int maxChunksPerRequest)
    {
        final int length = 2 * maxChunksPerRequest;
        kind = new int[length];
        chunk = new int[length];
        successor = new int[length];
        generation = new int[length];
        ns = new long[length];
        hi = new long[length];
        lo = new long[length];
    }

    /**
     * Starts the log of a new PREPARE_STORE.
     */
    void clear()
    {
        top = 0;
    }

    /**
     * Records the eviction of a readable chunk, before {@link SlotStates#evict(int)} changes it.
     *
     * @param slots slot states.
     * @param index key index.
     * @param id    the victim.
     */
    void recordEvict(final SlotStates slots, final ChunkIndex index, final int id)
    {
        kind[top] = EVICT;
        chunk[top] = id;
        successor[top] = slots.orderMark(id);
        generation[top] = slots.generation(id);
        ns[top] = index.ns(id);
        hi[top] = index.hi(id);
        lo[top] = index.lo(id);
        top++;
    }

    /**
     * Records the reservation of a chunk, after {@link SlotStates#reserve(int)}.
     *
     * @param id the reserved chunk.
     */
    void recordReserve(final int id)
    {
        kind[top] = RESERVE;
        chunk[top] = id;
        top++;
    }

    /**
     * Publishes the slot words of a successful PREPARE_STORE: an evicted slot says FREE with the generation
     * it was evicted at, a reserved one RESERVED with its new generation (a slot both evicted and reserved
     * ends RESERVED, its reservation recorded later).
     *
     * @param slots slot states.
     */
    void publish(final SlotStates slots)
    {
        for (int u = 0; u < top; u++)
        {
            final int id = chunk[u];
            if (EVICT == kind[u])
            {
                slots.putSlotWord(id, SlotTableDescriptor.STATE_FREE, generation[u]);
            }
            else
            {
                slots.putSlotWord(id, SlotTableDescriptor.STATE_RESERVED, slots.generation(id));
            }
        }
    }

    /**
     * Undoes every recorded change, newest first; no slot word was written, so none is.
     *
     * @param slots slot states.
     * @param index key index.
     */
    void rollback(final SlotStates slots, final ChunkIndex index)
    {
        for (int u = top - 1; u >= 0; u--)
        {
            final int id = chunk[u];
            if (RESERVE == kind[u])
            {
                index.remove(id);
                slots.unreserve(id);
            }
            else
            {
                slots.restoreEvicted(id, generation[u], successor[u]);
                index.insert(id, ns[u], hi[u], lo[u]);
            }
        }
        top = 0;
    }
}
