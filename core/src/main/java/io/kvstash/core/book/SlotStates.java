package io.kvstash.core.book;

import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.file.SlotTableDescriptor;
import org.agrona.concurrent.AtomicBuffer;

import java.util.Arrays;

/**
 * The slots of the pool and their bookkeeping: per slot its state (free, reserved, readable), pins,
 * generation and owning transfer; the free-slot stack; the LRU list of readable chunks (least recently used
 * at the head); the counts the gauges publish; and the slot words workers read. A chunk id is its slot index.
 * <p>
 * It keeps the structures consistent with each other and decides nothing: which slot to take, which chunk
 * to evict and when to publish a word are {@link ChunkBook}'s decisions. Every operation is O(1) except
 * {@link #cut(long)} and {@link #firstEvictable()} (which skips pinned chunks).
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}). Not thread safe.
 */
final class SlotStates
{
    static final byte FREE = 0;
    static final byte RESERVED = 1;
    static final byte READABLE = 2;

    private final AtomicBuffer slotTable;
    private final long poolSizeBytes;
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

    /**
     * Slots of a pool, none cut until {@link #cut(long)}.
     *
     * @param slotTable     slot words, one per slot the pool can hold at the smallest slot size.
     * @param poolSizeBytes pool size.
     * @param maxSlots      most slots at any slot size (the pool over the alignment).
     */
    SlotStates(final AtomicBuffer slotTable, final long poolSizeBytes, final int maxSlots)
    {
        this.slotTable = slotTable;
        this.poolSizeBytes = poolSizeBytes;
        this.maxSlots = maxSlots;
    }

    /**
     * Cuts the (empty) pool into slots of a new size, all free. Only called while no chunk is reserved or
     * readable; generations survive so a worker's stale view of a re-cut slot still fails its check.
     *
     * @param newSlotBytes slot size, already aligned.
     */
    void cut(final long newSlotBytes)
    {
        slotBytes = newSlotBytes;
        slotCapacity = (int)Math.min(maxSlots, SlotGeometry.capacity(poolSizeBytes, newSlotBytes));
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

    /**
     * Takes the free slot on top of the stack for a store transfer, with a new generation.
     *
     * @param transfer the reserving transfer's index.
     * @return the chunk id; the caller has checked {@link #freeSlots()} is not 0.
     */
    int reserve(final int transfer)
    {
        final int id = freeSlots[--freeTop];
        generation[id] = nextGeneration(generation[id]);
        state[id] = RESERVED;
        owner[id] = transfer;
        reservedChunks++;
        return id;
    }

    /**
     * Frees a reserved chunk that was never published, back on top of the free stack.
     *
     * @param id reserved chunk.
     */
    void unreserve(final int id)
    {
        state[id] = FREE;
        reservedChunks--;
        freeSlots[freeTop++] = id;
    }

    /**
     * Makes a reserved chunk readable, unpinned and most recently used.
     *
     * @param id reserved chunk.
     */
    void makeReadable(final int id)
    {
        state[id] = READABLE;
        pins[id] = 0;
        reservedChunks--;
        readableChunks++;
        evictableChunks++;
        lruAppend(id);
    }

    /**
     * Frees an unpinned readable chunk, onto the top of the free stack.
     *
     * @param id unpinned readable chunk.
     */
    void evict(final int id)
    {
        lruUnlink(id);
        state[id] = FREE;
        readableChunks--;
        evictableChunks--;
        freeSlots[freeTop++] = id;
    }

    /**
     * Undoes {@link #evict(int)} of the chunk on top of the free stack: readable again with its old
     * generation, unpinned, at its old place in the LRU list.
     *
     * @param id             the evicted chunk, which must be on top of the free stack.
     * @param oldGeneration  its generation before the eviction.
     * @param lruSuccessor   its successor in the LRU list before the eviction, or -1 when it was the tail.
     */
    void restoreEvicted(final int id, final int oldGeneration, final int lruSuccessor)
    {
        final int popped = freeSlots[--freeTop];
        if (popped != id)
        {
            throw new IllegalStateException("rollback out of order: " + popped + " != " + id);
        }
        generation[id] = oldGeneration;
        state[id] = READABLE;
        pins[id] = 0;
        readableChunks++;
        evictableChunks++;
        lruInsertBefore(id, lruSuccessor);
    }

    void pin(final int id)
    {
        if (0 == pins[id]++)
        {
            pinnedChunks++;
            evictableChunks--;
        }
    }

    void unpin(final int id)
    {
        if (0 == --pins[id])
        {
            pinnedChunks--;
            evictableChunks++;
        }
    }

    /**
     * Moves a readable chunk to the most recently used end.
     *
     * @param id readable chunk.
     */
    void touch(final int id)
    {
        lruUnlink(id);
        lruAppend(id);
    }

    /**
     * The least recently used unpinned chunk.
     *
     * @return chunk id, or -1 when every readable chunk is pinned (or none is readable).
     */
    int firstEvictable()
    {
        int id = lruHead;
        while (id >= 0 && pins[id] > 0)
        {
            id = lruNext[id];
        }
        return id;
    }

    /**
     * Publishes a slot's word for workers (release store).
     *
     * @param id             chunk id.
     * @param slotState      a {@code SlotTableDescriptor.STATE_*}.
     * @param slotGeneration the generation the word carries.
     */
    void putSlotWord(final int id, final int slotState, final int slotGeneration)
    {
        slotTable.putLongRelease(id * SlotTableDescriptor.WORD_LENGTH, SlotTableDescriptor.word(slotState, slotGeneration));
    }

    long slotWord(final int id)
    {
        return slotTable.getLongAcquire(id * SlotTableDescriptor.WORD_LENGTH);
    }

    boolean isReadable(final int id)
    {
        return READABLE == state[id];
    }

    byte state(final int id)
    {
        return state[id];
    }

    int pins(final int id)
    {
        return pins[id];
    }

    int generation(final int id)
    {
        return generation[id];
    }

    int owner(final int id)
    {
        return owner[id];
    }

    int lruHead()
    {
        return lruHead;
    }

    int lruTail()
    {
        return lruTail;
    }

    int lruPrev(final int id)
    {
        return lruPrev[id];
    }

    int lruNext(final int id)
    {
        return lruNext[id];
    }

    /**
     * The i-th entry of the free stack from the bottom, for the invariant check.
     *
     * @param i position, below {@link #freeSlots()}.
     * @return chunk id.
     */
    int freeSlot(final int i)
    {
        return freeSlots[i];
    }

    long slotBytes()
    {
        return slotBytes;
    }

    int slotCapacity()
    {
        return slotCapacity;
    }

    int freeSlots()
    {
        return freeTop;
    }

    int readableChunks()
    {
        return readableChunks;
    }

    int reservedChunks()
    {
        return reservedChunks;
    }

    int pinnedChunks()
    {
        return pinnedChunks;
    }

    int evictableChunks()
    {
        return evictableChunks;
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

    private static int nextGeneration(final int current)
    {
        final int next = current + 1;
        return 0 == next ? 1 : next;
    }
}
