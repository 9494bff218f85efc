package io.kvstash.tools;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.file.CountersDescriptor;
import org.HdrHistogram.Histogram;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The outcome of a replay: the workers' merged result, the server's counters and latency, and the
 * reference figures.
 */
public final class ReplayReport
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

    ReplayReport(
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
        map.put("evictions", counters[CountersDescriptor.EVICTIONS]);
        map.put("cold_chunks", counters[CountersDescriptor.COLD_CHUNKS]);
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
        map.put("server_errors", counters[CountersDescriptor.ERRORS]);
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
