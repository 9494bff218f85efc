package io.kvstash.perf.bench;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.tier.L2Keys;
import io.kvstash.tier.L2ValueDescriptor;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Layout;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import java.util.zip.CRC32C;

import static io.kvstash.perf.bench.BenchWorker.longOf;
import static io.kvstash.perf.bench.BenchWorker.stringOf;

/**
 * The worker's side of the l2 part ({@link L2Part}): three commands, each answering GB/s (10^9 bytes a second)
 * of chunk bytes per repetition and their median.
 * <ul>
 * <li>{@code l2_bare}: the cluster engine's own limit. A bare Lettuce connection ({@link L2Lettuce}) SETs every
 * chunk of the size as a valid second-tier value (header and payload, under the tier's content key) and GETs them
 * back, {@code depth} commands in flight; then GETs them again in runs of {@code depth} (a run's GETs together,
 * the next run after the last value, as read-throughs go), a reference beside the headline loop. The values stay
 * in the cluster for {@code l2_fetch}.</li>
 * <li>{@code l2_fetch}: read-through. Against a server with the tier on, each repetition CLEARs the pool, then
 * LOOKUPs the chunks in runs of {@code run} (one read-through's worth) and waits until each run is readable; the
 * time is from the first LOOKUP to the last run readable.</li>
 * <li>{@code l2_write}: write-through. Against a server with the tier on, each repetition stores new chunks
 * (the pipelined worker of the data part) and waits until the server's {@code l2_writes} counter (read from its
 * control file) has grown by their number; the time is from the first store to that moment. The chunks' values
 * are then deleted from the cluster.</li>
 * </ul>
 */
final class L2Runs
{
    /** The worker's instance. */
    private static final long INSTANCE = 1;
    /** Pause between two LOOKUPs of a run that is not yet readable, and between two reads of a counter. */
    private static final long POLL_NS = TimeUnit.MICROSECONDS.toNanos(50);
    /** Bound of the wait for one run or one repetition's writes. */
    private static final long WAIT_NS = TimeUnit.SECONDS.toNanos(120);
    /** Key stream of the chunks that {@code l2_bare} writes and {@code l2_fetch} reads. */
    private static final long FETCH_STREAM = 0;
    /** First key stream of the chunks {@code l2_write} stores (one stream per repetition). */
    private static final long WRITE_STREAM = 1_000;

    private L2Runs()
    {
    }

    /**
     * {@code l2_bare}: SET then GET every chunk, repetition by repetition.
     *
     * @param c        {@code seeds}, {@code chunk_bytes}, {@code keys}, {@code depth}, {@code reps}, {@code warmups}.
     * @param progress where progress lines go.
     * @return {@code set} and {@code get} series, {@code gc_worker}.
     * @throws Exception when a command fails.
     */
    static Map<String, Object> bare(final Map<String, Object> c, final Consumer<String> progress) throws Exception
    {
        final int chunkBytes = (int)longOf(c, "chunk_bytes");
        final int count = (int)longOf(c, "keys");
        final int depth = (int)longOf(c, "depth");
        final int reps = (int)longOf(c, "reps");
        final int warmups = (int)longOf(c, "warmups");
        final Layout layout = BenchSupport.layout(chunkBytes);
        final long[][] hashes = hashes(chunkBytes, count, FETCH_STREAM);
        final byte[][] keys = tierKeys(layout, hashes);
        final L2Lettuce.Value[] values = values(layout, hashes, chunkBytes);
        final double[] setGbps = new double[reps];
        final double[] getGbps = new double[reps];
        final double[] getRunsGbps = new double[reps];
        long gcWorker = 0;
        final Map<String, Object> result = new LinkedHashMap<>();
        try (L2Lettuce lettuce = new L2Lettuce(stringOf(c, "seeds"), L2ValueDescriptor.HEADER_LENGTH + chunkBytes,
            depth))
        {
            System.gc();
            for (int rep = -warmups; rep < reps; rep++)
            {
                final long gc0 = BenchSupport.gcCount();
                final double set = gbps(count, chunkBytes, lettuce.set(keys, values, depth));
                final double get = gbps(count, chunkBytes, lettuce.get(keys, L2ValueDescriptor.HEADER_LENGTH +
                    chunkBytes, depth));
                final double getRuns = gbps(count, chunkBytes, lettuce.getInRuns(keys,
                    L2ValueDescriptor.HEADER_LENGTH + chunkBytes, depth));
                if (rep >= 0)
                {
                    setGbps[rep] = set;
                    getGbps[rep] = get;
                    getRunsGbps[rep] = getRuns;
                    gcWorker += BenchSupport.gcCount() - gc0;
                }
                progress.accept(BenchSupport.fmt("l2 %s, %s %d: bare SET %.2f, GET %.2f GB/s (%d chunks, %d in " +
                    "flight), GET in runs of %d %.2f", BenchSupport.size(chunkBytes), rep < 0 ? "warm-up" : "rep",
                    rep < 0 ? rep + warmups : rep, set, get, count, depth, depth, getRuns));
            }
            result.put("receive_allocations", lettuce.receiveAllocations());
        }
        result.put("set", series(setGbps));
        result.put("get", series(getGbps));
        result.put("get_runs", series(getRunsGbps));
        result.put("gc_worker", gcWorker);
        return result;
    }

