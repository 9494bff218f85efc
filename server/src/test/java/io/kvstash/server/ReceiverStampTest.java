package io.kvstash.server;

import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.NanoClock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * How the receiver stamps requests: most take a recent reading of the clock shared with others (a read
 * costs as much as a hand-off between two cores), the ones timed for latency get a reading of their own, and
 * the shared readings never reach the latency histograms. The server's clock is a manual one here, moved
 * and counted by the test, and the test runs the server's duty cycle itself.
 */
@Timeout(60)
class ReceiverStampTest
{
    /** A monotonic clock that moves only when told and counts its readings. */
    private static final class ManualClock implements NanoClock
    {
        final AtomicLong now = new AtomicLong(TimeUnit.SECONDS.toNanos(1000));
        final AtomicLong reads = new AtomicLong();

        @Override
        public long nanoTime()
        {
            reads.incrementAndGet();
            return now.get();
        }
    }

    private final ManualClock clock = new ManualClock();
    private Path dir;
    private int answers;
    private long transferId;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    private void answer(final ClientResponse response)
    {
        assertEquals(Status.OK, response.status(), response.toString());
        if (RequestType.PREPARE_STORE == response.requestType())
        {
            transferId = response.transferId();
        }
        answers++;
    }

    @Test
    void shouldReadTheClockForFewRequestsAndRecordLatencyOnlyFromItsOwnReadings() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-stamps-");
        try (KvStashServer server = KvStashServer.launch(InvokedServer.context(dir).nanoClock(clock)))
        {
            final AgentInvoker invoker = server.invoker();
            final KvStashClient client = InvokedServer.connectAndRegister(invoker, dir,
                () -> clock.now.addAndGet(TimeUnit.MICROSECONDS.toNanos(100)));
            try
            {
                // Drain the latency the connection left, then let the server take a reading at T.
                server.latency().poll(System.currentTimeMillis());
                clock.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(1));
                for (int i = 0; i < 64; i++)
                {
                    invoker.invoke();
                }
                // Five seconds pass with no reading: a request stamped from the shared reading would look five
                // seconds old when answered.
                clock.now.addAndGet(TimeUnit.SECONDS.toNanos(5));
                final long readsBefore = clock.reads.get();
                final int pings = 400;
                for (int i = 0; i < pings; i++)
                {
                    assertTrue(client.requests().sendSimple(RequestType.PING, 0, 0, 0) > 0);
                    invoker.invoke();
                    assertEquals(1, client.poll(this::answer, 4));
                }
                final long reads = clock.reads.get() - readsBefore;
                // One reading per 16 duty cycles, one for each eighth request and its end time: about 125.
                // Reading for every request (and every cycle) would take 800 or more. The whole test stays under
                // 4,096 events, so no request here is one the stages time (those count once, not eight times).
                assertTrue(reads < pings / 2, "clock read " + reads + " times for " + pings + " requests");
                assertTrue(reads >= pings / 8, "clock read only " + reads + " times: no request was timed");

                for (int i = 0; i < 80; i++)
                {
                    assertTrue(client.requests().sendKeyed(RequestType.PREPARE_STORE, 1, ChunkKeys.ofIds(i), 0) > 0);
                    invoker.invoke();
                    assertEquals(1, client.poll(this::answer, 4));
                    assertTrue(client.requests().sendSimple(RequestType.COMMIT_STORE, 1, transferId, 0) > 0);
                    invoker.invoke();
                    assertEquals(1, client.poll(this::answer, 4));
                }
                assertEquals(pings + 160, answers);

                server.latency().poll(System.currentTimeMillis());
                final Histogram pingLatency = server.latency().requestTotal(RequestType.PING);
                assertEquals(pings, pingLatency.getTotalCount(), "one in eight recorded with a count of eight");
                assertTrue(pingLatency.getMaxValue() < TimeUnit.MILLISECONDS.toNanos(1),
                    "a shared reading reached the histogram: max " + pingLatency.getMaxValue() + " ns");
                assertEquals(80, server.latency().requestTotal(RequestType.PREPARE_STORE).getTotalCount());
                assertEquals(80, server.latency().requestTotal(RequestType.COMMIT_STORE).getTotalCount());

                // Busy duty cycles, each reading 64 requests: after the first, one PING in 64 is timed.
                sendPingsAndAnswer(client, invoker, 64);
                final long busyReadsBefore = clock.reads.get();
                final int batches = 20;
                for (int i = 0; i < batches; i++)
                {
                    sendPingsAndAnswer(client, invoker, 64);
                }
                final long busyReads = clock.reads.get() - busyReadsBefore;
                // Per batch: a reading of its own and an end time for the one timed, a reading for the timers
                // after a cycle that read 32 or more; one in eight would take 16 readings a batch.
                assertTrue(busyReads <= batches * 3 + 2, "clock read " + busyReads + " times for " + batches +
                    " cycles of 64 requests");
                server.latency().poll(System.currentTimeMillis());
                final long counted = server.latency().requestTotal(RequestType.PING).getTotalCount() - pings;
                final long sent = 64L * (batches + 1);
                assertTrue(counted >= sent - 64 && counted <= sent + 64, counted + " counted for " + sent + " PINGs");
            }
            finally
            {
                client.close();
            }
        }
    }
    private void sendPingsAndAnswer(final KvStashClient client, final AgentInvoker invoker, final int count)
    {
        for (int i = 0; i < count; i++)
        {
            assertTrue(client.requests().sendSimple(RequestType.PING, 0, 0, 0) > 0);
        }
        final int target = answers + count;
        invoker.invoke();
        while (answers < target)
        {
            client.poll(this::answer, count);
            invoker.invoke();
        }
    }
}
