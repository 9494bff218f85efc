package io.kvstash.core.book;

/**
 * Open-addressing hash index from a chunk key (namespace, hash high, hash low) to a chunk id, with linear
 * probing and backward-shift deletion (no tombstones, so lookups never degrade with churn). Allocation-free
 * after construction.
 * <p>
 * Each table entry is a {@code long}: the low 32 bits of the key's hash (its tag; the home slot is the tag
 * masked) above the chunk id + 1, 0 for empty. A probe compares tags and reads a key only when its tag
 * matches, and a deletion's backward shift finds every entry's home from its tag alone, so neither touches
 * the keys of other chunks. The keys live per chunk id in one array, namespace, high and low side by side,
 * so a key check reads one or two cache lines, not one in each of three arrays. The table costs 8 bytes an
 * entry (2 to 4 entries a chunk) where an {@code int} table cost 4: the cache lines saved on every probe
 * of a control pair (a PREPARE_STORE that evicts: two lookups, a removal and an insert) are worth more than
 * the memory, on pools too large for the cache.
 * <p>
 * An evicted chunk's entry may be removed later ({@link #removeLater(int)}), once the answer of the request that
 * evicted it is on its way: at most a quarter of the table waits so, and a probe always meets an empty entry.
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}).
 */
final class ChunkIndex
{
    private static final long EMPTY = 0;
    private static final int KEY_WORDS = 3;

    private long[] keys;
    private long[] table;
    private int mask;
    private int size;
    private final long[] pendingRemovals;
    private int pendingCount;
    private int pendingLimit;

    /**
     * An index for a chunk capacity.
     *
     * @param capacity         chunk ids range over {@code [0, capacity)}.
     * @param maxPendingRemovals removals {@link #removeLater(int)} keeps before it runs them itself.
     */
    ChunkIndex(final int capacity, final int maxPendingRemovals)
    {
        pendingRemovals = new long[Math.max(1, maxPendingRemovals)];
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
        if (null == keys || keys.length < KEY_WORDS * capacity)
        {
            keys = new long[KEY_WORDS * capacity];
        }
        table = new long[tableLength];
        mask = tableLength - 1;
        size = 0;
        pendingCount = 0;
        // Live entries fill at most half the table; stale ones waiting for removal at most a quarter more, so the
        // table never fills (a probe would never meet an empty entry) and its runs stay short.
        pendingLimit = Math.max(1, Math.min(pendingRemovals.length, tableLength / 4));
    }

    /**
     * Grows the index for a larger chunk capacity, keeping every entry (REGISTER of a smaller slot size; allocates).
     *
     * @param capacity chunk ids range over {@code [0, capacity)}.
     */
    void grow(final int capacity)
    {
        runPendingRemovals();
        if (keys.length < KEY_WORDS * capacity)
        {
            keys = java.util.Arrays.copyOf(keys, KEY_WORDS * capacity);
        }
        final int tableLength = Math.max(16, Integer.highestOneBit(Math.max(1, capacity) * 2 - 1) << 1);
        if (tableLength > table.length)
        {
            final long[] old = table;
            table = new long[tableLength];
            mask = tableLength - 1;
            for (final long entry : old)
            {
                if (EMPTY != entry)
                {
                    int pos = (int)(entry >>> 32) & mask;
                    while (EMPTY != table[pos])
                    {
                        pos = (pos + 1) & mask;
                    }
                    table[pos] = entry;
                }
            }
            pendingLimit = Math.max(1, Math.min(pendingRemovals.length, tableLength / 4));
        }
    }

    int size()
    {
        return size;
    }

    long ns(final int id)
    {
        return keys[KEY_WORDS * id];
    }

    long hi(final int id)
    {
        return keys[KEY_WORDS * id + 1];
    }

    long lo(final int id)
    {
        return keys[KEY_WORDS * id + 2];
    }

