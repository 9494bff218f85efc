package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.AgentInvoker;

import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Connecting a client to a server whose duty cycle the test runs ({@code ServerContext.useAgentInvoker}).
 */
final class InvokedServer
{
    private InvokedServer()
    {
    }

    /**
     * A small SHARED server whose duty cycle the test runs.
     *
     * @param dir the server's directory.
     * @return its configuration, to adjust before the launch.
     */
    static ServerContext context(final Path dir)
    {
        return new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.SHARED)
            .useAgentInvoker(true)
            .storeContext(new StoreContext().poolSizeBytes(16L << 20));
    }

    /**
     * Connects a client and registers instance 1. Connecting and registering wait for the server's duty
     * cycle, so a helper thread runs it meanwhile and hands the invoker back when done (the invoker is
     * single-threaded; the join orders the two threads' use of it).
     *
     * @param invoker      the server's duty cycle.
     * @param dir          the server's directory.
     * @param beforeInvoke run by the helper before each duty cycle (a test clock moves here), or null.
     * @return the connected client.
     * @throws InterruptedException when interrupted while the helper stops.
     */
    static KvStashClient connectAndRegister(final AgentInvoker invoker, final Path dir, final Runnable beforeInvoke)
        throws InterruptedException
    {
        final AtomicBoolean connecting = new AtomicBoolean(true);
        final Thread helper = new Thread(() ->
        {
            while (connecting.get())
            {
                if (null != beforeInvoke)
                {
                    beforeInvoke.run();
                }
                invoker.invoke();
                Thread.yield();
            }
        });
        helper.start();
        try
        {
            final KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir));
            final ClientResponse registered =
                client.register(1, Layout.of("llama", 1, 0, 2, 128, Dtype.BFLOAT16, false));
            assertEquals(Status.OK, registered.status(), registered.toString());
            return client;
        }
        finally
        {
            connecting.set(false);
            helper.join();
        }
    }
}
