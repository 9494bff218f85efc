package io.kvstash.pipeline.latency;

import io.kvstash.core.RequestType;

/**
 * Picks one request in {@link #WEIGHT} of each type to time end to end; each is recorded with a count of
 * {@link #WEIGHT}, so the percentiles stay those of the whole population. The clock read and the recorder's
 * two atomics cost about as much as a simple request, so timing every one would halve the throughput.
 * Counting per type, not per sequence, keeps a strict alternation (PREPARE_STORE, COMMIT_STORE, ...) from
 * sampling one type only.
 * <p>
 * Single writer: whoever decides (the publish stage, or a producer that stamps the chosen requests itself).
 */
public final class TypeSampler
{
    /** Requests of a type per timed one, a power of two. */
    public static final int WEIGHT = 8;

    private final long[] counts = new long[RequestType.COUNT];

    /**
     * Counts a request and says whether it is the one of its type to time.
     *
     * @param type request type.
     * @return true every {@link #WEIGHT}-th request of a valid type, false for an invalid type.
     */
    public boolean sample(final int type)
    {
        return RequestType.isValid(type) && 0 == (++counts[type] & (WEIGHT - 1));
    }
}
