package io.kvstash.pipeline.latency;

/**
 * The weight both latency samplers share: how many requests one timed request stands for, set from the size of
 * the batch just run. Timing a request costs a clock read and a recorder's two atomics, about as much as a simple
 * request in the pipeline, so a fixed rate of timing (one in eight, say) whatever the load costs a saturated
 * pipeline a visible share of its throughput. So the weight is the largest power of two in the last batch's size,
 * between the minimum and the maximum given: about one request timed per batch. A pipeline answering requests one
 * at a time times every one of them (or one in the minimum), a saturated one, whose batches run to hundreds, one
 * in {@link #MAX_WEIGHT}. If timing slows the pipeline down, its batches grow and the weight with them.
 * <p>
 * Single writer: the thread that samples.
 */
public abstract class LoadWeightedSampler
{
    /** Largest weight: one request in 256 timed, about one per batch of a saturated pipeline. */
    public static final int MAX_WEIGHT = 256;

    private final int minWeight;
    private final int maxWeight;
    private int weight;

    /**
     * A weight that moves with the load between two powers of two.
     *
     * @param minWeight weight while batches are small, a power of two, at least 1.
     * @param maxWeight weight when saturated, a power of two, from {@code minWeight} to {@link #MAX_WEIGHT}.
     * @throws IllegalArgumentException unless both are powers of two, {@code 1 <= min <= max <= MAX_WEIGHT}.
     */
    protected LoadWeightedSampler(final int minWeight, final int maxWeight)
    {
        if (minWeight < 1 || Integer.bitCount(minWeight) != 1 || maxWeight < minWeight ||
            Integer.bitCount(maxWeight) != 1 || maxWeight > MAX_WEIGHT)
        {
            throw new IllegalArgumentException("weights must be powers of two with 1 <= min <= max <= " +
                MAX_WEIGHT + ": " + minWeight + ", " + maxWeight);
        }
        this.minWeight = minWeight;
        this.maxWeight = maxWeight;
        this.weight = minWeight;
    }

    /**
     * Sets the weight from the size of a batch just run.
     *
     * @param events events in the batch.
     */
    public final void onBatch(final int events)
    {
        final int size = Integer.highestOneBit(events);
        weight = size <= minWeight ? minWeight : Math.min(size, maxWeight);
    }

    /**
     * The weight in force: the count a request picked now is recorded with.
     *
     * @return requests per timed one.
     */
    public final int weight()
    {
        return weight;
    }
}
