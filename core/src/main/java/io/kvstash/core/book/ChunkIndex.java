package io.kvstash.core.book;

/**
 * Open-addressing hash index from a chunk key (namespace, hash high, hash low) to a chunk id, with linear
 * probing and backward-shift deletion (no tombstones, so lookups never degrade with churn). The keys live in
 * arrays indexed by chunk id, so the table itself is one {@code int[]}. Allocation-free after construction.
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}).
 */
final class ChunkIndex
{
    private static final int EMPTY = 0;

    private long[] ns;
    private long[] hi;
    private long[] lo;
    private int[] table;
    private int mask;
    private int size;

    ChunkIndex(final int capacity)
    {
        resize(capacity);
    }

    /**
     * Re-creates the index empty for a new chunk capacity.
     *
     * @param capacity chunk ids range over {@code [0, capacity)}.
     */
    void resize(final int capacity)
    {
        final int tableLength = Math.max(16, Integer.highestOneBit(Math.max(1, capacity) * 2 - 1) << 1);
        if (null == ns || ns.length < capacity)
        {
            ns = new long[capacity];
            hi = new long[capacity];
            lo = new long[capacity];
        }
        table = new int[tableLength];
        mask = tableLength - 1;
        size = 0;
    }

    int size()
    {
        return size;
    }

    long ns(final int id)
    {
        return ns[id];
    }

    long hi(final int id)
    {
        return hi[id];
    }

    long lo(final int id)
    {
        return lo[id];
    }

    /**
     * Finds a chunk by key.
     *
     * @return chunk id or -1.
     */
    int find(final long keyNs, final long keyHi, final long keyLo)
    {
        int pos = (int)hash(keyNs, keyHi, keyLo) & mask;
        while (true)
        {
            final int entry = table[pos];
            if (EMPTY == entry)
            {
                return -1;
            }
            final int id = entry - 1;
            if (hi[id] == keyHi && lo[id] == keyLo && ns[id] == keyNs)
            {
                return id;
            }
            pos = (pos + 1) & mask;
        }
    }

    /**
     * Inserts a chunk id under a key that is not present.
     */
    void insert(final int id, final long keyNs, final long keyHi, final long keyLo)
    {
        ns[id] = keyNs;
        hi[id] = keyHi;
        lo[id] = keyLo;
        int pos = (int)hash(keyNs, keyHi, keyLo) & mask;
        while (EMPTY != table[pos])
        {
            pos = (pos + 1) & mask;
        }
        table[pos] = id + 1;
        size++;
    }

    /**
     * Removes a present chunk id, shifting later entries of its probe run back.
     */
    void remove(final int id)
    {
        int pos = (int)hash(ns[id], hi[id], lo[id]) & mask;
        while (table[pos] != id + 1)
        {
            if (EMPTY == table[pos])
            {
                throw new IllegalStateException("chunk " + id + " is not in the index");
            }
            pos = (pos + 1) & mask;
        }
        int gap = pos;
        int next = (gap + 1) & mask;
        while (EMPTY != table[next])
        {
            final int other = table[next] - 1;
            final int home = (int)hash(ns[other], hi[other], lo[other]) & mask;
            // Move the entry into the gap when its home does not lie cyclically in (gap, next].
            final boolean homeInRange = gap <= next ? (home > gap && home <= next) : (home > gap || home <= next);
            if (!homeInRange)
            {
                table[gap] = table[next];
                gap = next;
            }
            next = (next + 1) & mask;
        }
        table[gap] = EMPTY;
        size--;
    }

    /**
     * Mixes the three key words; client-supplied hashes may be small integers, so the mix must spread them.
     */
    static long hash(final long keyNs, final long keyHi, final long keyLo)
    {
        long h = keyNs * 0x9E3779B97F4A7C15L ^ keyHi;
        h = (h ^ (h >>> 32)) * 0xD6E8FEB86659FD93L ^ keyLo;
        h = (h ^ (h >>> 32)) * 0xD6E8FEB86659FD93L;
        return h ^ (h >>> 32);
    }
}
