package io.kvstash.pipeline.latency;

import io.kvstash.wire.RequestType;

/**
 * Picks the requests to time end to end: one in {@link #weight()} of each type, each recorded with a count of the
 * weight, so the histograms' counts stay those of the whole population. Counting per type, not per sequence,
 * keeps a strict alternation (PREPARE_STORE, COMMIT_STORE, ...) from sampling one type only. The server's receiver
 * picks with it, before it reads the clock for the picked requests only; the publish stage, for requests whose
 * producer read the clock for each, uses the cheaper {@link StrideSampler}. The weight follows the load
 * ({@link LoadWeightedSampler}); the weight in force when a request is picked is the count of that request, and
 * the number of its type's requests until the next pick.
 * <p>
 * A workload with a period of its own in one type's requests, every eighth LOOKUP a miss for example, can alias
 * with the weight; sampling is deterministic so that tests and replays see the same counts.
 * <p>
 * Single writer: the producer that decides.
 */
public final class TypeSampler extends LoadWeightedSampler
{
    private final int[] untilNext = new int[RequestType.COUNT];

    /**
     * A sampler whose weight moves with the load between two powers of two.
     *
     * @param minWeight weight while batches are small, a power of two, at least 1.
     * @param maxWeight weight when saturated, a power of two, from {@code minWeight} to {@link #MAX_WEIGHT}.
     */
    public TypeSampler(final int minWeight, final int maxWeight)
    {
        super(minWeight, maxWeight);
    }

    /**
     * Counts a request and says whether it is the one of its type to time: the first of each type is, then
     * one every weight.
     *
     * @param type request type.
     * @return the count to record the request's latency with, or 0 when it is not timed or its type is invalid.
     */
    public int sample(final int type)
    {
        if (!RequestType.isValid(type) || --untilNext[type] > 0)
        {
            return 0;
        }
        final int w = weight();
        untilNext[type] = w;
        return w;
    }
}
