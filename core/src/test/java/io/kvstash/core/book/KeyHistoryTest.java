package io.kvstash.core.book;

import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The key history the segmented policies read: a blocked count-min sketch of 4-bit counters halved every window,
 * checked against exact counts kept beside it (a key never reads below its references since the last halving,
 * saturating at 15), and its bitmap shortcut {@link KeyHistory#atLeastTwice} against {@code count >= 2} on every
 * key, before and after halvings; a LOOKUP's keys referenced at once ({@link KeyHistory#referenceAll}) against the
 * same keys one at a time.
 */
class KeyHistoryTest
{
    private static final long NS = 7;

    @Test
    void aKeyNeverReadsBelowItsReferencesSinceTheLastHalving()
    {
        final long window = 5_000;
        final KeyHistory history = new KeyHistory(1 << 14);
        final Map<Long, Integer> exact = new HashMap<>();
        final SplittableRandom random = new SplittableRandom(11);
        long sinceHalving = 0;
        for (int i = 0; i < 4 * window; i++)
        {
            // Skewed keys: a few hundred popular ones among many seen once or twice.
            final long key = random.nextInt(4) == 0 ? random.nextInt(300) : 1_000 + random.nextInt(20_000);
            if (++sinceHalving >= window)
            {
                sinceHalving = 0;
                exact.clear();
            }
            history.reference(NS, key * 31, key, window);
            exact.merge(key, 1, Integer::sum);
            final int count = history.count(NS, key * 31, key);
            assertTrue(count >= Math.min(KeyHistory.MAX_COUNT, exact.get(key)),
                "key " + key + " read " + count + " after " + exact.get(key) + " references");
        }
    }

    @Test
    void atLeastTwiceAnswersAsTheCountsDoBeforeAndAfterHalvings()
    {
        final long window = 3_000;
        final KeyHistory history = new KeyHistory(1 << 13);
        final SplittableRandom random = new SplittableRandom(5);
        int twice = 0;
        for (int i = 0; i < 5 * window; i++)
        {
            final long key = random.nextInt(3_000);
            history.reference(NS, key, key ^ 0x5555, window);
            if (0 == i % 97)
            {
                for (long k = 0; k < 6_000; k++)
                {
                    final boolean expected = history.count(NS, k, k ^ 0x5555) >= 2;
                    assertEquals(expected, history.atLeastTwice(NS, k, k ^ 0x5555), "key " + k + " at " + i);
                    twice += expected ? 1 : 0;
                }
            }
        }
        // The comparison saw both answers many times.
        assertTrue(twice > 10_000, "keys read as referenced twice: " + twice);
    }

    @Test
    void keysNoLookupReferencedTwiceAreNotAtLeastTwice()
    {
        final KeyHistory history = new KeyHistory(1 << 12);
        for (long k = 0; k < 100; k++)
        {
            history.reference(NS, k, k, 1 << 20);
        }
        for (long k = 0; k < 100; k++)
        {
            assertFalse(history.atLeastTwice(NS, k, k), "key " + k + " referenced once");
        }
        history.reference(NS, 42, 42, 1 << 20);
        assertTrue(history.atLeastTwice(NS, 42, 42));
    }

    @Test
    void referencingARangeAtOnceCountsAsOneKeyAfterAnother()
    {
        final long window = 700;
        final KeyHistory batched = new KeyHistory(1 << 12, 64);
        final KeyHistory sequential = new KeyHistory(1 << 12, 64);
        final SplittableRandom random = new SplittableRandom(3);
        final long[] hi = new long[100];
        final long[] lo = new long[100];
        for (int request = 0; request < 400; request++)
        {
            // Ranges of 1 to 100 keys (longer than the batch of 64 now and then), repeats within a range, and
            // halvings falling inside some ranges.
            final int n = 1 + random.nextInt(100);
            for (int i = 0; i < n; i++)
            {
                hi[i] = random.nextInt(500);
                lo[i] = hi[i] * 3;
            }
            batched.referenceAll(NS, hi, lo, 0, n, window);
            for (int i = 0; i < n; i++)
            {
                sequential.reference(NS, hi[i], lo[i], window);
            }
            for (long k = 0; k < 500; k++)
            {
                assertEquals(sequential.count(NS, k, k * 3), batched.count(NS, k, k * 3), "key " + k);
                assertEquals(sequential.atLeastTwice(NS, k, k * 3), batched.atLeastTwice(NS, k, k * 3), "key " + k);
            }
        }
    }

    @Test
    void cellsMustBeAPowerOfTwoOfAtLeastALine()
    {
        assertThrows(IllegalArgumentException.class, () -> new KeyHistory(1000));
        assertThrows(IllegalArgumentException.class, () -> new KeyHistory(KeyHistory.LINE_CELLS / 2));
    }
}
