package io.kvstash.perf.bench;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.tools.WorkerResult;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.idle.CountingBackoffIdleStrategy;
import org.HdrHistogram.Histogram;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

import static io.kvstash.perf.bench.BenchWorker.longOf;
import static io.kvstash.perf.bench.BenchWorker.stringOf;

/**
 * One worker of the scaling part ({@link ScalePart}): the same mix in every worker process, run for a window of
 * wall-clock time that every worker shares, so the workers' rates add up.
 * <p>
 * An <b>operation</b> is what an inference worker does for one prompt: LOOKUP (with pin) of a range of the
 * prompt's chunks; when some are present, PREPARE_RETRIEVE from that lookup, read every hit chunk and check its
 * stamp, COMMIT_RETRIEVE; when some are missing, PREPARE_STORE of the rest, write each reserved chunk (the key's
 * stamp in its first bytes), COMMIT_STORE. Half the prompts are new documents (all misses, all stored), half
 * return to one of the worker's recent documents with a range that may be longer than what was stored (hits,
 * then the extension stored). Keys are the worker's own, so the mix is the same whatever the number of workers.
 * A <b>request</b> is one round trip to the server; its time is what the percentiles report.
 * <p>
 * The client waits with the library's default ({@link ClientContext#newInFlightIdleStrategy()}), or with
 * {@code wait} set to {@code backoff} the client library's earlier default (the same phases, 100 yields before it parks); its spins,
 * yields and parks over the measured window are part of the result.
 */
final class ScaleRun
{
    /** Recent documents a returning prompt picks from, at most. */
    private static final int RECENT_DOCUMENTS = 64;

    private final KvStashClient client;
    /** The worker's own instance: one that ends early must not unregister another's. */
    private final long instanceId;
    private final int chunkBytes;
    private final int maxChunks;
    private final long keyBase;
    private final SplittableRandom random;
    private final UnsafeBuffer scratch;
    private final long[] recentDocuments = new long[RECENT_DOCUMENTS];
    private final int[] recentLengths = new int[RECENT_DOCUMENTS];
    private final long[] ids;
    private final int[] slotRangeIndex;
    private final int recent;
    private int recentCount;
    private long nextDocument;
    private Histogram requestTimes;
    private Histogram opTimes;
    private long requests;
    private long ops;
    private long chunks;
    private long bytes;
    private long hitChunks;
    private long mismatches;
    private long failures;
    private final Map<String, Long> failuresByStatus = new TreeMap<>();

    private ScaleRun(
        final KvStashClient client, final int chunkBytes, final int maxChunks, final int recent, final int worker)
    {
        this.recent = Math.max(1, Math.min(recent, RECENT_DOCUMENTS));
        this.instanceId = worker + 1;
        this.client = client;
        this.chunkBytes = chunkBytes;
        this.maxChunks = maxChunks;
        this.keyBase = (long)(worker + 1) << 44;
        this.random = new SplittableRandom(0x5CA1EL + worker);
        this.scratch = new UnsafeBuffer(BufferUtil.allocateDirectAligned(chunkBytes, 4096));
        this.ids = new long[maxChunks];
        this.slotRangeIndex = new int[maxChunks];
        for (int i = 0; i < chunkBytes; i += 8)
        {
            scratch.putLong(i, 0x9E3779B97F4A7C15L * (i + 1));
        }
    }

    /**
     * Runs the {@code scale} command: connects, registers, runs the mix until {@code start_ms} (wall clock,
     * shared by every worker), then measures it for {@code duration_ms}.
     *
     * @param c the command: {@code dir}, {@code chunk_bytes}, {@code max_chunks} (a prompt's chunks at most),
     *          {@code recent} (documents a returning prompt picks from), {@code worker},
     *          {@code start_ms}, {@code duration_ms}, optionally {@code wait} ({@code backoff}).
     * @return the result: counts, {@code elapsed_ns}, the request and operation histograms, the wait's counts.
     */
    static Map<String, Object> run(final Map<String, Object> c)
    {
        // The earlier default is the same phases with 100 yields before the parks, counted alike.
        final boolean earlierBackoff = BenchSupport.BACKOFF.equals(c.get("wait"));
        final CountingBackoffIdleStrategy inFlight = earlierBackoff ? new CountingBackoffIdleStrategy(
            ClientContext.WAIT_SPINS_DEFAULT, 100, ClientContext.WAIT_MIN_PARK_NS_DEFAULT,
            ClientContext.WAIT_MAX_PARK_NS_DEFAULT) : ClientContext.newInFlightIdleStrategy();
        final ClientContext context = new ClientContext()
            .directory(Path.of(stringOf(c, "dir")))
            .idleStrategy(inFlight);
        final int chunkBytes = (int)longOf(c, "chunk_bytes");
        final int worker = (int)longOf(c, "worker");
        try (KvStashClient client = KvStashClient.connect(context))
        {
            final ClientResponse registered = client.register(worker + 1, BenchSupport.layout(chunkBytes));
            if (!registered.isOk())
            {
                throw new IllegalStateException("register failed: " + registered);
            }
            final ScaleRun run = new ScaleRun(client, chunkBytes, (int)longOf(c, "max_chunks"),
                (int)longOf(c, "recent"), worker);
            final long startMs = longOf(c, "start_ms");
            run.reset();
            while (System.currentTimeMillis() < startMs)
            {
                run.op();
            }
            run.reset();
            final long spins = inFlight.spins();
            final long yields = inFlight.yields();
            final long parks = inFlight.parks();
            final long gcBefore = BenchSupport.gcCount();
            final long t0 = System.nanoTime();
            final long deadline = t0 + longOf(c, "duration_ms") * 1_000_000L;
            while (System.nanoTime() < deadline)
            {
                run.op();
            }
            final long elapsedNs = System.nanoTime() - t0;
            final Map<String, Object> result = run.result(elapsedNs);
            result.put("client_spins", inFlight.spins() - spins);
            result.put("client_yields", inFlight.yields() - yields);
            result.put("client_parks", inFlight.parks() - parks);
            result.put("gc_count", BenchSupport.gcCount() - gcBefore);
            client.unregister(worker + 1);
            return result;
        }
    }

