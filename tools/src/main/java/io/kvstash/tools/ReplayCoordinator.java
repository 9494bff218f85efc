package io.kvstash.tools;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerConfiguration;
import io.kvstash.server.ServerContext;
import io.kvstash.server.Sizes;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.file.CountersDescriptor;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs one {@link TraceReplay} as configured: validates the configuration and sizes the store, launches the
 * embedded server, starts the worker processes ({@link ReplayWorker}), releases them together, shows progress,
 * merges their results, reads the server's counters and writes the latency log. Used once, by
 * {@link TraceReplay#run()}.
 */
final class ReplayCoordinator
{
    private static final long READY_TIMEOUT_MS = 120_000;

    private final TraceReplay replay;
    private Path tracePath;
    private MooncakeTrace mooncake;
    private int largestRequest;
    private StoreContext store;

    ReplayCoordinator(final TraceReplay replay)
    {
        this.replay = replay;
    }

    /**
     * Runs the replay (see {@link TraceReplay#run()}).
     */
    ReplayReport run() throws IOException, InterruptedException
    {
        validate();
        tracePath = replay.trace.toAbsolutePath();
        mooncake = readTrace(tracePath);
        for (final MooncakeTrace.Request request : mooncake.requests())
        {
            largestRequest = Math.max(largestRequest, request.blockCount());
        }
        if (replay.capacityChunks > 0 && replay.capacityChunks < largestRequest)
        {
            throw new IllegalArgumentException("--capacity-chunks " + replay.capacityChunks + " is smaller than the " +
                "largest request of " + tracePath.getFileName() + " (" + largestRequest + " chunks): give at least " +
                largestRequest);
        }
        store = storeContext(Math.max(StoreContext.MAX_CHUNKS_PER_REQUEST_DEFAULT, largestRequest));
        TraceWorker.layoutFor(replay.payloadBytes, store.chunkTokens());

        final boolean ownDirectory = null == replay.directory;
        final Path dir = ownDirectory ? newDirectory() : replay.directory;
        // The server writes its intervals here; the final log adds the clients' totals to them (writeLatencyLog).
        final Path serverLog = null == replay.latencyLog ? null :
            Files.createTempFile(replay.latencyLog.toAbsolutePath().getParent(), ".kvstash-server-", ".hlog");
        final AtomicReference<KvStashServer> launched = new AtomicReference<>();
        final Thread cleanup = new Thread(() -> cleanup(dir, ownDirectory, launched.get()), "kvstash-replay-cleanup");
        final List<ReplayWorker> processes = new ArrayList<>();
        Runtime.getRuntime().addShutdownHook(cleanup);
        try
        {
            final KvStashServer server = KvStashServer.launch(serverContext(dir, serverLog));
            launched.set(server);
            for (int i = 0; i < replay.workers; i++)
            {
                processes.add(ReplayWorker.start(replay.workerJvmOptions, workerArgs(dir, tracePath, i), i));
            }
            awaitReady(processes);
            final long slotCapacity = server.counters().get(CountersDescriptor.SLOT_CAPACITY);
            checkCapacity(slotCapacity);
            return replayAndReport(server, processes, (int)slotCapacity, serverLog);
        }
        finally
        {
            for (final ReplayWorker process : processes)
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

    private void validate()
    {
        if (null == replay.trace)
        {
            throw new IllegalArgumentException("no trace");
        }
        if (replay.workers < 1 || replay.workers > TraceReplay.MAX_WORKERS)
        {
            throw new IllegalArgumentException("--workers " + replay.workers + " is out of range: give 1 to " +
                TraceReplay.MAX_WORKERS);
        }
        if (replay.payloadBytes < ChunkPattern.MIN_LENGTH)
        {
            throw new IllegalArgumentException("payload must be at least " + ChunkPattern.MIN_LENGTH + " bytes");
        }
        if (replay.capacityChunks < 0)
        {
            throw new IllegalArgumentException("capacity must be positive: " + replay.capacityChunks);
        }
    }

    private static MooncakeTrace readTrace(final Path tracePath) throws IOException
    {
        try
        {
            return MooncakeTrace.read(tracePath);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IOException("not a Mooncake trace: " + ex.getMessage(), ex);
        }
    }

    /**
     * The store of the replay's server: exactly {@code capacityChunks} slots of the payload rounded up to the
     * alignment, or a pool of {@code poolSizeBytes}.
     */
    private StoreContext storeContext(final int maxChunks)
    {
        final StoreContext store = new StoreContext()
            .alignment(TraceReplay.ALIGNMENT)
            .maxChunksPerRequest(maxChunks)
            .eviction(replay.eviction);
        if (replay.capacityChunks > 0)
        {
            final long slotBytes = ((long)replay.payloadBytes + TraceReplay.ALIGNMENT - 1) &
                -(long)TraceReplay.ALIGNMENT;
            store.slotBytes(slotBytes).poolSizeBytes(TraceReplay.poolBytesFor(replay.capacityChunks, slotBytes));
            if (SlotGeometry.capacity(store.poolSizeBytes(), slotBytes) != replay.capacityChunks)
            {
                throw new IllegalStateException("cannot size a pool to " + replay.capacityChunks + " slots");
            }
        }
        else
        {
            store.poolSizeBytes(replay.poolSizeBytes);
        }
        return store;
    }

    private ServerContext serverContext(final Path dir, final Path serverLog)
    {
        final int responseRing = Math.max(ServerConfiguration.RESPONSE_RING_CAPACITY_DEFAULT,
            Integer.highestOneBit(2 * (64 + 16 * store.maxChunksPerRequest() + store.maxInlineBytes() + 512) - 1));
        return new ServerContext()
            .directory(dir)
            .storeContext(store)
            .threadingMode(replay.threadingMode)
            .waitMode(replay.waitMode)
            .responseRingCapacity(responseRing)
            .maxClients(Math.max(ServerConfiguration.MAX_CLIENTS_DEFAULT, replay.workers + 8))
            .latencyLogFile(serverLog);
    }

    private void checkCapacity(final long slotCapacity)
    {
        if (slotCapacity < largestRequest)
        {
            throw new IllegalArgumentException("a pool of " + Sizes.formatSize(store.poolSizeBytes()) + " holds " +
                slotCapacity + " chunks of " + replay.payloadBytes + " bytes, fewer than the largest request of " +
                tracePath.getFileName() + " (" + largestRequest + " chunks): give a larger --pool-size");
        }
        if (replay.capacityChunks > 0 && slotCapacity != replay.capacityChunks)
        {
            throw new IllegalStateException("the pool holds " + slotCapacity + " slots, not " +
                replay.capacityChunks);
        }
    }

    /**
     * Releases the ready workers together, waits for their results, closes the server once it has drained, writes
     * the latency log and reports.
     */
    private ReplayReport replayAndReport(
        final KvStashServer server, final List<ReplayWorker> processes, final int slotCapacity, final Path serverLog)
        throws IOException, InterruptedException
    {
        final long start = System.nanoTime();
        final long startMs = System.currentTimeMillis();
        for (final ReplayWorker process : processes)
        {
            process.go();
        }
        final WorkerResult merged = awaitResults(processes, mooncake.requests().size(), start);
        // From the go to the last worker's result line: the replay, not the workers' JVM exits or the
        // coordinator's polling of them.
        long lastResultNs = 0;
        for (final ReplayWorker process : processes)
        {
            lastResultNs = Math.max(lastResultNs, process.resultNs() - start);
        }
        final long wallNs = lastResultNs > 0 ? lastResultNs : System.nanoTime() - start;
        final long endMs = System.currentTimeMillis();
        server.awaitDrained(TimeUnit.SECONDS.toMillis(10));
        final long[] counters = new long[CountersDescriptor.COUNT];
        server.counters().snapshot(counters);
        server.close();
        if (null != replay.latencyLog)
        {
            writeLatencyLog(replay.latencyLog, serverLog, merged, startMs, endMs);
        }

        final Histogram[] serverLatency = new Histogram[RequestType.COUNT];
        if (null != server.latency())
        {
            for (int type = 0; type < serverLatency.length; type++)
            {
                serverLatency[type] = server.latency().requestTotal(type);
            }
        }
        final long lruHits = PolicyReplay.hitChunks(mooncake.requests(), slotCapacity, EvictionPolicy.LRU);
        final ReplayReport report = new ReplayReport(tracePath, BundledTrace.isBundled(tracePath),
            replay.workers, replay.payloadBytes, store.poolSizeBytes(), slotCapacity, merged, wallNs, counters,
            serverLatency, lruHits);
        report.policy(replay.eviction, EvictionPolicy.LRU == replay.eviction ? lruHits :
            PolicyReplay.hitChunks(mooncake.requests(), slotCapacity, replay.eviction));
        return report;
    }

    private static Path newDirectory()
    {
        return ShmDirectories.newPath("kvstash-replay-" + ProcessHandle.current().pid() + "-");
    }

    private static synchronized void cleanup(final Path dir, final boolean ownDirectory, final KvStashServer server)
    {
        if (null != server)
        {
            server.close();
        }
        if (ownDirectory)
        {
            ShmDirectories.delete(dir);
        }
    }

    private List<String> workerArgs(final Path dir, final Path tracePath, final int index)
    {
        final List<String> command = new ArrayList<>();
        command.add(TraceReplay.WORKER_COMMAND);
        command.add("--dir=" + dir);
        command.add("--trace=" + tracePath);
        command.add("--index=" + index);
        command.add("--workers=" + replay.workers);
        command.add("--payload-bytes=" + replay.payloadBytes);
        command.add("--instance-id=" + (index + 1));
        command.add("--await-go");
        command.add("--warmup-requests=" + replay.workerWarmupRequests);
        if (replay.copyTransport)
        {
            command.add("--copy-transport");
        }
        if (null != replay.clientWaitMode)
        {
            command.add("--client-wait=" + replay.clientWaitMode.name().toLowerCase(Locale.ROOT).replace('_', '-'));
        }
        return command;
    }

    private void awaitReady(final List<ReplayWorker> processes) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + READY_TIMEOUT_MS;
        for (final ReplayWorker process : processes)
        {
            while (!process.ready())
            {
                process.checkAlive();
                if (System.currentTimeMillis() > deadline)
                {
                    throw new IllegalStateException("worker " + process.index() + " did not get ready in " +
                        READY_TIMEOUT_MS / 1000 + " s");
                }
                Thread.sleep(10);
            }
        }
    }

    private WorkerResult awaitResults(final List<ReplayWorker> processes, final int requests, final long startNs)
        throws InterruptedException
    {
        long nextProgressNs = startNs + TimeUnit.MILLISECONDS.toNanos(replay.progressInPlace ? 200 : 1000);
        long printed = -1;
        while (true)
        {
            boolean allDone = true;
            for (final ReplayWorker process : processes)
            {
                if (process.hasExited())
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
            if (null != replay.progress && now - nextProgressNs >= 0)
            {
                printed = printProgress(processes, requests, now - startNs);
                nextProgressNs = now + TimeUnit.MILLISECONDS.toNanos(replay.progressInPlace ? 200 : 1000);
            }
            Thread.sleep(20);
        }
        if (null != replay.progress)
        {
            if (printed < requests)
            {
                printProgress(processes, requests, System.nanoTime() - startNs);
            }
            if (replay.progressInPlace)
            {
                replay.progress.println();
                replay.progress.flush();
            }
        }
        final WorkerResult merged = new WorkerResult();
        for (final ReplayWorker process : processes)
        {
            merged.merge(process.result());
        }
        return merged;
    }

    private long printProgress(final List<ReplayWorker> processes, final int requests, final long elapsedNs)
    {
        long done = 0;
        for (final ReplayWorker process : processes)
        {
            done += process.progress();
        }
        final String line = String.format(Locale.ROOT, "replay: %,d / %,d requests (%.1f %%), %.1f s",
            done, requests, 100.0 * done / Math.max(1, requests), elapsedNs / 1e9);
        if (replay.progressInPlace)
        {
            replay.progress.print('\r' + line);
        }
        else
        {
            replay.progress.println(line);
        }
        replay.progress.flush();
        return done;
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
}
