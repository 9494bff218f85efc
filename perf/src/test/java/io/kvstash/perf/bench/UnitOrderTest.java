package io.kvstash.perf.bench;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The data command's loop order is balanced: over four repetitions every loop pair runs once in each place and
 * right after each of the other pairs exactly once, so no contender always inherits the same predecessor's caches.
 */
class UnitOrderTest
{
    @Test
    void everyPairRunsOnceInEachPlaceAndOnceAfterEachOther()
    {
        final int[][] order = DataRun.UNIT_ORDER;
        assertEquals(4, order.length);
        final int[][] inPlace = new int[4][4];
        final int[][] after = new int[4][4];
        for (final int[] row : order)
        {
            assertEquals(4, row.length);
            for (int place = 0; place < 4; place++)
            {
                inPlace[row[place]][place]++;
                if (place > 0)
                {
                    after[row[place - 1]][row[place]]++;
                }
            }
        }
        for (int unit = 0; unit < 4; unit++)
        {
            for (int other = 0; other < 4; other++)
            {
                assertEquals(1, inPlace[unit][other], "unit " + unit + " in place " + other);
                assertEquals(unit == other ? 0 : 1, after[unit][other], "unit " + other + " after unit " + unit);
            }
        }
    }
}
