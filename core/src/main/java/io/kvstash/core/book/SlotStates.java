package io.kvstash.core.book;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.wire.file.SlotTableDescriptor;
import org.agrona.concurrent.AtomicBuffer;

import java.util.Arrays;

/**
 * The states of the pool's slots, per chunk id, and their bookkeeping per size class. A chunk id names a slot
 * {@link SlotRegions} cut (dense, handed out lowest first and reused last freed first).
 * <p>
 * Per chunk id: its state (free, reserved, readable, or uncut), pins, generation, owning transfer, class and the
 * index of its slot word ({@code offset / alignment}); per class a free stack, the eviction order of its readable
 * chunks ({@link EvictionOrder}: under exact LRU one list, least recently used at the head); the counts the
 * gauges publish; and the slot words workers read. Each class's capacity, which bounds its order's protected
 * segment, is read from {@link SlotRegions}, which owns the classes.
 * <p>
 * It keeps the structures consistent with each other and decides nothing: which class a store takes from,
 * which chunk to evict and when to publish a word are the book's decisions ({@link StoreReservations} for a
 * store, {@link ChunkBook} and its other request classes for the rest). Every per-request operation
 * is O(1) except {@link #firstEvictable(int)} (which skips pinned chunks); growing the id space allocates
 * (REGISTER only).
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}). Not thread safe.
 */
final class SlotStates
{
    static final byte FREE = 0;
    static final byte RESERVED = 1;
    static final byte READABLE = 2;
    /** State of a chunk id that names no cut slot. */
    static final byte UNCUT = 3;

    private final AtomicBuffer slotTable;
    private final int alignmentShift;

    /** Each class's capacity, {@link SlotRegions}'s array: read here, with no hop, on every hit and store. */
    private final int[] classCapacity;
    private final int[] freeCount = new int[SlotRegions.MAX_CLASSES];
    /** Each class's free slots (a stack: pushed and taken at the head) and readable chunks in eviction order. */
    private final ClassLists free = new ClassLists();
    private final EvictionOrder order;

    private byte[] state = new byte[0];
    private int[] pins = new int[0];
    private int[] generation = new int[0];
    private int[] owner = new int[0];
    private int[] slotClass = new int[0];
    private int[] wordIndex = new int[0];
    private int[] freeIds = new int[0];
    private int freeIdTop;
    private int idLimit;

    private int freeSlots;
    private int readableChunks;
    private int reservedChunks;
    private int pinnedChunks;
    private int evictableChunks;

    /**
     * Slot states with no id until {@link SlotRegions} grows the id space and cuts slots.
     *
     * @param slotTable     slot words, one per alignment unit of the pool.
     * @param alignment     slot alignment, a power of two.
     * @param policy        the eviction policy, which says whether the order has a protected segment and its share.
     * @param classCapacity each class's capacity, {@link SlotRegions}'s array, which it fills as classes are made.
     */
    SlotStates(
        final AtomicBuffer slotTable, final int alignment, final EvictionPolicy policy, final int[] classCapacity)
    {
        this.order = new EvictionOrder(policy.segmented(), policy.protectedSharePercent());
        this.slotTable = slotTable;
        this.alignmentShift = Integer.numberOfTrailingZeros(alignment);
        this.classCapacity = classCapacity;
    }

    // ------------------------------------------------------------------------------------------ ids

    /**
     * Makes room for chunk ids below a capacity; the new ids are uncut (REGISTER only: allocates).
     *
     * @param capacity ids, at least {@link #idCapacity()}.
     */
    void grow(final int capacity)
    {
        state = Arrays.copyOf(state, capacity);
        Arrays.fill(state, idLimit, capacity, UNCUT);
        pins = Arrays.copyOf(pins, capacity);
        generation = Arrays.copyOf(generation, capacity);
        owner = Arrays.copyOf(owner, capacity);
        slotClass = Arrays.copyOf(slotClass, capacity);
        wordIndex = Arrays.copyOf(wordIndex, capacity);
        order.grow(capacity);
        free.grow(capacity);
        freeIds = Arrays.copyOf(freeIds, capacity);
    }