    /**
     * {@code l2_fetch}: CLEAR, then LOOKUP every run until readable, repetition by repetition.
     *
     * @param c        {@code dir}, {@code chunk_bytes}, {@code keys}, {@code run}, {@code reps}.
     * @param progress where progress lines go.
     * @return {@code fetch} series, the tier's fetch hits during the runs, {@code gc_worker}.
     * @throws Exception when a request fails or a run is not readable in time.
     */
    static Map<String, Object> fetch(final Map<String, Object> c, final Consumer<String> progress) throws Exception
    {
        final int chunkBytes = (int)longOf(c, "chunk_bytes");
        final int count = (int)longOf(c, "keys");
        final int run = (int)longOf(c, "run");
        final int reps = (int)longOf(c, "reps");
        final long[][] hashes = hashes(chunkBytes, count, FETCH_STREAM);
        final ChunkKeys[] runs = new ChunkKeys[count / run];
        for (int r = 0; r < runs.length; r++)
        {
            runs[r] = ChunkKeys.ofHashes(Arrays.copyOfRange(hashes[0], r * run, (r + 1) * run),
                Arrays.copyOfRange(hashes[1], r * run, (r + 1) * run));
        }
        final double[] fetchGbps = new double[reps];
        long gcWorker = 0;
        final Map<String, Object> result = new LinkedHashMap<>();
        try (KvStashClient client = connect(c, chunkBytes))
        {
            final long hits0 = client.counter(CountersDescriptor.L2_FETCH_HITS);
            System.gc();
            for (int rep = 0; rep < reps; rep++)
            {
                final ClientResponse cleared = client.clear(false);
                if (!cleared.isOk())
                {
                    throw new IllegalStateException("clear failed: " + cleared);
                }
                final long gc0 = BenchSupport.gcCount();
                final long start = System.nanoTime();
                for (final ChunkKeys keys : runs)
                {
                    awaitReadable(client, keys, run);
                }
                fetchGbps[rep] = gbps(runs.length * run, chunkBytes, System.nanoTime() - start);
                gcWorker += BenchSupport.gcCount() - gc0;
                progress.accept(BenchSupport.fmt("l2 %s, fetch %d: %.2f GB/s (%d runs of %d chunks)",
                    BenchSupport.size(chunkBytes), rep, fetchGbps[rep], runs.length, run));
            }
            // The tier counts a read-through's chunks just after it committed them, so the last run can be readable
            // a moment before it is counted: wait (bounded, untimed) for the count of every chunk fetched.
            final long expected = (long)reps * runs.length * run;
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (client.counter(CountersDescriptor.L2_FETCH_HITS) - hits0 < expected && System.nanoTime() - deadline < 0)
            {
                LockSupport.parkNanos(POLL_NS);
            }
            result.put("fetch_hits", client.counter(CountersDescriptor.L2_FETCH_HITS) - hits0);
        }
        result.put("fetch", series(fetchGbps));
        result.put("gc_worker", gcWorker);
        return result;
    }

