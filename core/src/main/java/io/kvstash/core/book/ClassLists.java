package io.kvstash.core.book;

import java.util.Arrays;

/**
 * Doubly linked lists of chunk ids, one per size class, kept in arrays indexed by id: O(1) insertion and removal
 * anywhere, no allocation once grown. {@link SlotStates} keeps two: each class's free slots (used as a stack) and
 * each class's readable chunks in LRU order (least recently used at the head).
 * <p>
 * Owner: the reserve stage thread (via {@link SlotStates}). Not thread safe.
 */
final class ClassLists
{
    private final int[] head = new int[SlotRegions.MAX_CLASSES];
    private final int[] tail = new int[SlotRegions.MAX_CLASSES];
    private int[] prev = new int[0];
    private int[] next = new int[0];

    ClassLists()
    {
        Arrays.fill(head, -1);
        Arrays.fill(tail, -1);
    }

    /**
     * Makes room for ids below a capacity (REGISTER only: allocates).
     *
     * @param capacity ids the lists may hold.
     */
    void grow(final int capacity)
    {
        prev = Arrays.copyOf(prev, capacity);
        next = Arrays.copyOf(next, capacity);
    }

    int head(final int c)
    {
        return head[c];
    }

    int tail(final int c)
    {
        return tail[c];
    }

    int prev(final int id)
    {
        return prev[id];
    }

    int next(final int id)
    {
        return next[id];
    }

    void pushFront(final int c, final int id)
    {
        final int first = head[c];
        prev[id] = -1;
        next[id] = first;
        if (first >= 0)
        {
            prev[first] = id;
        }
        else
        {
            tail[c] = id;
        }
        head[c] = id;
    }

    void append(final int c, final int id)
    {
        final int last = tail[c];
        prev[id] = last;
        next[id] = -1;
        if (last >= 0)
        {
            next[last] = id;
        }
        else
        {
            head[c] = id;
        }
        tail[c] = id;
    }

    /**
     * Links an id before another of the same list, or at the tail when there is none.
     *
     * @param c         the list.
     * @param id        the id to link.
     * @param successor the id it goes before, or -1.
     */
    void insertBefore(final int c, final int id, final int successor)
    {
        if (successor < 0)
        {
            append(c, id);
            return;
        }
        final int before = prev[successor];
        prev[id] = before;
        next[id] = successor;
        prev[successor] = id;
        if (before >= 0)
        {
            next[before] = id;
        }
        else
        {
            head[c] = id;
        }
    }

    void remove(final int c, final int id)
    {
        final int before = prev[id];
        final int after = next[id];
        if (before >= 0)
        {
            next[before] = after;
        }
        else
        {
            head[c] = after;
        }
        if (after >= 0)
        {
            prev[after] = before;
        }
        else
        {
            tail[c] = before;
        }
    }
}
