package io.kvstash.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;

/**
 * The Disruptor event: a pre-allocated {@link StoreCommand} plus the routing the publish stage needs and
 * the stage timestamps of the latency recording. Reused for every request that lands in its ring slot; the
 * producer calls {@link #reset()} before filling it.
 * <p>
 * Ownership follows the sequence: the producer until publish, then each stage in turn.
 */
public final class RequestEvent
{
    /**
     * The producer read the clock for this event, and the publish stage picks the requests to time
     * ({@link io.kvstash.pipeline.latency.StrideSampler}; every producer but the server's receiver).
     */
    public static final byte STAMP_PRECISE = 0;
    /**
     * The producer read the clock for this event and chose it as the one request of its type in
     * {@link #sampleWeight} to record.
     */
    public static final byte STAMP_SAMPLED = 1;
    /**
     * The timestamp is a recent reading of the clock shared with other events: good for leases, which run
     * seconds, but not for latency, so the event is never recorded. Only for events the stages do not time
     * ({@link Pipeline#isStageTimed(long)}).
     */
    public static final byte STAMP_COARSE = 2;
    /** The request and its outcome. */
    public final StoreCommand command;
    /** Index of the client to answer (IPC session slot), -1 for requests that expect no answer. */
    public int clientIndex;
    /** Session generation of that client, so an answer never reaches a newer client in the same slot. */
    public long clientSession;
    /** Opaque value of the producer, handed back to the response sink (the IPC layer's response bound). */
    public long producerTag;
    /**
     * Status the decoder failed the request with before any stage (MALFORMED, UNKNOWN_TYPE), or OK. The
     * decoder also calls {@link StoreCommand#fail}; this copy lets the journal replay the rejection.
     */
    public int decodeStatus;
    /** How the producer stamped the command: {@link #STAMP_PRECISE}, {@link #STAMP_SAMPLED}, {@link #STAMP_COARSE}. */
    public byte stamp;
    /** Count to record a {@link #STAMP_SAMPLED} event's latency with: the requests of its type it stands for. */
    public int sampleWeight;
    /** Time the reserve stage started, ns, or 0 when this event's stages are not timed. */
    public long reserveStartNs;
    /** Time the reserve stage ended, ns. */
    public long reserveEndNs;
    /** Time the commit stage started, ns, on its own thread (THREAD_PER_STAGE); its slot check comes first. */
    public long assignStartNs;
    /** Time the commit stage's slot check ended and its data effects started, ns. */
    public long assignEndNs;
    /** Time the commit stage ended, ns. */
    public long commitEndNs;

    /**
     * An event sized for a store configuration.
     *
     * @param context concluded store configuration.
     */
    public RequestEvent(final StoreContext context)
    {
        command = new StoreCommand(context);
    }

    /**
     * Fails the request at decoding: it passes every stage untouched and is answered with the status.
     *
     * @param status  MALFORMED, UNKNOWN_TYPE or INVALID_REQUEST.
     * @param message readable reason, a constant.
     */
    public void rejectAtDecode(final int status, final String message)
    {
        decodeStatus = status;
        command.fail(status, message);
    }

    /**
     * Clears the event for a new request.
     *
     * @return the command to fill.
     */
    public StoreCommand reset()
    {
        clientIndex = -1;
        clientSession = 0;
        decodeStatus = 0;
        producerTag = 0;
        stamp = STAMP_PRECISE;
        sampleWeight = 0;
        reserveStartNs = 0;
        reserveEndNs = 0;
        assignStartNs = 0;
        assignEndNs = 0;
        commitEndNs = 0;
        return command.reset();
    }
}
