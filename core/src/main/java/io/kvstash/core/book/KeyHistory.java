package io.kvstash.core.book;

/**
 * How often each key was referenced lately, approximately: a count-min sketch of 4-bit saturating counters in a
 * byte array (two cells per key, conservative update), every counter halved once a window of references has
 * passed, so old popularity fades. A key never referenced may read above 0 when it shares both cells with
 * others; a referenced key never reads below its references since the last halving. O(1) per reference,
 * amortised (a halving is O(cells), once per window); no allocation after construction.
 * <p>
 * Owner: the reserve stage thread (via {@link ChainLearner}). Not thread safe.
 */
final class KeyHistory
{
    /** Largest count a cell holds. */
    static final int MAX_COUNT = 15;

    private final byte[] cells;
    private final int mask;
    private long references;

    /**
     * A history with room for about a quarter of its cells' worth of distinct keys.
     *
     * @param cells cells, a power of two.
     */
    KeyHistory(final int cells)
    {
        if (Integer.bitCount(cells) != 1)
        {
            throw new IllegalArgumentException("cells " + cells + " is not a power of two");
        }
        this.cells = new byte[cells];
        this.mask = cells - 1;
    }

    /**
     * Counts one reference of a key; once {@code window} references have passed, halves every count first.
     *
     * @param ns     namespace.
     * @param hi     hash high half.
     * @param lo     hash low half.
     * @param window references between halvings, at least 1.
     */
    void reference(final long ns, final long hi, final long lo, final long window)
    {
        if (++references >= window)
        {
            references = 0;
            for (int i = 0; i < cells.length; i++)
            {
                cells[i] = (byte)(cells[i] >> 1);
            }
        }
        final long h = hash(ns, hi, lo);
        final int a = (int)h & mask;
        final int b = (int)(h >>> 32) & mask;
        final int min = Math.min(cells[a], cells[b]);
        if (min < MAX_COUNT)
        {
            if (cells[a] == min)
            {
                cells[a]++;
            }
            if (cells[b] == min)
            {
                cells[b]++;
            }
        }
    }

    /**
     * References of a key since the last halving, approximately (never fewer).
     *
     * @param ns namespace.
     * @param hi hash high half.
     * @param lo hash low half.
     * @return count, at most {@link #MAX_COUNT}.
     */
    int count(final long ns, final long hi, final long lo)
    {
        final long h = hash(ns, hi, lo);
        return Math.min(cells[(int)h & mask], cells[(int)(h >>> 32) & mask]);
    }

    private static long hash(final long ns, final long hi, final long lo)
    {
        long h = hi * 0x9E3779B97F4A7C15L ^ lo * 0xC2B2AE3D27D4EB4FL ^ ns * 0x165667B19E3779F9L;
        h ^= h >>> 31;
        h *= 0xBF58476D1CE4E5B9L;
        return h ^ (h >>> 29);
    }
}
