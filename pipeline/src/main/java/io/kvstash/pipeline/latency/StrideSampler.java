package io.kvstash.pipeline.latency;

/**
 * Draws the strides between the events to pick, about one in {@code weight} whatever its type, at random strides
 * averaging the weight; each picked event is recorded with a count of the weight. The publish stage's sampler for
 * the requests whose producer leaves the choice to it: the stage keeps the sequence of its next pick, so an event
 * not picked costs one comparison with it, less than {@link TypeSampler}'s per-type count, which matters at tens of
 * millions of requests a second, where every nanosecond is a share of the throughput. The random strides keep a period in the stream (a strict
 * alternation of two types, say) from aliasing with the weight: in a steady stream every event is picked with
 * probability one in the weight, so each type's counts are its own in expectation, not exactly as with
 * {@link TypeSampler}. The generator has a fixed seed, so a replay picks the same events.
 * <p>
 * The weight follows the load ({@link LoadWeightedSampler}). A new weight takes effect from the next pick.
 * <p>
 * Single writer: the publish stage.
 */
public final class StrideSampler extends LoadWeightedSampler
{
    private int seed = 0x2545F491;

    /**
     * A sampler whose weight moves with the load between two powers of two.
     *
     * @param minWeight weight while batches are small, a power of two, at least 1.
     * @param maxWeight weight when saturated, a power of two, from {@code minWeight} to
     *                  {@link #MAX_WEIGHT}.
     */
    public StrideSampler(final int minWeight, final int maxWeight)
    {
        super(minWeight, maxWeight);
    }

    /**
     * Draws the stride to the next pick: uniform over {@code [weight / 2, 3 * weight / 2]}, with a mean of the
     * weight (one when the weight is one). The event picked now is recorded with a count of {@link #weight()}.
     *
     * @return events from this pick to the next.
     */
    public int stride()
    {
        final int w = weight();
        int x = seed;
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        seed = x;
        return 1 == w ? 1 : (w >> 1) + (x & (w - 1)) + (x >>> 31);
    }
}
