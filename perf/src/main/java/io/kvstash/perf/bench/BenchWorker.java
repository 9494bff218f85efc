package io.kvstash.perf.bench;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.tools.Json;
import io.kvstash.tools.WorkerResult;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Layout;
import org.HdrHistogram.Histogram;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The bench's worker process: the client side of every cross-process contender, run in its own JVM as an
 * inference worker would be. It reads one JSON command per line on standard input and answers each with
 * one {@code RESULT {json}} line on standard output ({@code PROGRESS text} lines before it); the coordinator
 * ({@link BenchCommand}) runs the servers. Commands:
 * <ul>
 * <li>{@code data}: copy into and out of the pool's slots (a mapped {@code /dev/shm} file) with no request, and
 * store / retrieve through a kvstash server with the client's zero-copy slot views, interleaved repetition by
 * repetition;</li>
 * <li>{@code redis}, {@code chm}: SET/GET through redis-server, put/get of a {@code ConcurrentHashMap};</li>
 * <li>{@code control}, {@code echo}: prepare + commit pairs through a kvstash server, and the bare ring echo
 * of the same record sizes;</li>
 * <li>{@code l2_bare}, {@code l2_fetch}, {@code l2_write}: the second tier's part ({@link L2Runs});</li>
 * <li>{@code scale}: one worker of the scaling part ({@link ScaleRun});</li>
 * <li>{@code exit}.</li>
 * </ul>
 * Any failure answers {@code RESULT {"error": ...}} and the worker goes on with the next command.
 */
public final class BenchWorker
{
    private final PrintStream out;

    private BenchWorker(final PrintStream out)
    {
        this.out = out;
    }

