package io.kvstash.tools;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.process.ChildJvm;
import io.kvstash.server.KvStashServer;
import io.kvstash.wire.SlotGeometry;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;

/**
 * Replays a Mooncake trace through a real server and real worker processes: starts an embedded
 * {@link KvStashServer} (in a fresh directory under {@code /dev/shm} unless one is given), spawns W worker
 * JVMs ({@code KvStashCommand worker}, same java and class path) that connect, register and wait; releases
 * them together, shows progress, merges their results and reads the server's counters. Request {@code i}
 * goes to worker {@code i % W}; with one worker the replay is in file order and its hit counts are those of
 * an exact LRU (traces/README.md).
 * <p>
 * Configure with the fluent setters, then {@link #run()} once ({@link ReplayCoordinator} runs it; each worker is a
 * {@link ReplayWorker}, started with the one child-JVM launcher, {@link ChildJvm}).
 */
public final class TraceReplay
{
    /** Most worker processes of one replay. */
    public static final int MAX_WORKERS = 64;
    /** Default chunk payload of a replay: 4 KiB. */
    public static final int PAYLOAD_BYTES_DEFAULT = 4096;
    /** Alignment of replay pools; a capacity in chunks sizes slots to the payload rounded up to it. */
    public static final int ALIGNMENT = 4096;
    /** Main class the workers run. */
    public static final String WORKER_MAIN_CLASS = "io.kvstash.cli.KvStashCommand";
    /** Subcommand the workers run. */
    public static final String WORKER_COMMAND = "worker";
    /** Line a worker prints once connected and registered. */
    public static final String READY_LINE = "ready";
    /** Line the coordinator sends a ready worker to start it. */
    public static final String GO_LINE = "go";
    /** Prefix of a worker's progress lines: requests done so far. */
    public static final String PROGRESS_PREFIX = "progress ";
    /** Prefix of a worker's final line: its {@link WorkerResult} as JSON. */
    public static final String RESULT_PREFIX = "result ";

    // The configuration, read by the ReplayCoordinator that runs it.
    Path trace;
    int payloadBytes = PAYLOAD_BYTES_DEFAULT;
    int capacityChunks;
    long poolSizeBytes = StoreContext.POOL_SIZE_BYTES_DEFAULT;
    int workers = 1;
    Path directory;
    ThreadingMode threadingMode = ThreadingMode.SHARED;
    WaitMode waitMode = WaitMode.BACKOFF;
    boolean copyTransport;
    WaitMode clientWaitMode;
    int workerWarmupRequests = WorkerWarmup.REQUESTS_DEFAULT;
    List<String> workerJvmOptions = List.of("-XX:+UseSerialGC", "-Xms64m", "-Xmx256m");
    PrintWriter progress;
    Path latencyLog;
    EvictionPolicy eviction = EvictionPolicy.LRU;
    boolean progressInPlace;

    /**
     * Sets the Mooncake trace to replay.
     *
     * @param trace JSON lines file.
     * @return this.
     */
    public TraceReplay trace(final Path trace)
    {
        this.trace = trace;
        return this;
    }

    /**
     * Sets the bytes of one chunk.
     *
     * @param payloadBytes bytes, a multiple of the server's chunk tokens.
     * @return this.
     */
    public TraceReplay payloadBytes(final int payloadBytes)
    {
        this.payloadBytes = payloadBytes;
        return this;
    }

    /**
     * Sizes the pool to exactly this many chunk slots (0 to size it by {@link #poolSizeBytes(long)}).
     *
     * @param capacityChunks slots.
     * @return this.
     */
    public TraceReplay capacityChunks(final int capacityChunks)
    {
        this.capacityChunks = capacityChunks;
        return this;
    }

    /**
     * Sets the pool size, used when no capacity in chunks is set.
     *
     * @param poolSizeBytes bytes.
     * @return this.
     */
    public TraceReplay poolSizeBytes(final long poolSizeBytes)
    {
        this.poolSizeBytes = poolSizeBytes;
        return this;
    }

    /**
     * Sets the number of worker processes.
     *
     * @param workers at least 1.
     * @return this.
     */
    public TraceReplay workers(final int workers)
    {
        this.workers = workers;
        return this;
    }

