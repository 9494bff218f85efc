package io.kvstash.pipeline.latency;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class LoadWeightedSamplerTest
{
    @Test
    void shouldTakeTheLargestPowerOfTwoInTheBatchWithinTheBounds()
    {
        final LoadWeightedSampler sampler = new StrideSampler(1, 64);
        assertEquals(1, sampler.weight());
        sampler.onBatch(1);
        assertEquals(1, sampler.weight());
        sampler.onBatch(13);
        assertEquals(8, sampler.weight());
        sampler.onBatch(256);
        assertEquals(64, sampler.weight());
        sampler.onBatch(0);
        assertEquals(1, sampler.weight());

        final LoadWeightedSampler floor = new TypeSampler(8, 16);
        assertEquals(8, floor.weight());
        floor.onBatch(2);
        assertEquals(8, floor.weight());
        floor.onBatch(1000);
        assertEquals(16, floor.weight());
    }

    @Test
    void shouldRejectWeightsThatAreNotOrderedPowersOfTwo()
    {
        assertThrows(IllegalArgumentException.class, () -> new TypeSampler(0, 8));
        assertThrows(IllegalArgumentException.class, () -> new TypeSampler(3, 8));
        assertThrows(IllegalArgumentException.class, () -> new StrideSampler(16, 8));
        assertThrows(IllegalArgumentException.class, () -> new StrideSampler(8, 12));
        assertThrows(IllegalArgumentException.class, () -> new StrideSampler(8, LoadWeightedSampler.MAX_WEIGHT * 2));
    }
}
