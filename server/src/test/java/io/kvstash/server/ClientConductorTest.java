package io.kvstash.server;

import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreCounters;
import io.kvstash.tools.ShmDirectories;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.NanoClock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The client conductor's timers, run from the receiver's duty cycle at the receiver's clock readings: a client
 * that closes is seen at the next liveness check, reaped and freed, and not before its interval is due. The
 * server's clock is a manual one here and the test runs the server's duty cycle itself.
 */
@Timeout(60)
class ClientConductorTest
{
    private static final long LIVENESS_INTERVAL_MS = 50;

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
        dir = ShmDirectories.newPath("kvstash-test-conductor-");
        try (KvStashServer server = KvStashServer.launch(InvokedServer.context(dir)
            .livenessIntervalMs(LIVENESS_INTERVAL_MS)
            .nanoClock(clock)))
        {
            final AgentInvoker invoker = server.invoker();
            final StoreCounters counters = server.counters();
            final KvStashClient client = InvokedServer.connectAndRegister(invoker, dir,
                () -> clock.now.addAndGet(TimeUnit.MICROSECONDS.toNanos(100)));
            assertEquals(1, counters.get(StoreCounters.WIRE_CLIENTS));
            assertEquals(1, counters.get(StoreCounters.WIRE_CLIENTS_ATTACHED));

            // A liveness check runs now, with the client still open: it is due again one interval later.
            clock.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(LIVENESS_INTERVAL_MS));
            cycles(invoker, 2 * ReceiverAgent.CYCLES_PER_CLOCK_READ);
            client.close();

            // Within the interval the conductor does not look: the client stays attached however many cycles run.
            clock.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(LIVENESS_INTERVAL_MS / 2));
            cycles(invoker, 4 * ReceiverAgent.CYCLES_PER_CLOCK_READ);
            assertEquals(1, counters.get(StoreCounters.WIRE_CLIENTS));
            assertEquals(0, counters.get(StoreCounters.WIRE_CLIENTS_DETACHED));

            // Once it is due, the check closes the session, the REAP passes the pipeline and the session is freed.
            clock.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(LIVENESS_INTERVAL_MS));
            cycles(invoker, 4 * ReceiverAgent.CYCLES_PER_CLOCK_READ);
            assertEquals(0, counters.get(StoreCounters.WIRE_CLIENTS));
            assertEquals(1, counters.get(StoreCounters.WIRE_CLIENTS_DETACHED));
            assertEquals(0, counters.get(StoreCounters.ERRORS));
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
