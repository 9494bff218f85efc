package io.kvstash.pipeline.latency;

import io.kvstash.wire.RequestType;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TypeSamplerTest
{
    @Test
    void shouldPickTheFirstOfEachTypeThenOneInTheWeightWithItsWeight()
    {
        final TypeSampler sampler = new TypeSampler(8, 64);
        final long[] counted = new long[RequestType.COUNT];
        final int[] picked = new int[RequestType.COUNT];
        for (int i = 0; i < 800; i++)
        {
            // A strict alternation: each type still gets its own one in eight.
            final int type = 0 == (i & 1) ? RequestType.PREPARE_STORE : RequestType.COMMIT_STORE;
            final int count = sampler.sample(type);
            if (count > 0)
            {
                assertEquals(8, count);
                assertEquals(0, (i >> 1) % 8, "request " + i + " picked");
                counted[type] += count;
                picked[type]++;
            }
        }
        assertEquals(400, counted[RequestType.PREPARE_STORE]);
        assertEquals(400, counted[RequestType.COMMIT_STORE]);
        assertEquals(50, picked[RequestType.PREPARE_STORE]);
        assertEquals(0, sampler.sample(-1));
        assertEquals(0, sampler.sample(RequestType.COUNT));
    }

    @Test
    void shouldCountEveryRequestOnceWhileTheWeightMoves()
    {
        final TypeSampler sampler = new TypeSampler(1, 64);
        long counted = 0;
        long picked = 0;
        int requests = 0;
        // Batches of 1, 3, 9, 27, 81, 243 and back down, over and over.
        final int[] batches = { 1, 3, 9, 27, 81, 243, 81, 27, 9, 3 };
        for (int round = 0; round < 20; round++)
        {
            for (final int batch : batches)
            {
                for (int i = 0; i < batch; i++)
                {
                    final int count = sampler.sample(RequestType.LOOKUP);
                    counted += count;
                    picked += count > 0 ? 1 : 0;
                    requests++;
                }
                sampler.onBatch(batch);
            }
        }
        // Each pick stands for itself and the requests until the next: the counts run ahead of the requests by
        // less than the last pick's weight.
        assertTrue(counted >= requests && counted < requests + 64, counted + " counted for " + requests);
        assertTrue(picked < requests / 8, picked + " picked of " + requests);
    }
}
