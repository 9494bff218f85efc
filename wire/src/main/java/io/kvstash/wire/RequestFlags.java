package io.kvstash.wire;

/**
 * Bits of a request's flags word. The word is part of every request record; a request carrying a bit
 * outside {@link #CLIENT_MASK} is refused with {@link Status#INVALID_REQUEST}.
 */
public final class RequestFlags
{
    /** LOOKUP: pin the readable prefix under a lease. */
    public static final int PIN = 1;
    /** CLEAR: also abort reservations and drop pins. */
    public static final int FORCE = 2;
    /** PREPARE_RETRIEVE: take over the pins of the lookup transfer the request names. */
    public static final int FROM_LOOKUP = 4;
    /**
     * Server-internal, never accepted from a client: the sweep of a session whose process died, so the
     * store counts it once as a dead client.
     */
    public static final int REAPED = 8;
    /**
     * LOOKUP only: the worker will wait for the second tier's read-through this LOOKUP starts. A server that runs
     * a tier answers it with the read-through's ticket and the highest ticket completed
     * ({@link io.kvstash.wire.codec.ResponseFlyweight#LOOKUP_TIER_EXTRA_LENGTH}).
     */
    public static final int L2_WAIT = 16;
    /**
     * LOOKUP only: a LOOKUP asked again while waiting for a read-through; it starts none. Answered like
     * {@link #L2_WAIT}, with ticket 0.
     */
    public static final int L2_POLL = 32;
    /** The flags that only a LOOKUP may carry: on any other type, or both at once, they are refused. */
    public static final int LOOKUP_ONLY = L2_WAIT | L2_POLL;
    /** Every flag a client's request may carry. */
    public static final int CLIENT_MASK = PIN | FORCE | FROM_LOOKUP | L2_WAIT | L2_POLL;

    private RequestFlags()
    {
    }
}
