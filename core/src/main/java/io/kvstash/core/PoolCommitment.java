package io.kvstash.core;

/**
 * How much of the pool's data region is committed (its pages allocated), for a pool committed on demand: the store
 * gives a free region to a size class only when the region lies wholly in the committed prefix, so no client is
 * ever handed memory that the file system may not be able to back (on tmpfs such a page raises SIGBUS in whichever
 * process touches it). Without one ({@link StoreContext#poolCommitment()} null) the whole pool is committed.
 * <p>
 * The reserve stage calls these only when a size class needs a free region (once per region given, not per request);
 * the implementation commits regions ahead on a thread of its own and publishes the prefix with a release store.
 */
public interface PoolCommitment
{
    /**
     * Bytes from the start of the data region that are committed; only grows. Any thread (acquire).
     *
     * @return committed bytes, at most the pool size.
     */
    long committedBytes();

    /**
     * A region ending at {@code endBytes} was given to a size class: the implementation keeps its headroom of
     * committed regions above the highest end it was told. Reserve stage thread.
     *
     * @param endBytes end of the region given, from the data region's start.
     */
    void onRegionGiven(long endBytes);

    /**
     * A size class needs the lowest free region, ending at {@code endBytes}, and it is not committed yet (the
     * preparer is behind): commit up to that end now, on the calling thread if need be (the request waits, rather
     * than the store evicting chunks while the pool has room). Reserve stage thread.
     *
     * @param endBytes end of the region wanted, from the data region's start.
     * @return true when it is committed now; false when the file system refused (full): the store then evicts, as
     * in a full pool, or answers NO_SPACE.
     */
    boolean commitTo(long endBytes);
}
