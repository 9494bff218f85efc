package io.kvstash.perf.bench;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.perf.bench.BenchWorker.Series;
import io.kvstash.wire.ChunkKeys;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Consumer;

import static io.kvstash.perf.bench.BenchWorker.longOf;
import static io.kvstash.perf.bench.BenchWorker.stringOf;

/**
 * The worker's data command: copy (the physical limit) and kvstash store / retrieve of the same chunks,
 * interleaved repetition by repetition.
 */
final class DataRun
{
    /**
     * The four loop pairs' order in repetition r is row r mod 4: a Williams square, so that over four repetitions every
     * pair runs once in each place and follows each other pair exactly once (0 copy, 1 serial, 2 pipelined, 3 batched).
     */
    static final int[][] UNIT_ORDER = { { 0, 1, 3, 2 }, { 1, 2, 0, 3 }, { 2, 3, 1, 0 }, { 3, 0, 2, 1 } };

    private final Map<String, Object> c;
    private final Consumer<String> progress;
    private final int chunkBytes;
    private final int reps;
    private final int warmups;
    private final int chunksPerRep;
    private final String waitMode;
    // By unit of the rotation (UNIT_ORDER): the copy, the serial, pipelined and batched workers.
    private final Series[] writes;
    private final Series[] reads;
    private final double[] writeGbps = new double[4];
    private final double[] readGbps = new double[4];

    DataRun(final Map<String, Object> c, final Consumer<String> progress)
    {
        this.c = c;
        this.progress = progress;
        chunkBytes = (int)longOf(c, "chunk_bytes");
        reps = (int)longOf(c, "reps");
        warmups = (int)longOf(c, "warmups");
        chunksPerRep = (int)longOf(c, "chunks_per_rep");
        waitMode = stringOf(c, "wait");
        writes = new Series[]{ new Series("copy_in", reps), new Series("store", reps),
            new Series("store_pipelined", reps), new Series("store_batched", reps) };
        reads = new Series[]{ new Series("copy_out", reps), new Series("retrieve", reps),
            new Series("retrieve_pipelined", reps), new Series("retrieve_batched", reps) };
    }

    Map<String, Object> run() throws Exception
    {
        final UnsafeBuffer source = new UnsafeBuffer(BufferUtil.allocateDirectAligned(chunkBytes, 4096));
        source.putBytes(0, BenchWorker.pattern(chunkBytes));
        final UnsafeBuffer destination = new UnsafeBuffer(BufferUtil.allocateDirectAligned(chunkBytes, 4096));
        final Map<String, Object> result = new LinkedHashMap<>();
        try (KvStashClient client = KvStashClient.connect(new ClientContext()
            .directory(Path.of(stringOf(c, "dir")))
            .idleStrategy(BenchSupport.clientIdle(waitMode))))
        {
            final ClientResponse registered = client.register(1, BenchSupport.layout(chunkBytes));
            if (!registered.isOk() || registered.chunkBytes() != chunkBytes)
            {
                throw new IllegalStateException("register failed: " + registered);
            }
            final int capacity = registered.slotCapacity();
            if (chunksPerRep > capacity)
            {
                throw new IllegalArgumentException(chunksPerRep + " chunks per repetition exceed the pool");
            }
            final ChunkKeys[] keys = keys(capacity);
            final int batch = batch(keys.length);
            final DataLoops loops = new DataLoops(client, keys, source, destination, chunkBytes, batch);
            long gcSteady = 0;
            // Every key once, so the pool is full (each store evicts, as in a long-running server) and the
            // copy loops know a slot for every key (see DataLoops.copyIn).
            loops.store(keys.length, null, true, 1);
            // The keys and buffers above are set-up garbage: collect it before the measured loops.
            System.gc();
            for (int rep = -warmups; rep < reps; rep++)
            {
                gcSteady += repetition(loops, rep, batch);
            }
            result.put("chunk_bytes", chunkBytes);
            result.put("chunks_per_rep", chunksPerRep);
            result.put("slot_capacity", capacity);
            result.put("copy_in", writes[0].toMap());
            result.put("store", writes[1].toMap());
            result.put("copy_out", reads[0].toMap());
            result.put("retrieve", reads[1].toMap());
            result.put("store_pipelined", writes[2].toMap());
            result.put("retrieve_pipelined", reads[2].toMap());
            result.put("batch_chunks", batch);
            result.put("store_batched", writes[3].toMap());
            result.put("retrieve_batched", reads[3].toMap());
            result.put("gc_worker", gcSteady);
            result.put("orphans", client.orphanResponses());
        }
        return result;
    }

    /**
     * The key ring. More keys than slots: a key comes round again only after it was evicted, so every prepare
     * reserves (and, once the pool is full, evicts the least recently used chunk). With write-through on, the
     * tier's read of a chunk makes it recently used, so it may live a pool's worth of stores longer: the ring is
     * then two pools and four repetitions long.
     */
    private ChunkKeys[] keys(final int capacity)
    {
        final int keyCount = Boolean.TRUE.equals(c.get("write_through")) ?
            2 * capacity + 4 * chunksPerRep : capacity + chunksPerRep;
        final ChunkKeys[] keys = new ChunkKeys[keyCount];
        final SplittableRandom random = new SplittableRandom(chunkBytes * 31L);
        for (int i = 0; i < keyCount; i++)
        {
            keys[i] = ChunkKeys.ofHashes(new long[]{ random.nextLong() }, new long[]{ random.nextLong() });
        }
        return keys;
    }

    /**
     * The batched worker's chunks per request: eight, or the largest power of two that divides both the key
     * count and a repetition's chunks (a --quick 32 MiB repetition has four).
     */
    private int batch(final int keyCount)
    {
        int batch = DataLoops.MAX_BATCH;
        while (batch > 1 && (0 != keyCount % batch || 0 != chunksPerRep % batch))
        {
            batch >>= 1;
        }
        return batch;
    }

    /**
     * One repetition (a warm-up when {@code rep} is negative) of the four loop pairs, each a write and the read
     * of what it wrote: the copy, then the serial, the pipelined and the batched worker. A loop right after
     * another pair's copies runs up to 15 % faster or slower than in another place (the caches and pages the
     * previous loop left), so their order changes from one repetition to the next along a Williams square
     * ({@link #UNIT_ORDER}): every four repetitions each contender runs once in each place and once right after
     * each of the others. A plain rotation put each contender in every place but always after the same one.
     *
     * @return the collections during the workers' loops of a measured repetition, 0 for a warm-up.
     */
    private long repetition(final DataLoops loops, final int rep, final int batch)
    {
        final boolean measured = rep >= 0;
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
        }
        progress.accept(BenchSupport.fmt("%s %s %s %d/%d: copy in %.2f, store %.2f, copy out %.2f, retrieve %.2f%s",
            BenchSupport.size(chunkBytes), waitMode, measured ? "rep" : "warm-up",
            measured ? rep + 1 : rep + warmups + 1, measured ? reps : warmups, writeGbps[0], writeGbps[1],
            readGbps[0], readGbps[1], BenchSupport.fmt("; pipelined: store %.2f, retrieve %.2f; batched: store " +
            "%.2f, retrieve %.2f GB/s", writeGbps[2], readGbps[2], writeGbps[3], readGbps[3])));
        return measured ? gcLoops : 0;
    }
}