    /**
     * Finds a chunk by key.
     *
     * @return chunk id or -1.
     */
    int find(final long keyNs, final long keyHi, final long keyLo)
    {
        final int tag = (int)hash(keyNs, keyHi, keyLo);
        int pos = tag & mask;
        while (true)
        {
            final long entry = table[pos];
            if (EMPTY == entry)
            {
                return -1;
            }
            if ((int)(entry >>> 32) == tag)
            {
                final int id = (int)entry - 1;
                final int k = KEY_WORDS * id;
                if (keys[k + 1] == keyHi && keys[k + 2] == keyLo && keys[k] == keyNs)
                {
                    return id;
                }
            }
            pos = (pos + 1) & mask;
        }
    }

    /**
     * Inserts a chunk id under a key that is not present.
     */
    void insert(final int id, final long keyNs, final long keyHi, final long keyLo)
    {
        final int k = KEY_WORDS * id;
        keys[k] = keyNs;
        keys[k + 1] = keyHi;
        keys[k + 2] = keyLo;
        final int tag = (int)hash(keyNs, keyHi, keyLo);
        int pos = tag & mask;
        while (EMPTY != table[pos])
        {
            pos = (pos + 1) & mask;
        }
        table[pos] = entry(tag, id);
        size++;
    }

    /**
     * Removes a present chunk id, shifting later entries of its probe run back.
     */
    void remove(final int id)
    {
        final int k = KEY_WORDS * id;
        removeEntry(entry((int)hash(keys[k], keys[k + 1], keys[k + 2]), id));
        size--;
    }

    /**
     * Removes a present chunk id from the count now and from the table later, at {@link #runPendingRemovals()}:
     * for an evicted chunk whose id the caller re-inserts under a new key before any other lookup. Until then
     * the table keeps an entry with the old key's tag and the id, which no lookup can match: a lookup reads the
     * key stored for the id, which is the new one, and the new key has an entry of its own. The removal reads
     * the table lines of a key no request asked for (one or two random lines, in a table larger than the
     * level-2 cache), so deferring it past the answer keeps that wait off the answer's way.
     *
     * @param id chunk id whose key is about to be overwritten by {@link #insert}.
     */
    void removeLater(final int id)
    {
        if (pendingCount >= pendingLimit)
        {
            runPendingRemovals();
        }
        final int k = KEY_WORDS * id;
        pendingRemovals[pendingCount++] = entry((int)hash(keys[k], keys[k + 1], keys[k + 2]), id);
        size--;
    }

    /**
     * Runs the removals {@link #removeLater(int)} deferred.
     *
     * @return removals run.
     */
    int runPendingRemovals()
    {
        final int n = pendingCount;
        for (int i = 0; i < n; i++)
        {
            removeEntry(pendingRemovals[i]);
        }
        pendingCount = 0;
        return n;
    }

    /**
     * Removals deferred and not yet run.
     *
     * @return count.
     */
    int pendingRemovals()
    {
        return pendingCount;
    }

    /**
     * Table entries in use, counted by a scan: {@link #size()} plus the removals still pending. For invariant
     * checks, not for the hot path.
     *
     * @return entries.
     */
    int occupiedEntries()
    {
        int n = 0;
        for (final long entry : table)
        {
            n += EMPTY != entry ? 1 : 0;
        }
        return n;
    }

    /**
     * Removes one entry equal to {@code wanted}, shifting later entries of its probe run back. Two equal entries
     * (a deferred removal's and a rollback's re-insert of the same key and id) are interchangeable.
     */
    private void removeEntry(final long wanted)
    {
        int pos = (int)(wanted >>> 32) & mask;
        while (table[pos] != wanted)
        {
            if (EMPTY == table[pos])
            {
                throw new IllegalStateException("chunk " + ((int)wanted - 1) + " is not in the index");
            }
            pos = (pos + 1) & mask;
        }
        int gap = pos;
        int next = (gap + 1) & mask;
        while (EMPTY != table[next])
        {
            final int home = (int)(table[next] >>> 32) & mask;
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
    }

    private static long entry(final int tag, final int id)
    {
        return ((long)tag << 32) | (id + 1L);
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
