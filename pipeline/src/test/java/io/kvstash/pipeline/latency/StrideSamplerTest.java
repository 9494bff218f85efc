package io.kvstash.pipeline.latency;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class StrideSamplerTest
{
    @Test
    void shouldPickEveryEventAtAWeightOfOne()
    {
        final StrideSampler sampler = new StrideSampler(1, 256);
        for (int i = 0; i < 100; i++)
        {
            assertEquals(1, sampler.weight());
            assertEquals(1, sampler.stride());
        }
    }

    @Test
    void shouldDrawStridesBetweenHalfAndOneAndAHalfWeightsAveragingTheWeight()
    {
        final StrideSampler sampler = new StrideSampler(1, 256);
        sampler.onBatch(100);
        assertEquals(64, sampler.weight());
        long events = 0;
        int min = Integer.MAX_VALUE;
        int max = 0;
        final int picks = 20_000;
        for (int p = 0; p < picks; p++)
        {
            final int stride = sampler.stride();
            min = Math.min(min, stride);
            max = Math.max(max, stride);
            events += stride;
        }
        assertEquals(32, min);
        assertEquals(96, max);
        final double mean = (double)events / picks;
        assertTrue(Math.abs(mean - 64) < 0.5, "mean stride " + mean);
    }

    @Test
    void shouldCountEachTypeOfAStrictAlternationAsItsShare()
    {
        final StrideSampler sampler = new StrideSampler(1, 256);
        sampler.onBatch(1 << 20);
        assertEquals(256, sampler.weight());
        final long[] counted = new long[2];
        final int events = 4_000_000;
        long next = 0;
        for (int i = 0; i < events; i++)
        {
            if (i >= next)
            {
                counted[i & 1] += sampler.weight();
                next = i + sampler.stride();
            }
        }
        // A fixed stride of 256 would give every count to one type; random strides split them by share.
        for (final long c : counted)
        {
            assertTrue(Math.abs(c - events / 2) < events / 2 * 0.05, "counted " + c + " of " + events / 2);
        }
    }
}
