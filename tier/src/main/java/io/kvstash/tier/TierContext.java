package io.kvstash.tier;

import io.kvstash.server.ServerContext;
import io.lettuce.core.RedisURI;

import java.util.List;

/**
 * Configuration of a second tier ({@link L2Tier}), validated once by {@link #conclude()}: the cluster's seeds, the
 * bound of every cluster call, and whether committed chunks are written through. The tier's settings live here, not
 * in the server's context: the server knows the tier only as the {@link L2Tap} that {@link #attach(ServerContext)}
 * sets as its response observer.
 */
public final class TierContext
{
    /** Default bound of every call the tier makes to its cluster, in milliseconds. */
    public static final long TIMEOUT_MS_DEFAULT = 100;
    /** Largest bound of a cluster call, in milliseconds. */
    public static final long TIMEOUT_MS_MAX = 60_000;

    private String seeds;
    private long timeoutMs = TIMEOUT_MS_DEFAULT;
    private boolean writeThrough = true;
    private L2Tap tap;
    private boolean concluded;

    /**
     * Validates the configuration and makes the tap the server will leave its notices in.
     *
     * @return this.
     * @throws IllegalArgumentException when a seed is not {@code host:port} or the timeout is out of range.
     */
    public TierContext conclude()
    {
        if (concluded)
        {
            return this;
        }
        if (null == seeds)
        {
            throw new IllegalArgumentException("the second tier needs its cluster's seeds (redis://host:port,...)");
        }
        L2Seeds.parse(seeds);
        if (timeoutMs <= 0 || timeoutMs > TIMEOUT_MS_MAX)
        {
            throw new IllegalArgumentException("l2 timeout " + timeoutMs + "ms is out of range: give 1 to " +
                TIMEOUT_MS_MAX);
        }
        tap = new L2Tap(L2Tap.CAPACITY_DEFAULT, L2Tier.FETCH_AHEAD_CHUNKS, writeThrough);
        concluded = true;
        return this;
    }

    /**
     * Concludes this context and sets its tap as the server's response observer, before the server's launch; then
     * {@link L2Tier#launch(io.kvstash.server.KvStashServer, TierContext)} starts the tier once the server runs.
     *
     * @param serverContext the context the server will be launched with.
     * @return this.
     * @throws IllegalArgumentException when the server runs on an agent invoker: the tier is a client of its
     *                                  server, which must answer on its own threads.
     */
    public TierContext attach(final ServerContext serverContext)
    {
        if (serverContext.useAgentInvoker())
        {
            throw new IllegalArgumentException("the second tier (--l2) needs the server's own threads, " +
                "not an agent invoker: it is a client of its own server");
        }
        conclude();
        serverContext.responseObserver(tap);
        return this;
    }

    /**
     * @return the cluster's seeds, {@code redis://host:port[,host:port...]}.
     */
    public String seeds()
    {
        return seeds;
    }

    /**
     * @param seeds the cluster's seeds, {@code redis://host:port[,host:port...]}.
     * @return this.
     */
    public TierContext seeds(final String seeds)
    {
        this.seeds = seeds;
        return this;
    }

    /**
     * @return the seeds parsed, one URI per seed.
     */
    List<RedisURI> seedUris()
    {
        return L2Seeds.parse(seeds);
    }

    /**
     * @return the bound of every cluster call, milliseconds.
     */
    public long timeoutMs()
    {
        return timeoutMs;
    }

    /**
     * @param timeoutMs the bound of every cluster call, milliseconds, 1 to {@link #TIMEOUT_MS_MAX}.
     * @return this.
     */
    public TierContext timeoutMs(final long timeoutMs)
    {
        this.timeoutMs = timeoutMs;
        return this;
    }

    /**
     * @return true when committed chunks are written through to the cluster, false for read-through only.
     */
    public boolean writeThrough()
    {
        return writeThrough;
    }

    /**
     * @param writeThrough true to write committed chunks through to the cluster, false for read-through only.
     * @return this.
     */
    public TierContext writeThrough(final boolean writeThrough)
    {
        this.writeThrough = writeThrough;
        return this;
    }

    /**
     * The publish stage's notices, made by {@link #conclude()}; null before.
     *
     * @return the tap.
     */
    public L2Tap tap()
    {
        return tap;
    }

    /** {@inheritDoc} */
    @Override
    public String toString()
    {
        return "TierContext{seeds=" + seeds + ", timeoutMs=" + timeoutMs + ", writeThrough=" + writeThrough + '}';
    }
}
