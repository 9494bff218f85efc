package io.kvstash.wire;

/**
 * Request type codes of the protocol, plus the internal SWEEP tick. The numeric values are part of the
 * wire and of the journal format.
 */
public final class RequestType
{
    /** Liveness round trip; touches nothing. */
    public static final int PING = 0;
    /** Record an instance and its layout. */
    public static final int REGISTER = 1;
    /** Abort and release everything of an instance, then forget it. */
    public static final int UNREGISTER = 2;
    /** Count (and optionally pin) the readable prefix of a key range. */
    public static final int LOOKUP = 3;
    /** A scheduler's lookup: the prefix readable for every rank of a world size. */
    public static final int LOOKUP_ALL_RANKS = 4;
    /** Release the pins of a lookup (or retrieve) transfer without touching recency. */
    public static final int RELEASE = 5;
    /** Reserve slots for the absent chunks of a range. */
    public static final int PREPARE_STORE = 6;
    /** Make a store transfer's chunks readable. */
    public static final int COMMIT_STORE = 7;
    /** Free a store transfer's reserved slots. */
    public static final int ABORT_STORE = 8;
    /** Pin every chunk of a range (all or nothing) and return their slots. */
    public static final int PREPARE_RETRIEVE = 9;
    /** Release a retrieve transfer's pins and make its chunks most recently used. */
    public static final int COMMIT_RETRIEVE = 10;
    /** Admin: evict every unpinned readable chunk (force: also abort and unpin everything). */
    public static final int CLEAR = 11;
    /** Counters snapshot. */
    public static final int STATS = 12;
    /** Copy transport: write bytes of a reserved chunk through the message instead of the mapped pool. */
    public static final int WRITE_DATA = 13;
    /** Copy transport: read bytes of a pinned chunk through the message instead of the mapped pool. */
    public static final int READ_DATA = 14;
    /** Internal timer tick: reclaim expired leases; issued by the server itself, never by a client. */
    public static final int SWEEP = 15;
    /**
     * Internal: a client session ended (closed, dead, or detached); unregister every instance it registered.
     * Issued by the server itself, never by a client.
     */
    public static final int REAP = 16;

    /** Number of request types; codes are dense in {@code [0, COUNT)}. */
    public static final int COUNT = 17;

    private static final String[] NAMES =
    {
        "PING", "REGISTER", "UNREGISTER", "LOOKUP", "LOOKUP_ALL_RANKS", "RELEASE", "PREPARE_STORE",
        "COMMIT_STORE", "ABORT_STORE", "PREPARE_RETRIEVE", "COMMIT_RETRIEVE", "CLEAR", "STATS", "WRITE_DATA",
        "READ_DATA", "SWEEP", "REAP"
    };

    private RequestType()
    {
    }

    /**
     * Name of a request type.
     *
     * @param type code.
     * @return its name, or {@code "TYPE_<n>"} for a code outside the table.
     */
    public static String name(final int type)
    {
        return type >= 0 && type < COUNT ? NAMES[type] : "TYPE_" + type;
    }

    /**
     * Whether a code names a request type.
     *
     * @param type code.
     * @return true when {@code 0 <= type < COUNT}.
     */
    public static boolean isValid(final int type)
    {
        return type >= 0 && type < COUNT;
    }
}
