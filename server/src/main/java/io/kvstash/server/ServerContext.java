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

import static io.kvstash.server.ServerConfiguration.HEARTBEAT_INTERVAL_MS_DEFAULT;
import static io.kvstash.server.ServerConfiguration.HEARTBEAT_TIMEOUT_MS_DEFAULT;
import static io.kvstash.server.ServerConfiguration.LATENCY_INTERVAL_MS_DEFAULT;
import static io.kvstash.server.ServerConfiguration.LIVENESS_INTERVAL_MS_DEFAULT;
import static io.kvstash.server.ServerConfiguration.MAX_CLIENTS_DEFAULT;
import static io.kvstash.server.ServerConfiguration.REQUEST_RING_CAPACITY_DEFAULT;
import static io.kvstash.server.ServerConfiguration.RESPONSE_RING_CAPACITY_DEFAULT;
import static io.kvstash.server.ServerConfiguration.RING_SIZE_SHARED_DEFAULT;
import static io.kvstash.server.ServerConfiguration.SCAN_INTERVAL_MS_DEFAULT;
import static io.kvstash.server.ServerConfiguration.SWEEP_INTERVAL_MS_DEFAULT;

/**
 * Configuration of a {@link KvStashServer}, validated once by {@link #conclude()}: the server's own settings, and
 * the pipeline's and the store's held once in the {@link PipelineContext} this context owns (its accessors of
 * them delegate there, nothing is copied). The server completes that context with its mapped files at launch.
 */
