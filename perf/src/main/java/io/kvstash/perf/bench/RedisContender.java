package io.kvstash.perf.bench;

import org.HdrHistogram.Histogram;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import static io.kvstash.perf.bench.BenchWorker.longOf;

/**
 * The redis contender: the same chunks SET and GET through a {@code redis-server} from Debian's packages on
 * 127.0.0.1 with persistence off, with the Jedis client. The coordinator side finds (or installs, with
 * {@code apt-get install -y redis-server}) and starts the server on a free port; the worker side runs the
 * timed loops.
 */
final class RedisContender implements AutoCloseable
{
    private static final String[] CANDIDATES = { "/usr/bin/redis-server", "/usr/local/bin/redis-server" };

    private final Process process;
    private final int port;
    private final String version;

    private RedisContender(final Process process, final int port, final String version)
    {
        this.process = process;
        this.port = port;
        this.version = version;
    }

    /**
     * The redis-server executable, or null when none is installed.
     *
     * @return path or null.
     */
    static Path find()
    {
        for (final String candidate : CANDIDATES)
        {
            final Path p = Path.of(candidate);
            if (Files.isExecutable(p))
            {
                return p;
            }
        }
        final String path = System.getenv("PATH");
        if (null != path)
        {
            for (final String dir : path.split(File.pathSeparator))
            {
                final Path p = Path.of(dir, "redis-server");
                if (Files.isExecutable(p))
                {
                    return p;
                }
            }
        }
        return null;
    }

    /**
     * Installs redis-server with apt-get (the bench runs as root on the development machines); says so.
     *
     * @param progress where to say it.
     * @return the executable, or null when the install failed.
     * @throws InterruptedException when interrupted.
     */
    static Path install(final Consumer<String> progress) throws InterruptedException
    {
        progress.accept("redis-server is missing: installing it with `apt-get install -y redis-server`");
        if (!run(progress, "apt-get", "install", "-y", "redis-server"))
        {
            progress.accept("apt-get install failed: running `apt-get update` and trying again");
            run(progress, "apt-get", "update");
            run(progress, "apt-get", "install", "-y", "redis-server");
        }
        final Path found = find();
        progress.accept(null == found ? "redis-server could not be installed: the redis contender is skipped" :
            "installed " + found);
        return found;
    }

