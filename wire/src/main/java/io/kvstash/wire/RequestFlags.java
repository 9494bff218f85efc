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
    /** Every flag a client's request may carry. */
    public static final int CLIENT_MASK = PIN | FORCE | FROM_LOOKUP;

    private RequestFlags()
    {
    }
}
