package io.kvstash.testkit;

import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.server.ServerContext;
import io.kvstash.server.StartupContext;
import io.kvstash.tier.TierContext;
import io.kvstash.tier.TieredServer;
import org.agrona.concurrent.EpochClock;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The server entry point of every test that runs a server in its own process (the end-to-end tests, the chaos
 * suites, the Python client's tests):
 * <pre>
 * TestServer DIR POOL_BYTES [CHUNK_TOKENS [LEASE_MS [WAIT_MODE]]]
 * </pre>
 * With {@code -Dkvstash.l2=redis://host:port,...} it runs a second tier on that Redis Cluster (as {@code serve --l2}).
 * With {@code -Dkvstash.poolOnDemand=true} the pool is committed on demand (as {@code serve --prepare-pool on-demand}),
 * with {@code -Dkvstash.onDemandHeadroomBytes=N} of headroom.
 * Prints {@code READY incarnation=<hex> pid=<pid>} once serving. SIGTERM or the end of its standard input (the
 * test process died) closes it cleanly; it then prints {@code GC <collections> <ms> <bytes>}: the garbage
 * collections of this JVM from READY until then and the bytes the server's threads allocated meanwhile, the
 * server-side evidence that a suite caused no pauses. Exit code 2 on a usage error.
 * <p>
 * The server's wall clock (its heartbeat, its start time) is the machine's until a line on standard input steps
 * it, as NTP or a resumed VM would: {@code wall-clock behind MS} puts it MS behind the machine's (0 puts it back),
 * {@code wall-clock at MS} stops it at MS. Each is answered with {@code WALL-CLOCK <its reading>}; other lines are
 * ignored.
 */
public final class TestServer
{
    /** Start of the line printed once the server serves. */
    public static final String READY_PREFIX = "READY ";
    /** Start of the line printed when the server has closed. */
    public static final String GC_PREFIX = "GC ";
    /** Start of the line that answers a {@code wall-clock} line. */
    public static final String WALL_CLOCK_PREFIX = "WALL-CLOCK ";

    /** The server's wall clock: the machine's, set behind it, or stopped (see the class comment). */
    private static final class SteppedEpochClock implements EpochClock
    {
        private volatile long behindMs;
        private volatile long stoppedAtMs = -1;

        @Override
        public long time()
        {
            final long stopped = stoppedAtMs;
            return stopped >= 0 ? stopped : System.currentTimeMillis() - behindMs;
        }

        /**
         * Applies a {@code wall-clock} line.
         *
         * @return true when the line was one.
         */
        boolean step(final String line)
        {
            final String[] words = line.trim().split(" +");
            if (3 != words.length || !"wall-clock".equals(words[0]))
            {
                return false;
            }
            final long ms = Long.parseLong(words[2]);
            switch (words[1])
            {
                case "behind" ->
                {
                    behindMs = ms;
                    stoppedAtMs = -1;
                }
                case "at" -> stoppedAtMs = ms;
                default ->
                {
                    return false;
                }
            }
            return true;
        }
    }

    private TestServer()
    {
    }

    /**
     * Entry point (see the class comment).
     *
     * @param args directory, pool bytes, then optionally chunk tokens, lease ms, wait mode.
     * @throws Exception when the server cannot start.
     */
    public static void main(final String[] args) throws Exception
    {
        if (args.length < 2)
        {
            System.err.println("usage: TestServer DIR POOL_BYTES [CHUNK_TOKENS [LEASE_MS [WAIT_MODE]]]");
            System.exit(2);
        }
        final StoreContext store = new StoreContext().poolSizeBytes(Long.parseLong(args[1]));
        if (args.length > 2)
        {
            store.chunkTokens(Integer.parseInt(args[2]));
        }
        if (args.length > 3)
        {
            store.leaseNs(TimeUnit.MILLISECONDS.toNanos(Long.parseLong(args[3])));
        }
        final SteppedEpochClock wallClock = new SteppedEpochClock();
        final ServerContext context = new ServerContext().directory(Path.of(args[0])).storeContext(store)
            .epochClock(wallClock);
        if (args.length > 4)
        {
            context.waitMode(WaitMode.valueOf(args[4].toUpperCase(Locale.ROOT).replace('-', '_')));
        }
        if (Boolean.getBoolean("kvstash.poolOnDemand"))
        {
            // The pool committed as the store grows, with the headroom given in bytes (default: the server's).
            context.startupContext().poolOnDemand(true).onDemandHeadroomBytes(Long.getLong(
                "kvstash.onDemandHeadroomBytes", StartupContext.ON_DEMAND_HEADROOM_BYTES_DEFAULT));
        }
        final String l2Seeds = System.getProperty("kvstash.l2");
        serve(context, null == l2Seeds || l2Seeds.isEmpty() ? null : new TierContext().seeds(l2Seeds), wallClock);
        System.exit(0);
    }

    /**
     * The arguments that start a server with a lease of its own and the default chunk tokens.
     *
     * @param dir       the server's directory.
     * @param poolBytes pool size.
     * @param leaseMs   lease.
     * @return arguments for {@link #main(String[])}.
     */
    public static String[] args(final Path dir, final long poolBytes, final long leaseMs)
    {
        return new String[]{ dir.toString(), Long.toString(poolBytes),
            Integer.toString(StoreContext.CHUNK_TOKENS_DEFAULT), Long.toString(leaseMs) };
    }

    /**
     * The incarnation a READY line announces.
     *
     * @param readyLine the line.
     * @return the incarnation in hex, as the server prints it.
     */
    public static String incarnation(final String readyLine)
    {
        for (final String part : readyLine.split(" "))
        {
            if (part.startsWith("incarnation="))
            {
                return part.substring("incarnation=".length());
            }
        }
        throw new IllegalArgumentException("not a READY line: " + readyLine);
    }

    private static void serve(
        final ServerContext context, final TierContext tierContext, final SteppedEpochClock wallClock)
        throws IOException, InterruptedException
    {
        final TieredServer server = TieredServer.launch(context, tierContext);
        // Launching leaves the young generation of a small heap nearly full, so a little more allocation sets off
        // a collection, whoever allocates it. Collect the launch's garbage now, so the count after READY is the
        // suite's own; the bytes the server's threads allocate meanwhile are reported as well.
        System.gc();
        final long[] gcAtReady = gc();
        final long allocatedAtReady = serverThreadsAllocated();
        final AtomicBoolean closed = new AtomicBoolean();
        final CountDownLatch stopped = new CountDownLatch(1);
        final Runnable shutdown = () ->
        {
            if (closed.compareAndSet(false, true))
            {
                // Counted before closing: closing (threads stopping, the last latency interval) is not the suite.
                final long[] gc = gc();
                final long allocated = serverThreadsAllocated() - allocatedAtReady;
                server.close();
                System.out.println(GC_PREFIX + (gc[0] - gcAtReady[0]) + " " + (gc[1] - gcAtReady[1]) + " " + allocated);
                System.out.flush();
                stopped.countDown();
            }
        };
        Runtime.getRuntime().addShutdownHook(new Thread(shutdown, "test-server-shutdown"));
        System.out.println(READY_PREFIX + "incarnation=" + Long.toHexString(context.incarnation()) +
            " pid=" + ProcessHandle.current().pid());
        System.out.flush();
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while (null != (line = in.readLine()))
        {
            if (wallClock.step(line))
            {
                System.out.println(WALL_CLOCK_PREFIX + wallClock.time());
                System.out.flush();
            }
        }
        shutdown.run();
        stopped.await();
    }

    /**
     * Collections and milliseconds spent collecting in this JVM so far.
     *
     * @return {collections, ms}.
     */
    public static long[] gc()
    {
        long count = 0;
        long ms = 0;
        for (final GarbageCollectorMXBean bean : ManagementFactory.getGarbageCollectorMXBeans())
        {
            count += Math.max(0, bean.getCollectionCount());
            ms += Math.max(0, bean.getCollectionTime());
        }
        return new long[]{ count, ms };
    }

    /**
     * Bytes allocated so far by the server's threads (their names hold {@code kvstash}).
     *
     * @return bytes.
     */
    static long serverThreadsAllocated()
    {
        final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        // Names only: getThreadInfo without a depth takes no stack traces (Thread.getAllStackTraces would).
        long bytes = 0;
        for (final ThreadInfo info : threads.getThreadInfo(threads.getAllThreadIds()))
        {
            if (null != info && info.getThreadName().contains("kvstash"))
            {
                bytes += Math.max(0, threads.getThreadAllocatedBytes(info.getThreadId()));
            }
        }
        return bytes;
    }
}
