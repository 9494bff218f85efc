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
    /**
     * The request does not count as a use. On a COMMIT_RETRIEVE the chunks keep their place in the eviction order
     * and the policy's read statistics, as if they had not been read: for a reader that copies chunks elsewhere
     * (the server's second tier writing them through) rather than a worker that needs them. On a LOOKUP or
     * LOOKUP_ALL_RANKS the answer is the same, but its keys are not counted as referenced in the eviction policy's
     * history: for a caller asking again about a request it asked about before (an engine's scheduler asks at
     * each step while a request waits).
     */
    public static final int QUIET = 64;
    /**
     * PREPARE_RETRIEVE by keys or tokens only: load what is there. Instead of all or nothing, the readable leading
     * chunks of the range (chunk 0 up to, not including, the first chunk that is absent or not readable) are pinned
     * and answered OK with one slot per chunk of that prefix (range indices 0..k-1); a range whose chunk 0 is not
     * readable is a MISS, exactly as without the flag. Refused on any other type and with {@link #FROM_LOOKUP}.
     */
    public static final int PREFIX = 128;
    /**
     * COMMIT_RETRIEVE and RELEASE only: answer nothing. The server does with the request exactly what it does
     * without the flag (releases the pins, counts, moves the chunks in the eviction order) but writes no response;
     * a failure (UNKNOWN_TRANSFER, UNKNOWN_INSTANCE, ...) is counted in
     * {@link io.kvstash.wire.file.CountersDescriptor#NO_REPLY_FAILURES}, since no one hears it. For a reader that
     * has copied its chunks out and checked their slot words, so that its retrieve waits for one answer (the
     * PREPARE_RETRIEVE's) instead of two. From wire version 3.1 on ({@link WireVersion#NO_REPLY_MINOR}): an older
     * server refuses it as an unknown flag, and answers that.
     */
    public static final int NO_REPLY = 256;
    /** The flags that only a LOOKUP may carry: on any other type, or both at once, they are refused. */
    public static final int LOOKUP_ONLY = L2_WAIT | L2_POLL;
    /** Every flag a client's request may carry. */
    public static final int CLIENT_MASK = PIN | FORCE | FROM_LOOKUP | L2_WAIT | L2_POLL | QUIET | PREFIX |
        NO_REPLY;

    private RequestFlags()
    {
    }

    /**
     * Why a request's known flags do not fit its type: L2_WAIT or L2_POLL on anything but a LOOKUP, or both at
     * once; QUIET on anything but a COMMIT_RETRIEVE, LOOKUP or LOOKUP_ALL_RANKS; PREFIX on anything but a
     * PREPARE_RETRIEVE, or together with FROM_LOOKUP; NO_REPLY on anything but a COMMIT_RETRIEVE or RELEASE. (Other
     * known flags on a type that does not use them are
     * ignored.)
     *
     * @param type  the request type.
     * @param flags the request's flags.
     * @return the reason, or null when they fit.
     */
    public static String misplaced(final int type, final int flags)
    {
        final int lookupOnly = flags & LOOKUP_ONLY;
        if (0 != lookupOnly)
        {
            if (RequestType.LOOKUP != type)
            {
                return "L2_WAIT and L2_POLL are LOOKUP flags";
            }
            if (LOOKUP_ONLY == lookupOnly)
            {
                return "L2_WAIT and L2_POLL together";
            }
        }
        if ((flags & QUIET) != 0 && RequestType.COMMIT_RETRIEVE != type && RequestType.LOOKUP != type &&
            RequestType.LOOKUP_ALL_RANKS != type)
        {
            return "QUIET is a COMMIT_RETRIEVE, LOOKUP and LOOKUP_ALL_RANKS flag";
        }
        if ((flags & PREFIX) != 0)
        {
            if (RequestType.PREPARE_RETRIEVE != type)
            {
                return "PREFIX is a PREPARE_RETRIEVE flag";
            }
            if ((flags & FROM_LOOKUP) != 0)
            {
                return "PREFIX and FROM_LOOKUP together";
            }
        }
        if ((flags & NO_REPLY) != 0 && RequestType.COMMIT_RETRIEVE != type && RequestType.RELEASE != type)
        {
            return "NO_REPLY is a COMMIT_RETRIEVE and RELEASE flag";
        }
        return null;
    }

    /**
     * Whether a request is answered: false only for a COMMIT_RETRIEVE or RELEASE with {@link #NO_REPLY}. A request
     * with the flag on another type is refused, and the refusal is answered.
     *
     * @param type  the request type.
     * @param flags the request's flags.
     * @return true when the server writes a response for it.
     */
    public static boolean isAnswered(final int type, final int flags)
    {
        return (flags & NO_REPLY) == 0 || (RequestType.COMMIT_RETRIEVE != type && RequestType.RELEASE != type);
    }
}
