package io.kvstash.e2e;

import io.kvstash.core.StoreContext;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;

import java.nio.file.Path;

/**
 * A server process for the end-to-end tests: {@code DIR POOL_BYTES}; prints {@code READY <incarnation>}.
 */
public final class TestServer
{
    private TestServer()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        final ServerContext context = new ServerContext()
            .directory(Path.of(args[0]))
            .storeContext(new StoreContext().poolSizeBytes(Long.parseLong(args[1])));
        final KvStashServer server = KvStashServer.launch(context);
        Runtime.getRuntime().addShutdownHook(new Thread(server::close));
        System.out.println("READY " + Long.toHexString(context.incarnation()));
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