    private static boolean run(final Consumer<String> progress, final String... command) throws InterruptedException
    {
        try
        {
            final ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
            builder.environment().put("DEBIAN_FRONTEND", "noninteractive");
            final Process p = builder.start();
            final List<String> lines = new ArrayList<>();
            try (java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)))
            {
                String line;
                while (null != (line = in.readLine()))
                {
                    lines.add(line);
                }
            }
            final boolean ok = p.waitFor(10, TimeUnit.MINUTES) && 0 == p.exitValue();
            if (!ok)
            {
                final int from = Math.max(0, lines.size() - 5);
                for (final String line : lines.subList(from, lines.size()))
                {
                    progress.accept("  " + line);
                }
            }
            return ok;
        }
        catch (final IOException ex)
        {
            progress.accept(String.join(" ", command) + " failed: " + ex.getMessage());
            return false;
        }
    }

    /**
     * Starts redis-server on a free loopback port with persistence off and waits until it answers PING.
     *
     * @param executable redis-server.
     * @param workDir    its working directory (nothing is written there with persistence off).
     * @param log        its log file.
     * @return the running server.
     * @throws IOException when it does not start.
     * @throws InterruptedException when interrupted.
     */
    static RedisContender start(final Path executable, final Path workDir, final Path log)
        throws IOException, InterruptedException
    {
        final int port;
        try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress()))
        {
            port = socket.getLocalPort();
        }
        final Process process = new ProcessBuilder(executable.toString(),
            "--port", Integer.toString(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--dir", workDir.toString(), "--loglevel", "warning")
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .start();
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true)
        {
            try (Jedis jedis = connect(port))
            {
                final String info = jedis.info("server");
                String version = "unknown";
                for (final String line : info.split("\r?\n"))
                {
                    if (line.startsWith("redis_version:"))
                    {
                        version = line.substring("redis_version:".length()).trim();
                    }
                }
                return new RedisContender(process, port, version);
            }
            catch (final RuntimeException ex)
            {
                if (!process.isAlive() || System.nanoTime() - deadline > 0)
                {
                    process.destroyForcibly();
                    throw new IOException("redis-server did not start (see " + log + ")", ex);
                }
                Thread.sleep(50);
            }
        }
    }

    static Jedis connect(final int port)
    {
        return new Jedis(new HostAndPort("127.0.0.1", port), DefaultJedisClientConfig.builder()
            .connectionTimeoutMillis(2000)
            .socketTimeoutMillis(120_000)
            .build());
    }

    int port()
    {
        return port;
    }

    String version()
    {
        return version;
    }

    @Override
    public void close()
    {
        process.destroy();
        try
        {
            if (!process.waitFor(5, TimeUnit.SECONDS))
            {
                process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The worker side: per repetition FLUSHALL (untimed), SET every chunk of the repetition under a new key,
     * then GET each back and check its stamp; GB/s per loop and per-chunk latency.
     *
     * @param c        the command: port, chunk_bytes, reps, warmups, chunks_per_rep.
     * @param progress progress lines.
     * @return the result map.
     */
    static Map<String, Object> runClient(final Map<String, Object> c, final Consumer<String> progress)
    {
        final int port = (int)longOf(c, "port");
        final int chunkBytes = (int)longOf(c, "chunk_bytes");
        final int reps = (int)longOf(c, "reps");
        final int warmups = (int)longOf(c, "warmups");
        final int chunks = (int)longOf(c, "chunks_per_rep");
        final byte[] source = BenchWorker.pattern(chunkBytes);
        final byte[][] keys = new byte[chunks][];
        for (int i = 0; i < chunks; i++)
        {
            keys[i] = ("kvstash-bench:" + chunkBytes + ":" + i).getBytes(StandardCharsets.US_ASCII);
        }
        final BenchWorker.Series set = new BenchWorker.Series("redis_set", reps);
        final BenchWorker.Series get = new BenchWorker.Series("redis_get", reps);
        try (Jedis jedis = connect(port))
        {
            for (int rep = -warmups; rep < reps; rep++)
            {
                final boolean measured = rep >= 0;
                jedis.flushAll();
                final Histogram hs = measured ? set.perChunk : null;
                long start = System.nanoTime();
                long t0 = start;
                for (int i = 0; i < chunks; i++)
                {
                    stamp(source, i);
                    jedis.set(keys[i], source);
                    t0 = lap(hs, t0);
                }
                final double setGbps = (double)chunks * chunkBytes / (System.nanoTime() - start);
                final Histogram hg = measured ? get.perChunk : null;
                start = System.nanoTime();
                t0 = start;
                for (int i = 0; i < chunks; i++)
                {
                    final byte[] value = jedis.get(keys[i]);
                    if (null == value || value.length != chunkBytes || stampOf(value) != i)
                    {
                        throw new IllegalStateException("redis GET returned the wrong chunk");
                    }
                    t0 = lap(hg, t0);
                }
                final double getGbps = (double)chunks * chunkBytes / (System.nanoTime() - start);
                if (measured)
                {
                    set.gbps[rep] = setGbps;
                    get.gbps[rep] = getGbps;
                }
                progress.accept(BenchSupport.fmt("%s redis %s: SET %.2f, GET %.2f GB/s", BenchSupport.size(chunkBytes),
                    measured ? "rep " + (rep + 1) + "/" + reps : "warm-up", setGbps, getGbps));
            }
            jedis.flushAll();
        }
        final Map<String, Object> result = new LinkedHashMap<>();
        result.put("set", set.toMap());
        result.put("get", get.toMap());
        return result;
    }

    static long lap(final Histogram h, final long t0)
    {
        final long t1 = System.nanoTime();
        if (null != h)
        {
            BenchSupport.record(h, t1 - t0);
        }
        return t1;
    }

    static void stamp(final byte[] bytes, final long value)
    {
        for (int k = 0; k < 8; k++)
        {
            bytes[k] = (byte)(value >>> (8 * k));
        }
    }

    static long stampOf(final byte[] bytes)
    {
        long v = 0;
        for (int k = 7; k >= 0; k--)
        {
            v = (v << 8) | (bytes[k] & 0xFF);
        }
        return v;
    }
}