    /**
     * Sets the server directory; null for a fresh one under {@code /dev/shm}, removed afterwards.
     *
     * @param directory path or null.
     * @return this.
     */
    public TraceReplay directory(final Path directory)
    {
        this.directory = directory;
        return this;
    }

    /**
     * Sets the server's threading mode.
     *
     * @param threadingMode mode.
     * @return this.
     */
    public TraceReplay threadingMode(final ThreadingMode threadingMode)
    {
        this.threadingMode = threadingMode;
        return this;
    }

    /**
     * Sets the server's wait mode.
     *
     * @param waitMode mode.
     * @return this.
     */
    public TraceReplay waitMode(final WaitMode waitMode)
    {
        this.waitMode = waitMode;
        return this;
    }

    /**
     * Makes the workers use the copy transport instead of mapping the pool.
     *
     * @param copyTransport true for the copy transport.
     * @return this.
     */
    public TraceReplay copyTransport(final boolean copyTransport)
    {
        this.copyTransport = copyTransport;
        return this;
    }

    /**
     * Sets how the workers' clients wait for responses.
     *
     * @param clientWaitMode mode, or null for the client library's default.
     * @return this.
     */
    public TraceReplay clientWaitMode(final WaitMode clientWaitMode)
    {
        this.clientWaitMode = clientWaitMode;
        return this;
    }

    /**
     * Writes the replay's latency as an HdrHistogram interval log: the server's intervals by request type and
     * stage ({@code type.*}, {@code stage.*}) and each operation's end-to-end totals at the workers' clients
     * ({@code client.*}, one interval spanning the replay), all in nanoseconds ({@code kvstash latency} reads it).
     *
     * @param latencyLog file to write, or null for none.
     * @return this.
     */
    public TraceReplay latencyLog(final Path latencyLog)
    {
        this.latencyLog = latencyLog;
        return this;
    }

    /**
     * Sets how many of the trace's first requests each worker replays against a private server of its own before
     * it is ready ({@link WorkerWarmup}); the replay's server sees none of them.
     *
     * @param requests requests, 0 for no warm-up.
     * @return this.
     */
    public TraceReplay workerWarmupRequests(final int requests)
    {
        this.workerWarmupRequests = Math.max(0, requests);
        return this;
    }

    /**
     * Sets the server's eviction policy; under any policy a one-worker replay counts the hits of
     * {@link PolicyReplay} (the offline replay under that policy), reported beside them.
     *
     * @param eviction policy (default {@link EvictionPolicy#LRU}).
     * @return this.
     */
    public TraceReplay eviction(final EvictionPolicy eviction)
    {
        this.eviction = eviction;
        return this;
    }

    /**
     * Sets the JVM options of the worker processes (the Agrona export is always added).
     *
     * @param options options.
     * @return this.
     */
    public TraceReplay workerJvmOptions(final List<String> options)
    {
        this.workerJvmOptions = List.copyOf(options);
        return this;
    }

    /**
     * Where progress goes while the replay runs.
     *
     * @param progress writer (standard error), or null for none.
     * @param inPlace  true to rewrite one line ({@code \r}, a terminal), false for a line per second.
     * @return this.
     */
    public TraceReplay progress(final PrintWriter progress, final boolean inPlace)
    {
        this.progress = progress;
        this.progressInPlace = inPlace;
        return this;
    }

    /**
     * Pool size a capacity in chunks needs: exactly {@code capacityChunks} slots of the aligned payload,
     * no slot straddling a mapping segment.
     *
     * @param capacityChunks slots.
     * @param slotBytes      bytes of a slot, a multiple of the alignment.
     * @return bytes.
     */
    public static long poolBytesFor(final int capacityChunks, final long slotBytes)
    {
        final long perSegment = SlotGeometry.SEGMENT_BYTES / slotBytes;
        return (capacityChunks / perSegment) * SlotGeometry.SEGMENT_BYTES + (capacityChunks % perSegment) * slotBytes;
    }

    /**
     * Runs the replay.
     *
     * @return the report.
     * @throws IOException when the trace cannot be read or parsed, or the server's files cannot be created.
     * @throws InterruptedException when interrupted while waiting for the workers.
     * @throws IllegalStateException when a worker fails; its own message went to standard error.
     * @throws IllegalArgumentException when the configuration is invalid.
     */
    public ReplayReport run() throws IOException, InterruptedException
    {
        return new ReplayCoordinator(this).run();
    }
}