    /**
     * Chunk ids range over {@code [0, idCapacity())}.
     *
     * @return id capacity.
     */
    int idCapacity()
    {
        return state.length;
    }

    /**
     * Names a new slot of a class: the id uncut last, else the lowest never handed out, free and unpinned, with
     * the generation its slot word carries. It is on no free stack until {@link #pushFree(int)}.
     *
     * @param c      class.
     * @param offset the slot's offset in the data region.
     * @return the chunk id.
     */
    int cut(final int c, final long offset)
    {
        final int id = freeIdTop > 0 ? freeIds[--freeIdTop] : idLimit++;
        state[id] = FREE;
        pins[id] = 0;
        slotClass[id] = c;
        wordIndex[id] = (int)(offset >>> alignmentShift);
        // The word's own generation: a slot cut where another class's slot was moves on from that one's.
        generation[id] = SlotTableDescriptor.generation(slotWord(id));
        return id;
    }

    /**
     * Forgets a free slot: off its class's free stack, its id uncut and the first the next {@link #cut} reuses.
     *
     * @param id free chunk id.
     */
    void uncut(final int id)
    {
        removeFree(id);
        state[id] = UNCUT;
        freeIds[freeIdTop++] = id;
    }

    /**
     * Pushes a free slot onto the top of its class's free stack.
     *
     * @param id free chunk id on no stack.
     */
    void pushFree(final int id)
    {
        final int c = slotClass[id];
        free.pushFront(c, id);
        freeCount[c]++;
        freeSlots++;
    }

    // ------------------------------------------------------------------------------------------ slots

    /**
     * Takes the free slot on top of a class's stack for a store transfer, with a new generation.
     *
     * @param c        class.
     * @param transfer the reserving transfer's index.
     * @return the chunk id; the caller has checked {@link #freeSlots(int)} is not 0.
     */
    int reserve(final int c, final int transfer)
    {
        final int id = free.head(c);
        removeFree(id);
        generation[id] = nextGeneration(generation[id]);
        state[id] = RESERVED;
        owner[id] = transfer;
        reservedChunks++;
        return id;
    }

    /**
     * Frees a reserved chunk that was never published, back on top of its class's free stack.
     *
     * @param id reserved chunk.
     */
    void unreserve(final int id)
    {
        state[id] = FREE;
        reservedChunks--;
        pushFree(id);
    }

    /** {@link #makeReadable(int, int)} where: the recent end of probation (exact LRU's append). */
    static final int ENTER_RECENT = -1;
    /** {@link #makeReadable(int, int)} where: the recent end of protected. */
    static final int ENTER_HOT = -2;
    /** {@link #makeReadable(int, int)} where: the evict-first end of probation. */
    static final int ENTER_COLD = -3;

    /**
     * Makes a reserved chunk readable and unpinned, and links it into its class's eviction order.
     *
     * @param id    reserved chunk.
     * @param where {@link #ENTER_RECENT}, {@link #ENTER_HOT}, {@link #ENTER_COLD}, or a readable chunk of the
     *              class to enter right before (right after, when both are cold: {@code -4 - that chunk}).
     */
    void makeReadable(final int id, final int where)
    {
        state[id] = READABLE;
        pins[id] = 0;
        reservedChunks--;
        readableChunks++;
        evictableChunks++;
        final int c = slotClass[id];
        if (ENTER_RECENT == where)
        {
            order.append(c, id);
        }
        else if (ENTER_HOT == where)
        {
            order.appendHot(c, id, classCapacity[c]);
        }
        else if (where >= 0)
        {
            order.insertBefore(c, id, where, classCapacity[c]);
        }
        else
        {
            order.insertCold(c, id, -4 - where);
        }
    }