    /**
     * Waits until a run of chunks is readable: a LOOKUP that waits for the read-through its miss starts, as a
     * worker would send it; asked again (a new read-through) only when one did not bring the whole run.
     */
    private static void awaitReadable(final KvStashClient client, final ChunkKeys keys, final int chunks)
    {
        final long deadline = System.nanoTime() + WAIT_NS;
        ClientResponse r;
        while ((r = client.lookupWaitingForTier(INSTANCE, keys, false, Math.max(0, deadline - System.nanoTime())))
            .hitChunks() < chunks)
        {
            if (!r.isOk())
            {
                throw new IllegalStateException("lookup failed: " + r);
            }
            if (System.nanoTime() - deadline > 0)
            {
                throw new IllegalStateException("a run of " + chunks + " chunks was not readable after " +
                    TimeUnit.NANOSECONDS.toSeconds(WAIT_NS) + " s (" + r.hitChunks() + " hits; tier fetch hits " +
                    client.counter(CountersDescriptor.L2_FETCH_HITS) + ", misses " +
                    client.counter(CountersDescriptor.L2_FETCH_MISSES) + ", timeouts " +
                    client.counter(CountersDescriptor.L2_TIMEOUTS) + ")");
            }
            LockSupport.parkNanos(POLL_NS);
        }
    }

    /**
     * {@code l2_write}: store new chunks, wait until the tier wrote them all, delete them from the cluster.
     *
     * @param c        {@code dir}, {@code seeds}, {@code chunk_bytes}, {@code keys}, {@code reps},
     *                 {@code first_rep} (each repetition's chunks are new: the tier skips a key already there).
     * @param progress where progress lines go.
     * @return {@code write} series, the stores' own GB/s, {@code gc_worker}.
     * @throws Exception when a request fails or the writes do not all land in time.
     */
    static Map<String, Object> write(final Map<String, Object> c, final Consumer<String> progress) throws Exception
    {
        final int chunkBytes = (int)longOf(c, "chunk_bytes");
        final int count = (int)longOf(c, "keys");
        final int reps = (int)longOf(c, "reps");
        final int firstRep = (int)longOf(c, "first_rep");
        final Layout layout = BenchSupport.layout(chunkBytes);
        final UnsafeBuffer source = new UnsafeBuffer(BufferUtil.allocateDirectAligned(chunkBytes, 4096));
        source.putBytes(0, BenchWorker.pattern(chunkBytes));
        final UnsafeBuffer destination = new UnsafeBuffer(BufferUtil.allocateDirectAligned(chunkBytes, 4096));
        final double[] writeGbps = new double[reps];
        final double[] storeGbps = new double[reps];
        long gcWorker = 0;
        final Map<String, Object> result = new LinkedHashMap<>();
        try (KvStashClient client = connect(c, chunkBytes);
            L2Lettuce lettuce = new L2Lettuce(stringOf(c, "seeds"), 1, 1))
        {
            for (int rep = 0; rep < reps; rep++)
            {
                final long[][] hashes = hashes(chunkBytes, count, WRITE_STREAM + firstRep + rep);
                final ChunkKeys[] keys = new ChunkKeys[count];
                for (int i = 0; i < count; i++)
                {
                    keys[i] = ChunkKeys.ofHashes(new long[]{ hashes[0][i] }, new long[]{ hashes[1][i] });
                }
                final DataLoops loops = new DataLoops(client, keys, source, destination, chunkBytes, 1);
                final long writes0 = client.counter(CountersDescriptor.L2_WRITES);
                final long others0 = client.counter(CountersDescriptor.L2_WRITE_SKIPS) +
                    client.counter(CountersDescriptor.L2_WRITE_ERRORS);
                System.gc();
                final long gc0 = BenchSupport.gcCount();
                final long start = System.nanoTime();
                storeGbps[rep] = loops.store(count, null, true, 1);
                final long deadline = System.nanoTime() + WAIT_NS;
                long written;
                while ((written = client.counter(CountersDescriptor.L2_WRITES) - writes0) < count)
                {
                    final long others = client.counter(CountersDescriptor.L2_WRITE_SKIPS) +
                        client.counter(CountersDescriptor.L2_WRITE_ERRORS) - others0;
                    if (written + others >= count || System.nanoTime() - deadline > 0)
                    {
                        throw new IllegalStateException("write-through wrote " + written + " of " + count +
                            " chunks (" + others + " skipped or failed; tier timeouts " +
                            client.counter(CountersDescriptor.L2_TIMEOUTS) + ", errors " +
                            client.counter(CountersDescriptor.L2_ERRORS) + ")");
                    }
                    LockSupport.parkNanos(POLL_NS);
                }
                writeGbps[rep] = gbps(count, chunkBytes, System.nanoTime() - start);
                gcWorker += BenchSupport.gcCount() - gc0;
                lettuce.delete(tierKeys(layout, hashes));
                progress.accept(BenchSupport.fmt("l2 %s, write %d: %.2f GB/s written through (%d chunks; the " +
                    "stores alone %.2f GB/s)", BenchSupport.size(chunkBytes), firstRep + rep, writeGbps[rep], count,
                    storeGbps[rep]));
            }
        }
        result.put("write", series(writeGbps));
        result.put("store_gbps", BenchSupport.median(storeGbps));
        result.put("gc_worker", gcWorker);
        return result;
    }

