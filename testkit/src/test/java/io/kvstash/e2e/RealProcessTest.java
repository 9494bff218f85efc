package io.kvstash.e2e;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.process.ChildJvm;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.testkit.EndToEndWorker;
import io.kvstash.testkit.RawRingClient;
import io.kvstash.testkit.TestServer;
import io.kvstash.testkit.TestWorker;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.WireDescriptor;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * End-to-end tests with a real server and real worker processes (files, rings, liveness and the store semantics).
 */
@Timeout(120)
class RealProcessTest
{
    static final long POOL_BYTES = 48L * 16384;
    /** Heap of the test servers and workers: a server's latency histograms alone take about 90 MiB. */
    static final String HEAP = "256m";
    Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    static ServerContext serverContext(final Path dir)
    {
        return new ServerContext().directory(dir).storeContext(new StoreContext().poolSizeBytes(POOL_BYTES));
    }

    static Map<String, Long> result(final String line)
    {
        final Map<String, Long> values = new HashMap<>();
        for (final String part : line.substring("RESULT ".length()).split(" "))
        {
            final String[] kv = part.split("=");
            values.put(kv[0], Long.parseLong(kv[1]));
        }
        return values;
    }

    @Test
    void shouldStoreAndRetrieveVerifiedChunksFromTwoWorkerProcessesOneOnTheCopyTransport() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-two-workers-");
        try (KvStashServer server = KvStashServer.launch(serverContext(dir));
            ChildJvm shared = ChildJvm.startWithHeap(HEAP, TestWorker.class,
                "store-retrieve", dir.toString(), "1", "400", "80", "11");
            ChildJvm copy = ChildJvm.startWithHeap(HEAP, TestWorker.class,
                "store-retrieve", dir.toString(), "2", "150", "80", "12", "copy"))
        {
            final Map<String, Long> a = result(shared.await("RESULT", 90_000));
            final Map<String, Long> b = result(copy.await("RESULT", 90_000));
            assertEquals(0, shared.exitCode(10_000));
            assertEquals(0, copy.exitCode(10_000));
            assertEquals(0L, a.get("mismatches"));
            assertEquals(0L, b.get("mismatches"));
            assertTrue(a.get("verified") > 100, a.toString());
            assertTrue(b.get("verified") > 20, b.toString());
            assertTrue(server.counters().get(CountersDescriptor.EVICTIONS) > 0, "the pool was meant to evict");
            assertTrue(server.counters().get(CountersDescriptor.COPY_BYTES_IN) > 0);
            assertTrue(server.counters().get(CountersDescriptor.COPY_BYTES_OUT) > 0);
            awaitCounter(server, CountersDescriptor.WIRE_CLIENTS, 0, 5_000);
            assertEquals(0, server.counters().get(CountersDescriptor.RESERVED_CHUNKS));
            assertEquals(0, server.counters().get(CountersDescriptor.PINNED_CHUNKS));
            assertEquals(0, server.counters().get(CountersDescriptor.PENDING_TRANSFERS));
        }
    }

    @Test
    void shouldReclaimTheReservationOfAWorkerKilledBetweenPrepareAndCommitWithinOneSecond() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-kill-worker-");
        try (KvStashServer server = KvStashServer.launch(serverContext(dir));
            ChildJvm worker = ChildJvm.startWithHeap(HEAP, TestWorker.class, "prepare-hang", dir.toString(), "9", "100",
                "3"))
        {
            worker.await("PREPARED", 30_000);
            final long capacity = server.counters().get(CountersDescriptor.SLOT_CAPACITY);
            assertEquals(3, server.counters().get(CountersDescriptor.RESERVED_CHUNKS));
            assertEquals(capacity - 3, server.counters().get(CountersDescriptor.FREE_SLOTS));

            final long killedNs = System.nanoTime();
            worker.kill9();
            awaitCounter(server, CountersDescriptor.RESERVED_CHUNKS, 0, 5_000);
            final long reclaimMs = (System.nanoTime() - killedNs) / 1_000_000;
            assertTrue(reclaimMs <= 1_000, "reclaimed after " + reclaimMs + " ms");
            assertEquals(capacity, server.counters().get(CountersDescriptor.FREE_SLOTS));
            assertEquals(1, server.counters().get(CountersDescriptor.DEAD_CLIENTS));
            assertEquals(3, server.counters().get(CountersDescriptor.ABORTED_CHUNKS));
            assertEquals(0, server.counters().get(CountersDescriptor.PENDING_TRANSFERS));
            try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
            {
                assertEquals(Status.OK, client.register(10, EndToEndWorker.LAYOUT).status());
                assertEquals(0, client.lookup(10, EndToEndWorker.range(100, 3), false).hitChunks());
                assertEquals(Status.MISS, client.prepareRetrieve(10, EndToEndWorker.range(100, 1)).status());
            }
            System.out.println("dead worker reclaimed in " + reclaimMs + " ms");
        }
    }

    @Test
    void shouldNeverReapALiveIdleWorker() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-idle-");
        final ServerContext context = serverContext(dir).livenessIntervalMs(20);
        try (KvStashServer server = KvStashServer.launch(context);
            ChildJvm worker = ChildJvm.startWithHeap(HEAP, TestWorker.class, "prepare-hang", dir.toString(), "9", "1", "2"))
        {
            worker.await("PREPARED", 30_000);
            Thread.sleep(1_000);
            assertTrue(worker.isAlive());
            assertEquals(2, server.counters().get(CountersDescriptor.RESERVED_CHUNKS));
            assertEquals(0, server.counters().get(CountersDescriptor.DEAD_CLIENTS));
            assertEquals(1, server.counters().get(CountersDescriptor.WIRE_CLIENTS));
        }
    }

    @Test
    void shouldGiveAClearErrorAndReconnectWhenTheServerIsKilledAndRestarted() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-restart-");
        try (ChildJvm first = ChildJvm.startWithHeap(HEAP, TestServer.class, dir.toString(),
            Long.toString(POOL_BYTES)))
        {
            final String firstIncarnation = TestServer.incarnation(first.await(TestServer.READY_PREFIX, 30_000));
            try (ChildJvm worker = ChildJvm.startWithHeap(HEAP, TestWorker.class, "reconnect", dir.toString()))
            {
                assertEquals("CONNECTED " + firstIncarnation, worker.await("CONNECTED", 30_000));
                first.kill9();
                assertTrue(first.waitFor(10_000), "the killed server is still running");
                final String error = worker.await("ERROR", 30_000);
                assertTrue(error.contains("SERVER_GONE") || error.contains("SERVER_RESTARTED"), error);
                assertTrue(Files.exists(dir.resolve(ControlFileDescriptor.FILE_NAME)), "a dead server leaves its files");
                try (ChildJvm second = ChildJvm.startWithHeap(HEAP, TestServer.class, dir.toString(),
                    Long.toString(POOL_BYTES)))
                {
                    final String secondIncarnation = TestServer.incarnation(second.await(TestServer.READY_PREFIX, 30_000));
                    assertNotEquals(firstIncarnation, secondIncarnation);
                    assertEquals("WORKS " + secondIncarnation, worker.await("WORKS", 60_000));
                    assertEquals(0, worker.exitCode(10_000));
                    assertTrue(Files.exists(dir.resolve("dead-control-" + firstIncarnation)),
                        "the dead server's control file (and error log) is kept");
                    try (Stream<Path> files = Files.list(dir))
                    {
                        assertEquals(1, files.filter(p -> p.getFileName().toString().startsWith("pool-")).count(),
                            "the dead server's pool file was reclaimed");
                    }
                    second.signal("TERM");
                    assertEquals(143, second.exitCode(20_000));
                    assertFalse(Files.exists(dir.resolve(ControlFileDescriptor.FILE_NAME)),
                        "a clean shutdown removes the control file");
                }
            }
        }
    }

    @Test
    void shouldUseMode0700And0600AndRefuseUnsafeDirectories() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-modes-");
        try (KvStashServer server = KvStashServer.launch(serverContext(dir));
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));
            try (Stream<Path> files = Files.list(dir))
            {
                files.forEach(file ->
                {
                    try
                    {
                        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)),
                            file.toString());
                    }
                    catch (final IOException ex)
                    {
                        throw new IllegalStateException(ex);
                    }
                });
            }
            assertTrue(Files.exists(client.clientFile()));
            assertTrue(server.directory().equals(dir));
        }
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwxrwx"));
        final IOException writable = assertThrows(IOException.class, () -> KvStashServer.launch(serverContext(dir)));
        assertTrue(writable.getMessage().contains("writable by group or others"), writable.getMessage());

        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
        if (0 == io.kvstash.wire.file.SecureDirectory.currentUid())
        {
            Files.setAttribute(dir, "unix:uid", 65534);
            final IOException foreign = assertThrows(IOException.class, () -> KvStashServer.launch(serverContext(dir)));
            assertTrue(foreign.getMessage().contains("owned by uid 65534"), foreign.getMessage());
            Files.setAttribute(dir, "unix:uid", 0);
        }
        final Set<PosixFilePermission> permissions = Files.getPosixFilePermissions(dir);
        assertFalse(permissions.contains(PosixFilePermission.OTHERS_WRITE));
    }

    @Test
    void shouldAnswerBadRecordsWithErrorStatusesAndKeepServingOtherClients() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-garbage-");
        final ServerContext context = serverContext(dir);
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient good = KvStashClient.connect(new ClientContext().directory(dir));
            RawRingClient raw = new RawRingClient(dir, context.incarnation(), context.requestRingCapacity(),
                context.responseRingCapacity()))
        {
            assertTrue(raw.awaitAttached(10_000), "raw client not attached, state " + raw.attachState());
            assertEquals(Status.OK, good.register(1, EndToEndWorker.LAYOUT).status());

            assertTrue(raw.send(RequestType.PING, new byte[4], 10_000));
            assertEquals(Status.MALFORMED, status(raw, correlation(42), RequestType.LOOKUP, 42));
            assertEquals(Status.UNKNOWN_TYPE, status(raw, header(43, 0), 999, 43));
            assertEquals(Status.UNKNOWN_TYPE, status(raw, header(44, 0), RequestType.SWEEP, 44));
            assertEquals(Status.UNKNOWN_TYPE, status(raw, header(45, 0), RequestType.REAP, 45));
            assertEquals(Status.INVALID_REQUEST,
                status(raw, keyed(46, WireDescriptor.KEY_MODE_HASHES, 1_000_000, 0), RequestType.LOOKUP, 46));
            assertEquals(Status.MALFORMED,
                status(raw, keyed(47, WireDescriptor.KEY_MODE_HASHES, 5, 2), RequestType.LOOKUP, 47));
            assertEquals(Status.MALFORMED, status(raw, keyed(48, 77, 1, 1), RequestType.PREPARE_STORE, 48));
            assertEquals(Status.MALFORMED, status(raw, registerWithModelLength(49, 100_000), RequestType.REGISTER, 49));
            assertEquals(Status.INVALID_REQUEST, status(raw, tokens(50, 300, 0, 5), RequestType.LOOKUP, 50));
            assertEquals(Status.UNKNOWN_INSTANCE, status(raw, header(51, 12345), RequestType.COMMIT_STORE, 51));

            final SplittableRandom random = new SplittableRandom(5);
            int answered = 0;
            for (int i = 0; i < 2_000; i++)
            {
                final byte[] garbage = new byte[8 + random.nextInt(200)];
                random.nextBytes(garbage);
                ByteBuffer.wrap(garbage).order(ByteOrder.LITTLE_ENDIAN).putLong(0, 10_000 + i);
                // Any type but -1, the ring's padding type, which a consumer skips by definition.
                final int type = random.nextInt(10) == 0 ? -2 - random.nextInt(1000) : random.nextInt(RequestType.COUNT + 3);
                if ((RequestType.COMMIT_RETRIEVE == type || RequestType.RELEASE == type) &&
                    garbage.length >= WireDescriptor.FLAGS_OFFSET + Integer.BYTES)
                {
                    // A COMMIT_RETRIEVE or RELEASE with NO_REPLY is answered to no one, whatever its outcome
                    // (NoReplyClientTest, test_no_reply.py): every record here asks for an answer.
                    final ByteBuffer flags = ByteBuffer.wrap(garbage).order(ByteOrder.LITTLE_ENDIAN);
                    flags.putInt(WireDescriptor.FLAGS_OFFSET,
                        flags.getInt(WireDescriptor.FLAGS_OFFSET) & ~RequestFlags.NO_REPLY);
                }
                assertTrue(raw.send(type, garbage, 10_000));
                final UnsafeBuffer response = raw.receive(10_000);
                assertTrue(null != response, "no answer to garbage record " + i);
                assertEquals(10_000 + i, response.getLong(0, ByteOrder.LITTLE_ENDIAN));
                answered++;
                if (i % 200 == 0)
                {
                    assertEquals(Status.OK, good.ping().status());
                }
            }
            assertEquals(2_000, answered);
            assertTrue(server.counters().get(CountersDescriptor.WIRE_MALFORMED) > 10);

            // A length word that runs past the ring end: the ring can no longer be parsed, so the server
            // detaches that client; every other client goes on.
            raw.corruptNextRecordLength();
            final long deadline = System.currentTimeMillis() + 5_000;
            while (ClientFileDescriptor.ATTACH_DETACHED != raw.attachState() && System.currentTimeMillis() < deadline)
            {
                Thread.sleep(5);
            }
            assertEquals(ClientFileDescriptor.ATTACH_DETACHED, raw.attachState());
            final ClientResponse stored = good.prepareStore(1, EndToEndWorker.range(3, 1));
            assertEquals(Status.OK, stored.status());
            assertEquals(Status.OK, good.commitStore(1, stored.transferId()).status());
            assertEquals(1, good.lookup(1, EndToEndWorker.range(3, 1), false).hitChunks());
            // The only error logged is the detach of the corrupt ring; no bad record raised an exception.
            assertEquals(1, server.counters().get(CountersDescriptor.ERRORS));
        }
    }

    private static int status(final RawRingClient raw, final byte[] payload, final int type, final long correlationId)
    {
        assertTrue(raw.send(type, payload, 10_000), "request ring stayed full");
        final UnsafeBuffer response = raw.receive(10_000);
        assertTrue(null != response, "no response to correlation " + correlationId);
        assertEquals(correlationId, response.getLong(WireDescriptor.RESPONSE_CORRELATION_ID_OFFSET, ByteOrder.LITTLE_ENDIAN));
        return response.getInt(WireDescriptor.RESPONSE_STATUS_OFFSET, ByteOrder.LITTLE_ENDIAN);
    }

    private static byte[] correlation(final long correlationId)
    {
        final ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(0, correlationId);
        return b.array();
    }

    private static byte[] header(final long correlationId, final long instanceId)
    {
        final ByteBuffer b = ByteBuffer.allocate(WireDescriptor.REQUEST_HEADER_LENGTH).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(WireDescriptor.CORRELATION_ID_OFFSET, correlationId);
        b.putLong(WireDescriptor.INSTANCE_ID_OFFSET, instanceId);
        return b.array();
    }

    private static byte[] keyed(final long correlationId, final int keyMode, final int count, final int present)
    {
        final ByteBuffer b = ByteBuffer.allocate(WireDescriptor.REQUEST_HEADER_LENGTH + 8 + present * 16)
            .order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(WireDescriptor.CORRELATION_ID_OFFSET, correlationId);
        b.putLong(WireDescriptor.INSTANCE_ID_OFFSET, 1);
        b.putInt(WireDescriptor.KEY_MODE_OFFSET, keyMode);
        b.putInt(WireDescriptor.REQUEST_HEADER_LENGTH, count);
        return b.array();
    }

    private static byte[] tokens(final long correlationId, final int tokenCount, final int from, final int to)
    {
        final ByteBuffer b = ByteBuffer.allocate(WireDescriptor.REQUEST_HEADER_LENGTH + 16 + tokenCount * 4)
            .order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(WireDescriptor.CORRELATION_ID_OFFSET, correlationId);
        b.putLong(WireDescriptor.INSTANCE_ID_OFFSET, 1);
        b.putInt(WireDescriptor.KEY_MODE_OFFSET, WireDescriptor.KEY_MODE_TOKENS);
        b.putInt(WireDescriptor.REQUEST_HEADER_LENGTH, tokenCount);
        b.putInt(WireDescriptor.REQUEST_HEADER_LENGTH + 4, from);
        b.putInt(WireDescriptor.REQUEST_HEADER_LENGTH + 8, to);
        return b.array();
    }

    private static byte[] registerWithModelLength(final long correlationId, final int modelLength)
    {
        final ByteBuffer b = ByteBuffer.allocate(WireDescriptor.REQUEST_HEADER_LENGTH + WireDescriptor.REGISTER_BODY_LENGTH)
            .order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(WireDescriptor.CORRELATION_ID_OFFSET, correlationId);
        b.putInt(WireDescriptor.REQUEST_HEADER_LENGTH + 24, modelLength);
        return b.array();
    }

    static void awaitCounter(final KvStashServer server, final int id, final long value, final long timeoutMs)
        throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (server.counters().get(id) != value)
        {
            if (System.currentTimeMillis() > deadline)
            {
                throw new AssertionError(CountersDescriptor.name(id) + " is " + server.counters().get(id) + ", not " + value);
            }
            Thread.sleep(2);
        }
    }
}
