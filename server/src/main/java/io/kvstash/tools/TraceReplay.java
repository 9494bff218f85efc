package io.kvstash.tools;

import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.SlotGeometry;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Replays a Mooncake trace through a real server and real worker processes: starts an embedded
 * {@link KvStashServer} (in a fresh directory under {@code /dev/shm} unless one is given), spawns W worker
 * JVMs ({@code KvStashCommand worker}, same java and class path) that connect, register and wait; releases
 * them together, shows progress, merges their results and reads the server's counters. Request {@code i}
 * goes to worker {@code i % W}; with one worker the replay is in file order and its hit counts are those of
 * an exact LRU (SPEC section 6).
 * <p>
 * Configure with the fluent setters, then {@link #run()} once.
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

    private static final long READY_TIMEOUT_MS = 120_000;

    private Path trace;
    private int payloadBytes = PAYLOAD_BYTES_DEFAULT;
    private int capacityChunks;
    private long poolSizeBytes = StoreContext.POOL_SIZE_BYTES_DEFAULT;
    private int workers = 1;
    private Path directory;
    private ThreadingMode threadingMode = ThreadingMode.SHARED;
    private WaitMode waitMode = WaitMode.BACKOFF;
    private boolean copyTransport;
    private WaitMode clientWaitMode;
    private List<String> workerJvmOptions = List.of("-XX:+UseSerialGC", "-Xms64m", "-Xmx256m");
    private PrintWriter progress;
    private Path latencyLog;
    private boolean progressInPlace;

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
    public Report run() throws IOException, InterruptedException
    {
        if (null == trace)
        {
            throw new IllegalArgumentException("no trace");
        }
        if (workers < 1 || workers > MAX_WORKERS)
        {
            throw new IllegalArgumentException("--workers " + workers + " is out of range: give 1 to " + MAX_WORKERS);
        }
        if (payloadBytes < ChunkPattern.MIN_LENGTH)
        {
            throw new IllegalArgumentException("payload must be at least " + ChunkPattern.MIN_LENGTH + " bytes");
        }
        if (capacityChunks < 0)
        {
            throw new IllegalArgumentException("capacity must be positive: " + capacityChunks);
        }
        final Path tracePath = trace.toAbsolutePath();
        final MooncakeTrace mooncake;
        try
        {
            mooncake = MooncakeTrace.read(tracePath);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IOException("not a Mooncake trace: " + ex.getMessage(), ex);
        }
        int maxChunks = StoreContext.MAX_CHUNKS_PER_REQUEST_DEFAULT;
        int largestRequest = 0;
        for (final MooncakeTrace.Request request : mooncake.requests())
        {
            largestRequest = Math.max(largestRequest, request.blockCount());
        }
        maxChunks = Math.max(maxChunks, largestRequest);
        if (capacityChunks > 0 && capacityChunks < largestRequest)
        {
            throw new IllegalArgumentException("--capacity-chunks " + capacityChunks + " is smaller than the " +
                "largest request of " + tracePath.getFileName() + " (" + largestRequest + " chunks): give at least " +
                largestRequest);
        }

        final StoreContext store = new StoreContext()
            .alignment(ALIGNMENT)
            .maxChunksPerRequest(maxChunks);
        if (capacityChunks > 0)
        {
            final long slotBytes = ((long)payloadBytes + ALIGNMENT - 1) & -(long)ALIGNMENT;
            store.slotBytes(slotBytes).poolSizeBytes(poolBytesFor(capacityChunks, slotBytes));
            if (SlotGeometry.capacity(store.poolSizeBytes(), slotBytes) != capacityChunks)
            {
                throw new IllegalStateException("cannot size a pool to " + capacityChunks + " slots");
            }
        }
        else
        {
            store.poolSizeBytes(poolSizeBytes);
        }
        TraceWorker.layoutFor(payloadBytes, store.chunkTokens());

        final boolean ownDirectory = null == directory;
        final Path dir = ownDirectory ? newDirectory() : directory;
        final int responseRing = Math.max(ServerContext.RESPONSE_RING_CAPACITY_DEFAULT,
            Integer.highestOneBit(2 * (64 + 16 * maxChunks + store.maxInlineBytes() + 512) - 1));
        final ServerContext serverContext = new ServerContext()
            .directory(dir)
            .storeContext(store)
            .threadingMode(threadingMode)
            .waitMode(waitMode)
            .responseRingCapacity(responseRing)
            .maxClients(Math.max(ServerContext.MAX_CLIENTS_DEFAULT, workers + 8));
        // The server writes its intervals here; the final log adds the clients' totals to them (writeLatencyLog).
        final Path serverLog = null == latencyLog ? null :
            Files.createTempFile(latencyLog.toAbsolutePath().getParent(), ".kvstash-server-", ".hlog");
        serverContext.latencyLogFile(serverLog);

        final AtomicReference<KvStashServer> launched = new AtomicReference<>();
        final Thread cleanup = new Thread(() -> cleanup(dir, ownDirectory, launched.get()), "kvstash-replay-cleanup");
        final List<WorkerProcess> processes = new ArrayList<>();
        Runtime.getRuntime().addShutdownHook(cleanup);
        try
        {
            final KvStashServer server = KvStashServer.launch(serverContext);
            launched.set(server);
            for (int i = 0; i < workers; i++)
            {
                processes.add(WorkerProcess.start(command(dir, tracePath, i), i));
            }
            awaitReady(processes);
            final long slotCapacity = server.counters().get(StoreCounters.SLOT_CAPACITY);
            if (slotCapacity < largestRequest)
            {
                throw new IllegalArgumentException("a pool of " + Sizes.formatSize(store.poolSizeBytes()) + " holds " +
                    slotCapacity + " chunks of " + payloadBytes + " bytes, fewer than the largest request of " +
                    tracePath.getFileName() + " (" + largestRequest + " chunks): give a larger --pool-size");
            }
            if (capacityChunks > 0 && slotCapacity != capacityChunks)
            {
                throw new IllegalStateException("the pool holds " + slotCapacity + " slots, not " + capacityChunks);
            }

            final long start = System.nanoTime();
            final long startMs = System.currentTimeMillis();
            for (final WorkerProcess process : processes)
            {
                process.go();
            }
            final WorkerResult merged = awaitResults(processes, mooncake.requests().size(), start);
            final long wallNs = System.nanoTime() - start;
            final long endMs = System.currentTimeMillis();
            server.awaitDrained(TimeUnit.SECONDS.toMillis(10));
            final long[] counters = new long[StoreCounters.COUNT];
            server.counters().snapshot(counters);
            server.close();
            if (null != latencyLog)
            {
                writeLatencyLog(latencyLog, serverLog, merged, startMs, endMs);
            }

            final Histogram[] serverLatency = new Histogram[RequestType.COUNT];
            if (null != server.latency())
            {
                for (int type = 0; type < serverLatency.length; type++)
                {
                    serverLatency[type] = server.latency().requestTotal(type);
                }
            }
            final long lruHits = LruReference.hitChunks(mooncake.requests(), (int)slotCapacity);
            return new Report(tracePath, BundledTrace.isBundled(tracePath), workers, payloadBytes,
                store.poolSizeBytes(), (int)slotCapacity, merged, wallNs, counters, serverLatency, lruHits);
        }
        finally
        {
            for (final WorkerProcess process : processes)
            {
                process.destroy();
            }
            cleanup(dir, ownDirectory, launched.get());
            if (null != serverLog)
            {
                Files.deleteIfExists(serverLog);
            }
            try
            {
                Runtime.getRuntime().removeShutdownHook(cleanup);
            }
            catch (final IllegalStateException ignore)
            {
                // The JVM is shutting down: the hook runs anyway.
            }
        }
    }

    private static Path newDirectory()
    {
        final Path shm = Path.of("/dev/shm");
        final Path base = Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir"));
        return base.resolve("kvstash-replay-" + ProcessHandle.current().pid() + "-" +
            Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xFFFF_FFFFL));
    }

    private static synchronized void cleanup(final Path dir, final boolean ownDirectory, final KvStashServer server)
    {
        if (null != server)
        {
            server.close();
        }
        if (!ownDirectory || !Files.isDirectory(dir))
        {
            return;
        }
        try
        {
            try (DirectoryStream<Path> files = Files.newDirectoryStream(dir))
            {
                for (final Path file : files)
                {
                    Files.deleteIfExists(file);
                }
            }
            Files.deleteIfExists(dir);
        }
        catch (final IOException ignore)
        {
            // Best effort: a directory left under /dev/shm is reclaimed by its next server or by hand.
        }
    }

    private List<String> command(final Path dir, final Path tracePath, final int index)
    {
        final List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--add-exports");
        command.add("java.base/jdk.internal.misc=ALL-UNNAMED");
        command.addAll(workerJvmOptions);
        command.add("-cp");
        command.add(absoluteClassPath());
        command.add(WORKER_MAIN_CLASS);
        command.add(WORKER_COMMAND);
        command.add("--dir=" + dir);
        command.add("--trace=" + tracePath);
        command.add("--index=" + index);
        command.add("--workers=" + workers);
        command.add("--payload-bytes=" + payloadBytes);
        command.add("--instance-id=" + (index + 1));
        command.add("--await-go");
        if (copyTransport)
        {
            command.add("--copy-transport");
        }
        if (null != clientWaitMode)
        {
            command.add("--client-wait=" + clientWaitMode.name().toLowerCase(Locale.ROOT).replace('_', '-'));
        }
        return command;
    }

    private static String absoluteClassPath()
    {
        final StringBuilder out = new StringBuilder();
        for (final String entry : System.getProperty("java.class.path").split(File.pathSeparator))
        {
            if (entry.isEmpty())
            {
                continue;
            }
            if (out.length() > 0)
            {
                out.append(File.pathSeparatorChar);
            }
            out.append(Path.of(entry).toAbsolutePath());
        }
        return out.toString();
    }

    private void awaitReady(final List<WorkerProcess> processes) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + READY_TIMEOUT_MS;
        for (final WorkerProcess process : processes)
        {
            while (!process.ready())
            {
                process.checkAlive();
                if (System.currentTimeMillis() > deadline)
                {
                    throw new IllegalStateException("worker " + process.index + " did not get ready in " +
                        READY_TIMEOUT_MS / 1000 + " s");
                }
                Thread.sleep(10);
            }
        }
    }

    private WorkerResult awaitResults(final List<WorkerProcess> processes, final int requests, final long startNs)
        throws InterruptedException
    {
        long nextProgressNs = startNs + TimeUnit.MILLISECONDS.toNanos(progressInPlace ? 200 : 1000);
        long printed = -1;
        while (true)
        {
            boolean allDone = true;
            for (final WorkerProcess process : processes)
            {
                if (process.process.waitFor(0, TimeUnit.MILLISECONDS))
                {
                    process.joinReader();
                    process.checkExit();
                }
                else
                {
                    allDone = false;
                }
            }
            if (allDone)
            {
                break;
            }
            final long now = System.nanoTime();
            if (null != progress && now - nextProgressNs >= 0)
            {
                printed = printProgress(processes, requests, now - startNs);
                nextProgressNs = now + TimeUnit.MILLISECONDS.toNanos(progressInPlace ? 200 : 1000);
            }
            Thread.sleep(20);
        }
        if (null != progress)
        {
            if (printed < requests)
            {
                printProgress(processes, requests, System.nanoTime() - startNs);
            }
            if (progressInPlace)
            {
                progress.println();
                progress.flush();
            }
        }
        final WorkerResult merged = new WorkerResult();
        for (final WorkerProcess process : processes)
        {
            merged.merge(process.result());
        }
        return merged;
    }

    private long printProgress(final List<WorkerProcess> processes, final int requests, final long elapsedNs)
    {
        long done = 0;
        for (final WorkerProcess process : processes)
        {
            done += process.progress;
        }
        final String line = String.format(Locale.ROOT, "replay: %,d / %,d requests (%.1f %%), %.1f s",
            done, requests, 100.0 * done / Math.max(1, requests), elapsedNs / 1e9);
        if (progressInPlace)
        {
            progress.print('\r' + line);
        }
        else
        {
            progress.println(line);
        }
        progress.flush();
        return done;
    }

    /**
     * One worker JVM and the thread that reads its standard output.
     */
    private static final class WorkerProcess
    {
        private final int index;
        private final Process process;
        private final Thread reader;
        private volatile boolean ready;
        private volatile long progress;
        private volatile String resultLine;

        private WorkerProcess(final int index, final Process process)
        {
            this.index = index;
            this.process = process;
            this.reader = new Thread(this::readOutput, "kvstash-worker-" + index + "-stdout");
            reader.setDaemon(true);
            reader.start();
        }

        static WorkerProcess start(final List<String> command, final int index) throws IOException
        {
            final ProcessBuilder builder = new ProcessBuilder(command);
            builder.redirectError(ProcessBuilder.Redirect.INHERIT);
            return new WorkerProcess(index, builder.start());
        }

        private void readOutput()
        {
            try (BufferedReader in = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)))
            {
                String line;
                while (null != (line = in.readLine()))
                {
                    if (line.startsWith(PROGRESS_PREFIX))
                    {
                        progress = Long.parseLong(line.substring(PROGRESS_PREFIX.length()).trim());
                    }
                    else if (line.startsWith(RESULT_PREFIX))
                    {
                        resultLine = line.substring(RESULT_PREFIX.length());
                    }
                    else if (line.equals(READY_LINE))
                    {
                        ready = true;
                    }
                    else
                    {
                        System.err.println("[worker " + index + "] " + line);
                    }
                }
            }
            catch (final IOException | NumberFormatException ignore)
            {
                // The worker is gone or wrote garbage: its exit code and missing result say so.
            }
        }

        boolean ready()
        {
            return ready;
        }

        void checkAlive()
        {
            if (!process.isAlive())
            {
                throw new IllegalStateException("worker " + index + " exited with code " + process.exitValue() +
                    " before it was ready (see its message above)");
            }
        }

        void go()
        {
            try
            {
                final OutputStream in = process.getOutputStream();
                in.write((GO_LINE + "\n").getBytes(StandardCharsets.US_ASCII));
                in.flush();
            }
            catch (final IOException ex)
            {
                throw new IllegalStateException("worker " + index + " is gone", ex);
            }
        }

        void joinReader() throws InterruptedException
        {
            reader.join(TimeUnit.SECONDS.toMillis(10));
        }

        void checkExit()
        {
            final int code = process.exitValue();
            if (0 != code || null == resultLine)
            {
                throw new IllegalStateException("worker " + index + " failed (exit code " + code +
                    (null == resultLine ? ", no result" : "") + "; see its message above)");
            }
        }

        WorkerResult result()
        {
            return WorkerResult.fromMap(Json.parseObject(resultLine));
        }

        void destroy()
        {
            if (process.isAlive())
            {
                process.destroyForcibly();
            }
            try
            {
                process.getOutputStream().close();
            }
            catch (final IOException ignore)
            {
                // Already closed.
            }
        }
    }

    /**
     * Writes the replay's interval log: the server's intervals as it logged them, then one interval per client
     * operation spanning the replay. The log's base time is the earliest start among them, so every interval's
     * offset is non-negative.
     */
    static void writeLatencyLog(
        final Path file, final Path serverLog, final WorkerResult clients, final long startMs, final long endMs)
        throws IOException
    {
        final List<Histogram> intervals = IntervalLogs.read(serverLog);
        long baseMs = startMs;
        for (final Histogram interval : intervals)
        {
            baseMs = Math.min(baseMs, interval.getStartTimeStamp());
        }
        for (int op = 0; op < WorkerResult.OPERATION_TYPES; op++)
        {
            final Histogram total = clients.histogram(op);
            if (total.getTotalCount() > 0)
            {
                final Histogram copy = total.copy();
                copy.setTag("client." + WorkerResult.OPERATION_NAMES[op]);
                copy.setStartTimeStamp(startMs);
                copy.setEndTimeStamp(endMs);
                intervals.add(copy);
            }
        }
        try (PrintStream out = new PrintStream(file.toFile(), StandardCharsets.UTF_8))
        {
            final HistogramLogWriter writer = new HistogramLogWriter(out);
            writer.outputComment("kvstash replay latency in ns: the server's intervals by request type and stage " +
                "(type.*, stage.*), the workers' end-to-end totals over the replay (client.*)");
            writer.outputLogFormatVersion();
            writer.outputStartTime(baseMs);
            writer.setBaseTime(baseMs);
            writer.outputLegend();
            for (final Histogram h : intervals)
            {
                writer.outputIntervalHistogram(h);
            }
        }
    }

    /**
     * The outcome of a replay: the workers' merged result, the server's counters and latency, and the
     * reference figures.
     */
    public static final class Report
    {
        private final Path trace;
        private final boolean bundled;
        private final int workers;
        private final int payloadBytes;
        private final long poolSizeBytes;
        private final int capacityChunks;
        private final WorkerResult result;
        private final long wallNs;
        private final long[] counters;
        private final Histogram[] serverLatency;
        private final long lruHitChunks;

        Report(
            final Path trace,
            final boolean bundled,
            final int workers,
            final int payloadBytes,
            final long poolSizeBytes,
            final int capacityChunks,
            final WorkerResult result,
            final long wallNs,
            final long[] counters,
            final Histogram[] serverLatency,
            final long lruHitChunks)
        {
            this.trace = trace;
            this.bundled = bundled;
            this.workers = workers;
            this.payloadBytes = payloadBytes;
            this.poolSizeBytes = poolSizeBytes;
            this.capacityChunks = capacityChunks;
            this.result = result;
            this.wallNs = wallNs;
            this.counters = counters;
            this.serverLatency = serverLatency;
            this.lruHitChunks = lruHitChunks;
        }

        /**
         * The trace replayed.
         *
         * @return absolute path.
         */
        public Path trace()
        {
            return trace;
        }

        /**
         * Whether the trace is the bundled one (the SPEC reference figures apply).
         *
         * @return true when bundled.
         */
        public boolean bundled()
        {
            return bundled;
        }

        /**
         * Worker processes.
         *
         * @return count.
         */
        public int workers()
        {
            return workers;
        }

        /**
         * Bytes of one chunk.
         *
         * @return bytes.
         */
        public int payloadBytes()
        {
            return payloadBytes;
        }

        /**
         * Pool size.
         *
         * @return bytes.
         */
        public long poolSizeBytes()
        {
            return poolSizeBytes;
        }

        /**
         * Slots in the pool.
         *
         * @return chunks the pool holds.
         */
        public int capacityChunks()
        {
            return capacityChunks;
        }

        /**
         * The workers' merged result.
         *
         * @return result.
         */
        public WorkerResult result()
        {
            return result;
        }

        /**
         * Wall time from releasing the workers to the last one finishing.
         *
         * @return ns.
         */
        public long wallNs()
        {
            return wallNs;
        }

        /**
         * A server counter at the end of the replay.
         *
         * @param id counter id ({@link StoreCounters}).
         * @return value.
         */
        public long counter(final int id)
        {
            return counters[id];
        }

        /**
         * Server-side latency of a request type (receive to response), null when latency was off.
         *
         * @param type request type.
         * @return histogram (ns) or null.
         */
        public Histogram serverLatency(final int type)
        {
            return serverLatency[type];
        }

        /**
         * Hit chunks of the offline exact LRU at this capacity, in file order.
         *
         * @return chunks.
         */
        public long lruHitChunks()
        {
            return lruHitChunks;
        }

        /**
         * Hit rate: hit chunks over chunk references.
         *
         * @return fraction in [0, 1].
         */
        public double hitRate()
        {
            return result.count(WorkerResult.HIT_CHUNKS) / (double)Math.max(1, result.count(WorkerResult.CHUNKS));
        }

        /**
         * Bytes moved (written and read) per second.
         *
         * @return GB/s (10^9 bytes per second).
         */
        public double gigabytesPerSecond()
        {
            return (result.count(WorkerResult.BYTES_WRITTEN) + result.count(WorkerResult.BYTES_READ)) /
                (double)Math.max(1, wallNs);
        }

        /**
         * Request round trips per second, every worker together.
         *
         * @return operations per second.
         */
        public double operationsPerSecond()
        {
            long ops = 0;
            for (int op = 0; op < WorkerResult.ROUND_TRIP_OPERATIONS; op++)
            {
                ops += result.histogram(op).getTotalCount();
            }
            return ops * 1e9 / Math.max(1, wallNs);
        }

        /**
         * The report as a JSON-ready map: the fields of {@code replay --json}.
         *
         * @return ordered map.
         */
        public Map<String, Object> toMap()
        {
            final Map<String, Object> map = new LinkedHashMap<>();
            final long chunks = result.count(WorkerResult.CHUNKS);
            map.put("trace", trace.toString());
            map.put("format", "mooncake");
            map.put("workers", workers);
            map.put("requests", result.count(WorkerResult.REQUESTS));
            map.put("chunks", chunks);
            map.put("hit_chunks", result.count(WorkerResult.HIT_CHUNKS));
            map.put("hit_rate", round(hitRate(), 6));
            map.put("capacity_chunks", capacityChunks);
            map.put("payload_bytes", payloadBytes);
            map.put("pool_bytes", poolSizeBytes);
            map.put("evictions", counters[StoreCounters.EVICTIONS]);
            map.put("retrieved_chunks", result.count(WorkerResult.RETRIEVED_CHUNKS));
            map.put("stored_chunks", result.count(WorkerResult.STORED_CHUNKS));
            map.put("skipped_chunks", result.count(WorkerResult.SKIPPED_CHUNKS));
            map.put("bytes_written", result.count(WorkerResult.BYTES_WRITTEN));
            map.put("bytes_read", result.count(WorkerResult.BYTES_READ));
            map.put("elapsed_s", round(wallNs / 1e9, 3));
            map.put("gbps", round(gigabytesPerSecond(), 3));
            map.put("ops_per_s", Math.round(operationsPerSecond()));
            final Histogram all = result.roundTrips();
            map.put("p50_us", micros(all.getValueAtPercentile(50)));
            map.put("p90_us", micros(all.getValueAtPercentile(90)));
            map.put("p99_us", micros(all.getValueAtPercentile(99)));
            map.put("p999_us", micros(all.getValueAtPercentile(99.9)));
            map.put("max_us", micros(all.getMaxValue()));
            final Map<String, Object> latency = new LinkedHashMap<>();
            for (int op = 0; op < WorkerResult.OPERATION_TYPES; op++)
            {
                final Histogram h = result.histogram(op);
                if (h.getTotalCount() > 0)
                {
                    latency.put(WorkerResult.OPERATION_NAMES[op], percentiles(h));
                }
            }
            map.put("latency_us", latency);
            map.put("checksum_mismatches", result.count(WorkerResult.CHECKSUM_MISMATCHES));
            map.put("fence_failures", result.count(WorkerResult.FENCE_FAILURES));
            map.put("retrieve_misses", result.count(WorkerResult.RETRIEVE_MISSES));
            map.put("no_space", result.count(WorkerResult.NO_SPACE));
            map.put("unknown_transfer", result.count(WorkerResult.UNKNOWN_TRANSFER));
            map.put("other_errors", result.count(WorkerResult.OTHER_ERRORS));
            map.put("server_errors", counters[StoreCounters.ERRORS]);
            map.put("lru_hit_chunks", lruHitChunks);
            map.put("lru_hit_rate", round(lruHitChunks / (double)Math.max(1, chunks), 6));
            if (bundled)
            {
                final Map<String, Object> reference = new LinkedHashMap<>();
                BundledTrace.referenceHitChunks().forEach((n, hits) -> reference.put(String.valueOf(n), hits));
                map.put("reference_hit_chunks", reference);
                final Long atCapacity = BundledTrace.referenceHitChunks().get(capacityChunks);
                if (null != atCapacity)
                {
                    map.put("reference_hit_chunks_at_capacity", atCapacity);
                    map.put("reference_hit_rate", round(atCapacity / (double)Math.max(1, chunks), 6));
                }
            }
            return map;
        }

        /**
         * Percentiles of a histogram in microseconds.
         *
         * @param h histogram (ns).
         * @return count, p50, p90, p99, p999, max.
         */
        public static Map<String, Object> percentiles(final Histogram h)
        {
            final Map<String, Object> map = new LinkedHashMap<>();
            map.put("count", h.getTotalCount());
            map.put("p50", micros(h.getValueAtPercentile(50)));
            map.put("p90", micros(h.getValueAtPercentile(90)));
            map.put("p99", micros(h.getValueAtPercentile(99)));
            map.put("p999", micros(h.getValueAtPercentile(99.9)));
            map.put("max", micros(h.getMaxValue()));
            return map;
        }

        private static double micros(final long ns)
        {
            return round(ns / 1000.0, 2);
        }

        private static double round(final double value, final int digits)
        {
            final double scale = Math.pow(10, digits);
            return Math.round(value * scale) / scale;
        }
    }
}