    private static KvStashClient connect(final Map<String, Object> c, final int chunkBytes)
    {
        final KvStashClient client = KvStashClient.connect(new ClientContext()
            .directory(Path.of(stringOf(c, "dir")))
            .idleStrategy(BenchSupport.clientIdle(BenchSupport.BACKOFF)));
        final ClientResponse registered = client.register(INSTANCE, BenchSupport.layout(chunkBytes));
        if (!registered.isOk() || registered.chunkBytes() != chunkBytes)
        {
            client.close();
            throw new IllegalStateException("register failed: " + registered);
        }
        return client;
    }

    /**
     * The 128-bit hashes of a key stream: {@code [0]} high halves, {@code [1]} low halves.
     */
    static long[][] hashes(final int chunkBytes, final int count, final long stream)
    {
        final SplittableRandom random = new SplittableRandom(chunkBytes * 7_919L + stream * 104_729L);
        final long[][] h = new long[2][count];
        for (int i = 0; i < count; i++)
        {
            h[0][i] = random.nextLong();
            h[1][i] = random.nextLong();
        }
        return h;
    }

    /**
     * The second tier's content keys of chunks of a layout, without salt.
     */
    private static byte[][] tierKeys(final Layout layout, final long[][] hashes)
    {
        final String namespace = L2Keys.namespace(layout, 0);
        final byte[][] keys = new byte[hashes[0].length][];
        for (int i = 0; i < keys.length; i++)
        {
            keys[i] = L2Keys.key(namespace, hashes[0][i], hashes[1][i]);
        }
        return keys;
    }

    /**
     * The values of the chunks: each its own header, all the same payload (the bench's pattern); the headers are
     * computed here, so the timed SETs only move bytes.
     */
    private static L2Lettuce.Value[] values(final Layout layout, final long[][] hashes, final int chunkBytes)
    {
        final long layoutHash = L2Keys.layoutHash(layout);
        final ByteBuffer payload = ByteBuffer.allocateDirect(chunkBytes);
        payload.put(BenchWorker.pattern(chunkBytes)).flip();
        final ByteBuffer scratch = ByteBuffer.allocateDirect(L2ValueDescriptor.HEADER_LENGTH + chunkBytes);
        scratch.put(L2ValueDescriptor.HEADER_LENGTH, payload.duplicate(), 0, chunkBytes);
        final CRC32C crc = new CRC32C();
        final L2Lettuce.Value[] values = new L2Lettuce.Value[hashes[0].length];
        for (int i = 0; i < values.length; i++)
        {
            L2ValueDescriptor.writeHeader(scratch, crc, layoutHash, 0, hashes[0][i], hashes[1][i], chunkBytes);
            final ByteBuffer header = ByteBuffer.allocateDirect(L2ValueDescriptor.HEADER_LENGTH);
            header.put(scratch.duplicate().limit(L2ValueDescriptor.HEADER_LENGTH)).flip();
            values[i] = new L2Lettuce.Value(header, payload);
        }
        return values;
    }

    private static double gbps(final int chunks, final int chunkBytes, final long ns)
    {
        return (double)chunks * chunkBytes / Math.max(1, ns);
    }

    private static Map<String, Object> series(final double[] gbps)
    {
        final Map<String, Object> m = new LinkedHashMap<>();
        final List<Double> each = Arrays.stream(gbps).boxed().collect(Collectors.toList());
        m.put("gbps", each);
        m.put("median_gbps", BenchSupport.median(gbps));
        return m;
    }
}
