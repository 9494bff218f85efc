package io.kvstash.core.book;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The length classes {@code slru-admit} sorts stores into ({@link ChainLearner#lengthClass}): 1 to 3 chunks have
 * their own, then two per octave, the last one open-ended; every kind's tag (kind + 1) fits the short each chunk
 * keeps.
 */
class StoreLengthClassTest
{
    @Test
    void smallStoresHaveTheirOwnClassesThenTwoAnOctave()
    {
        final int[][] expected = {
            { 1, 1 }, { 2, 2 }, { 3, 3 }, { 4, 4 }, { 5, 4 }, { 6, 5 }, { 7, 5 }, { 8, 6 }, { 11, 6 }, { 12, 7 },
            { 15, 7 }, { 16, 8 }, { 23, 8 }, { 24, 9 }, { 31, 9 }, { 32, 10 }, { 47, 10 }, { 48, 11 }, { 64, 12 },
            { 96, 13 }, { 128, 14 }, { 2047, 21 }, { 2048, 22 }, { 3071, 22 }, { 3072, 23 }, { 1 << 20, 23 },
            { Integer.MAX_VALUE, 23 },
        };
        for (final int[] pair : expected)
        {
            assertEquals(pair[1], ChainLearner.lengthClass(pair[0]), "class of " + pair[0] + " chunks");
        }
    }

    @Test
    void classesNeverFallAsStoresGrowAndStayInRange()
    {
        int previous = 0;
        for (int chunks = 1; chunks <= 1 << 14; chunks++)
        {
            final int c = ChainLearner.lengthClass(chunks);
            assertTrue(c >= previous && c <= previous + 1, "class of " + chunks + " chunks: " + c);
            assertTrue(c >= 1 && c < ChainLearner.LENGTH_CLASSES, "class of " + chunks + " chunks: " + c);
            previous = c;
        }
        assertEquals(ChainLearner.LENGTH_CLASSES - 1, previous);
        // The largest kind: a continuation of the longest class at the place farthest from the store's end; its
        // tag (kind + 1) must fit the short each chunk keeps.
        final int places = ChainLearner.END_PLACES;
        final int largestKind = (2 * ChainLearner.LENGTH_CLASSES - 1) * places + places - 1;
        assertTrue(largestKind + 1 <= Short.MAX_VALUE);
    }
}
