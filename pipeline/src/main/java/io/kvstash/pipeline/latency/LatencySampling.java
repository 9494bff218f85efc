package io.kvstash.pipeline.latency;

/**
 * The one latency sampling policy of a pipeline and its producers, concluded once from the pipeline's context:
 * whether latency is recorded at all, which events the stages time one by one, and the samplers that pick the
 * requests timed end to end. Every site that decides whether to time something asks it:
 * <ul>
 *   <li>per stage: {@link #isStageTimed(long)}, one event in {@code stageSampleMask + 1} by sequence, asked by
 *   the reserve stage (which stamps the stage boundaries) and by the producer (which must then read the clock
 *   for that event's timestamp);</li>
 *   <li>end to end, by a producer that reads the clock for the picked requests only:
 *   {@link #newProducerSampler()}, one of each type in {@link #PRODUCER_MIN_WEIGHT} or fewer under load;</li>
 *   <li>end to end, by the publish stage for the requests whose producer read the clock for each:
 *   {@link #newPublishSampler()}, one in {@link #PUBLISH_MIN_WEIGHT} or fewer under load.</li>
 * </ul>
 * Each picked request is recorded with a count of the requests it stands for ({@link LoadWeightedSampler}).
 * <p>
 * Threading: the samplers it makes are each owned by the one thread that samples with them. Whether recording is
 * enabled is a plain field: {@link #enabled(boolean)} may be called only where every reader runs on the calling
 * thread between two duty cycles (a SHARED pipeline), otherwise it stays as concluded.
 */
public final class LatencySampling
{
    /**
     * Least weight of the publish stage's sampler: while batches are small it times every request whose producer
     * read the clock for it, so a request with one in flight is always timed.
     */
    public static final int PUBLISH_MIN_WEIGHT = 1;

    /**
     * Least weight of a producer's sampler: one request of each type in this many is timed end to end while the
     * producer's duty cycles read few requests, one in up to {@link LoadWeightedSampler#MAX_WEIGHT} under load.
     * Timing every request would put a clock read on the path of a request with one in flight, and the
     * percentiles of one in eight are those of all.
     */
    public static final int PRODUCER_MIN_WEIGHT = 8;

    private final int stageSampleMask;
    private boolean enabled;

    /**
     * A policy.
     *
     * @param enabled         whether latency is recorded.
     * @param stageSampleMask {@code 2^k - 1}: an event is timed per stage when {@code (sequence & mask) == 0}.
     * @throws IllegalArgumentException when the mask is not {@code 2^k - 1}.
     */
    public LatencySampling(final boolean enabled, final int stageSampleMask)
    {
        if (stageSampleMask < 0 || Integer.bitCount(stageSampleMask + 1) != 1)
        {
            throw new IllegalArgumentException("stage sample mask must be 2^k - 1: " + stageSampleMask);
        }
        this.enabled = enabled;
        this.stageSampleMask = stageSampleMask;
    }

    /**
     * Whether latency is recorded.
     *
     * @return true when recording.
     */
    public boolean isEnabled()
    {
        return enabled;
    }

    /**
     * Switches recording; only between duty cycles, from the one thread that runs every reader (see the class
     * comment).
     *
     * @param enabled whether to record from the next duty cycle.
     */
    public void enabled(final boolean enabled)
    {
        this.enabled = enabled;
    }

    /**
     * The stage timing sample mask.
     *
     * @return {@code 2^k - 1}.
     */
    public int stageSampleMask()
    {
        return stageSampleMask;
    }

    /**
     * Whether the stages time the event of a sequence: recording is enabled and the sequence is a multiple of
     * {@code stageSampleMask + 1}. Its producer must then stamp it with a clock reading of its own.
     *
     * @param sequence the event's sequence.
     * @return true when the stages time it.
     */
    public boolean isStageTimed(final long sequence)
    {
        return enabled && (sequence & stageSampleMask) == 0;
    }

    /**
     * A sampler for a producer that reads the clock for the requests it picks only: per type, weight from
     * {@link #PRODUCER_MIN_WEIGHT} to {@link LoadWeightedSampler#MAX_WEIGHT}. Owned by that producer's thread,
     * which tells it each batch's size ({@link LoadWeightedSampler#onBatch(int)}).
     *
     * @return a new sampler.
     */
    public TypeSampler newProducerSampler()
    {
        return new TypeSampler(PRODUCER_MIN_WEIGHT, LoadWeightedSampler.MAX_WEIGHT);
    }

    /**
     * The publish stage's sampler, for the requests whose producer read the clock for each: by stride, weight
     * from {@link #PUBLISH_MIN_WEIGHT} to {@link LoadWeightedSampler#MAX_WEIGHT}. Owned by the publish stage.
     *
     * @return a new sampler.
     */
    public StrideSampler newPublishSampler()
    {
        return new StrideSampler(PUBLISH_MIN_WEIGHT, LoadWeightedSampler.MAX_WEIGHT);
    }
}
