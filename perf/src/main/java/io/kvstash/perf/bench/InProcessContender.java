package io.kvstash.perf.bench;

import org.HdrHistogram.Histogram;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

import static io.kvstash.perf.bench.BenchWorker.longOf;

/**
 * The in-process contender: a {@link ConcurrentHashMap} of chunks inside the worker's JVM, what keeping the
 * cache in the inference process costs. A put copies the chunk into a new array (the store's copy in); a
 * get copies the stored array into the caller's buffer (the copy out). Each repetition starts from an empty
 * map (cleared untimed), so every put adds a new entry, as every kvstash store reserves a new chunk.
 */
final class InProcessContender
{
    private InProcessContender()
    {
    }

    /**
     * Runs the put / get loops.
     *
     * @param c        the command: chunk_bytes, reps, warmups, chunks_per_rep.
     * @param progress progress lines.
     * @return the result map.
     */
    static Map<String, Object> run(final Map<String, Object> c, final Consumer<String> progress)
    {
        final int chunkBytes = (int)longOf(c, "chunk_bytes");
        final int reps = (int)longOf(c, "reps");
        final int warmups = (int)longOf(c, "warmups");
        final int chunks = (int)longOf(c, "chunks_per_rep");
        final byte[] source = BenchWorker.pattern(chunkBytes);
        final byte[] destination = new byte[chunkBytes];
        final Long[] keys = new Long[chunks];
        for (int i = 0; i < chunks; i++)
        {
            keys[i] = (long)i * 0x9E3779B97F4A7C15L;
        }
        final ConcurrentHashMap<Long, byte[]> map = new ConcurrentHashMap<>(2 * chunks);
        final BenchWorker.Series put = new BenchWorker.Series("chm_put", reps);
        final BenchWorker.Series get = new BenchWorker.Series("chm_get", reps);
        for (int rep = -warmups; rep < reps; rep++)
        {
            final boolean measured = rep >= 0;
            map.clear();
            final Histogram hp = measured ? put.perChunk : null;
            long start = System.nanoTime();
            long t0 = start;
            for (int i = 0; i < chunks; i++)
            {
                RedisContender.stamp(source, i);
                final byte[] copy = new byte[chunkBytes];
                System.arraycopy(source, 0, copy, 0, chunkBytes);
                map.put(keys[i], copy);
                t0 = RedisContender.lap(hp, t0);
            }
            final double putGbps = (double)chunks * chunkBytes / (System.nanoTime() - start);
            final Histogram hg = measured ? get.perChunk : null;
            start = System.nanoTime();
            t0 = start;
            for (int i = 0; i < chunks; i++)
            {
                System.arraycopy(map.get(keys[i]), 0, destination, 0, chunkBytes);
                if (RedisContender.stampOf(destination) != i)
                {
                    throw new IllegalStateException("map returned the wrong chunk");
                }
                t0 = RedisContender.lap(hg, t0);
            }
            final double getGbps = (double)chunks * chunkBytes / (System.nanoTime() - start);
            if (measured)
            {
                put.gbps[rep] = putGbps;
                get.gbps[rep] = getGbps;
            }
            progress.accept(BenchSupport.fmt("%s in-process %s: put %.2f, get %.2f GB/s", BenchSupport.size(chunkBytes),
                measured ? "rep " + (rep + 1) + "/" + reps : "warm-up", putGbps, getGbps));
        }
        map.clear();
        final Map<String, Object> result = new LinkedHashMap<>();
        result.put("put", put.toMap());
        result.put("get", get.toMap());
        return result;
    }
}
