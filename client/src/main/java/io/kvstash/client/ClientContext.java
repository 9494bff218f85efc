package io.kvstash.client;

import io.kvstash.wire.file.PoolPages;
import io.kvstash.wire.file.SecureDirectory;
import org.agrona.concurrent.IdleStrategy;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Configuration of a {@link KvStashClient}.
 */
public final class ClientContext
{
    /** Default time to wait for a response or for the server to attach the client. */
    public static final long TIMEOUT_NS_DEFAULT = TimeUnit.SECONDS.toNanos(10);
    /** Default interval of server liveness checks while waiting. */
    public static final long LIVENESS_CHECK_NS_DEFAULT = TimeUnit.MILLISECONDS.toNanos(100);

    private Path directory;
    private long timeoutNs = TIMEOUT_NS_DEFAULT;
    private long livenessCheckNs = LIVENESS_CHECK_NS_DEFAULT;
    private IdleStrategy idleStrategy;
    private boolean copyTransport;
    private boolean pretouchPool = true;
    private int pretouchThreads = Math.min(Runtime.getRuntime().availableProcessors(), PoolPages.MAX_THREADS);

    /**
     * Completes defaults.
     *
     * @return this.
     */
    public ClientContext conclude()
    {
        if (null == directory)
        {
            directory = SecureDirectory.defaultDirectory();
        }
        if (null == idleStrategy)
        {
            idleStrategy = new InFlightIdleStrategy();
        }
        if (timeoutNs <= 0 || livenessCheckNs <= 0)
        {
            throw new IllegalArgumentException("timeouts must be positive");
        }
        return this;
    }

    /**
     * Server directory.
     *
     * @return path.
     */
    public Path directory()
    {
        return directory;
    }

    /**
     * Sets the server directory.
     *
     * @param directory path.
     * @return this.
     */
    public ClientContext directory(final Path directory)
    {
        this.directory = directory;
        return this;
    }

    /**
     * Response timeout.
     *
     * @return ns.
     */
    public long timeoutNs()
    {
        return timeoutNs;
    }

    /**
     * Sets the response timeout.
     *
     * @param timeoutNs ns.
     * @return this.
     */
    public ClientContext timeoutNs(final long timeoutNs)
    {
        this.timeoutNs = timeoutNs;
        return this;
    }

    /**
     * Interval of server liveness checks while waiting.
     *
     * @return ns.
     */
    public long livenessCheckNs()
    {
        return livenessCheckNs;
    }

    /**
     * Sets the interval of server liveness checks while waiting.
     *
     * @param livenessCheckNs ns.
     * @return this.
     */
    public ClientContext livenessCheckNs(final long livenessCheckNs)
    {
        this.livenessCheckNs = livenessCheckNs;
        return this;
    }

    /**
     * Idle strategy while waiting for a response: by default an {@link InFlightIdleStrategy} (spin, yield for a
     * few milliseconds, then park), since a worker that waits has a request in flight.
     *
     * @return strategy.
     */
    public IdleStrategy idleStrategy()
    {
        return idleStrategy;
    }

    /**
     * Sets the idle strategy while waiting (busy-spin for latency runs).
     *
     * @param idleStrategy strategy.
     * @return this.
     */
    public ClientContext idleStrategy(final IdleStrategy idleStrategy)
    {
        this.idleStrategy = idleStrategy;
        return this;
    }

    /**
     * Whether chunk bytes travel inside messages instead of the mapped pool.
     *
     * @return true for the copy transport.
     */
    public boolean copyTransport()
    {
        return copyTransport;
    }

    /**
     * Selects the copy transport: the pool is not mapped and chunk bytes travel in WRITE_DATA / READ_DATA
     * messages (slower, same semantics), for a client that cannot map the pool.
     *
     * @param copyTransport true for the copy transport.
     * @return this.
     */
    public ClientContext copyTransport(final boolean copyTransport)
    {
        this.copyTransport = copyTransport;
        return this;
    }

    /**
     * Whether the pool mapping is touched page by page at connect.
     *
     * @return true when pre-touching.
     */
    public boolean pretouchPool()
    {
        return pretouchPool;
    }

    /**
     * Sets whether to touch every pool page at connect, so no page fault lands on a transfer.
     *
     * @param pretouchPool true to pre-touch.
     * @return this.
     */
    public ClientContext pretouchPool(final boolean pretouchPool)
    {
        this.pretouchPool = pretouchPool;
        return this;
    }

    /**
     * Threads that touch the pool at connect, the connecting thread among them.
     *
     * @return threads, 1 to {@link PoolPages#MAX_THREADS}.
     */
    public int pretouchThreads()
    {
        return pretouchThreads;
    }

    /**
     * Sets how many threads touch the pool at connect: the connecting thread and up to seven short-lived helpers
     * that end before {@code connect} returns. The default is one per processor, at most {@link PoolPages#MAX_THREADS}.
     * Workers that connect at the same moment on a small machine gain nothing from more than one each.
     *
     * @param pretouchThreads 1 to {@link PoolPages#MAX_THREADS}.
     * @return this.
     */
    public ClientContext pretouchThreads(final int pretouchThreads)
    {
        if (pretouchThreads < 1 || pretouchThreads > PoolPages.MAX_THREADS)
        {
            throw new IllegalArgumentException("pretouch threads out of range 1.." + PoolPages.MAX_THREADS + ": " +
                pretouchThreads);
        }
        this.pretouchThreads = pretouchThreads;
        return this;
    }
}
