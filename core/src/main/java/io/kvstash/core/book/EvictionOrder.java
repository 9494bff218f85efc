package io.kvstash.core.book;

import java.util.Arrays;

/**
 * The order in which each size class's readable chunks are evicted, for every {@code EvictionPolicy}: one
 * list per class (probation; the exact LRU list under {@code lru} and {@code chain}), and for the segmented
 * policies a second, protected list per class. The head of a list is evicted first; probation empties before
 * protected. A chunk enters at the recent end, before a given chunk (its parent, so a chain's descendants stay
 * older than its ancestors), after a given chunk, at the evict-first end (cold), or at the recent end of
 * protected (hot). A hit moves the chunk to the recent end of its list, or of protected when segmented;
 * protected holds at most the policy's share ({@link io.kvstash.core.EvictionPolicy#protectedSharePercent}) of the
 * slots the pool would hold of the class and hands its least recently used chunk back to probation's recent end
 * beyond that.
 * <p>
 * Every operation is O(1) but {@link #victim}, which skips pinned chunks, and no operation allocates once
 * grown. Owner: the reserve stage thread (via {@link SlotStates}). Not thread safe.
 */
final class EvictionOrder
{
    /** Segment of a chunk on probation (the only segment of the unsegmented policies). */
    static final byte PROBATION = 0;
    /** Segment of a protected chunk. */
    static final byte PROTECTED = 1;

    private final boolean segmented;
    private final int protectedSharePercent;
    private final ClassLists probation = new ClassLists();
    private final ClassLists protectedList = new ClassLists();
    private final int[] protectedCount = new int[SlotRegions.MAX_CLASSES];
    private byte[] segment = new byte[0];

    /**
     * An order with or without a protected segment.
     *
     * @param segmented             true for the segmented policies.
     * @param protectedSharePercent most of a class's slots protected chunks hold, in percent (segmented only).
     */
    EvictionOrder(final boolean segmented, final int protectedSharePercent)
    {
        this.segmented = segmented;
        this.protectedSharePercent = protectedSharePercent;
    }

    /**
     * Makes room for ids below a capacity (REGISTER only: allocates).
     *
     * @param capacity ids the lists may hold.
     */
    void grow(final int capacity)
    {
        probation.grow(capacity);
        protectedList.grow(capacity);
        segment = Arrays.copyOf(segment, capacity);
    }

    /**
     * Links a chunk that became readable at the recent end of probation.
     *
     * @param c  its class.
     * @param id the chunk.
     */
    void append(final int c, final int id)
    {
        segment[id] = PROBATION;
        probation.append(c, id);
    }

    /**
     * Links a chunk that became readable at the recent end of protected (probation when not segmented).
     *
     * @param c        its class.
     * @param id       the chunk.
     * @param classSlots the class's slots were the pool all its own, which bound protected.
     */
    void appendHot(final int c, final int id, final int classSlots)
    {
        if (!segmented)
        {
            append(c, id);
            return;
        }
        segment[id] = PROTECTED;
        protectedList.append(c, id);
        protectedCount[c]++;
        trim(c, classSlots);
    }

    /**
     * Links a chunk right before another linked chunk of its class, in that chunk's segment.
     *
     * @param c        its class.
     * @param id       the chunk.
     * @param before   a linked chunk of the class.
     * @param classSlots the class's slots were the pool all its own, which bound protected.
     */
    void insertBefore(final int c, final int id, final int before, final int classSlots)
    {
        segment[id] = segment[before];
        if (PROTECTED == segment[before])
        {
            protectedList.insertBefore(c, id, before);
            protectedCount[c]++;
            trim(c, classSlots);
        }
        else
        {
            probation.insertBefore(c, id, before);
        }
    }

    /**
     * Links a chunk on probation right after another chunk on probation, or at the evict-first end of
     * probation when there is none (a cold entry).
     *
     * @param c     its class.
     * @param id    the chunk.
     * @param after a chunk on probation of the class, or -1.
     */
    void insertCold(final int c, final int id, final int after)
    {
        segment[id] = PROBATION;
        if (after < 0)
        {
            probation.pushFront(c, id);
        }
        else
        {
            probation.insertBefore(c, id, probation.next(after));
        }
    }

    /**
     * A hit: the chunk moves to the recent end of its list, or of protected when segmented.
     *
     * @param c        its class.
     * @param id       a linked chunk.
     * @param classSlots the class's slots were the pool all its own, which bound protected.
     */
    void touch(final int c, final int id, final int classSlots)
    {
        remove(c, id);
        appendHot(c, id, classSlots);
    }

