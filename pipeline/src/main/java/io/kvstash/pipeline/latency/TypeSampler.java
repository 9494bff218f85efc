package io.kvstash.pipeline.latency;

import io.kvstash.core.RequestType;

/**
 * Picks the requests to time end to end: one in {@code weight} of each type, each recorded with a count of
 * {@code weight}, so the histograms' counts stay those of the whole population. Counting per type, not per
 * sequence, keeps a strict alternation (PREPARE_STORE, COMMIT_STORE, ...) from sampling one type only. The
 * server's receiver picks with it, before it reads the clock for the picked requests only; the publish stage,
 * for requests whose producer read the clock for each, uses the cheaper {@link StrideSampler}.
 * <p>
 * The weight follows the load. Timing a request costs a clock read (about 28 ns on this project's VM) and a
 * recorder's two atomics, as much as a simple request in the pipeline (50-75 ns): timing one in eight cost 7-10 %
 * of a saturated pipeline's throughput. So the caller reports the size of each batch it ran, and the weight
 * becomes the largest power of two in it, between the minimum and the maximum given: about one request of each
 * type timed per batch. A pipeline answering requests one at a time times every one of them (or one in the
 * minimum), a saturated one, whose batches run to hundreds, one in {@link #MAX_WEIGHT}. If timing slows the
 * pipeline down, its batches grow and the weight with them. The weight in force when a request is picked is the
 * count of that request, and the number of its type's requests until the next pick.
 * <p>
 * A workload with a period of its own in one type's requests, every eighth LOOKUP a miss for example, can alias
 * with the weight; sampling is deterministic so that tests and replays see the same counts.
 * <p>
 * Single writer: the producer that decides.
 */
public final class TypeSampler
{
    /** Largest weight of the samplers: one request in 256 timed, about one per batch of a saturated pipeline. */
    public static final int MAX_WEIGHT = 256;

    private final int[] untilNext = new int[RequestType.COUNT];
    private final int minWeight;
    private final int maxWeight;
    private int weight;

    /**
     * A sampler whose weight moves with the load between two powers of two.
     *
     * @param minWeight weight while batches are small, a power of two, at least 1.
     * @param maxWeight weight when saturated, a power of two, from {@code minWeight} to {@link #MAX_WEIGHT}.
     */
    public TypeSampler(final int minWeight, final int maxWeight)
    {
        checkWeights(minWeight, maxWeight);
        this.minWeight = minWeight;
        this.maxWeight = maxWeight;
        this.weight = minWeight;
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
        final int w = weight;
        untilNext[type] = w;
        return w;
    }

    /**
     * Sets the weight from the size of a batch just run.
     *
     * @param events events in the batch.
     */
    public void onBatch(final int events)
    {
        weight = weightFor(events, minWeight, maxWeight);
    }

    /**
     * The weight in force.
     *
     * @return requests of a type per timed one.
     */
    public int weight()
    {
        return weight;
    }

    /**
     * The weight for a batch: the largest power of two in its size, within the bounds.
     *
     * @param events    events in the batch.
     * @param minWeight lower bound, a power of two.
     * @param maxWeight upper bound, a power of two.
     * @return the weight.
     */
    static int weightFor(final int events, final int minWeight, final int maxWeight)
    {
        final int size = Integer.highestOneBit(events);
        return size <= minWeight ? minWeight : Math.min(size, maxWeight);
    }

    /**
     * Checks a sampler's bounds.
     *
     * @param minWeight lower bound.
     * @param maxWeight upper bound.
     * @throws IllegalArgumentException unless both are powers of two with 1 <= min <= max <= {@link #MAX_WEIGHT}.
     */
    static void checkWeights(final int minWeight, final int maxWeight)
    {
        if (minWeight < 1 || Integer.bitCount(minWeight) != 1 || maxWeight < minWeight ||
            Integer.bitCount(maxWeight) != 1 || maxWeight > MAX_WEIGHT)
        {
            throw new IllegalArgumentException("weights must be powers of two with 1 <= min <= max <= " +
                MAX_WEIGHT + ": " + minWeight + ", " + maxWeight);
        }
    }
}
