package io.kvstash.testkit;

import io.kvstash.core.StoreContext;
import io.kvstash.process.ChildJvm;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerConfiguration;
import io.kvstash.server.ServerContext;
import io.kvstash.tier.L2Tier;
import io.kvstash.tier.TierContext;
import io.kvstash.tier.TieredServer;
import io.kvstash.tools.Json;
import io.kvstash.tools.TraceReplay;
import io.kvstash.tools.TraceWorker;
import io.kvstash.tools.WorkerResult;
import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.file.CountersDescriptor;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * One host of a {@link SharedTierReplay}: an embedded server in its own directory (optionally on the second tier)
 * and one worker process ({@code kvstash worker}) that replays the host's share of the trace, request {@code i}
 * when {@code i % hosts == index}, in trace order. Start, {@link #awaitReady}, {@link #go}, {@link #hasExited}
 * until done, {@link #finish}, then {@link #close}.
 */
final class SharedTierHost implements AutoCloseable
{
    /** The tier's counters a host reports, by their names in {@code stat}. */
    static final int[] TIER_COUNTERS = {
        CountersDescriptor.L2_WRITES, CountersDescriptor.L2_WRITE_SKIPS, CountersDescriptor.L2_WRITE_ERRORS,
        CountersDescriptor.L2_FETCH_HITS, CountersDescriptor.L2_FETCH_MISSES, CountersDescriptor.L2_CORRUPT_VALUES,
        CountersDescriptor.L2_TIMEOUTS, CountersDescriptor.L2_ERRORS, CountersDescriptor.L2_NOTICES_DROPPED };
    /** Names of {@link #TIER_COUNTERS}. */
    static final String[] TIER_COUNTER_NAMES = {
        "l2_writes", "l2_write_skips", "l2_write_errors", "l2_fetch_hits", "l2_fetch_misses", "l2_corrupt_values",
        "l2_timeouts", "l2_errors", "l2_notices_dropped" };

    private static final long READY_TIMEOUT_MS = 120_000;
    private static final long TIER_UP_TIMEOUT_MS = 30_000;
    private static final long SETTLE_TIMEOUT_MS = 10_000;

    private final int index;
    private final int capacityChunks;
    private final boolean tier;
    private final TieredServer tiered;
    private final KvStashServer server;
    private final String seeds;
    private ChildJvm worker;
    private volatile boolean ready;
    private volatile String resultLine;
    private final long[] counters = new long[CountersDescriptor.COUNT];
    private WorkerResult result;

    private SharedTierHost(final int index, final int capacityChunks, final String seeds, final TieredServer tiered)
    {
        this.index = index;
        this.capacityChunks = capacityChunks;
        this.tier = null != seeds;
        this.tiered = tiered;
        this.server = tiered.server();
        this.seeds = seeds;
    }

    /**
     * Launches the host's server, waits for its tier to be up, and starts its worker (which connects, registers
     * and waits for {@link #go}).
     *
     * @param spec      the replay.
     * @param index     this host, in {@code [0, hosts)}.
     * @param directory the server's directory.
     * @param seeds     the cluster's seeds, null for a host without the tier.
     * @param model     model name the worker registers (the tier's keys are per model).
     * @return the host.
     * @throws IOException          when the server or the worker cannot start.
     * @throws InterruptedException when interrupted while waiting for the tier.
     */
    static SharedTierHost start(
        final SharedTierReplay spec, final int index, final Path directory, final String seeds, final String model)
        throws IOException, InterruptedException
    {
        final int capacity = spec.capacityChunks / spec.hosts;
        final long slotBytes = ((long)spec.payloadBytes + TraceReplay.ALIGNMENT - 1) & -(long)TraceReplay.ALIGNMENT;
        final StoreContext store = new StoreContext()
            .alignment(TraceReplay.ALIGNMENT)
            .maxChunksPerRequest(Math.max(StoreContext.MAX_CHUNKS_PER_REQUEST_DEFAULT, spec.largestRequest))
            .slotBytes(slotBytes)
            .poolSizeBytes(TraceReplay.poolBytesFor(capacity, slotBytes));
        if (SlotGeometry.capacity(store.poolSizeBytes(), slotBytes) != capacity)
        {
            throw new IllegalStateException("cannot size a pool to " + capacity + " slots");
        }
        TraceWorker.layoutFor(spec.payloadBytes, store.chunkTokens());
        final int maxChunks = store.maxChunksPerRequest();
        final ServerContext context = new ServerContext()
            .directory(directory)
            .storeContext(store)
            .responseRingCapacity(Math.max(ServerConfiguration.RESPONSE_RING_CAPACITY_DEFAULT,
                Integer.highestOneBit(2 * (64 + 16 * maxChunks + store.maxInlineBytes() + 512) - 1)));
        final SharedTierHost host = new SharedTierHost(index, capacity, seeds,
            TieredServer.launch(context, null == seeds ? null : new TierContext().seeds(seeds)));
        try
        {
            if (host.tier)
            {
                host.awaitTierUp();
            }
            final List<String> args = new ArrayList<>(List.of(TraceReplay.WORKER_COMMAND,
                "--dir=" + directory, "--trace=" + spec.trace.toAbsolutePath(), "--index=" + index,
                "--workers=" + spec.hosts, "--payload-bytes=" + spec.payloadBytes, "--instance-id=" + (index + 1),
                "--model=" + model, "--await-go"));
            if (host.tier)
            {
                args.add("--tier-wait-ms=" + spec.tierWaitMs);
            }
            host.worker = new ChildJvm.Options()
                .jvmOptions(List.of("-XX:+UseSerialGC", "-Xms64m", "-Xmx256m"))
                .name("kvstash-host-" + index + "-stdout")
                .lineListener(host::onLine)
                .start(TraceReplay.WORKER_MAIN_CLASS, args);
            return host;
        }
        catch (final IOException | InterruptedException | RuntimeException ex)
        {
            host.close();
            throw ex;
        }
    }

    private void onLine(final String line)
    {
        if (line.startsWith(TraceReplay.RESULT_PREFIX))
        {
            resultLine = line.substring(TraceReplay.RESULT_PREFIX.length());
        }
        else if (line.equals(TraceReplay.READY_LINE))
        {
            ready = true;
        }
        else if (!line.startsWith(TraceReplay.PROGRESS_PREFIX))
        {
            System.err.println("[host " + index + "] " + line);
        }
    }

    private void awaitTierUp() throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + TIER_UP_TIMEOUT_MS;
        while (L2Tier.STATE_UP != tiered.tier().state())
        {
            if (System.currentTimeMillis() > deadline)
            {
                throw new IllegalStateException("host " + index + ": the second tier is not up after " +
                    TIER_UP_TIMEOUT_MS / 1000 + " s (is the cluster at " + seeds + " up?)");
            }
            Thread.sleep(20);
        }
    }

    /**
     * Waits until the worker is connected and registered.
     *
     * @throws InterruptedException when interrupted.
     */
    void awaitReady() throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + READY_TIMEOUT_MS;
        while (!ready)
        {
            if (!worker.isAlive())
            {
                throw new IllegalStateException("host " + index + ": the worker exited with code " +
                    worker.exitValue() + " before it was ready (see its message above)");
            }
            if (System.currentTimeMillis() > deadline)
            {
                throw new IllegalStateException("host " + index + ": the worker did not get ready");
            }
            Thread.sleep(10);
        }
    }

    /**
     * Releases the worker.
     */
    void go()
    {
        worker.send(TraceReplay.GO_LINE);
    }

    /**
     * Whether the worker is done (it exited).
     *
     * @return true when exited.
     * @throws InterruptedException when interrupted.
     */
    boolean hasExited() throws InterruptedException
    {
        return worker.waitFor(0);
    }

    /**
     * After the worker exited: reads its result, lets the server finish its work (the tier's write-through
     * included, a bounded wait) and snapshots the server's counters.
     *
     * @throws InterruptedException when interrupted.
     */
    void finish() throws InterruptedException
    {
        worker.awaitEndOfOutput(10_000);
        final int code = worker.exitValue();
        if (0 != code || null == resultLine)
        {
            throw new IllegalStateException("host " + index + ": the worker failed (exit code " + code +
                (null == resultLine ? ", no result" : "") + "; see its message above)");
        }
        result = WorkerResult.fromMap(Json.parseObject(resultLine));
        server.awaitDrained(TimeUnit.SECONDS.toMillis(10));
        server.counters().snapshot(counters);
        if (tier)
        {
            // The write-through runs behind the commits: wait (bounded) until the tier's counters stop moving.
            final long[] next = new long[CountersDescriptor.COUNT];
            final long deadline = System.currentTimeMillis() + SETTLE_TIMEOUT_MS;
            while (System.currentTimeMillis() < deadline)
            {
                Thread.sleep(200);
                server.counters().snapshot(next);
                if (sameTierCounters(counters, next))
                {
                    break;
                }
                System.arraycopy(next, 0, counters, 0, counters.length);
            }
        }
    }

    private static boolean sameTierCounters(final long[] a, final long[] b)
    {
        for (final int id : TIER_COUNTERS)
        {
            if (a[id] != b[id])
            {
                return false;
            }
        }
        return true;
    }

    /**
     * The worker's result, after {@link #finish}.
     *
     * @return result.
     */
    WorkerResult result()
    {
        return result;
    }

    /**
     * A server counter, after {@link #finish}.
     *
     * @param id counter id.
     * @return value.
     */
    long counter(final int id)
    {
        return counters[id];
    }

    /**
     * The host's figures, after {@link #finish}.
     *
     * @return ordered map: requests, chunks, hits, checksum mismatches, errors, evictions, the tier's counters.
     */
    Map<String, Object> toMap()
    {
        final Map<String, Object> map = new LinkedHashMap<>();
        map.put("host", index);
        map.put("capacity_chunks", capacityChunks);
        map.put("requests", result.count(WorkerResult.REQUESTS));
        map.put("chunks", result.count(WorkerResult.CHUNKS));
        map.put("hit_chunks", result.count(WorkerResult.HIT_CHUNKS));
        map.put("retrieved_chunks", result.count(WorkerResult.RETRIEVED_CHUNKS));
        map.put("stored_chunks", result.count(WorkerResult.STORED_CHUNKS));
        map.put("checksum_mismatches", result.count(WorkerResult.CHECKSUM_MISMATCHES));
        map.put("fence_failures", result.count(WorkerResult.FENCE_FAILURES));
        map.put("retrieve_misses", result.count(WorkerResult.RETRIEVE_MISSES));
        map.put("no_space", result.count(WorkerResult.NO_SPACE));
        map.put("other_errors", result.count(WorkerResult.OTHER_ERRORS));
        map.put("evictions", counters[CountersDescriptor.EVICTIONS]);
        map.put("server_errors", counters[CountersDescriptor.ERRORS]);
        map.put("elapsed_s", Math.round(result.elapsedNs() / 1e6) / 1e3);
        if (tier)
        {
            for (int i = 0; i < TIER_COUNTERS.length; i++)
            {
                map.put(TIER_COUNTER_NAMES[i], counters[TIER_COUNTERS[i]]);
            }
        }
        return map;
    }

    /**
     * Stops the worker (if still running) and the server.
     */
    @Override
    public void close()
    {
        if (null != worker)
        {
            worker.close();
        }
        tiered.close();
    }
}
