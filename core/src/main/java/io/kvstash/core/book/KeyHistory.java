package io.kvstash.core.book;

import java.util.Arrays;

/**
 * How often each key was referenced lately, approximately: a count-min sketch of 4-bit saturating counters (two
 * per key, conservative update), every counter halved once a window of references has passed, so old popularity
 * fades. A key's two counters lie in one 64-byte line of the sketch (a blocked sketch), chosen by its hash, so a
 * reference or a count costs one cache miss, not two, and sixteen counters share a {@code long}. A key never
 * referenced may read above 0 when it shares both counters with others; a referenced key never reads below its
 * references since the last halving. O(1) per reference, amortised (a halving is O(cells / 16), once per window);
 * no allocation after construction.
 * <p>
 * The question the policies ask of a stored chunk, {@link #atLeastTwice}, is answered from a bitmap of one bit
 * per {@code long} of counters (set when one of its sixteen counters is 2 or more, 1/1024 of the sketch's size,
 * so it stays in the core's caches) and reads the sketch only when both of the key's bits are set: a store of
 * keys no LOOKUP referenced twice costs no cache miss in the sketch (a miss there cost a control pair about
 * 10 % of its server time).
 * <p>
 * Owner: the reserve stage thread (via {@link ChainLearner}). Not thread safe.
 */
final class KeyHistory
{
    /** Largest count a cell holds. */
    static final int MAX_COUNT = 15;
    /** Cells in one 64-byte line: eight {@code long}s of sixteen 4-bit cells. */
    static final int LINE_CELLS = 128;
    private static final long HALF_MASK = 0x7777_7777_7777_7777L;

    /** Per counter, its bits that say 2 or more. */
    private static final long TWO_OR_MORE_MASK = 0xEEEE_EEEE_EEEE_EEEEL;

    private final long[] words;
    private final long[] twoOrMore;
    private final int lineMask;
    private final long[] batchHashes;
    private long references;
    /** Where the first pass of {@link #referenceAll} leaves a sum of the lines it loaded, so the loads stay. */
    private long touched;

    /**
     * A history with room for about a quarter of its cells' worth of distinct keys, referencing up to 1,024 keys
     * at once ({@link #referenceAll}).
     *
     * @param cells cells, a power of two, at least {@link #LINE_CELLS}.
     */
    KeyHistory(final int cells)
    {
        this(cells, 1024);
    }

    /**
     * A history with room for about a quarter of its cells' worth of distinct keys.
     *
     * @param cells     cells, a power of two, at least {@link #LINE_CELLS}.
     * @param batchKeys most keys {@link #referenceAll} takes in two passes (a LOOKUP's range at most).
     */
    KeyHistory(final int cells, final int batchKeys)
    {
        if (Integer.bitCount(cells) != 1 || cells < LINE_CELLS)
        {
            throw new IllegalArgumentException("cells " + cells + " is not a power of two of at least " + LINE_CELLS);
        }
        this.words = new long[cells / 16];
        this.twoOrMore = new long[Math.max(1, words.length / 64)];
        this.lineMask = cells / LINE_CELLS - 1;
        this.batchHashes = new long[batchKeys];
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
            Arrays.fill(twoOrMore, 0L);
            for (int i = 0; i < words.length; i++)
            {
                final long w = (words[i] >>> 1) & HALF_MASK;
                words[i] = w;
                if (0 != (w & TWO_OR_MORE_MASK))
                {
                    twoOrMore[i >>> 6] |= 1L << i;
                }
            }
        }
        increment(hash(ns, hi, lo));
    }

    private void increment(final long h)
    {
        final int line = ((int)h & lineMask) << 3;
        final int a = (int)(h >>> 32) & (LINE_CELLS - 1);
        final int b = (int)(h >>> 48) & (LINE_CELLS - 1);
        final int wa = line + (a >>> 4);
        final int wb = line + (b >>> 4);
        final int sa = (a & 15) << 2;
        final int sb = (b & 15) << 2;
        final int ca = (int)(words[wa] >>> sa) & 15;
        final int cb = (int)(words[wb] >>> sb) & 15;
        final int min = Math.min(ca, cb);
        if (min < MAX_COUNT)
        {
            if (ca == min)
            {
                words[wa] += 1L << sa;
                if (ca >= 1)
                {
                    twoOrMore[wa >>> 6] |= 1L << wa;
                }
            }
            if (cb == min && (wa != wb || sa != sb))
            {
                words[wb] += 1L << sb;
                if (cb >= 1)
                {
                    twoOrMore[wb >>> 6] |= 1L << wb;
                }
            }
        }
    }

    /**
     * Counts one reference of each of some keys, in order, exactly as {@link #reference} one after the other
     * would. Unless a halving falls among them, in two passes: the first hashes every key and loads its line, so
     * that the lines' cache misses overlap (a LOOKUP's keys land on unrelated lines of a sketch larger than the
     * core's caches), the second counts them.
     *
     * @param ns     namespace of the keys.
     * @param hi     hash high halves.
     * @param lo     hash low halves.
     * @param from   first key's index.
     * @param to     index after the last key.
     * @param window references between halvings, at least 1.
     */
    void referenceAll(final long ns, final long[] hi, final long[] lo, final int from, final int to, final long window)
    {
        final int n = to - from;
        if (n > batchHashes.length || references + n >= window)
        {
            for (int i = from; i < to; i++)
            {
                reference(ns, hi[i], lo[i], window);
            }
            return;
        }
        references += n;
        long sum = 0;
        for (int i = 0; i < n; i++)
        {
            final long h = hash(ns, hi[from + i], lo[from + i]);
            batchHashes[i] = h;
            sum += words[((int)h & lineMask) << 3];
        }
        touched = sum;
        for (int i = 0; i < n; i++)
        {
            increment(batchHashes[i]);
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
        return count(hash(ns, hi, lo));
    }

    private int count(final long h)
    {
        final int line = ((int)h & lineMask) << 3;
        final int a = (int)(h >>> 32) & (LINE_CELLS - 1);
        final int b = (int)(h >>> 48) & (LINE_CELLS - 1);
        return Math.min((int)(words[line + (a >>> 4)] >>> ((a & 15) << 2)) & 15,
            (int)(words[line + (b >>> 4)] >>> ((b & 15) << 2)) & 15);
    }

    /**
     * Whether a key was referenced at least twice since the last halving, approximately (never false when it
     * was): {@code count(ns, hi, lo) >= 2}, reading the sketch only when the bitmap allows it.
     *
     * @param ns namespace.
     * @param hi hash high half.
     * @param lo hash low half.
     * @return true when both of the key's counters are 2 or more.
     */
    boolean atLeastTwice(final long ns, final long hi, final long lo)
    {
        final long h = hash(ns, hi, lo);
        final int line = ((int)h & lineMask) << 3;
        final int a = (int)(h >>> 32) & (LINE_CELLS - 1);
        final int b = (int)(h >>> 48) & (LINE_CELLS - 1);
        final int wa = line + (a >>> 4);
        final int wb = line + (b >>> 4);
        return 0 != ((twoOrMore[wa >>> 6] >>> wa) & 1) && 0 != ((twoOrMore[wb >>> 6] >>> wb) & 1) && count(h) >= 2;
    }

    private static long hash(final long ns, final long hi, final long lo)
    {
        long h = hi * 0x9E3779B97F4A7C15L ^ lo * 0xC2B2AE3D27D4EB4FL ^ ns * 0x165667B19E3779F9L;
        h ^= h >>> 31;
        h *= 0xBF58476D1CE4E5B9L;
        return h ^ (h >>> 29);
    }
}
