package io.kvstash.server;

import com.sun.net.httpserver.HttpServer;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.Pipeline;
import io.kvstash.pipeline.PipelineContext;
import io.kvstash.pipeline.ResponseSink;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.pipeline.latency.IntervalLogger;
import io.kvstash.server.codec.ResponseEncoder;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.idle.CountingBackoffIdleStrategy;
import org.HdrHistogram.HistogramLogWriter;
import org.agrona.CloseHelper;
import org.agrona.ErrorHandler;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.CachedNanoClock;
import org.agrona.concurrent.CompositeAgent;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingMillisIdleStrategy;
import org.agrona.concurrent.errors.DistinctErrorLog;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The kvstash server: the files in its directory, the pipeline, and the receiver that connects the two.
 * {@link #launch(ServerContext)} starts it; {@link #close()} stops it cleanly and removes its files but the lock file.
 */
public final class KvStashServer implements AutoCloseable
{
    private final ServerContext context;
    private final ServerFiles files;
    private final Pipeline pipeline;
    private final ReceiverAgent receiver;
    private final AgentRunner receiverRunner;
    /** The receiver thread's idle strategy, or null under an agent invoker. */
    private final IdleStrategy receiverIdle;
    private final AgentRunner latencyLogRunner;
    private final AgentInvoker invoker;
    private final IntervalLogger intervalLogger;
    private final DistinctErrorLog errorLog;
    private final PrometheusEndpoint prometheus;
    private final ErrorHandler errorHandler;
    private volatile boolean closed;

    private KvStashServer(final ServerContext context) throws IOException
    {
        this.context = context.conclude();
        // Bound before the files, so that a taken port refuses the start before the pool is prepared.
        final HttpServer http = context.prometheusPort() < 0 ? null :
            PrometheusEndpoint.bind(context.prometheusPort());
        files = openFiles(context, http);
        PrometheusEndpoint endpoint = null;
        try
        {
            errorLog = new DistinctErrorLog(files.errorLogBuffer(), context.epochClock());
            final StoreCounters counters = files.counters();
            // Its own thread, reading the counters only.
            endpoint = null == http ? null : PrometheusEndpoint.start(http, counters, context.incarnation(),
                context.epochClock().time(), context.storeContext().poolSizeBytes());
            prometheus = endpoint;
            // The stages count ERRORS where they catch, so the pipeline logs only; the server's agents and their
            // runners count and log through the one counted handler.
            final ErrorHandler loggingHandler = ServerErrors.logging(errorLog);
            errorHandler = ServerErrors.counted(loggingHandler, counters);
            final ClientSession[] sessions = newSessions(context.maxClients());
            pipeline = new Pipeline(concludePipeline(loggingHandler, newPublisher(sessions)));
            intervalLogger = context.latencyEnabled() ? new IntervalLogger(pipeline.latency(),
                openLatencyLog(context.latencyLogFile()), context.epochClock().time()) : null;
            receiver = newReceiver(sessions);
            final LatencyLogAgent latencyLog = null == intervalLogger ? null :
                new LatencyLogAgent(intervalLogger, context.epochClock(), context.nanoClock(),
                context.latencyIntervalMs(),
                context.useAgentInvoker() ? LatencyLogAgent.INVOKED_CYCLES_PER_CLOCK_READ : 1,
                () -> counters.get(CountersDescriptor.WIRE_RECORDS));
            // Starts the stage threads of the mode, and the journal's thread when capturing.
            pipeline.start();
            // SHARED mode runs the stages in the receiver's duty cycle; an invoker needs SHARED (conclude()).
            final Agent agent = ThreadingMode.SHARED == context.threadingMode() ?
                new CompositeAgent(receiver, pipeline.agent()) : receiver;
            // Under an invoker one thread runs everything, the caller's (the latency intervals too); else the
            // receiver has a thread, and the latency log one of its own.
            final boolean invoked = context.useAgentInvoker();
            invoker = invoked ? startInvoker(agent, latencyLog) : null;
            receiverIdle = invoked ? null : newReceiverIdle(counters);
            receiverRunner = invoked ? null : startOnThread(new AgentRunner(receiverIdle, errorHandler, null, agent));
            latencyLogRunner = invoked || null == latencyLog ? null : startOnThread(new AgentRunner(
                new SleepingMillisIdleStrategy(LatencyLogAgent.sleepPeriodMs(context.latencyIntervalMs())),
                errorHandler, null, latencyLog));
        }
        catch (final IOException | RuntimeException ex)
        {
            CloseHelper.quietClose(endpoint);
            if (null == endpoint && null != http)
            {
                http.stop(0);
            }
            files.close();
            throw ex;
        }
    }

    private static ServerFiles openFiles(final ServerContext context, final HttpServer http) throws IOException
    {
        try
        {
            return new ServerFiles(context);
        }
        catch (final IOException | RuntimeException ex)
        {
            if (null != http)
            {
                http.stop(0);
            }
            throw ex;
        }
    }

    /**
     * Completes the pipeline's context with what the server made at launch (the store's data offset, the mapped
     * regions and counters, the error handler, the response sink) and concludes it.
     */
    private PipelineContext concludePipeline(final ErrorHandler errorHandler, final ResponseSink responseSink)
    {
        final PipelineContext pipelineContext = context.pipelineContext();
        pipelineContext.storeContext().dataOffset(files.dataOffset());
        return pipelineContext
            .pool(files.pool())
            .slotTable(files.slotTable())
            .counters(files.counters())
            .errorHandler(errorHandler)
            .responseSink(responseSink)
            .conclude();
    }

    private static ClientSession[] newSessions(final int maxClients)
    {
        final ClientSession[] sessions = new ClientSession[maxClients];
        for (int i = 0; i < sessions.length; i++)
        {
            sessions[i] = new ClientSession(i);
        }
        return sessions;
    }

    private ClientPublisher newPublisher(final ClientSession[] sessions)
    {
        final ResponseObserver observer = context.responseObserver();
        if (null != observer)
        {
            // Before the publish stage starts: the observer counts into the server's counters.
            observer.onStart(files.counters());
        }
        return new ClientPublisher(sessions, files.counters(), ResponseEncoder.registerExtra(
            context.incarnation(), context.storeContext().poolSizeBytes(), context.storeContext().leaseNs(),
            context.storeContext().chunkTokens(), files.poolPath().getFileName().toString()), observer);
    }

    private ReceiverAgent newReceiver(final ClientSession[] sessions)
    {
        // The conductor runs in the receiver's duty cycle at the receiver's clock readings: both publish into the
        // single-producer pipeline.
        final CachedNanoClock conductorClock = new CachedNanoClock();
        conductorClock.update(context.nanoClock().nanoTime());
        final ClientConductor conductor = new ClientConductor(context, files, pipeline, sessions, errorHandler,
            context.epochClock(), context.nanoClock(), conductorClock);
        return new ReceiverAgent(context, pipeline, conductor, sessions, files.counters(), errorHandler,
            conductorClock);
    }

    private AgentInvoker startInvoker(final Agent agent, final LatencyLogAgent latencyLog)
    {
        final AgentInvoker invoker = new AgentInvoker(errorHandler, null,
            null == latencyLog ? agent : new InvokedAgent(agent, latencyLog));
        invoker.start();
        return invoker;
    }

    private IdleStrategy newReceiverIdle(final StoreCounters counters) throws IOException
    {
        // The blocking and the backoff waits sleep on the doorbell (backoff after a few idle milliseconds), so that
        // a client's request or a new client's file wakes them.
        final WaitMode waitMode = context.waitMode();
        if (null == files.doorbell())
        {
            return waitMode.newIdleStrategy();
        }
        final DoorbellIdleStrategy idle = new DoorbellIdleStrategy(files.doorbell(), files.control(), counters,
            errorHandler, receiver,
            WaitMode.BACKOFF == waitMode ? (CountingBackoffIdleStrategy)waitMode.newIdleStrategy() : null);
        receiver.wakeOnNewClients(idle::wakeUp);
        return idle;
    }

    private static AgentRunner startOnThread(final AgentRunner runner)
    {
        AgentRunner.startOnThread(runner);
        return runner;
    }

    private static HistogramLogWriter openLatencyLog(final Path file) throws FileNotFoundException
    {
        return null == file ? null : new HistogramLogWriter(file.toFile());
    }

    /**
     * The port of the Prometheus text endpoint.
     *
     * @return port on the loopback address, or -1 without an endpoint.
     */
    public int prometheusPort()
    {
        return null == prometheus ? -1 : prometheus.port();
    }

    /**
     * Starts a server.
     *
     * @param context configuration.
     * @return the running server.
     * @throws IOException when its files cannot be created.
     * @throws IllegalStateException when another server runs on the directory.
     */
    public static KvStashServer launch(final ServerContext context) throws IOException
    {
        return new KvStashServer(context);
    }

    /**
     * Configuration.
     *
     * @return context.
     */
    public ServerContext context()
    {
        return context;
    }

    /**
     * The server's counted error handler: it counts {@code ERRORS} and records each distinct error in the control
     * file's error log. For components attached to the server (the second tier) to report through.
     *
     * @return the handler.
     */
    public ErrorHandler errorHandler()
    {
        return errorHandler;
    }

    /**
     * Counters (mapped in the control file).
     *
     * @return counters.
     */
    public StoreCounters counters()
    {
        return files.counters();
    }

    /**
     * The pipeline, for inspection.
     *
     * @return pipeline.
     */
    public Pipeline pipeline()
    {
        return pipeline;
    }

    /**
     * The server's duty cycle when {@link ServerContext#useAgentInvoker(boolean)} is set: the caller's thread
     * runs it with {@link AgentInvoker#invoke()} (receiver, stages and journal, as in SHARED mode), and nothing
     * of the server runs in between. Null otherwise.
     *
     * @return the invoker, or null when the server runs its own thread.
     */
    public AgentInvoker invoker()
    {
        return invoker;
    }

    /**
     * Latency totals, or null when latency is off.
     *
     * @return the interval logger.
     */
    public IntervalLogger latency()
    {
        return intervalLogger;
    }

    /**
     * How the receiver's thread spent its duty cycles since the start, for benchmarks: {@code duty_cycles},
     * {@code empty_cycles} (cycles that read no request), {@code rings_polled}, {@code requests_read}, and with
     * the backoff wait mode its {@code spins}, {@code yields} and {@code parks} (each park a timer wake-up; the
     * sleeps on the doorbell that follow are the {@code sleeps} counter).
     * Exact after {@link #close()}, approximate while the server runs.
     *
     * @return counts by name, in that order.
     */
    public Map<String, Long> receiverCounts()
    {
        final long[] cycles = new long[4];
        receiver.dutyCycleCounts(cycles);
        final Map<String, Long> counts = new LinkedHashMap<>();
        counts.put("duty_cycles", cycles[0]);
        counts.put("empty_cycles", cycles[1]);
        counts.put("rings_polled", cycles[2]);
        counts.put("requests_read", cycles[3]);
        final CountingBackoffIdleStrategy backoff = receiverIdle instanceof DoorbellIdleStrategy ?
            ((DoorbellIdleStrategy)receiverIdle).backoff() :
            receiverIdle instanceof CountingBackoffIdleStrategy ? (CountingBackoffIdleStrategy)receiverIdle : null;
        if (null != backoff)
        {
            counts.put("spins", backoff.spins());
            counts.put("yields", backoff.yields());
            counts.put("parks", backoff.parks());
        }
        return counts;
    }

    /**
     * Directory of the server's files.
     *
     * @return path.
     */
    public Path directory()
    {
        return files.directory();
    }

    /**
     * Path of the pool file.
     *
     * @return path.
     */
    public Path poolPath()
    {
        return files.poolPath();
    }

    /**
     * Waits until the pipeline has passed every event published so far.
     *
     * @param timeoutMs how long to wait.
     * @return true when drained in time.
     */
    public boolean awaitDrained(final long timeoutMs)
    {
        final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!pipeline.isDrained())
        {
            if (System.nanoTime() - deadline > 0)
            {
                return false;
            }
            Thread.yield();
        }
        return true;
    }

    /**
     * Stops the receiver and the pipeline, marks the control file closed and removes the server's files.
     */
    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        CloseHelper.closeAll(prometheus, invoker, receiverRunner);
        if (receiverIdle instanceof DoorbellIdleStrategy)
        {
            ((DoorbellIdleStrategy)receiverIdle).close();
        }
        if (null != latencyLogRunner)
        {
            // Its thread sleeps up to 100 ms between looks at the clock (LatencyLogAgent.sleepPeriodMs): with a
            // retry timeout of 1 ms the runner interrupts the sleep rather than wait it out, so a close stays short.
            latencyLogRunner.close(1, thread -> {});
        }
        pipeline.close();
        if (null != intervalLogger)
        {
            intervalLogger.poll(context.epochClock().time());
            intervalLogger.close();
        }
        files.close();
    }

    /**
     * The invoker's duty cycle: the server's agents, then the latency log. Not a {@link CompositeAgent} of the
     * two: the server's agent is a composite too, and the one {@code doWork} call site in {@link CompositeAgent}
     * would see four agent classes and go megamorphic, a virtual call on every idle cycle and every request.
     * Here each call site sees one class.
     */
    private static final class InvokedAgent implements Agent
    {
        private final Agent server;
        private final LatencyLogAgent latencyLog;

        InvokedAgent(final Agent server, final LatencyLogAgent latencyLog)
        {
            this.server = server;
            this.latencyLog = latencyLog;
        }

        @Override
        public void onStart()
        {
            server.onStart();
            latencyLog.onStart();
        }

        @Override
        public int doWork() throws Exception
        {
            return server.doWork() + latencyLog.doWork();
        }

        @Override
        public void onClose()
        {
            try
            {
                server.onClose();
            }
            finally
            {
                latencyLog.onClose();
            }
        }

        @Override
        public String roleName()
        {
            return server.roleName() + "+" + latencyLog.roleName();
        }
    }
}
