package io.kvstash.server;

import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.PipelineContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.SecureDirectory;
import io.kvstash.wire.ring.RingDescriptor;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.NanoClock;
import org.agrona.concurrent.SystemEpochClock;
import org.agrona.concurrent.SystemNanoClock;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Configuration of a {@link KvStashServer}, validated once by {@link #conclude()}.
 */
public final class ServerContext
{
    /**
     * Default request ring capacity per client: 2 MiB. A record carries at most half a ring, so the largest
     * token request is 262,128 tokens (1,023 chunks of 256); longer prompts are hashed by the client and sent
     * as chunk hashes. Pages of a client file that are never written cost no memory.
     */
    public static final int REQUEST_RING_CAPACITY_DEFAULT = 2 << 20;
    /** Default response ring capacity per client: 256 KiB. */
    public static final int RESPONSE_RING_CAPACITY_DEFAULT = 256 << 10;
    /** Default client limit. */
    public static final int MAX_CLIENTS_DEFAULT = 256;
    /** Default heartbeat interval. */
    public static final long HEARTBEAT_INTERVAL_MS_DEFAULT = 100;
    /** Default time after which clients consider a silent server dead. */
    public static final long HEARTBEAT_TIMEOUT_MS_DEFAULT = 3000;
    /** Default client liveness check interval. */
    public static final long LIVENESS_INTERVAL_MS_DEFAULT = 100;
    /** Default new-client scan interval. */
    public static final long SCAN_INTERVAL_MS_DEFAULT = 10;
    /** Default lease sweep interval. */
    public static final long SWEEP_INTERVAL_MS_DEFAULT = 100;
    /**
     * The server times one request of each type in this many end to end, and one in up to
     * {@code LoadWeightedSampler.MAX_WEIGHT} under load; each timed request is counted as the requests it stands for.
     */
    public static final int LATENCY_SAMPLE_MIN_WEIGHT = 8;
    /** Default latency interval log period. */
    public static final long LATENCY_INTERVAL_MS_DEFAULT = 1000;
    /**
     * Default Disruptor ring size in SHARED mode. There the ring is no queue between threads: the receiver
     * publishes at most a duty cycle's requests and the stages run them in the same cycle, so a full ring
     * only ends the cycle's reading early. A small ring keeps the events a request touches in the cache:
     * with one request in flight a 1,024-event ring hands each request a cold event.
     */
    public static final int RING_SIZE_SHARED_DEFAULT = 64;

    private StoreContext storeContext = new StoreContext();
    private Path directory;
    private int requestRingCapacity = REQUEST_RING_CAPACITY_DEFAULT;
    private int responseRingCapacity = RESPONSE_RING_CAPACITY_DEFAULT;
    private int maxClients = MAX_CLIENTS_DEFAULT;
    private int errorLogLength = ControlFileDescriptor.ERROR_LOG_LENGTH_DEFAULT;
    private ThreadingMode threadingMode = ThreadingMode.SHARED;
    private WaitMode waitMode = WaitMode.BACKOFF;
    private int ringSize = 0;
    private boolean useAgentInvoker;
    private long heartbeatIntervalMs = HEARTBEAT_INTERVAL_MS_DEFAULT;
    private long heartbeatTimeoutMs = HEARTBEAT_TIMEOUT_MS_DEFAULT;
    private long livenessIntervalMs = LIVENESS_INTERVAL_MS_DEFAULT;
    private long scanIntervalMs = SCAN_INTERVAL_MS_DEFAULT;
    private long sweepIntervalMs = SWEEP_INTERVAL_MS_DEFAULT;
    private long latencyIntervalMs = LATENCY_INTERVAL_MS_DEFAULT;
    private Path captureFile;
    private Path latencyLogFile;
    private int prometheusPort = -1;
    private boolean latencyEnabled = true;
    private boolean pretouch = true;
    private boolean prepareInBackground;
    private java.util.function.Consumer<String> startupLog;
    private volatile boolean startAborted;
    private EpochClock epochClock = SystemEpochClock.INSTANCE;
    private NanoClock nanoClock = new SystemNanoClock();
    private long incarnation;
    private boolean concluded;

    /**
     * Validates and completes the configuration.
     *
     * @return this.
     */
    public ServerContext conclude()
    {
        if (concluded)
        {
            return this;
        }
        if (null == directory)
        {
            directory = SecureDirectory.defaultDirectory();
        }
        RingDescriptor.checkCapacity(requestRingCapacity);
        RingDescriptor.checkCapacity(responseRingCapacity);
        if (maxClients <= 0 || maxClients > 65536)
        {
            throw new IllegalArgumentException("max clients " + maxClients + " is out of range: give 1 to 65536");
        }
        if (0 == incarnation)
        {
            incarnation = (System.currentTimeMillis() << 16) ^ (ProcessHandle.current().pid() & 0xFFFF) ^
                System.nanoTime() & 0xFFF;
        }
        if (!storeContext.isConcluded())
        {
            storeContext.conclude();
        }
        if (prometheusPort < -1 || prometheusPort > 65535)
        {
            throw new IllegalArgumentException("prometheus port " + prometheusPort +
                " is out of range: give 1 to 65535, or 0 for any free port");
        }
        if (latencyIntervalMs <= 0)
        {
            throw new IllegalArgumentException("latency interval must be positive: " + latencyIntervalMs);
        }
        if (useAgentInvoker && ThreadingMode.SHARED != threadingMode)
        {
            throw new IllegalArgumentException("an agent invoker needs SHARED threading, not " + threadingMode);
        }
        if (0 == ringSize)
        {
            ringSize = ThreadingMode.SHARED == threadingMode ?
                RING_SIZE_SHARED_DEFAULT : PipelineContext.RING_SIZE_DEFAULT;
        }
        final int requestMax = RingDescriptor.maxPayloadLength(requestRingCapacity);
        if (requestMax < 256 + storeContext.maxInlineBytes())
        {
            throw new IllegalArgumentException("request ring too small for the largest copy-transport message");
        }
        final int responseMax = RingDescriptor.maxPayloadLength(responseRingCapacity);
        if (responseMax < 64 + 16 * storeContext.maxChunksPerRequest() + storeContext.maxInlineBytes() + 512)
        {
            throw new IllegalArgumentException("response ring too small for the largest response");
        }
        concluded = true;
        return this;
    }

    /**
     * Store configuration.
     *
     * @return store context.
     */
    public StoreContext storeContext()
    {
        return storeContext;
    }

    /**
     * Sets the store configuration.
     *
     * @param storeContext store context.
     * @return this.
     */
    public ServerContext storeContext(final StoreContext storeContext)
    {
        this.storeContext = storeContext;
        return this;
    }

    /**
     * Shared-memory directory.
     *
     * @return path.
     */
    public Path directory()
    {
        return directory;
    }

    /**
     * Sets the shared-memory directory.
     *
     * @param directory path.
     * @return this.
     */
    public ServerContext directory(final Path directory)
    {
        this.directory = directory;
        return this;
    }

    /**
     * Request ring capacity per client.
     *
     * @return bytes.
     */
    public int requestRingCapacity()
    {
        return requestRingCapacity;
    }

    /**
     * Sets the request ring capacity per client.
     *
     * @param requestRingCapacity bytes, a power of two.
     * @return this.
     */
    public ServerContext requestRingCapacity(final int requestRingCapacity)
    {
        this.requestRingCapacity = requestRingCapacity;
        return this;
    }

    /**
     * Response ring capacity per client.
     *
     * @return bytes.
     */
    public int responseRingCapacity()
    {
        return responseRingCapacity;
    }

    /**
     * Sets the response ring capacity per client.
     *
     * @param responseRingCapacity bytes, a power of two.
     * @return this.
     */
    public ServerContext responseRingCapacity(final int responseRingCapacity)
    {
        this.responseRingCapacity = responseRingCapacity;
        return this;
    }

    /**
     * Client limit.
     *
     * @return clients at most.
     */
    public int maxClients()
    {
        return maxClients;
    }

    /**
     * Sets the client limit.
     *
     * @param maxClients clients at most.
     * @return this.
     */
    public ServerContext maxClients(final int maxClients)
    {
        this.maxClients = maxClients;
        return this;
    }

    /**
     * Error log length.
     *
     * @return bytes.
     */
    public int errorLogLength()
    {
        return errorLogLength;
    }

    /**
     * Sets the error log length.
     *
     * @param errorLogLength bytes.
     * @return this.
     */
    public ServerContext errorLogLength(final int errorLogLength)
    {
        this.errorLogLength = errorLogLength;
        return this;
    }

    /**
     * Threading mode of the pipeline and receiver.
     *
     * @return mode.
     */
    public ThreadingMode threadingMode()
    {
        return threadingMode;
    }

    /**
     * Sets the threading mode: SHARED (the default) runs receiver and stages on one thread; DEDICATED a
     * receiver thread and a pipeline thread; THREAD_PER_STAGE a receiver thread and one per stage. On a
     * machine of two cores SHARED is the fastest shape measured: a DEDICATED server answered a control pair in
     * 26 us at the median where a SHARED one took 1.8 us, both backing off when idle, because every request
     * crosses from the receiver's thread to the pipeline's (docs/BENCHMARKS.md, Dec 3 13:30).
     *
     * @param threadingMode mode.
     * @return this.
     */
    public ServerContext threadingMode(final ThreadingMode threadingMode)
    {
        this.threadingMode = threadingMode;
        return this;
    }

    /**
     * Wait mode.
     *
     * @return mode.
     */
    public WaitMode waitMode()
    {
        return waitMode;
    }

    /**
     * Sets the wait mode of every server thread.
     *
     * @param waitMode mode.
     * @return this.
     */
    public ServerContext waitMode(final WaitMode waitMode)
    {
        this.waitMode = waitMode;
        return this;
    }

    /**
     * Disruptor ring size; 0 until {@link #conclude()} when left to the default of the threading mode
     * ({@link #RING_SIZE_SHARED_DEFAULT} in SHARED mode, {@link PipelineContext#RING_SIZE_DEFAULT} otherwise).
     *
     * @return events.
     */
    public int ringSize()
    {
        return ringSize;
    }

    /**
     * Sets the Disruptor ring size.
     *
     * @param ringSize events, a power of two; 0 for the threading mode's default.
     * @return this.
     */
    public ServerContext ringSize(final int ringSize)
    {
        this.ringSize = ringSize;
        return this;
    }

    /**
     * Whether the caller runs the server's duty cycle ({@link KvStashServer#invoker()}) instead of a thread of
     * the server's own.
     *
     * @return true for an invoker.
     */
    public boolean useAgentInvoker()
    {
        return useAgentInvoker;
    }

    /**
     * Runs the server's duty cycle on the caller's thread through {@link KvStashServer#invoker()}, in the
     * manner of Aeron's conductor invoker: for embedding the server in an application's own duty cycle, and
     * for measuring the server's own work with client and server on one thread. Needs SHARED threading. The
     * server does nothing, not even its heartbeat, unless the caller invokes it.
     *
     * @param useAgentInvoker true for an invoker.
     * @return this.
     */
    public ServerContext useAgentInvoker(final boolean useAgentInvoker)
    {
        this.useAgentInvoker = useAgentInvoker;
        return this;
    }

    /**
     * Heartbeat interval.
     *
     * @return ms.
     */
    public long heartbeatIntervalMs()
    {
        return heartbeatIntervalMs;
    }

    /**
     * Sets the heartbeat interval.
     *
     * @param heartbeatIntervalMs ms.
     * @return this.
     */
    public ServerContext heartbeatIntervalMs(final long heartbeatIntervalMs)
    {
        this.heartbeatIntervalMs = heartbeatIntervalMs;
        return this;
    }

    /**
     * Heartbeat timeout published to clients.
     *
     * @return ms.
     */
    public long heartbeatTimeoutMs()
    {
        return heartbeatTimeoutMs;
    }

    /**
     * Sets the heartbeat timeout published to clients.
     *
     * @param heartbeatTimeoutMs ms.
     * @return this.
     */
    public ServerContext heartbeatTimeoutMs(final long heartbeatTimeoutMs)
    {
        this.heartbeatTimeoutMs = heartbeatTimeoutMs;
        return this;
    }

    /**
     * Client liveness check interval.
     *
     * @return ms.
     */
    public long livenessIntervalMs()
    {
        return livenessIntervalMs;
    }

    /**
     * Sets the client liveness check interval.
     *
     * @param livenessIntervalMs ms.
     * @return this.
     */
    public ServerContext livenessIntervalMs(final long livenessIntervalMs)
    {
        this.livenessIntervalMs = livenessIntervalMs;
        return this;
    }

    /**
     * New-client scan interval.
     *
     * @return ms.
     */
    public long scanIntervalMs()
    {
        return scanIntervalMs;
    }

    /**
     * Sets the new-client scan interval.
     *
     * @param scanIntervalMs ms.
     * @return this.
     */
    public ServerContext scanIntervalMs(final long scanIntervalMs)
    {
        this.scanIntervalMs = scanIntervalMs;
        return this;
    }

    /**
     * Lease sweep interval.
     *
     * @return ms.
     */
    public long sweepIntervalMs()
    {
        return sweepIntervalMs;
    }

    /**
     * Sets the lease sweep interval.
     *
     * @param sweepIntervalMs ms.
     * @return this.
     */
    public ServerContext sweepIntervalMs(final long sweepIntervalMs)
    {
        this.sweepIntervalMs = sweepIntervalMs;
        return this;
    }

    /**
     * Latency interval period.
     *
     * @return ms.
     */
    public long latencyIntervalMs()
    {
        return latencyIntervalMs;
    }

    /**
     * Sets the latency interval period.
     *
     * @param latencyIntervalMs ms.
     * @return this.
     */
    public ServerContext latencyIntervalMs(final long latencyIntervalMs)
    {
        this.latencyIntervalMs = latencyIntervalMs;
        return this;
    }

    /**
     * Capture (journal) file.
     *
     * @return path or null.
     */
    public Path captureFile()
    {
        return captureFile;
    }

    /**
     * Sets the capture (journal) file.
     *
     * @param captureFile path or null.
     * @return this.
     */
    public ServerContext captureFile(final Path captureFile)
    {
        this.captureFile = captureFile;
        return this;
    }

    /**
     * Latency interval log ({@code .hlog}).
     *
     * @return path or null.
     */
    public Path latencyLogFile()
    {
        return latencyLogFile;
    }

    /**
     * Sets the latency interval log ({@code .hlog}).
     *
     * @param latencyLogFile path or null.
     * @return this.
     */
    public ServerContext latencyLogFile(final Path latencyLogFile)
    {
        this.latencyLogFile = latencyLogFile;
        return this;
    }

    /**
     * Port of the Prometheus text endpoint on the loopback address ({@link PrometheusEndpoint}).
     *
     * @return port, 0 for any free port, or -1 for no endpoint (the default).
     */
    public int prometheusPort()
    {
        return prometheusPort;
    }

    /**
     * Sets the port of the Prometheus text endpoint on the loopback address.
     *
     * @param prometheusPort port, 0 for any free port, or -1 for no endpoint.
     * @return this.
     */
    public ServerContext prometheusPort(final int prometheusPort)
    {
        this.prometheusPort = prometheusPort;
        return this;
    }

    /**
     * Whether latency is recorded.
     *
     * @return true when recording.
     */
    public boolean latencyEnabled()
    {
        return latencyEnabled;
    }

    /**
     * Turns latency recording on or off.
     *
     * @param latencyEnabled true to record.
     * @return this.
     */
    public ServerContext latencyEnabled(final boolean latencyEnabled)
    {
        this.latencyEnabled = latencyEnabled;
        return this;
    }

    /**
     * Whether the pool is pre-touched at start.
     *
     * @return true when pre-touching.
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
    public ServerContext pretouch(final boolean pretouch)
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
    public ServerContext prepareInBackground(final boolean prepareInBackground)
    {
        this.prepareInBackground = prepareInBackground;
        return this;
    }

    /**
     * Where the server says, one line each, what it does during start-up that an operator should know of: a dead
     * server's files reclaimed, the pool being prepared (after every check that could refuse the start).
     *
     * @return the log, or null for none.
     */
    public java.util.function.Consumer<String> startupLog()
    {
        return startupLog;
    }

    /**
     * Sets the start-up log.
     *
     * @param startupLog called on the launching thread with one line at a time; null for none.
     * @return this.
     */
    public ServerContext startupLog(final java.util.function.Consumer<String> startupLog)
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
     * Whether {@link #abortStart()} was called.
     *
     * @return true when the start is to stop.
     */
    public boolean isStartAborted()
    {
        return startAborted;
    }

    /**
     * The wall clock the server writes out: the control file's start time and heartbeat, the latency log's
     * timestamps. Its timers never run on it (see {@code ReceiverAgent}).
     *
     * @return the clock.
     */
    public EpochClock epochClock()
    {
        return epochClock;
    }

    /**
     * Sets the wall clock the server writes out (tests step it to check that the server and its clients do
     * not depend on it stepping evenly).
     *
     * @param epochClock the clock.
     * @return this.
     */
    public ServerContext epochClock(final EpochClock epochClock)
    {
        this.epochClock = epochClock;
        return this;
    }

    /**
     * The monotonic clock of the server: every timer, the requests' timestamps (leases) and the latency
     * recording run on it.
     *
     * @return the clock.
     */
    public NanoClock nanoClock()
    {
        return nanoClock;
    }

    /**
     * Sets the monotonic clock of the server (tests drive and count its readings).
     *
     * @param nanoClock the clock.
     * @return this.
     */
    public ServerContext nanoClock(final NanoClock nanoClock)
    {
        this.nanoClock = nanoClock;
        return this;
    }

    /**
     * Incarnation of this server start.
     *
     * @return incarnation, never 0 once concluded.
     */
    public long incarnation()
    {
        return incarnation;
    }

    /**
     * Sets the incarnation (tests and replays); 0 picks a fresh one.
     *
     * @param incarnation incarnation.
     * @return this.
     */
    public ServerContext incarnation(final long incarnation)
    {
        this.incarnation = incarnation;
        return this;
    }

    /**
     * Lease in ms, for printing.
     *
     * @return ms.
     */
    public long leaseMs()
    {
        return TimeUnit.NANOSECONDS.toMillis(storeContext.leaseNs());
    }

    /** {@inheritDoc} */
    @Override
    public String toString()
    {
        return "ServerContext{directory=" + directory + ", " + storeContext + ", requestRingCapacity=" +
            requestRingCapacity + ", responseRingCapacity=" + responseRingCapacity + ", maxClients=" + maxClients +
            ", threadingMode=" + threadingMode + ", waitMode=" + waitMode + ", ringSize=" + ringSize +
            ", heartbeatIntervalMs=" + heartbeatIntervalMs + ", heartbeatTimeoutMs=" + heartbeatTimeoutMs +
            ", livenessIntervalMs=" + livenessIntervalMs + ", sweepIntervalMs=" + sweepIntervalMs +
            ", captureFile=" + captureFile + ", latencyLogFile=" + latencyLogFile + ", prometheusPort=" +
            prometheusPort + ", incarnation=" +
            Long.toHexString(incarnation) + '}';
    }
}
