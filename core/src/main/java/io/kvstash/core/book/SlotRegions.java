package io.kvstash.core.book;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.PoolCommitment;
import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.file.SlotTableDescriptor;
import org.agrona.concurrent.AtomicBuffer;

import java.util.Arrays;

/**
 * The pool's regions and size classes. The data region is cut into regions of {@link #REGION_BYTES} (a power of
 * two that divides a mapping segment, so no region straddles a segment end). A size class is a slot size; a free
 * region is given to a class on first use and stays with it until another class reclaims it. A class's slots lie
 * on the grid of its slot size from the start of each segment ({@link SlotGeometry}: slot {@code k} of a segment
 * at {@code k * slotBytes}), and a slot exists (is cut) while every region it touches belongs to its class. So a
 * pool with one class has exactly the slots, offsets and free-stack order of a pool cut whole at that slot size,
 * and a class's chunk never straddles a segment end or memory of another class.
 * <p>
 * It owns the classes (their slot sizes, capacities and cut slot counts), each region's class, the ids of the slots
 * that start in each region, the free regions, and the {@link SlotStates} of the slots it cuts. Giving a region
 * to a class cuts its slots there and pushes them onto the class's free stack; reclaiming a region evicts its
 * readable chunks and uncuts its slots.
 * <p>
 * A pool committed on demand ({@link PoolCommitment}) has one rule more: a free region is given only when it lies
 * wholly in the committed prefix, so no slot is handed out over memory the file system may fail to back. The lowest
 * free region not committed yet is committed on the spot ({@link PoolCommitment#commitTo}); only when the file
 * system refuses does {@link #acquireFreeRegions(int)} fail, and the store evicts as in a full pool. Regions are
 * given lowest first, so the regions in use stay a prefix too.
 * <p>
 * It decides nothing: when to give or reclaim a region is {@link StoreReservations}' decision. Giving and reclaiming a
 * region is O(slots of the region), once per region given; creating a class allocates (REGISTER only).
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}). Not thread safe.
 */
final class SlotRegions
{
    /** Bytes of a region (unless the alignment is bigger): small enough for a 1 GiB pool to hold many classes. */
    static final long REGION_BYTES = 16L << 20;
    /** Most slot sizes one pool holds. */
    static final int MAX_CLASSES = 64;

    private final SlotStates slots;
    private final PoolCommitment commitment;
    private final long poolSizeBytes;
    private final long regionBytes;
    private final int regionCount;

    private int classCount;
    private final long[] classSlotBytes = new long[MAX_CLASSES];
    /** Shared with {@link SlotStates}, which reads it on the request path. */
    private final int[] classCapacity = new int[MAX_CLASSES];
    private final int[] cutCount = new int[MAX_CLASSES];
    private int cutSlots;

    private final int[] regionClass;
    private int freeRegions;
    private long freeRegionBytes;
    /** End of the highest region ever given, from the data region's start. */
    private long givenEndBytes;
    /** Per region, {@link #stride} entries: the ids of the slots that start in it (-1: not cut). */
    private int[] regionSlotIds = new int[0];
    private int stride;
    private int[] scratch = new int[0];

    /**
     * Regions of a pool, all free, and no class or slot until {@link #classFor(long)}.
     *
     * @param slotTable     slot words, one per alignment unit of the pool.
     * @param poolSizeBytes pool size.
     * @param alignment     slot alignment, a power of two.
     * @param policy        the eviction policy, which says whether the order has a protected segment and its share.
     * @param commitment    what of the pool is committed; null when all of it is.
     */
    SlotRegions(
        final AtomicBuffer slotTable,
        final long poolSizeBytes,
        final int alignment,
        final EvictionPolicy policy,
        final PoolCommitment commitment)
    {
        this.slots = new SlotStates(slotTable, alignment, policy, classCapacity);
        this.commitment = commitment;
        this.poolSizeBytes = poolSizeBytes;
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

    /**
     * The states of the slots these regions are cut into.
     *
     * @return slot states.
     */
    SlotStates slots()
    {
        return slots;
    }

    // ------------------------------------------------------------------------------------------ regions

    /**
     * Gives free regions to a class, lowest first, until at least one slot of it is cut. On a pool committed on
     * demand a free region not wholly committed is committed first; it stops there when that fails.
     *
     * @param c class whose free stack is empty.
     * @return true when a slot was cut; false when no committed free region is left.
     */
    boolean acquireFreeRegions(final int c)
    {
        final long committed = null == commitment ? poolSizeBytes : commitment.committedBytes();
        for (int r = 0; r < regionCount && freeRegions > 0; r++)
        {
            if (regionClass[r] < 0)
            {
                final long end = r * regionBytes + regionLength(r);
                if (end > committed && !commitment.commitTo(end))
                {
                    return false;
                }
                final int made = acquire(c, r);
                if (end > givenEndBytes)
                {
                    givenEndBytes = end;
                    if (null != commitment)
                    {
                        commitment.onRegionGiven(end);
                    }
                }
                if (made > 0)
                {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * End of the highest region ever given to a class, from the data region's start.
     *
     * @return bytes.
     */
    long givenEndBytes()
    {
        return givenEndBytes;
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
            if (slots.isReadable(id))
            {
                slots.evict(id);
                index.remove(id);
                slots.putSlotWord(id, SlotTableDescriptor.STATE_FREE, slots.generation(id));
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
            final byte state = slots.state(id);
            if (SlotStates.RESERVED == state || slots.pins(id) > 0)
            {
                return 2;
            }
            if (SlotStates.READABLE == state)
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
            slots.pushFree(scratch[i]);
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
        final int id = slots.cut(c, start);
        regionSlotIds[registryEntry(start)] = id;
        cutCount[c]++;
        cutSlots++;
        return id;
    }

    private void uncut(final int id)
    {
        final int c = slots.slotClass(id);
        regionSlotIds[registryEntry(slots.offset(id))] = -1;
        slots.uncut(id);
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
        slots.grow(regionCount * newStride);
        // A region touches at most the slots that start in it and one that starts before it.
        scratch = new int[newStride + 2];
    }

    // ------------------------------------------------------------------------------------------ gauges

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
        return slots.freeCutSlots() + uncutFreeSlots();
    }

    int cutSlots()
    {
        return cutSlots;
    }

    int cutSlots(final int c)
    {
        return cutCount[c];
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
}
