package io.kvstash.pipeline.latency;

import io.kvstash.wire.RequestType;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LatencySamplingTest
{
    @Test
    void shouldTimeOneEventInTheMaskPlusOneWhenEnabled()
    {
        final LatencySampling sampling = new LatencySampling(true, 3);
        assertTrue(sampling.isStageTimed(0));
        assertFalse(sampling.isStageTimed(1));
        assertFalse(sampling.isStageTimed(3));
        assertTrue(sampling.isStageTimed(4));
        sampling.enabled(false);
        assertFalse(sampling.isEnabled());
        assertFalse(sampling.isStageTimed(4));
    }

    @Test
    void shouldTimeEveryEventWithMaskZero()
    {
        final LatencySampling sampling = new LatencySampling(true, 0);
        for (long sequence = 0; sequence < 16; sequence++)
        {
            assertTrue(sampling.isStageTimed(sequence));
        }
    }

    @Test
    void shouldRefuseAMaskThatIsNotAPowerOfTwoLessOne()
    {
        assertThrows(IllegalArgumentException.class, () -> new LatencySampling(true, 5));
        assertThrows(IllegalArgumentException.class, () -> new LatencySampling(true, -1));
    }

    @Test
    void shouldMakeSamplersWithThePolicyWeights()
    {
        final LatencySampling sampling = new LatencySampling(true, 4095);
        final TypeSampler producer = sampling.newProducerSampler();
        assertEquals(LatencySampling.PRODUCER_MIN_WEIGHT, producer.weight());
        assertEquals(LatencySampling.PRODUCER_MIN_WEIGHT, producer.sample(RequestType.LOOKUP));
        producer.onBatch(1 << 20);
        assertEquals(LoadWeightedSampler.MAX_WEIGHT, producer.weight());

        final StrideSampler publish = sampling.newPublishSampler();
        assertEquals(LatencySampling.PUBLISH_MIN_WEIGHT, publish.weight());
        assertEquals(1, publish.stride());
        publish.onBatch(1 << 20);
        assertEquals(LoadWeightedSampler.MAX_WEIGHT, publish.weight());
    }
}
