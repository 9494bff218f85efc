package io.kvstash.server;

import java.util.function.Consumer;

/**
 * How a {@link KvStashServer} starts, held by its {@link ServerContext}: whether and when the pool's pages are
 * prepared, where the server says what it does during the start, and a request, from any thread, to stop a start in
 * progress.
 */
public final class StartupContext
{
    /** Committed bytes an on-demand pool keeps ahead of the highest region in use: 64 MiB, four regions. */
    public static final long ON_DEMAND_HEADROOM_BYTES_DEFAULT = 64L << 20;

    private boolean pretouch = true;
    private boolean prepareInBackground;
    private boolean poolOnDemand;
    private long onDemandHeadroomBytes = ON_DEMAND_HEADROOM_BYTES_DEFAULT;
    private Consumer<String> startupLog;
    private volatile boolean startAborted;

    /**
     * Start-up settings with their defaults: the pool prepared before ready, no start-up log.
     */
    public StartupContext()
    {
    }

    /**
     * @return true when the pool is pre-touched at start.
     */
    public boolean pretouch()
    {
        return pretouch;
    }

    /**
     * Sets whether every pool page is touched at start, so no page fault lands on a request and a full
     * tmpfs fails the start instead of a request.
     *
     * @param pretouch true to pre-touch.
     * @return this.
     */
    public StartupContext pretouch(final boolean pretouch)
    {
        this.pretouch = pretouch;
        return this;
    }

    /**
     * Whether the pool's pages are prepared by a background thread after the server is ready, instead of before.
     *
     * @return true when in the background.
     */
    public boolean prepareInBackground()
    {
        return prepareInBackground;
    }

    /**
     * Sets where the pool's pages are prepared when {@link #pretouch()} is on. Before ready (false, the default), the
     * start takes about a second per GiB on a small VM and a full file system fails it. In the background (true),
     * the server is ready in about the same time for any pool size; a thread of its own then touches every page
     * (an atomic add of zero, safe beside clients writing), and the pool's size was checked against the file
     * system's free space at the start. Clients map and touch their own view when they connect either way.
     *
     * @param prepareInBackground true to prepare after ready.
     * @return this.
     */
    public StartupContext prepareInBackground(final boolean prepareInBackground)
    {
        this.prepareInBackground = prepareInBackground;
        return this;
    }

    /**
     * Whether the pool's memory is committed as the store grows instead of whole at the start.
     *
     * @return true when on demand.
     */
    public boolean poolOnDemand()
    {
        return poolOnDemand;
    }

    /**
     * Sets whether the pool's memory is committed on demand ({@code serve --prepare-pool on-demand}); it overrides
     * {@link #pretouch()} and {@link #prepareInBackground()}. The pool file stays sparse past a committed prefix: the
     * headroom ({@link #onDemandHeadroomBytes()}) is committed before ready, then a thread of the server's commits
     * one region at a time (zeros written through the file, which a full file system refuses with an error instead
     * of a SIGBUS, then every page touched), keeping the headroom above the highest region in use. The store gives a
     * size class only committed regions; one it cannot have yet makes the store evict, as in a full pool. Clients
     * are told (the Features bit {@code FEATURE_POOL_ON_DEMAND}) and touch only the committed prefix.
     *
     * @param poolOnDemand true to commit on demand.
     * @return this.
     */
    public StartupContext poolOnDemand(final boolean poolOnDemand)
    {
        this.poolOnDemand = poolOnDemand;
        return this;
    }

    /**
     * Committed bytes an on-demand pool keeps ahead of the highest region in use.
     *
     * @return bytes.
     */
    public long onDemandHeadroomBytes()
    {
        return onDemandHeadroomBytes;
    }

    /**
     * Sets the committed bytes an on-demand pool keeps ahead of the highest region in use: more absorbs a faster
     * burst of stores before one finds its next region not committed yet; the memory held at start is this much.
     *
     * @param onDemandHeadroomBytes bytes, at least one.
     * @return this.
     */
    public StartupContext onDemandHeadroomBytes(final long onDemandHeadroomBytes)
    {
        if (onDemandHeadroomBytes < 1)
        {
            throw new IllegalArgumentException("on-demand headroom must be positive: " + onDemandHeadroomBytes);
        }
        this.onDemandHeadroomBytes = onDemandHeadroomBytes;
        return this;
    }

    /**
     * Where the server says, one line each, what it does during start-up that an operator should know of: a dead
     * server's files reclaimed, the pool being prepared (after every check that could refuse the start).
     *
     * @return the log, or null for none.
     */
    public Consumer<String> startupLog()
    {
        return startupLog;
    }

    /**
     * Sets the start-up log.
     *
     * @param startupLog called on the launching thread with one line at a time; null for none.
     * @return this.
     */
    public StartupContext startupLog(final Consumer<String> startupLog)
    {
        this.startupLog = startupLog;
        return this;
    }

    /**
     * Asks a start in progress to stop: the launch fails soon (the pool's preparation checks between blocks)
     * and removes every file it made. Safe from any thread, e.g. a shutdown hook; no effect after the launch.
     */
    public void abortStart()
    {
        startAborted = true;
    }

    /**
     * @return true when {@link #abortStart()} was called: the start is to stop.
     */
    public boolean isStartAborted()
    {
        return startAborted;
    }
}
