package io.kvstash.chaos;

import io.kvstash.core.StoreContext;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A server process of the restart suite: {@code DIR POOL_BYTES LEASE_MS}; prints {@code READY <incarnation>}
 * and serves until killed. SIGTERM closes it cleanly and prints {@code GC <collections> <ms> <bytes>}: the
 * garbage collections of this JVM from READY until the signal and the bytes the server's threads allocated
 * meanwhile, the server-side evidence that a suite caused no pauses.
 */
public final class ChaosServer
{
    private ChaosServer()
    {
    }

    /**
     * Entry point.
     *
     * @param args directory, pool bytes, lease ms.
     * @throws Exception when the server cannot start.
     */
    public static void main(final String[] args) throws Exception
    {
        final ServerContext context = new ServerContext()
            .directory(Path.of(args[0]))
            .storeContext(new StoreContext()
                .poolSizeBytes(Long.parseLong(args[1]))
                .leaseNs(TimeUnit.MILLISECONDS.toNanos(Long.parseLong(args[2]))));
        final KvStashServer server = KvStashServer.launch(context);
        // Launching leaves the young generation of this 128 MiB heap 97 % full (34 of 35 MB, jcmd GC.heap_info,
        // Dec 3), so a few hundred KiB more set off a collection, whoever allocates them: starting the latency
        // log's thread was enough. Collect the launch's garbage now, so the count after READY is the suite's
        // own; the bytes the server's threads allocate meanwhile are reported as well.
        System.gc();
        final long[] gcAtReady = ChaosRunner.gc();
        final long allocatedAtReady = serverThreadsAllocated();
        Runtime.getRuntime().addShutdownHook(new Thread(() ->
        {
            // Counted before closing: closing (threads stopping, the last latency interval) is not the suite.
            final long[] gc = ChaosRunner.gc();
            final long allocated = serverThreadsAllocated() - allocatedAtReady;
            server.close();
            System.out.println("GC " + (gc[0] - gcAtReady[0]) + " " + (gc[1] - gcAtReady[1]) + " " + allocated);
            System.out.flush();
        }));
        System.out.println("READY " + Long.toHexString(context.incarnation()));
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
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
        for (final java.lang.management.ThreadInfo info : threads.getThreadInfo(threads.getAllThreadIds()))
        {
            if (null != info && info.getThreadName().contains("kvstash"))
            {
                bytes += Math.max(0, threads.getThreadAllocatedBytes(info.getThreadId()));
            }
        }
        return bytes;
    }
}