public final class ServerContext
{
    // The pipeline's and the store's settings, held once: the accessors of them here delegate to it.
    private final PipelineContext pipelineContext = new PipelineContext()
        .storeContext(new StoreContext())
        .threadingMode(ThreadingMode.SHARED)
        .ringSize(0)
        .multiProducer(false)
        .clock(new SystemNanoClock());
    private Path directory;
    private int requestRingCapacity = REQUEST_RING_CAPACITY_DEFAULT;
    private int responseRingCapacity = RESPONSE_RING_CAPACITY_DEFAULT;
    private int maxClients = MAX_CLIENTS_DEFAULT;
    private int errorLogLength = ControlFileDescriptor.ERROR_LOG_LENGTH_DEFAULT;
    private boolean useAgentInvoker;
    private long heartbeatIntervalMs = HEARTBEAT_INTERVAL_MS_DEFAULT;
    private long heartbeatTimeoutMs = HEARTBEAT_TIMEOUT_MS_DEFAULT;
    private long livenessIntervalMs = LIVENESS_INTERVAL_MS_DEFAULT;
    private long scanIntervalMs = SCAN_INTERVAL_MS_DEFAULT;
    private long sweepIntervalMs = SWEEP_INTERVAL_MS_DEFAULT;
    private long latencyIntervalMs = LATENCY_INTERVAL_MS_DEFAULT;
    private Path latencyLogFile;
    private int prometheusPort = -1;
    private ResponseObserver responseObserver;
    private StartupContext startupContext = new StartupContext();
    private EpochClock epochClock = SystemEpochClock.INSTANCE;
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
        ServerConfiguration.checkMaxClients(maxClients);
        if (0 == pipelineContext.incarnation())
        {
            pipelineContext.incarnation(ServerConfiguration.newIncarnation());
        }
        final StoreContext storeContext = pipelineContext.storeContext();
        if (!storeContext.isConcluded())
        {
            storeContext.conclude();
        }
        ServerConfiguration.checkPrometheusPort(prometheusPort);
        ServerConfiguration.checkLatencyIntervalMs(latencyIntervalMs);
        final ThreadingMode threadingMode = pipelineContext.threadingMode();
        ServerConfiguration.checkThreading(useAgentInvoker, threadingMode);
        if (0 == pipelineContext.ringSize())
        {
            pipelineContext.ringSize(ThreadingMode.SHARED == threadingMode ?
                RING_SIZE_SHARED_DEFAULT : PipelineContext.RING_SIZE_DEFAULT);
        }
        ServerConfiguration.checkRingsHoldLargestRecords(requestRingCapacity, responseRingCapacity, storeContext);
        concluded = true;
        return this;
    }

    /**
     * The pipeline's context, owned by this one, for the pipeline settings with no accessor here: the Disruptor's
     * ring size (0, the default, sizes it by the threading mode when this context is concluded:
     * {@link ServerConfiguration#RING_SIZE_SHARED_DEFAULT} in SHARED mode, {@link PipelineContext#RING_SIZE_DEFAULT}
     * otherwise), the capture journal ({@code serve --capture}) and the stage timing sample. The server sets its
     * regions, counters, sink and error handler at launch.
     *
     * @return the pipeline's context.
     */
    public PipelineContext pipelineContext()
    {
        return pipelineContext;
    }

    /**
     * @return the store's configuration, held by the pipeline's context.
     */
    public StoreContext storeContext()
    {
        return pipelineContext.storeContext();
    }

    /**
     * @param storeContext the store's configuration.
     * @return this.
     */
    public ServerContext storeContext(final StoreContext storeContext)
    {
        pipelineContext.storeContext(storeContext);
        return this;
    }

    /**
     * @return the shared-memory directory.
     */
    public Path directory()
    {
        return directory;
    }

    /**
     * @param directory the shared-memory directory.
     * @return this.
     */
    public ServerContext directory(final Path directory)
    {
        this.directory = directory;
        return this;
    }

    /**
     * @return the request ring capacity per client, bytes.
     */
    public int requestRingCapacity()
    {
        return requestRingCapacity;
    }

    /**
     * @param requestRingCapacity the request ring capacity per client, bytes, a power of two.
     * @return this.
     */
    public ServerContext requestRingCapacity(final int requestRingCapacity)
    {
        this.requestRingCapacity = requestRingCapacity;
        return this;
    }

    /**
     * @return the response ring capacity per client, bytes.
     */
    public int responseRingCapacity()
    {
        return responseRingCapacity;
    }

    /**
     * @param responseRingCapacity the response ring capacity per client, bytes, a power of two.
     * @return this.
     */
    public ServerContext responseRingCapacity(final int responseRingCapacity)
    {
        this.responseRingCapacity = responseRingCapacity;
        return this;
    }

    /**
     * @return the most clients attached at once.
     */
    public int maxClients()
    {
        return maxClients;
    }

    /**
     * @param maxClients the most clients attached at once, 1 to 65536.
     * @return this.
     */
    public ServerContext maxClients(final int maxClients)
    {
        this.maxClients = maxClients;
        return this;
    }

    /**
     * @return the length of the distinct error log, bytes.
     */
    public int errorLogLength()
    {
        return errorLogLength;
    }

    /**
     * @param errorLogLength the length of the distinct error log, bytes.
     * @return this.
     */
    public ServerContext errorLogLength(final int errorLogLength)
    {
        this.errorLogLength = errorLogLength;
        return this;
    }

    /**
     * @return the threading mode of the receiver and the pipeline.
     */
    public ThreadingMode threadingMode()
    {
        return pipelineContext.threadingMode();
    }

    /**
     * Sets the threading mode: SHARED (the default) runs receiver and stages on one thread; DEDICATED a
     * receiver thread and a pipeline thread; THREAD_PER_STAGE a receiver thread and one per stage. SHARED is the
     * fastest on a machine of few cores: in the other modes every request crosses from the receiver's thread to
     * the pipeline's, and a thread that backs off when idle must be woken for each one.
     *
     * @param threadingMode mode.
     * @return this.
     */
    public ServerContext threadingMode(final ThreadingMode threadingMode)
    {
        pipelineContext.threadingMode(threadingMode);
        return this;
    }

    /**
     * @return the wait mode of every server thread.
     */
    public WaitMode waitMode()
    {
        return pipelineContext.waitMode();
    }

    /**
     * @param waitMode the wait mode of every server thread.
     * @return this.
     */
    public ServerContext waitMode(final WaitMode waitMode)
    {
        pipelineContext.waitMode(waitMode);
        return this;
    }

    /**
     * @return true when the caller runs the server's duty cycle ({@link KvStashServer#invoker()}).
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
     * @return the heartbeat interval, ms.
     */
    public long heartbeatIntervalMs()
    {
        return heartbeatIntervalMs;
    }

    /**
     * @param heartbeatIntervalMs the heartbeat interval, ms.
     * @return this.
     */
    public ServerContext heartbeatIntervalMs(final long heartbeatIntervalMs)
    {
        this.heartbeatIntervalMs = heartbeatIntervalMs;
        return this;
    }

    /**
     * @return the heartbeat timeout published to clients, ms.
     */
    public long heartbeatTimeoutMs()
    {
        return heartbeatTimeoutMs;
    }

    /**
     * @param heartbeatTimeoutMs the heartbeat timeout published to clients, ms.
     * @return this.
     */
    public ServerContext heartbeatTimeoutMs(final long heartbeatTimeoutMs)
    {
        this.heartbeatTimeoutMs = heartbeatTimeoutMs;
        return this;
    }

    /**
     * @return the client liveness check interval, ms.
     */
    public long livenessIntervalMs()
    {
        return livenessIntervalMs;
    }

    /**
     * @param livenessIntervalMs the client liveness check interval, ms.
     * @return this.
     */
    public ServerContext livenessIntervalMs(final long livenessIntervalMs)
    {
        this.livenessIntervalMs = livenessIntervalMs;
        return this;
    }

    /**
     * @return the new-client scan interval, ms.
     */
    public long scanIntervalMs()
    {
        return scanIntervalMs;
    }

    /**
     * @param scanIntervalMs the new-client scan interval, ms.
     * @return this.
     */
    public ServerContext scanIntervalMs(final long scanIntervalMs)
    {
        this.scanIntervalMs = scanIntervalMs;
        return this;
    }

    /**
     * @return the lease sweep interval, ms.
     */
    public long sweepIntervalMs()
    {
        return sweepIntervalMs;
    }

    /**
     * @param sweepIntervalMs the lease sweep interval, ms.
     * @return this.
     */
    public ServerContext sweepIntervalMs(final long sweepIntervalMs)
    {
        this.sweepIntervalMs = sweepIntervalMs;
        return this;
    }

    /**
     * @return the latency interval period, ms.
     */
    public long latencyIntervalMs()
    {
        return latencyIntervalMs;
    }

    /**
     * @param latencyIntervalMs the latency interval period, ms, positive.
     * @return this.
     */
    public ServerContext latencyIntervalMs(final long latencyIntervalMs)
    {
        this.latencyIntervalMs = latencyIntervalMs;
        return this;
    }

    /**
     * @return the latency interval log ({@code .hlog}), or null for none.
     */
    public Path latencyLogFile()
    {
        return latencyLogFile;
    }

    /**
     * @param latencyLogFile the latency interval log ({@code .hlog}), or null for none.
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
     * The publish side's observer of answered requests (the second tier's tap), or null for none.
     *
     * @return the observer.
     */
    public ResponseObserver responseObserver()
    {
        return responseObserver;
    }

    /**
     * Sets the observer the publish stage tells of every answered request: the hook a component such as the second
     * tier attaches through. The server then also answers a waiting LOOKUP with the observer's tickets and says so
     * in its control file's features.
     *
     * @param responseObserver the observer, or null for none.
     * @return this.
     */
    public ServerContext responseObserver(final ResponseObserver responseObserver)
    {
        this.responseObserver = responseObserver;
        return this;
    }

    /**
     * @return true when latency is recorded.
     */
    public boolean latencyEnabled()
    {
        return pipelineContext.latencyEnabled();
    }

    /**
     * Turns latency recording on or off.
     *
     * @param latencyEnabled true to record.
     * @return this.
     */
    public ServerContext latencyEnabled(final boolean latencyEnabled)
    {
        pipelineContext.latencyEnabled(latencyEnabled);
        return this;
    }

    /**
     * How the server starts: whether and when its pool's pages are prepared, its start-up log, and a request to
     * stop a start in progress.
     *
     * @return the start-up configuration, owned by this context.
     */
    public StartupContext startupContext()
    {
        return startupContext;
    }

    /**
     * Replaces the start-up configuration.
     *
     * @param startupContext how the server starts.
     * @return this.
     */
    public ServerContext startupContext(final StartupContext startupContext)
    {
        this.startupContext = startupContext;
        return this;
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
        return pipelineContext.clock();
    }

    /**
     * Sets the monotonic clock of the server (tests drive and count its readings).
     *
     * @param nanoClock the clock.
     * @return this.
     */
    public ServerContext nanoClock(final NanoClock nanoClock)
    {
        pipelineContext.clock(nanoClock);
        return this;
    }

    /**
     * @return the incarnation of this server start, never 0 once concluded.
     */
    public long incarnation()
    {
        return pipelineContext.incarnation();
    }

    /**
     * Sets the incarnation (tests and replays); 0 picks a fresh one.
     *
     * @param incarnation incarnation.
     * @return this.
     */
    public ServerContext incarnation(final long incarnation)
    {
        pipelineContext.incarnation(incarnation);
        return this;
    }

    /** {@inheritDoc} */
    @Override
    public String toString()
    {
        return "ServerContext{directory=" + directory + ", " + storeContext() + ", requestRingCapacity=" +
            requestRingCapacity + ", responseRingCapacity=" + responseRingCapacity + ", maxClients=" + maxClients +
            ", threadingMode=" + threadingMode() + ", waitMode=" + waitMode() + ", ringSize=" +
            pipelineContext.ringSize() + ", heartbeatIntervalMs=" + heartbeatIntervalMs + ", heartbeatTimeoutMs=" +
            heartbeatTimeoutMs + ", livenessIntervalMs=" + livenessIntervalMs + ", sweepIntervalMs=" + sweepIntervalMs +
            ", captureFile=" + pipelineContext.journalFile() + ", latencyLogFile=" + latencyLogFile +
            ", prometheusPort=" + prometheusPort + ", incarnation=" + Long.toHexString(incarnation()) + '}';
    }
}
