package io.kvstash.e2e;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.client.KvStashException;
import io.kvstash.process.ChildJvm;
import io.kvstash.process.ShmDirectories;
import io.kvstash.testkit.TestServer;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The server's wall clock steps (NTP, a resumed VM): its timers and its clients' view of its liveness must not
 * depend on it. The server runs in a process of its own ({@link TestServer}), as operators run it, and the test
 * steps its wall clock through its standard input; the clients, in this process, judge it by its control file and
 * its process, as workers do, with the machine's clock: a step of the server's clock is also what a client sees
 * when its own clock steps.
 */
@Timeout(60)
class WallClockStepTest
{
    private static final long HOUR_MS = TimeUnit.HOURS.toMillis(1);
    private static final long POOL_BYTES = 16L << 20;
    private static final long WAIT_MS = 30_000;
    private static final Layout LAYOUT = Layout.of("llama", 1, 0, 2, 128, Dtype.BFLOAT16, false);

    Path dir;
    UnsafeBuffer control;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldKeepBeatingAttachingAndReclaimingWhenTheServersWallClockStepsBackAnHour() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-clock-step-");
        try (ChildJvm server = startServer();
            KvStashClient first = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertEquals(Status.OK, first.register(1, LAYOUT).status());
            storeAndRetrieve(first, 1, ChunkKeys.ofIds(1, 2));

            stepWallClock(server, "behind " + HOUR_MS);
            // The server goes on beating (its timers run on the monotonic clock): the stepped value shows up.
            awaitTrue(() -> heartbeat() < System.currentTimeMillis() - HOUR_MS / 2, "the server stopped beating");
            // A connected client judges the heartbeat by its moving, not by its distance to this wall clock.
            final long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
            while (System.nanoTime() - until < 0)
            {
                assertTrue(first.alive(), "a live server looked dead after its clock stepped back");
                Thread.sleep(20);
            }
            storeAndRetrieve(first, 1, ChunkKeys.ofIds(3, 4));

            // A new client connects: the server still scans for it, and the client's first check watches
            // the heartbeat move instead of refusing an hour-old one.
            try (KvStashClient second = KvStashClient.connect(new ClientContext().directory(dir)))
            {
                assertEquals(Status.OK, second.register(2, LAYOUT).status());
                storeAndRetrieve(second, 2, ChunkKeys.ofIds(5, 6));

                // A client leaving with a reservation held: the liveness check still runs and reaps it.
                final ClientResponse prepared = second.prepareStore(2, ChunkKeys.ofIds(7, 8));
                assertEquals(Status.OK, prepared.status(), prepared.toString());
                assertEquals(2, first.counter(CountersDescriptor.RESERVED_CHUNKS));
            }
            awaitTrue(() -> 0 == first.counter(CountersDescriptor.RESERVED_CHUNKS) &&
                0 == first.counter(CountersDescriptor.PENDING_TRANSFERS),
                "the departed client's reservation was not reclaimed");

            // And back again: the clock steps forward an hour.
            stepWallClock(server, "behind 0");
            awaitTrue(() -> Math.abs(heartbeat() - System.currentTimeMillis()) < HOUR_MS / 2,
                "the server stopped beating after the step forward");
            assertTrue(first.alive());
            storeAndRetrieve(first, 1, ChunkKeys.ofIds(9, 10));
            stop(server);
        }
    }

    @Test
    void shouldRefuseToConnectToAServerWhoseHeartbeatDoesNotMove() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-clock-still-");
        try (ChildJvm server = startServer())
        {
            stepWallClock(server, "at 1000000");
            awaitTrue(() -> 1_000_000L == heartbeat(), "the server writes its own clock");
            final KvStashException ex = assertThrows(KvStashException.class,
                () -> KvStashClient.connect(new ClientContext().directory(dir)).close());
            assertEquals(KvStashException.Reason.SERVER_GONE, ex.reason(), ex.getMessage());
            try (Stream<Path> files = Files.list(dir))
            {
                assertEquals(0, files.map(p -> p.getFileName().toString())
                    .filter(name -> name.startsWith(ClientFileDescriptor.FILE_PREFIX)).count(),
                    "the refused client left a client file");
            }
            stop(server);
        }
    }

    private ChildJvm startServer() throws Exception
    {
        final ChildJvm server = ChildJvm.startWithHeap(RealProcessTest.HEAP, TestServer.class, dir.toString(),
            Long.toString(POOL_BYTES));
        server.await(TestServer.READY_PREFIX, WAIT_MS);
        return server;
    }

    /**
     * Steps the server's wall clock ({@code wall-clock behind MS} or {@code wall-clock at MS}) and waits until
     * the server has.
     */
    private static void stepWallClock(final ChildJvm server, final String step) throws InterruptedException
    {
        server.send("wall-clock " + step);
        server.await(TestServer.WALL_CLOCK_PREFIX, WAIT_MS);
    }

    /**
     * Stops the server cleanly: the end of its standard input.
     */
    private static void stop(final ChildJvm server) throws InterruptedException
    {
        server.closeStdin();
        assertEquals(0, server.exitCode(WAIT_MS), "a clean stop");
    }

    private static void storeAndRetrieve(final KvStashClient client, final long instanceId, final ChunkKeys keys)
    {
        final ClientResponse prepared = client.prepareStore(instanceId, keys);
        assertEquals(Status.OK, prepared.status(), prepared.toString());
        final long transfer = prepared.transferId();
        final UnsafeBuffer view = new UnsafeBuffer(0, 0);
        for (int i = 0; i < prepared.slotCount(); i++)
        {
            final int key = prepared.slotRangeIndex(i);
            client.chunks().slotView(prepared, i, view).putLong(0, keys.hi(key) ^ keys.lo(key));
        }
        assertEquals(Status.OK, client.commitStore(instanceId, transfer).status());
        final ClientResponse retrieved = client.prepareRetrieve(instanceId, keys);
        assertEquals(Status.OK, retrieved.status(), retrieved.toString());
        assertEquals(keys.count(), retrieved.slotCount());
        for (int i = 0; i < retrieved.slotCount(); i++)
        {
            final int key = retrieved.slotRangeIndex(i);
            assertEquals(keys.hi(key) ^ keys.lo(key), client.chunks().slotView(retrieved, i, view).getLong(0));
        }
        assertEquals(Status.OK, client.commitRetrieve(instanceId, retrieved.transferId()).status());
    }

    /**
     * The heartbeat in the control file, mapped once: the server writes that file at start and keeps it.
     */
    private long heartbeat() throws Exception
    {
        if (null == control)
        {
            try (FileChannel channel = FileChannel.open(dir.resolve(ControlFileDescriptor.FILE_NAME),
                StandardOpenOption.READ))
            {
                control = new UnsafeBuffer(channel.map(FileChannel.MapMode.READ_ONLY, 0, channel.size()));
            }
        }
        return control.getLongVolatile(ControlFileDescriptor.HEARTBEAT_OFFSET);
    }

    private static void awaitTrue(final ThrowingCondition condition, final String message) throws Exception
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.get())
        {
            assertTrue(System.nanoTime() - deadline < 0, message);
            Thread.sleep(10);
        }
    }

    @FunctionalInterface
    private interface ThrowingCondition
    {
        boolean get() throws Exception;
    }
}
