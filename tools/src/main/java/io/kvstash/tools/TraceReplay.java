package io.kvstash.tools;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.server.KvStashServer;
import io.kvstash.wire.SlotGeometry;
import org.HdrHistogram.Histogram;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

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
    public Report run() throws IOException, InterruptedException
    {
        return new ReplayCoordinator(this).run();
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
        private EvictionPolicy eviction = EvictionPolicy.LRU;
        private long policyHitChunks = -1;

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
         * Whether the trace is the bundled one (the reference figures of traces/README.md apply).
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
         * Records the server's eviction policy and the offline replay's hit chunks under it.
         *
         * @param eviction        policy.
         * @param policyHitChunks hit chunks of {@link PolicyReplay} under it.
         */
        void policy(final EvictionPolicy eviction, final long policyHitChunks)
        {
            this.eviction = eviction;
            this.policyHitChunks = policyHitChunks;
        }

        /**
         * The server's eviction policy.
         *
         * @return policy.
         */
        public EvictionPolicy eviction()
        {
            return eviction;
        }

        /**
         * Hit chunks of the offline replay in file order under the server's policy (the exact-LRU figure under
         * {@code lru}).
         *
         * @return chunks.
         */
        public long policyHitChunks()
        {
            return policyHitChunks < 0 ? lruHitChunks : policyHitChunks;
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
            map.put("eviction", eviction.label());
            map.put("policy_hit_chunks", policyHitChunks());
            map.put("capacity_chunks", capacityChunks);
            map.put("payload_bytes", payloadBytes);
            map.put("pool_bytes", poolSizeBytes);
            map.put("evictions", counters[StoreCounters.EVICTIONS]);
            map.put("cold_chunks", counters[StoreCounters.COLD_CHUNKS]);
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
