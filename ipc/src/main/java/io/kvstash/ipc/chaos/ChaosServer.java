package io.kvstash.ipc.chaos;

import io.kvstash.core.StoreContext;
import io.kvstash.ipc.server.KvStashServer;
import io.kvstash.ipc.server.ServerContext;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A server process of the restart suite: {@code DIR POOL_BYTES LEASE_MS}; prints {@code READY <incarnation>}
 * and serves until killed. SIGTERM closes it cleanly and prints {@code GC <collections> <ms>}: the garbage
 * collections of this JVM since it printed READY, the server-side evidence that a suite caused no pauses.
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
        final long[] gcAtReady = ChaosRunner.gc();
        Runtime.getRuntime().addShutdownHook(new Thread(() ->
        {
            server.close();
            final long[] gc = ChaosRunner.gc();
            System.out.println("GC " + (gc[0] - gcAtReady[0]) + " " + (gc[1] - gcAtReady[1]));
            System.out.flush();
        }));
        System.out.println("READY " + Long.toHexString(context.incarnation()));
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
