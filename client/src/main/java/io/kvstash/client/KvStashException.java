package io.kvstash.client;

/**
 * A connection-level failure of a kvstash client: the server is gone, restarted, refused the client or did
 * not answer in time. Expected request outcomes are status codes, never this exception.
 */
public class KvStashException extends RuntimeException
{
    private static final long serialVersionUID = 1L;

    /** Why the connection failed. */
    public enum Reason
    {
        /** No server runs on the directory (or it shut down). */
        SERVER_GONE,
        /** The server on the directory is a newer incarnation than the one this client connected to. */
        SERVER_RESTARTED,
        /** The server refused the client file. */
        REJECTED,
        /** The server detached this client (closed or corrupt ring). */
        DETACHED,
        /** No response within the client's timeout while the server looked alive. */
        TIMEOUT,
        /** The server's files could not be opened or are not understood. */
        BAD_FILES
    }

    private final Reason reason;

    /**
     * An exception with a reason.
     *
     * @param reason  why.
     * @param message readable detail.
     */
    public KvStashException(final Reason reason, final String message)
    {
        super(reason + ": " + message);
        this.reason = reason;
    }

    /**
     * An exception with a reason and a cause.
     *
     * @param reason  why.
     * @param message readable detail.
     * @param cause   underlying failure.
     */
    public KvStashException(final Reason reason, final String message, final Throwable cause)
    {
        super(reason + ": " + message, cause);
        this.reason = reason;
    }

    /**
     * Why the connection failed.
     *
     * @return reason.
     */
    public Reason reason()
    {
        return reason;
    }
}
