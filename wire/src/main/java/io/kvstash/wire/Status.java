package io.kvstash.wire;

/**
 * Response status codes. Every request gets exactly one of these; expected outcomes are codes, never
 * exceptions. The numeric values are part of the wire (see docs/PROTOCOL.md) and never change meaning.
 */
public final class Status
{
    /** The request did what it asked. */
    public static final int OK = 0;
    /** PREPARE_RETRIEVE: at least one chunk of the range is not readable; nothing is pinned. */
    public static final int MISS = 1;
    /** PREPARE_STORE: not enough slots even after evicting every unpinned readable chunk; nothing reserved. */
    public static final int NO_SPACE = 2;
    /** The transfer id was never issued, already finished, aborted, expired, of another kind or instance. */
    public static final int UNKNOWN_TRANSFER = 3;
    /** The instance id is not registered. */
    public static final int UNKNOWN_INSTANCE = 4;
    /** REGISTER: the instance, or another instance of the same model, world size and rank, has another layout. */
    public static final int LAYOUT_MISMATCH = 5;
    /** REGISTER: unknown dtype, a zero or negative size, an overflowing shape, or a chunk larger than the pool. */
    public static final int INVALID_LAYOUT = 6;
    /** A field is out of range: chunk count, token range, world size, salt, flags. */
    public static final int INVALID_REQUEST = 7;
    /** The request type is not known. */
    public static final int UNKNOWN_TYPE = 8;
    /** The record is shorter than its declared fields, or a length in it is inconsistent (trailing bytes are ignored). */
    public static final int MALFORMED = 9;
    /** A server limit is reached (pending transfers, instances); retry later. */
    public static final int BUSY = 10;
    /** An unexpected error inside the server; counted and logged, the server keeps serving. */
    public static final int SERVER_ERROR = 11;

    /** Number of status codes; codes are dense in {@code [0, COUNT)}. */
    public static final int COUNT = 12;

    private static final String[] NAMES =
    {
        "OK", "MISS", "NO_SPACE", "UNKNOWN_TRANSFER", "UNKNOWN_INSTANCE", "LAYOUT_MISMATCH", "INVALID_LAYOUT",
        "INVALID_REQUEST", "UNKNOWN_TYPE", "MALFORMED", "BUSY", "SERVER_ERROR"
    };

    private Status()
    {
    }

    /**
     * Name of a status code.
     *
     * @param status code.
     * @return its name, or {@code "STATUS_<n>"} for a code outside the table.
     */
    public static String name(final int status)
    {
        return status >= 0 && status < COUNT ? NAMES[status] : "STATUS_" + status;
    }
}