    /**
     * Unlinks a chunk.
     *
     * @param c  its class.
     * @param id a linked chunk.
     */
    void remove(final int c, final int id)
    {
        if (PROTECTED == segment[id])
        {
            protectedList.remove(c, id);
            protectedCount[c]--;
        }
        else
        {
            probation.remove(c, id);
        }
    }

    /**
     * The first unpinned chunk of a class in eviction order.
     *
     * @param c    class.
     * @param pins pins by chunk id.
     * @return chunk id, or -1 when every linked chunk of the class is pinned (or none is linked).
     */
    int victim(final int c, final int[] pins)
    {
        int id = probation.head(c);
        while (id >= 0 && pins[id] > 0)
        {
            id = probation.next(id);
        }
        if (id < 0)
        {
            id = protectedList.head(c);
            while (id >= 0 && pins[id] > 0)
            {
                id = protectedList.next(id);
            }
        }
        return id;
    }

    /**
     * Where a linked chunk is, enough to {@link #restore} it after it was unlinked.
     *
     * @param id a linked chunk.
     * @return its segment and its successor in its list, packed.
     */
    int mark(final int id)
    {
        final int successor = PROTECTED == segment[id] ? protectedList.next(id) : probation.next(id);
        return ((successor + 1) << 1) | segment[id];
    }

    /**
     * Links a chunk back where a {@link #mark} said it was (rollback, newest change first).
     *
     * @param c    its class.
     * @param id   the chunk.
     * @param mark its mark before it was unlinked.
     */
    void restore(final int c, final int id, final int mark)
    {
        final int successor = (mark >>> 1) - 1;
        segment[id] = (byte)(mark & 1);
        if (PROTECTED == segment[id])
        {
            protectedList.insertBefore(c, id, successor);
            protectedCount[c]++;
        }
        else
        {
            probation.insertBefore(c, id, successor);
        }
    }

    /**
     * The first chunk of a class in eviction order, pinned or not.
     *
     * @param c class.
     * @return chunk id, or -1 when none is linked.
     */
    int first(final int c)
    {
        final int head = probation.head(c);
        return head >= 0 ? head : protectedList.head(c);
    }

    /**
     * The chunk after another in eviction order: its list's next, and from probation's last to protected's
     * first.
     *
     * @param c  its class.
     * @param id a linked chunk.
     * @return chunk id, or -1 at the end.
     */
    int following(final int c, final int id)
    {
        if (PROTECTED == segment[id])
        {
            return protectedList.next(id);
        }
        final int next = probation.next(id);
        return next >= 0 ? next : protectedList.head(c);
    }

    /**
     * Whether a linked chunk is protected.
     *
     * @param id a linked chunk.
     * @return true when in the protected segment.
     */
    boolean isProtected(final int id)
    {
        return PROTECTED == segment[id];
    }

    /**
     * Checks a class's lists (links both ways, ends, segment flags, the protected count); slow, for tests.
     *
     * @param c     class.
     * @param slots slot states, for the chunks' states and classes.
     * @return chunks linked, or -1 when a list is broken.
     */
    int check(final int c, final SlotStates slots)
    {
        final int a = checkList(probation, c, PROBATION, slots);
        final int b = checkList(protectedList, c, PROTECTED, slots);
        return a < 0 || b < 0 || b != protectedCount[c] || (!segmented && b != 0) ? -1 : a + b;
    }

    private int checkList(final ClassLists list, final int c, final byte seg, final SlotStates slots)
    {
        int prev = -1;
        int n = 0;
        for (int id = list.head(c); id >= 0; id = list.next(id))
        {
            if (!slots.isReadable(id) || list.prev(id) != prev || slots.slotClass(id) != c || segment[id] != seg ||
                ++n > slots.readableChunks())
            {
                return -1;
            }
            prev = id;
        }
        return list.tail(c) == prev ? n : -1;
    }

    private void trim(final int c, final int classSlots)
    {
        final long limit = (long)classSlots * protectedSharePercent / 100;
        while (protectedCount[c] > limit)
        {
            final int id = protectedList.head(c);
            protectedList.remove(c, id);
            protectedCount[c]--;
            segment[id] = PROBATION;
            probation.append(c, id);
        }
    }
}