    private void reset()
    {
        requestTimes = BenchSupport.newHistogram();
        opTimes = BenchSupport.newHistogram();
        requests = 0;
        ops = 0;
        chunks = 0;
        bytes = 0;
        hitChunks = 0;
        mismatches = 0;
        failures = 0;
        failuresByStatus.clear();
    }

    private void failed(final int status)
    {
        failures++;
        failuresByStatus.merge(Status.name(status), 1L, Long::sum);
    }

    private Map<String, Object> result(final long elapsedNs)
    {
        final Map<String, Object> r = new LinkedHashMap<>();
        r.put("elapsed_ns", elapsedNs);
        r.put("requests", requests);
        r.put("ops", ops);
        r.put("chunks", chunks);
        r.put("bytes", bytes);
        r.put("hit_chunks", hitChunks);
        r.put("mismatches", mismatches);
        r.put("failures", failures);
        r.put("failures_by_status", new LinkedHashMap<String, Object>(failuresByStatus));
        r.put("request_times", WorkerResult.encode(requestTimes));
        r.put("op_times", WorkerResult.encode(opTimes));
        return r;
    }

    /**
     * One prompt: a new document or a return to a recent one, looked up, its hits retrieved, the rest stored.
     */
    private void op()
    {
        final long document;
        int length = 1 + random.nextInt(maxChunks);
        if (recentCount > 0 && random.nextBoolean())
        {
            final int pick = random.nextInt(Math.min(recentCount, recent));
            document = recentDocuments[pick];
            length = Math.max(length, recentLengths[pick]);
            recentLengths[pick] = length;
        }
        else
        {
            document = nextDocument++;
            final int at = recentCount++ % recent;
            recentDocuments[at] = document;
            recentLengths[at] = length;
        }
        for (int i = 0; i < length; i++)
        {
            ids[i] = keyBase | document << 6 | i;
        }
        final ChunkKeys keys = ChunkKeys.ofIds(Arrays.copyOf(ids, length));
        final long start = System.nanoTime();
        long t = start;
        final ClientResponse lookup = client.lookup(instanceId, keys, true);
        t = timed(t);
        final int hits = lookup.isOk() ? lookup.hitChunks() : 0;
        if (hits > 0)
        {
            t = retrieve(keys, lookup.transferId(), t);
        }
        if (hits < length)
        {
            store(keys.range(hits, length), t);
        }
        BenchSupport.record(opTimes, System.nanoTime() - start);
        ops++;
    }

    private long timed(final long t0)
    {
        final long t1 = System.nanoTime();
        BenchSupport.record(requestTimes, t1 - t0);
        requests++;
        return t1;
    }

    private long retrieve(final ChunkKeys keys, final long lookupTransferId, final long t0)
    {
        final ClientResponse r = client.prepareRetrieveFromLookup(instanceId, lookupTransferId);
        long t = timed(t0);
        if (!r.isOk())
        {
            failed(r.status());
            return t;
        }
        final long transferId = r.transferId();
        final int slots = copySlots(r);
        for (int i = 0; i < slots; i++)
        {
            final int status = client.chunks().readChunk(instanceId, r, i, 0, chunkBytes, scratch, 0);
            if (Status.OK != status)
            {
                failed(status);
                continue;
            }
            if (scratch.getLong(0) != keys.lo(slotRangeIndex[i]))
            {
                mismatches++;
            }
            hitChunks++;
            chunks++;
            bytes += chunkBytes;
        }
        t = System.nanoTime();
        final ClientResponse commit = client.commitRetrieve(instanceId, transferId);
        t = timed(t);
        if (!commit.isOk())
        {
            failed(commit.status());
        }
        return t;
    }

    private void store(final ChunkKeys range, final long t0)
    {
        final ClientResponse r = client.prepareStore(instanceId, range);
        timed(t0);
        if (!r.isOk())
        {
            failed(r.status());
            return;
        }
        final long transferId = r.transferId();
        if (0 == transferId)
        {
            return;
        }
        final int slots = copySlots(r);
        for (int i = 0; i < slots; i++)
        {
            scratch.putLong(0, range.lo(slotRangeIndex[i]));
            final int status = client.chunks().writeChunk(instanceId, r, i, 0, chunkBytes, scratch, 0);
            if (Status.OK != status)
            {
                failed(status);
                continue;
            }
            chunks++;
            bytes += chunkBytes;
        }
        final long t = System.nanoTime();
        final ClientResponse commit = client.commitStore(instanceId, transferId);
        timed(t);
        if (!commit.isOk())
        {
            failed(commit.status());
        }
    }

    private int copySlots(final ClientResponse r)
    {
        final int slots = Math.min(r.slotCount(), maxChunks);
        for (int i = 0; i < slots; i++)
        {
            slotRangeIndex[i] = r.slotRangeIndex(i);
        }
        return slots;
    }
}