    /**
     * Frees an unpinned readable chunk, onto the top of its class's free stack.
     *
     * @param id unpinned readable chunk.
     */
    void evict(final int id)
    {
        order.remove(slotClass[id], id);
        state[id] = FREE;
        readableChunks--;
        evictableChunks--;
        pushFree(id);
    }

    /**
     * Undoes {@link #evict(int)} of the chunk on top of its class's free stack: readable again with its old
     * generation, unpinned, at its old place in the eviction order.
     *
     * @param id             the evicted chunk, which must be on top of its class's free stack.
     * @param oldGeneration  its generation before the eviction.
     * @param orderMark      its {@link #orderMark(int)} before the eviction.
     */
    void restoreEvicted(final int id, final int oldGeneration, final int orderMark)
    {
        final int top = free.head(slotClass[id]);
        if (top != id)
        {
            throw new IllegalStateException("rollback out of order: " + top + " != " + id);
        }
        removeFree(id);
        generation[id] = oldGeneration;
        state[id] = READABLE;
        pins[id] = 0;
        readableChunks++;
        evictableChunks++;
        order.restore(slotClass[id], id, orderMark);
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
     * A hit: moves a readable chunk to the recent end of its class's order (of protected when segmented).
     *
     * @param id readable chunk.
     */
    void touch(final int id)
    {
        order.touch(slotClass[id], id, classCapacity[slotClass[id]]);
    }

    /**
     * The first unpinned chunk of a class in eviction order (under exact LRU the least recently used).
     *
     * @param c class.
     * @return chunk id, or -1 when every readable chunk of the class is pinned (or none is readable).
     */
    int firstEvictable(final int c)
    {
        return order.victim(c, pins);
    }

    /**
     * Where a readable chunk is in its class's eviction order, for {@link #restoreEvicted}.
     *
     * @param id readable chunk.
     * @return an opaque mark.
     */
    int orderMark(final int id)
    {
        return order.mark(id);
    }

    /**
     * Whether a readable chunk is in the protected segment of a segmented order.
     *
     * @param id readable chunk.
     * @return true when protected.
     */
    boolean isProtected(final int id)
    {
        return order.isProtected(id);
    }

    /**
     * Checks a class's eviction order; slow, for tests.
     *
     * @param c class.
     * @return readable chunks linked, or -1 when broken.
     */
    int checkOrder(final int c)
    {
        return order.check(c, this);
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
        slotTable.putLongRelease(
            (int)SlotTableDescriptor.wordOffset(wordIndex[id]), SlotTableDescriptor.word(slotState, slotGeneration));
    }

    long slotWord(final int id)
    {
        return slotTable.getLongAcquire((int)SlotTableDescriptor.wordOffset(wordIndex[id]));
    }

    /**
     * A chunk's offset in the data region.
     *
     * @param id chunk id.
     * @return byte offset relative to the data region.
     */
    long offset(final int id)
    {
        return (long)wordIndex[id] << alignmentShift;
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

    int slotClass(final int id)
    {
        return slotClass[id];
    }

    int lruHead(final int c)
    {
        return order.first(c);
    }

    int lruNext(final int id)
    {
        return order.following(slotClass[id], id);
    }

    int freeHead(final int c)
    {
        return free.head(c);
    }

    int freeNext(final int id)
    {
        return free.next(id);
    }

    int freeSlots(final int c)
    {
        return freeCount[c];
    }

    /**
     * Ids handed out so far: every cut slot's id is below it.
     *
     * @return id bound.
     */
    int idLimit()
    {
        return idLimit;
    }

    int freeCutSlots()
    {
        return freeSlots;
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

    private void removeFree(final int id)
    {
        final int c = slotClass[id];
        free.remove(c, id);
        freeCount[c]--;
        freeSlots--;
    }

    private static int nextGeneration(final int current)
    {
        final int next = current + 1;
        return 0 == next ? 1 : next;
    }
}
