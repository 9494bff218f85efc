package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import org.agrona.CloseHelper;
import org.agrona.concurrent.AgentInvoker;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The receiver's counts of its duty cycles, which the scaling benchmark reads: every cycle polls the request ring
 * of every attached client once, a cycle that reads nothing counts as empty, and every request read is counted.
 * The test runs the server's duty cycle itself, with three real clients attached; a server on its own thread in
 * the backoff wait mode adds its spins, yields and parks.
 */
@Timeout(60)
class ReceiverCountsTest
{
    private final List<KvStashClient> clients = new ArrayList<>();
    private KvStashServer server;
    private Path dir;

    @AfterEach
    void cleanup()
    {
        clients.forEach(CloseHelper::quietClose);
        CloseHelper.quietClose(server);
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldPollEveryClientOncePerDutyCycleAndCountWhatItRead() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-receiver-counts-");
        server = KvStashServer.launch(InvokedServer.context(dir));
        final AgentInvoker invoker = server.invoker();
        connect(invoker, 3);
        final Map<String, Long> before = server.receiverCounts();
        assertFalse(before.containsKey("parks"), "an invoked server has no idle strategy of its own: " + before);

        final long first = clients.get(0).requests().sendSimple(RequestType.PING, 0, 0, 0);
        final long third = clients.get(2).requests().sendSimple(RequestType.PING, 0, 0, 0);
        assertTrue(first > 0 && third > 0);
        invoker.invoke();
        final Map<String, Long> busy = server.receiverCounts();
        assertEquals(1, busy.get("duty_cycles") - before.get("duty_cycles"));
        assertEquals(0, busy.get("empty_cycles") - before.get("empty_cycles"));
        assertEquals(3, busy.get("rings_polled") - before.get("rings_polled"));
        assertEquals(2, busy.get("requests_read") - before.get("requests_read"));
        assertEquals(Status.OK, clients.get(0).await(first).status());
        assertEquals(Status.OK, clients.get(2).await(third).status());

        invoker.invoke();
        final Map<String, Long> idle = server.receiverCounts();
        assertEquals(1, idle.get("empty_cycles") - busy.get("empty_cycles"));
        assertEquals(3, idle.get("rings_polled") - busy.get("rings_polled"));
        assertEquals(busy.get("requests_read"), idle.get("requests_read"));
    }

    @Test
    void shouldCountTheParksOfAServerThreadThatBacksOff() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-receiver-counts-");
        server = KvStashServer.launch(InvokedServer.context(dir).useAgentInvoker(false));
        final KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir));
        clients.add(client);
        assertEquals(Status.OK, client.ping().status());
        // An idle server backs off to parks within a few thousand empty cycles.
        final long deadline = System.nanoTime() + 10_000_000_000L;
        while (server.receiverCounts().get("parks") < 1 && System.nanoTime() < deadline)
        {
            Thread.sleep(1);
        }
        server.close();
        final Map<String, Long> counts = server.receiverCounts();
        assertTrue(counts.get("parks") >= 1, counts.toString());
        assertTrue(counts.get("spins") >= 100, counts.toString());
        assertTrue(counts.get("requests_read") >= 1, counts.toString());
        assertTrue(counts.get("empty_cycles") < counts.get("duty_cycles"), counts.toString());
    }

    private void connect(final AgentInvoker invoker, final int count) throws InterruptedException
    {
        final AtomicBoolean connecting = new AtomicBoolean(true);
        final Thread helper = new Thread(() ->
        {
            while (connecting.get())
            {
                invoker.invoke();
                Thread.yield();
            }
        });
        helper.start();
        try
        {
            for (int i = 0; i < count; i++)
            {
                clients.add(KvStashClient.connect(new ClientContext().directory(dir)));
            }
        }
        finally
        {
            connecting.set(false);
            helper.join();
        }
    }
}
