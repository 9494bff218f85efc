package io.kvstash.perf.bench;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.tools.Json;
import io.kvstash.tools.WorkerResult;
import io.kvstash.wire.ChunkKeys;
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
                return new DataRun(c, this::progress).run();
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
            final DataLoops loops = new DataLoops(client, keys, source, destination, chunkBytes, 1);
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
}
