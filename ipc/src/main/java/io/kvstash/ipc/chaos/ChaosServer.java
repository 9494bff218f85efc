package io.kvstash.ipc.chaos;

import io.kvstash.core.StoreContext;
import io.kvstash.ipc.server.KvStashServer;
import io.kvstash.ipc.server.ServerContext;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A server process of the restart suite: {@code DIR POOL_BYTES LEASE_MS}; prints {@code READY <incarnation>}
 * and serves until killed (SIGTERM closes it cleanly).
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
        Runtime.getRuntime().addShutdownHook(new Thread(server::close));
        System.out.println("READY " + Long.toHexString(context.incarnation()));
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