    /**
     * Runs commands from standard input until {@code exit} or end of input.
     *
     * @param args none.
     * @throws Exception when standard input fails.
     */
    public static void main(final String[] args) throws Exception
    {
        final PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true,
            StandardCharsets.UTF_8);
        final BenchWorker worker = new BenchWorker(out);
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)))
        {
            out.println("READY " + ProcessHandle.current().pid());
            String line;
            while (null != (line = in.readLine()))
            {
                if (line.isBlank())
                {
                    continue;
                }
                final Map<String, Object> command = Json.parseObject(line);
                final String name = String.valueOf(command.get("cmd"));
                if ("exit".equals(name))
                {
                    break;
                }
                Map<String, Object> result;
                try
                {
                    result = worker.run(name, command);
                }
                catch (final Throwable ex)
                {
                    result = new LinkedHashMap<>();
                    result.put("error", name + ": " + ex);
                    ex.printStackTrace();
                }
                out.println("RESULT " + Json.write(result));
            }
        }
    }

    private Map<String, Object> run(final String name, final Map<String, Object> c) throws Exception
    {
        switch (name)
        {
            case "data":
                return new DataRun(c).run();
            case "redis":
                return RedisContender.runClient(c, this::progress);
            case "chm":
                return InProcessContender.run(c, this::progress);
            case "control":
                return ControlRun.kvstash(c, this::progress);
            case "echo":
                return ControlRun.echo(c, this::progress);
            case "first_touch":
                return firstTouch(c);
            case "l2_bare":
                return L2Runs.bare(c, this::progress);
            case "l2_fetch":
                return L2Runs.fetch(c, this::progress);
            case "l2_write":
                return L2Runs.write(c, this::progress);
            case "scale":
                return ScaleRun.run(c);
            default:
                throw new IllegalArgumentException("unknown command " + name);
        }
    }

    /**
     * The cost of first touch on the request path: a pool nobody prepared (the server's preparation and the client's
     * touch at connect both off), stored through slot by slot once (every page faulted in by the client's copy),
     * then once more with new keys that evict the first ones into the same, now mapped, pages.
     */
    private Map<String, Object> firstTouch(final Map<String, Object> c) throws Exception
    {
        final int chunkBytes = (int)longOf(c, "chunk_bytes");
        final UnsafeBuffer source = new UnsafeBuffer(BufferUtil.allocateDirectAligned(chunkBytes, 4096));
        source.putBytes(0, pattern(chunkBytes));
        final UnsafeBuffer destination = new UnsafeBuffer(BufferUtil.allocateDirectAligned(chunkBytes, 4096));
        final Map<String, Object> result = new LinkedHashMap<>();
        try (KvStashClient client = KvStashClient.connect(new ClientContext()
            .directory(Path.of(stringOf(c, "dir")))
            .idleStrategy(BenchSupport.clientIdle(stringOf(c, "wait")))
            .pretouchPool(false)))
        {
            final ClientResponse registered = client.register(1, BenchSupport.layout(chunkBytes));
            if (!registered.isOk())
            {
                throw new IllegalStateException("register failed: " + registered);
            }
            final int capacity = registered.slotCapacity();
            final ChunkKeys[] keys = new ChunkKeys[2 * capacity];
            final SplittableRandom random = new SplittableRandom(chunkBytes * 17L);
            for (int i = 0; i < keys.length; i++)
            {
                keys[i] = ChunkKeys.ofHashes(new long[]{ random.nextLong() }, new long[]{ random.nextLong() });
            }
            final Loops loops = new Loops(client, keys, source, destination, chunkBytes, 1);
            final double firstGbps = loops.store(capacity, null, true, 1);
            final double touchedGbps = loops.store(capacity, null, true, 1);
            result.put("chunk_bytes", chunkBytes);
            result.put("chunks", capacity);
            result.put("first_touch_store_gbps", firstGbps);
            result.put("touched_store_gbps", touchedGbps);
            result.put("first_touch_vs_touched", firstGbps / touchedGbps);
            progress(BenchSupport.fmt("first touch: %d chunks of %s stored at %.2f GB/s into pages never touched, " +
                "%.2f GB/s into the same pages again", capacity, BenchSupport.size(chunkBytes), firstGbps, touchedGbps));
        }
        return result;
    }

    void progress(final String text)
    {
        out.println("PROGRESS " + text);
    }

    static long longOf(final Map<String, Object> c, final String key)
    {
        final Object v = c.get(key);
        if (!(v instanceof Number))
        {
            throw new IllegalArgumentException("missing " + key);
        }
        return ((Number)v).longValue();
    }

    static String stringOf(final Map<String, Object> c, final String key)
    {
        final Object v = c.get(key);
        if (null == v)
        {
            throw new IllegalArgumentException("missing " + key);
        }
        return v.toString();
    }

    /**
     * Source bytes of a chunk: the same pseudo-random pattern for every contender of a size.
     *
     * @param bytes chunk size.
     * @return the bytes.
     */
    static byte[] pattern(final int bytes)
    {
        final byte[] data = new byte[bytes];
        final SplittableRandom random = new SplittableRandom(bytes);
        for (int i = 0; i + 8 <= bytes; i += 8)
        {
            final long v = random.nextLong();
            for (int k = 0; k < 8; k++)
            {
                data[i + k] = (byte)(v >>> (8 * k));
            }
        }
        return data;
    }

    /**
     * Result of the contenders of one chunk size that share a stream: GB/s per repetition and a per-chunk
     * latency histogram over every measured repetition.
     */
    static final class Series
    {
        final String name;
        final double[] gbps;
        final Histogram perChunk = BenchSupport.newHistogram();

        Series(final String name, final int reps)
        {
            this.name = name;
            this.gbps = new double[reps];
        }

        Map<String, Object> toMap()
        {
            final Map<String, Object> m = new LinkedHashMap<>();
            m.put("gbps", java.util.Arrays.stream(gbps).boxed().collect(java.util.stream.Collectors.toList()));
            m.put("median_gbps", BenchSupport.median(gbps));
            m.put("histogram", WorkerResult.encode(perChunk));
            return m;
        }
    }

    /**
     * The data command: copy (the physical limit) and kvstash store / retrieve of the same chunks,
     * interleaved repetition by repetition.
     */
    final class DataRun
    {
        private final Map<String, Object> c;

        DataRun(final Map<String, Object> c)
        {
            this.c = c;
        }

        Map<String, Object> run() throws Exception
        {
            final int chunkBytes = (int)longOf(c, "chunk_bytes");
            final int reps = (int)longOf(c, "reps");
            final int warmups = (int)longOf(c, "warmups");
            final int chunksPerRep = (int)longOf(c, "chunks_per_rep");
            final Path dir = Path.of(stringOf(c, "dir"));
            final String waitMode = stringOf(c, "wait");
            final String label = BenchSupport.size(chunkBytes);

            final UnsafeBuffer source = new UnsafeBuffer(BufferUtil.allocateDirectAligned(chunkBytes, 4096));
            source.putBytes(0, pattern(chunkBytes));
            final UnsafeBuffer destination = new UnsafeBuffer(BufferUtil.allocateDirectAligned(chunkBytes, 4096));
            final Map<String, Object> result = new LinkedHashMap<>();
            try (KvStashClient client = KvStashClient.connect(new ClientContext()
                .directory(dir)
                .idleStrategy(BenchSupport.clientIdle(waitMode))))
            {
                final Layout layout = BenchSupport.layout(chunkBytes);
                final ClientResponse registered = client.register(1, layout);
                if (!registered.isOk() || registered.chunkBytes() != chunkBytes)
                {
                    throw new IllegalStateException("register failed: " + registered);
                }
                final int capacity = registered.slotCapacity();
                if (chunksPerRep > capacity)
                {
                    throw new IllegalArgumentException(chunksPerRep + " chunks per repetition exceed the pool");
                }
                // More keys than slots: a key comes round again only after it was evicted, so every prepare
                // reserves (and, once the pool is full, evicts the least recently used chunk). With write-through
                // on, the tier's read of a chunk makes it recently used, so it may live a pool's worth of stores
                // longer: the ring is then two pools and four repetitions long.
                final int keyCount = Boolean.TRUE.equals(c.get("write_through")) ?
                    2 * capacity + 4 * chunksPerRep : capacity + chunksPerRep;
                final ChunkKeys[] keys = new ChunkKeys[keyCount];
                final SplittableRandom random = new SplittableRandom(chunkBytes * 31L);
                for (int i = 0; i < keyCount; i++)
                {
                    keys[i] = ChunkKeys.ofHashes(new long[]{ random.nextLong() }, new long[]{ random.nextLong() });
                }
                final Series copyIn = new Series("copy_in", reps);
                final Series store = new Series("store", reps);
                final Series copyOut = new Series("copy_out", reps);
                final Series retrieve = new Series("retrieve", reps);
                final Series storePipelined = new Series("store_pipelined", reps);
                final Series retrievePipelined = new Series("retrieve_pipelined", reps);
                final Series storeBatched = new Series("store_batched", reps);
                final Series retrieveBatched = new Series("retrieve_batched", reps);
                // The batched worker's chunks per request: eight, or the largest power of two that divides both
                // the key count and a repetition's chunks (a --quick 32 MiB repetition has four).
                int batch = Loops.MAX_BATCH;
                while (batch > 1 && (0 != keyCount % batch || 0 != chunksPerRep % batch))
                {
                    batch >>= 1;
                }
                final Loops loops = new Loops(client, keys, source, destination, chunkBytes, batch);
                // By unit of the rotation below: the copy, the serial, pipelined and batched workers.
                final Series[] writes = { copyIn, store, storePipelined, storeBatched };
                final Series[] reads = { copyOut, retrieve, retrievePipelined, retrieveBatched };
                final double[] writeGbps = new double[4];
                final double[] readGbps = new double[4];
                long gcSteady = 0;
                // Every key once, so the pool is full (each store evicts, as in a long-running server) and the
                // copy loops know a slot for every key (see Loops.copyIn).
                loops.store(keyCount, null, true, 1);
                // The keys and buffers above are set-up garbage: collect it before the measured loops.
                System.gc();
                for (int rep = -warmups; rep < reps; rep++)
                {
                    final boolean measured = rep >= 0;
                    // Four pairs of loops, each a write and the read of what it wrote: the copy, then the serial,
                    // the pipelined and the batched worker. A loop right after another pair's copies runs up to 15 %
                    // faster or slower than in another place (the caches and pages the previous loop left), so
                    // their order changes from one repetition to the next along a Williams square (UNIT_ORDER):
                    // every four repetitions each contender runs once in each place and once right after each of
                    // the others. A plain rotation put each contender in every place but always after the same one.
                    long gcLoops = 0;
                    for (int k = 0; k < 4; k++)
                    {
                        final int unit = UNIT_ORDER[Math.floorMod(rep, 4)][k];
                        if (0 == unit)
                        {
                            writeGbps[0] = loops.copyIn(chunksPerRep, measured ? writes[0].perChunk : null);
                            readGbps[0] = loops.copyOut(chunksPerRep, measured ? reads[0].perChunk : null);
                            continue;
                        }
                        final boolean pipelined = 1 != unit;
                        final int perRequest = 3 == unit ? batch : 1;
                        final long gc0 = BenchSupport.gcCount();
                        writeGbps[unit] = loops.store(chunksPerRep, measured ? writes[unit].perChunk : null,
                            pipelined, perRequest);
                        readGbps[unit] = loops.retrieve(chunksPerRep, measured ? reads[unit].perChunk : null,
                            pipelined, perRequest);
                        gcLoops += BenchSupport.gcCount() - gc0;
                    }
                    if (measured)
                    {
                        for (int unit = 0; unit < 4; unit++)
                        {
                            writes[unit].gbps[rep] = writeGbps[unit];
                            reads[unit].gbps[rep] = readGbps[unit];
                        }
                        gcSteady += gcLoops;
                    }
                    progress(BenchSupport.fmt("%s %s %s %d/%d: copy in %.2f, store %.2f, copy out %.2f, retrieve %.2f%s",
                        label, waitMode, measured ? "rep" : "warm-up", measured ? rep + 1 : rep + warmups + 1,
                        measured ? reps : warmups, writeGbps[0], writeGbps[1], readGbps[0], readGbps[1],
                        BenchSupport.fmt("; pipelined: store %.2f, retrieve %.2f; batched: store %.2f, retrieve " +
                        "%.2f GB/s", writeGbps[2], readGbps[2], writeGbps[3], readGbps[3])));
                }
                result.put("chunk_bytes", chunkBytes);
                result.put("chunks_per_rep", chunksPerRep);
                result.put("slot_capacity", capacity);
                result.put("copy_in", copyIn.toMap());
                result.put("store", store.toMap());
                result.put("copy_out", copyOut.toMap());
                result.put("retrieve", retrieve.toMap());
                result.put("store_pipelined", storePipelined.toMap());
                result.put("retrieve_pipelined", retrievePipelined.toMap());
                result.put("batch_chunks", batch);
                result.put("store_batched", storeBatched.toMap());
                result.put("retrieve_batched", retrieveBatched.toMap());
                result.put("gc_worker", gcSteady);
                result.put("orphans", client.orphanResponses());
            }
            return result;
        }
    }

    /**
     * The timed loops of the data command. Each returns GB/s (10^9 bytes per second) over the whole loop and,
     * when given a histogram, records each chunk's time; nothing in them allocates.
     */
    static final class Loops
    {
        /** Most chunks per request of the batched worker. */
        static final int MAX_BATCH = 8;

        private final KvStashClient client;
        private final ChunkKeys[] keys;
        private final ChunkKeys[] batchKeys;
        private final int batch;
        private final UnsafeBuffer source;
        private final UnsafeBuffer destination;
        private final long[] slotOfKey;
        private final UnsafeBuffer copyView = new UnsafeBuffer(0, 0);
        private final UnsafeBuffer slotView = new UnsafeBuffer(0, 0);
        private final int chunkBytes;
        private int keyCursor;
        private int copyFirstKey;
        private int repFirstKey;

        Loops(
            final KvStashClient client,
            final ChunkKeys[] keys,
            final UnsafeBuffer source,
            final UnsafeBuffer destination,
            final int chunkBytes,
            final int batch)
        {
            this.client = client;
            this.keys = keys;
            this.source = source;
            this.destination = destination;
            this.slotOfKey = new long[keys.length];
            this.chunkBytes = chunkBytes;
            this.ahead = new ClientResponse[]{ client.newResponse(), client.newResponse() };
            this.committed = client.newResponse();
            // Batch b is keys [b * batch, (b + 1) * batch): built once, so the loops allocate nothing.
            this.batch = batch;
            this.batchKeys = new ChunkKeys[keys.length / batch];
            for (int b = 0; b < batchKeys.length; b++)
            {
                final long[] hi = new long[batch];
                final long[] lo = new long[batch];
                for (int i = 0; i < batch; i++)
                {
                    hi[i] = keys[b * batch + i].hi(0);
                    lo[i] = keys[b * batch + i].lo(0);
                }
                batchKeys[b] = ChunkKeys.ofHashes(hi, lo);
            }
        }

        /**
         * The physical limit of the store: the same chunks copied into pool slots with no request at all, so
         * the copy moves bytes through the very pages a store does. A separate {@code /dev/shm} file of the
         * same size is no fair bound: which pages a file gets, and which process first touched them, move
         * copies through it faster or slower than through the pool's, by tens of percent in either direction.
         * The slots are those of the keys stored half a lap of the key ring ago: as cold as the
         * least recently used slots a store reuses, and neither those nor the ones a retrieve is about to read.
         * Their chunks are never read again (the retrieves read what their own store just wrote), and the
         * store that reuses a slot rewrites all of it.
         */
        double copyIn(final int chunks, final Histogram h)
        {
            copyFirstKey = Math.floorMod(keyCursor - keys.length / 2, keys.length);
            final long start = System.nanoTime();
            long t0 = start;
            for (int i = 0, key = copyFirstKey; i < chunks; i++, key = key + 1 == keys.length ? 0 : key + 1)
            {
                client.chunks().slotView(slotOfKey[key], chunkBytes, copyView);
                source.putLong(0, i);
                copyView.putBytes(0, source, 0, chunkBytes);
                t0 = record(h, t0);
            }
            return gbps(chunks, System.nanoTime() - start);
        }

        double copyOut(final int chunks, final Histogram h)
        {
            // Reads back the chunks copyIn just wrote, oldest first, as retrieve reads what store wrote.
            final long start = System.nanoTime();
            long t0 = start;
            for (int i = 0, key = copyFirstKey; i < chunks; i++, key = key + 1 == keys.length ? 0 : key + 1)
            {
                client.chunks().slotView(slotOfKey[key], chunkBytes, copyView);
                destination.putBytes(0, copyView, 0, chunkBytes);
                if (destination.getLong(0) != i)
                {
                    throw new IllegalStateException("copy out read chunk " + destination.getLong(0) + ", not " + i);
                }
                t0 = record(h, t0);
            }
            return gbps(chunks, System.nanoTime() - start);
        }

        /**
         * Stores chunks, {@code perRequest} per request (1, or the batch size the loops were built with): a
         * PREPARE_STORE of the request's keys, each slot checked and written, one COMMIT_STORE. Serial: each
         * answer awaited before the next request goes out (two round trips per request on top of the copy).
         * Pipelined, as a worker streaming a prompt's chunks should run it: the next request's PREPARE_STORE
         * is sent before the current request's bytes are written, so the server decides while the bytes move,
         * and each COMMIT_STORE is sent without waiting (its answer is checked when it arrives). Eight chunks
         * per request is how an inference engine stores a prompt.
         */
        double store(final int chunks, final Histogram h, final boolean pipelined, final int perRequest)
        {
            final KvStashClient client = this.client;
            client.asyncHandler(commits);
            repFirstKey = keyCursor;
            final int requests = chunks / perRequest;
            final long start = System.nanoTime();
            long t0 = start;
            int k = keyCursor;
            long nextPrepare = sendPrepare(RequestType.PREPARE_STORE, k, perRequest);
            for (int j = 0; j < requests; j++)
            {
                final ClientResponse prepared = client.await(nextPrepare, ahead[j & 1]);
                if (!prepared.isOk() || perRequest != prepared.slotCount())
                {
                    throw new IllegalStateException("prepare store failed: " + prepared);
                }
                final int next = nextKey(k, perRequest);
                final boolean more = j + 1 < requests;
                if (pipelined && more)
                {
                    nextPrepare = sendPrepare(RequestType.PREPARE_STORE, next, perRequest);
                }
                for (int i = 0; i < perRequest; i++)
                {
                    if (!client.chunks().isStillReserved(prepared, i))
                    {
                        throw new IllegalStateException("reservation lost: " + prepared);
                    }
                    final int key = k + prepared.slotRangeIndex(i);
                    client.chunks().slotView(prepared, i, slotView);
                    slotOfKey[key] = prepared.slotOffset(i);
                    source.putLong(0, key);
                    slotView.putBytes(0, source, 0, chunkBytes);
                    t0 = record(h, t0);
                }
                commit(RequestType.COMMIT_STORE, prepared.transferId(), pipelined);
                if (!pipelined && more)
                {
                    nextPrepare = sendPrepare(RequestType.PREPARE_STORE, next, perRequest);
                }
                k = next;
            }
            keyCursor = k;
            commits.drain(client);
            return gbps(chunks, System.nanoTime() - start);
        }

        /**
         * Retrieves the chunks the last {@link #store} wrote, {@code perRequest} per request, serial or
         * pipelined as there: each slot read, then checked still readable and stamped with its key's index.
         */
        double retrieve(final int chunks, final Histogram h, final boolean pipelined, final int perRequest)
        {
            final KvStashClient client = this.client;
            client.asyncHandler(commits);
            final int requests = chunks / perRequest;
            final long start = System.nanoTime();
            long t0 = start;
            int k = repFirstKey;
            long nextPrepare = sendPrepare(RequestType.PREPARE_RETRIEVE, k, perRequest);
            for (int j = 0; j < requests; j++)
            {
                final ClientResponse prepared = client.await(nextPrepare, ahead[j & 1]);
                if (!prepared.isOk() || perRequest != prepared.slotCount())
                {
                    throw new IllegalStateException("prepare retrieve failed: " + prepared);
                }
                final int next = nextKey(k, perRequest);
                final boolean more = j + 1 < requests;
                if (pipelined && more)
                {
                    nextPrepare = sendPrepare(RequestType.PREPARE_RETRIEVE, next, perRequest);
                }
                for (int i = 0; i < perRequest; i++)
                {
                    client.chunks().slotView(prepared, i, slotView);
                    destination.putBytes(0, slotView, 0, chunkBytes);
                    if (!client.chunks().isStillReadable(prepared, i) || destination.getLong(0) != k + prepared.slotRangeIndex(i))
                    {
                        throw new IllegalStateException("retrieve read the wrong chunk");
                    }
                    t0 = record(h, t0);
                }
                commit(RequestType.COMMIT_RETRIEVE, prepared.transferId(), pipelined);
                if (!pipelined && more)
                {
                    nextPrepare = sendPrepare(RequestType.PREPARE_RETRIEVE, next, perRequest);
                }
                k = next;
            }
            commits.drain(client);
            return gbps(chunks, System.nanoTime() - start);
        }

        private int nextKey(final int key, final int perRequest)
        {
            final int next = key + perRequest;
            return next == keys.length ? 0 : next;
        }

        private static long record(final Histogram h, final long t0)
        {
            if (null == h)
            {
                return t0;
            }
            final long t1 = System.nanoTime();
            BenchSupport.record(h, t1 - t0);
            return t1;
        }

        /**
         * Sends the PREPARE of the {@code perRequest} keys from {@code key} on (1, or the batch size).
         */
        private long sendPrepare(final int type, final int key, final int perRequest)
        {
            final ChunkKeys range = 1 == perRequest ? keys[key] : batchKeys[key / batch];
            long correlationId;
            while ((correlationId = client.requests().sendKeyed(type, 1, range, 0)) < 0)
            {
                client.poll(commits, 64);
            }
            return correlationId;
        }

        /**
         * Sends a commit. Serial: waits for its answer and checks it. Pipelined: the async handler checks the
         * answer when it arrives.
         */
        private void commit(final int type, final long transferId, final boolean pipelined)
        {
            // Two or three small requests in flight never fill the ring; answers are not polled here because
            // the next prepare's answer may be among them.
            long correlationId = client.requests().sendSimple(type, 1, transferId, 0);
            if (correlationId < 0)
            {
                final long deadline = System.nanoTime() + 10_000_000_000L;
                while ((correlationId = client.requests().sendSimple(type, 1, transferId, 0)) < 0)
                {
                    if (System.nanoTime() - deadline > 0)
                    {
                        throw new IllegalStateException("request ring stayed full");
                    }
                    Thread.onSpinWait();
                }
            }
            if (pipelined)
            {
                commits.sent++;
            }
            else
            {
                Commits.check(client.await(correlationId, committed));
            }
        }

        private final Commits commits = new Commits();
        private final ClientResponse[] ahead;
        private final ClientResponse committed;

        private double gbps(final int chunks, final long ns)
        {
            return (double)chunks * chunkBytes / Math.max(1, ns);
        }
    }

    /**
     * The four loop pairs' order in repetition r is row r mod 4: a Williams square, so that over four repetitions every
     * pair runs once in each place and follows each other pair exactly once (0 copy, 1 serial, 2 pipelined, 3 batched).
     */
    static final int[][] UNIT_ORDER = { { 0, 1, 3, 2 }, { 1, 2, 0, 3 }, { 2, 3, 1, 0 }, { 3, 0, 2, 1 } };

    /**
     * Checks the answers of commits sent without waiting: each must be OK.
     */
    static final class Commits implements KvStashClient.ResponseHandler
    {
        long sent;
        long answered;

        @Override
        public void onResponse(final ClientResponse response)
        {
            check(response);
            answered++;
        }

        /**
         * Throws unless the response is a commit answered OK.
         */
        static void check(final ClientResponse response)
        {
            if (Status.OK != response.status() || (RequestType.COMMIT_STORE != response.requestType() &&
                RequestType.COMMIT_RETRIEVE != response.requestType()))
            {
                throw new IllegalStateException("commit failed: " + response);
            }
        }

        void drain(final KvStashClient client)
        {
            final long deadline = System.nanoTime() + 10_000_000_000L;
            while (answered < sent)
            {
                client.poll(this, 64);
                if (System.nanoTime() - deadline > 0)
                {
                    throw new IllegalStateException((sent - answered) + " commits never answered");
                }
            }
        }
    }
}
