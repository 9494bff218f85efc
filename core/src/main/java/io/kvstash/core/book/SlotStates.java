package io.kvstash.core.book;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.file.SlotTableDescriptor;
import org.agrona.concurrent.AtomicBuffer;

import java.util.Arrays;

/**
 * The slots of the pool and their bookkeeping, per size class. The data region is cut into regions of
 * {@link #REGION_BYTES} (a power of two that divides a mapping segment, so no region straddles a segment end).
 * A size class is a slot size; a free region is given to a class on first use and stays with it until another
 * class reclaims it. A class's slots lie on the grid of its slot size from the start of each segment
 * ({@link SlotGeometry}: slot {@code k} of a segment at {@code k * slotBytes}), and a slot exists (is cut) while
 * every region it touches belongs to its class. So a pool with one class has exactly the slots, offsets and
 * free-stack order of a pool cut whole at that slot size, and a class's chunk never straddles a segment end or
 * memory of another class.
 * <p>
 * Per cut slot (a chunk id, dense, handed out lowest first and reused last freed first): its state (free,
 * reserved, readable), pins, generation, owning transfer, class and the index of its slot word
 * ({@code offset / alignment}); per class a free stack and the eviction order of its readable chunks
 * ({@link EvictionOrder}: under exact LRU one list, least recently used at the head); the counts the gauges publish; and the slot words workers read.
 * <p>
 * It keeps the structures consistent with each other and decides nothing: which class a store takes from,
 * which chunk to evict, when to publish a word and when to reclaim a region are {@link ChunkBook}'s decisions.
 * Every per-request operation is O(1) except {@link #firstEvictable(int)} (which skips pinned chunks); cutting
 * and reclaiming a region is O(slots of the region), once per region given.
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

    /** Bytes of a region (unless the alignment is bigger): small enough for a 1 GiB pool to hold many classes. */
    static final long REGION_BYTES = 16L << 20;
    /** Most slot sizes one pool holds. */
    static final int MAX_CLASSES = 64;

    private final AtomicBuffer slotTable;
    private final long poolSizeBytes;
    private final int alignmentShift;
    private final long regionBytes;
    private final int regionCount;

    private int classCount;
    private final long[] classSlotBytes = new long[MAX_CLASSES];
    private final int[] classCapacity = new int[MAX_CLASSES];
    private final int[] freeCount = new int[MAX_CLASSES];
    /** Each class's free slots (a stack: pushed and taken at the head) and readable chunks in eviction order. */
    private final ClassLists free = new ClassLists();
    private final EvictionOrder order;
    private final int[] cutCount = new int[MAX_CLASSES];

    private final int[] regionClass;
    private int freeRegions;
    private long freeRegionBytes;
    /** Per region, {@link #stride} entries: the ids of the slots that start in it (-1: not cut). */
    private int[] regionSlotIds = new int[0];
    private int stride;

    private byte[] state = new byte[0];
    private int[] pins = new int[0];
    private int[] generation = new int[0];
    private int[] owner = new int[0];
    private int[] slotClass = new int[0];
    private int[] wordIndex = new int[0];
    private int[] freeIds = new int[0];
    private int freeIdTop;
    private int idLimit;
    private int[] scratch = new int[0];

    private int cutSlots;
    private int freeSlots;
    private int readableChunks;
    private int reservedChunks;
    private int pinnedChunks;
    private int evictableChunks;

    /**
     * Slots of a pool, no class and no slot until {@link #classFor(long)}.
     *
     * @param slotTable     slot words, one per alignment unit of the pool.
     * @param poolSizeBytes pool size.
     * @param alignment     slot alignment, a power of two.
     * @param policy        the eviction policy, which says whether the order has a protected segment and its share.
     */
    SlotStates(final AtomicBuffer slotTable, final long poolSizeBytes, final int alignment, final EvictionPolicy policy)
    {
        this.order = new EvictionOrder(policy.segmented(), policy.protectedSharePercent());
        this.slotTable = slotTable;
        this.poolSizeBytes = poolSizeBytes;
        this.alignmentShift = Integer.numberOfTrailingZeros(alignment);
        this.regionBytes = Math.min(SlotGeometry.SEGMENT_BYTES, Math.max(REGION_BYTES, alignment));
        this.regionCount = (int)((poolSizeBytes + regionBytes - 1) / regionBytes);
        regionClass = new int[regionCount];
        Arrays.fill(regionClass, -1);
        freeRegions = regionCount;
        freeRegionBytes = poolSizeBytes;
    }

    // ------------------------------------------------------------------------------------------ classes

    /**
     * The class of a slot size, created when new (allocates: REGISTER only). The id space and the per-region
     * tables grow so that every region can hold slots of the smallest class.
     *
     * @param slotBytes slot size, aligned, at most a segment and the pool.
     * @return class index, or -1 when the pool already holds {@link #MAX_CLASSES} slot sizes.
     */
    int classFor(final long slotBytes)
    {
        for (int c = 0; c < classCount; c++)
        {
            if (classSlotBytes[c] == slotBytes)
            {
                return c;
            }
        }
        if (classCount == MAX_CLASSES)
        {
            return -1;
        }
        final int c = classCount++;
        classSlotBytes[c] = slotBytes;
        classCapacity[c] = (int)SlotGeometry.capacity(poolSizeBytes, slotBytes);
        final int newStride = (int)((regionBytes + slotBytes - 1) / slotBytes);
        if (newStride > stride)
        {
            restride(newStride);
        }
        return c;
    }

    int classCount()
    {
        return classCount;
    }

    long classSlotBytes(final int c)
    {
        return classSlotBytes[c];
    }

    /**
     * Most slots of a class the pool holds, were every region its own (kept from REGISTER: the policies ask for
     * the pool's capacity on every LOOKUP and store, and the geometry's division showed in their profile).
     *
     * @param c class.
     * @return slot count.
     */
    int classCapacity(final int c)
    {
        return classCapacity[c];
    }

    // ------------------------------------------------------------------------------------------ regions

    /**
     * Gives free regions to a class, lowest first, until at least one slot of it is cut.
     *
     * @param c class whose free stack is empty.
     * @return true when a slot was cut; false when no free region is left.
     */
    boolean acquireFreeRegions(final int c)
    {
        for (int r = 0; r < regionCount && freeRegions > 0; r++)
        {
            if (regionClass[r] < 0 && acquire(c, r) > 0)
            {
                return true;
            }
        }
        return false;
    }

    /**
     * Finds a region of another class that can be given to a class: the first whose slots are all free, else
     * the first whose slots are all free or readable and unpinned.
     *
     * @param c the class that needs room.
     * @return region index, or -1 when every region of another class holds a reserved or pinned chunk.
     */
    int reclaimableRegion(final int c)
    {
        int evictable = -1;
        for (int r = 0; r < regionCount; r++)
        {
            final int b = regionClass[r];
            if (b >= 0 && b != c)
            {
                final int busy = regionLoad(r);
                if (0 == busy)
                {
                    return r;
                }
                if (1 == busy && evictable < 0)
                {
                    evictable = r;
                }
            }
        }
        return evictable;
    }

    /**
     * Empties a region and frees it: each readable chunk of its class that touches it is evicted (its key
     * removed from the index, its word published FREE), each touching slot uncut.
     *
     * @param r     a region {@link #reclaimableRegion(int)} returned.
     * @param index key index.
     * @return chunks evicted.
     */
    int reclaim(final int r, final ChunkIndex index)
    {
        final int n = touchingSlots(r);
        int evicted = 0;
        for (int i = 0; i < n; i++)
        {
            final int id = scratch[i];
            if (READABLE == state[id])
            {
                evict(id);
                index.remove(id);
                putSlotWord(id, SlotTableDescriptor.STATE_FREE, generation[id]);
                evicted++;
            }
            uncut(id);
        }
        regionClass[r] = -1;
        freeRegions++;
        freeRegionBytes += regionLength(r);
        return evicted;
    }

    /**
     * 0 when every cut slot touching a region is free, 1 when each is free or readable and unpinned, 2 otherwise.
     */
    private int regionLoad(final int r)
    {
        final int n = touchingSlots(r);
        int load = 0;
        for (int i = 0; i < n; i++)
        {
            final int id = scratch[i];
            if (RESERVED == state[id] || pins[id] > 0)
            {
                return 2;
            }
            if (READABLE == state[id])
            {
                load = 1;
            }
        }
        return load;
    }

    private int acquire(final int c, final int r)
    {
        regionClass[r] = c;
        freeRegions--;
        freeRegionBytes -= regionLength(r);
        final long s = classSlotBytes[c];
        final long regionStart = r * regionBytes;
        final long segmentStart = regionStart - regionStart % SlotGeometry.SEGMENT_BYTES;
        final long segmentLength = Math.min(SlotGeometry.SEGMENT_BYTES, poolSizeBytes - segmentStart);
        final long perSegment = segmentLength / s;
        final long a = regionStart - segmentStart;
        final long b = Math.min(a + regionBytes, segmentLength);
        final long kHi = Math.min((b - 1) / s, perSegment - 1);
        int made = 0;
        for (long k = a / s; k <= kHi; k++)
        {
            final long start = segmentStart + k * s;
            if (ownsAll(c, start, s))
            {
                scratch[made++] = cut(c, start);
            }
        }
        // Pushed highest first, so the lowest offset is taken first, as from a pool cut whole.
        for (int i = made - 1; i >= 0; i--)
        {
            pushFree(scratch[i]);
        }
        return made;
    }

    private boolean ownsAll(final int c, final long start, final long s)
    {
        final int last = (int)((start + s - 1) / regionBytes);
        for (int q = (int)(start / regionBytes); q <= last; q++)
        {
            if (regionClass[q] != c)
            {
                return false;
            }
        }
        return true;
    }

    /**
     * Collects into the scratch array the cut slots of a region's class that touch it.
     */
    private int touchingSlots(final int r)
    {
        final int c = regionClass[r];
        final long s = classSlotBytes[c];
        final long regionStart = r * regionBytes;
        final long segmentStart = regionStart - regionStart % SlotGeometry.SEGMENT_BYTES;
        final long segmentLength = Math.min(SlotGeometry.SEGMENT_BYTES, poolSizeBytes - segmentStart);
        final long a = regionStart - segmentStart;
        final long b = Math.min(a + regionBytes, segmentLength);
        final long kHi = Math.min((b - 1) / s, segmentLength / s - 1);
        int n = 0;
        for (long k = a / s; k <= kHi; k++)
        {
            final int id = slotIdAt(segmentStart + k * s);
            if (id >= 0)
            {
                scratch[n++] = id;
            }
        }
        return n;
    }

    private int registryEntry(final long start)
    {
        final int r = (int)(start / regionBytes);
        final long regionStart = r * regionBytes;
        final long s = classSlotBytes[regionClass[r]];
        final long segmentStart = regionStart - regionStart % SlotGeometry.SEGMENT_BYTES;
        final long firstStart = ((regionStart - segmentStart + s - 1) / s) * s + segmentStart;
        return r * stride + (int)((start - firstStart) / s);
    }

    private int slotIdAt(final long start)
    {
        return regionSlotIds[registryEntry(start)];
    }

    private int cut(final int c, final long start)
    {
        final int id = freeIdTop > 0 ? freeIds[--freeIdTop] : idLimit++;
        state[id] = FREE;
        pins[id] = 0;
        slotClass[id] = c;
        wordIndex[id] = (int)(start >>> alignmentShift);
        // The word's own generation: a slot cut where another class's slot was moves on from that one's.
        generation[id] = SlotTableDescriptor.generation(slotWord(id));
        regionSlotIds[registryEntry(start)] = id;
        cutCount[c]++;
        cutSlots++;
        return id;
    }

    private void uncut(final int id)
    {
        final int c = slotClass[id];
        removeFree(id);
        regionSlotIds[registryEntry((long)wordIndex[id] << alignmentShift)] = -1;
        state[id] = UNCUT;
        freeIds[freeIdTop++] = id;
        cutCount[c]--;
        cutSlots--;
    }

    private void restride(final int newStride)
    {
        final int[] ids = new int[regionCount * newStride];
        Arrays.fill(ids, -1);
        for (int r = 0; r < regionCount; r++)
        {
            System.arraycopy(regionSlotIds, r * stride, ids, r * newStride, stride);
        }
        regionSlotIds = ids;
        stride = newStride;
        final int capacity = regionCount * newStride;
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
        // A region touches at most the slots that start in it and one that starts before it.
        scratch = new int[newStride + 2];
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
            order.appendHot(c, id, classCapacity(c));
        }
        else if (where >= 0)
        {
            order.insertBefore(c, id, where, classCapacity(c));
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
        order.touch(slotClass[id], id, classCapacity(slotClass[id]));
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

    int cutSlots(final int c)
    {
        return cutCount[c];
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

    /**
     * Slots the pool holds now: the cut ones and what the free regions hold. With one class this is the pool
     * cut whole at its slot size; with several, the free regions count in slots of the largest class.
     *
     * @return slot count.
     */
    int slotCapacity()
    {
        return cutSlots + uncutFreeSlots();
    }

    /**
     * Free slots: the free cut ones and what the free regions hold ({@link #slotCapacity()}).
     *
     * @return count.
     */
    int freeSlots()
    {
        return freeSlots + uncutFreeSlots();
    }

    int cutSlots()
    {
        return cutSlots;
    }

    int freeCutSlots()
    {
        return freeSlots;
    }

    int freeRegions()
    {
        return freeRegions;
    }

    long regionBytes()
    {
        return regionBytes;
    }

    int regionCount()
    {
        return regionCount;
    }

    int regionClass(final int r)
    {
        return regionClass[r];
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

    private int uncutFreeSlots()
    {
        if (0 == classCount)
        {
            return 0;
        }
        if (1 == classCount)
        {
            return classCapacity(0) - cutSlots;
        }
        long largest = 0;
        for (int c = 0; c < classCount; c++)
        {
            largest = Math.max(largest, classSlotBytes[c]);
        }
        return (int)(freeRegionBytes / largest);
    }

    private long regionLength(final int r)
    {
        return Math.min(regionBytes, poolSizeBytes - r * regionBytes);
    }

    private void pushFree(final int id)
    {
        final int c = slotClass[id];
        free.pushFront(c, id);
        freeCount[c]++;
        freeSlots++;
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
