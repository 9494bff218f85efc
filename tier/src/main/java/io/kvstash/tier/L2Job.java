package io.kvstash.tier;

/**
 * Chunk keys of one layout and salt from one notice, written or fetched in order; pooled by the tier so a
 * notice allocates nothing once the pool is warm. Owner: the tier's thread.
 */
final class L2Job
{
    L2Layout layout;
    long salt;
    long ticket;
    long createdNs;
    int count;
    int next;
    long[] hi = new long[16];
    long[] lo = new long[16];

    /**
     * Makes the job empty for {@code count} keys (its arrays grow when they are too short).
     *
     * @param layout the keys' layout, or null for a job with nothing to do.
     * @param salt   cache salt.
     * @param count  keys.
     * @return this.
     */
    L2Job reset(final L2Layout layout, final long salt, final int count)
    {
        if (hi.length < count)
        {
            hi = new long[count];
            lo = new long[count];
        }
        this.layout = layout;
        this.salt = salt;
        this.count = count;
        this.ticket = 0;
        this.createdNs = 0;
        this.next = 0;
        return this;
    }
}
