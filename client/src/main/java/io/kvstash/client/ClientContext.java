package io.kvstash.client;

import io.kvstash.wire.file.PoolPages;
import io.kvstash.wire.file.SecureDirectory;
import io.kvstash.wire.idle.CountingBackoffIdleStrategy;
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
    /** Cores from which the default wait yields for a millisecond. */
    public static final int WAIT_MANY_CORES = 4;
    /** Default wait: spins before yielding. */
    public static final int WAIT_SPINS_DEFAULT = 100;
    /** Default wait: yields before parking, at most (a few milliseconds of waiting when the core is free). */
    public static final int WAIT_YIELDS_DEFAULT = 20_000;
    /** Default wait: time it yields before it parks, at most, with {@link #WAIT_MANY_CORES} cores or more. */
    public static final long WAIT_YIELD_NS_DEFAULT = TimeUnit.MILLISECONDS.toNanos(1);
    /** Default wait: yields before parking on a machine of fewer than {@link #WAIT_MANY_CORES} cores. */
    public static final int WAIT_FEW_CORES_YIELDS = 100;
    /** Default wait: first park. */
    public static final long WAIT_MIN_PARK_NS_DEFAULT = TimeUnit.MICROSECONDS.toNanos(1);
    /** Default wait: longest park. */
    public static final long WAIT_MAX_PARK_NS_DEFAULT = TimeUnit.MICROSECONDS.toNanos(100);

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
            idleStrategy = newInFlightIdleStrategy();
        }
        if (timeoutNs <= 0 || livenessCheckNs <= 0)
        {
            throw new IllegalArgumentException("timeouts must be positive");
        }
        return this;
    }

    /**
     * The client's default wait for a response: spin, then yield for up to a millisecond, and park only when the
     * answer is that late; on a machine of fewer than {@link #WAIT_MANY_CORES} cores, where a server thread and a
     * worker or two already fill the cores and a yielding worker takes the server's share,
     * {@link #WAIT_FEW_CORES_YIELDS} yields without a time bound. A worker waiting for a response has a request in
     * flight, so the answer is due within a server duty cycle or a few; a park costs a timer wake-up (about 50 us on
     * Linux, the default timer slack, whatever the requested pause) and the answer waits in the ring for all of it.
     * With one server thread answering several workers a wait grows with the queue ahead, past a short
     * spin-and-yield phase, so a strategy that parks after a few hundred idle passes parks on most requests once
     * workers are many. Yielding keeps the worker ready to read its answer at once while handing the core to any
     * thread that can run; it is free where cores outnumber the busy threads, and where they do not, a yielding
     * worker stays runnable and takes its share of them, which the time bound limits.
     *
     * @return a new strategy that counts its spins, yields and parks, so that a benchmark can say how a worker waited.
     */
    public static CountingBackoffIdleStrategy newInFlightIdleStrategy()
    {
        final boolean manyCores = Runtime.getRuntime().availableProcessors() >= WAIT_MANY_CORES;
        return new CountingBackoffIdleStrategy(
            WAIT_SPINS_DEFAULT,
            manyCores ? WAIT_YIELDS_DEFAULT : WAIT_FEW_CORES_YIELDS,
            manyCores ? WAIT_YIELD_NS_DEFAULT : Long.MAX_VALUE,
            WAIT_MIN_PARK_NS_DEFAULT,
            WAIT_MAX_PARK_NS_DEFAULT);
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
     * Idle strategy while waiting for a response: by default {@link #newInFlightIdleStrategy()}'s (spin, yield for
     * up to a millisecond, then park), since a worker that waits has a request in flight.
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
     * Sets whether to touch every pool page at connect, so no page fault lands on a transfer. A server that commits its
     * pool on demand has only a committed prefix of pages: then only that prefix is touched, at connect and again
     * when a slot reaches past what was touched (touching the rest would allocate it).
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
