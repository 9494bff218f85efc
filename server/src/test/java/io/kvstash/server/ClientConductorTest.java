package io.kvstash.server;

import io.kvstash.core.StoreCounters;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.process.ChildJvm;
import io.kvstash.process.ShmDirectories;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.NanoClock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

/**
 * The client conductor's timers, run from the receiver's duty cycle at the receiver's clock readings: a client
 * that closes, or whose process is killed, is seen at the next liveness check, reaped and freed, and not before
 * its interval is due. The server's clock is a manual one here and the test runs the server's duty cycle itself;
 * the client runs in a process of its own ({@link ClientProcess}), as a worker does: its file lock is held per
 * process, and only another process's death lets the server take it.
 */
@Timeout(60)
class ClientConductorTest
{
    private static final long LIVENESS_INTERVAL_MS = 50;
    private static final long WAIT_MS = 30_000;

    /** A monotonic clock that moves only when told. */
    private static final class ManualClock implements NanoClock
    {
        final AtomicLong now = new AtomicLong(TimeUnit.SECONDS.toNanos(1000));

        @Override
        public long nanoTime()
        {
            return now.get();
        }
    }

    private final ManualClock clock = new ManualClock();
    private Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldDetachAClosedClientAtTheNextLivenessCheckWhenItsIntervalIsDue() throws Exception
    {
        detachAtTheNextLivenessCheck(false);
    }

    @Test
    void shouldReapAKilledClientAtTheNextLivenessCheckWhenItsIntervalIsDue() throws Exception
    {
        detachAtTheNextLivenessCheck(true);
    }

    /**
     * A client in another process connects and registers; a liveness check runs while it is open; then it closes
     * (or is killed), and is detached at the next check once that is due, not before.
     */
    private void detachAtTheNextLivenessCheck(final boolean kill) throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-conductor-");
        try (KvStashServer server = KvStashServer.launch(InvokedServer.context(dir)
            .livenessIntervalMs(LIVENESS_INTERVAL_MS)
            .nanoClock(clock));
            ChildJvm client = ClientProcess.start("client", dir.toString()))
        {
            final AgentInvoker invoker = server.invoker();
            final StoreCounters counters = server.counters();
            awaitWhileInvoking(invoker, client, ClientProcess.CONNECTED);
            assertEquals(1, counters.get(CountersDescriptor.WIRE_CLIENTS));
            assertEquals(1, counters.get(CountersDescriptor.WIRE_CLIENTS_ATTACHED));

            // A liveness check runs now, with the client still open: it is due again one interval later.
            clock.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(LIVENESS_INTERVAL_MS));
            cycles(invoker, 2 * ReceiverAgent.CYCLES_PER_CLOCK_READ);
            assertEquals(1, counters.get(CountersDescriptor.WIRE_CLIENTS), "a live client in another process was reaped");
            assertEquals(0, counters.get(CountersDescriptor.WIRE_CLIENTS_DETACHED));
            if (kill)
            {
                client.kill9();
                assertFalse(client.isAlive(), "the killed client still runs");
            }
            else
            {
                client.send("close");
                client.await(ClientProcess.CLOSED, WAIT_MS);
            }

            // Within the interval the conductor does not look: the client stays attached however many cycles run.
            clock.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(LIVENESS_INTERVAL_MS / 2));
            cycles(invoker, 4 * ReceiverAgent.CYCLES_PER_CLOCK_READ);
            assertEquals(1, counters.get(CountersDescriptor.WIRE_CLIENTS));
            assertEquals(0, counters.get(CountersDescriptor.WIRE_CLIENTS_DETACHED));

            // Once it is due, the check closes the session, the REAP passes the pipeline and the session is freed.
            clock.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(LIVENESS_INTERVAL_MS));
            cycles(invoker, 4 * ReceiverAgent.CYCLES_PER_CLOCK_READ);
            assertEquals(0, counters.get(CountersDescriptor.WIRE_CLIENTS));
            assertEquals(1, counters.get(CountersDescriptor.WIRE_CLIENTS_DETACHED));
            assertEquals(kill ? 1 : 0, counters.get(CountersDescriptor.DEAD_CLIENTS),
                kill ? "a killed client is reaped as dead" : "a closed client is not dead");
            assertEquals(0, counters.get(CountersDescriptor.ERRORS));
        }
    }

    /**
     * Runs the server's duty cycle on a helper thread, the clock moving 100 us a cycle, until the child prints a
     * line: connecting and registering wait for the server. The join hands the invoker back to this thread.
     */
    private void awaitWhileInvoking(final AgentInvoker invoker, final ChildJvm child, final String prefix)
        throws InterruptedException
    {
        final AtomicBoolean waiting = new AtomicBoolean(true);
        final Thread helper = new Thread(() ->
        {
            while (waiting.get())
            {
                clock.now.addAndGet(TimeUnit.MICROSECONDS.toNanos(100));
                invoker.invoke();
                Thread.yield();
            }
        });
        helper.start();
        try
        {
            child.await(prefix, WAIT_MS);
        }
        finally
        {
            waiting.set(false);
            helper.join();
        }
    }

    private static void cycles(final AgentInvoker invoker, final int count)
    {
        for (int i = 0; i < count; i++)
        {
            invoker.invoke();
        }
    }
}
