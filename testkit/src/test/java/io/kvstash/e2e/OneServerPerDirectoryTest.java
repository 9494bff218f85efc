package io.kvstash.e2e;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.process.ChildJvm;
import io.kvstash.process.LockProbe;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.testkit.EndToEndWorker;
import io.kvstash.testkit.ServeProcess;
import io.kvstash.tools.ChunkPattern;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.ControlFileDescriptor;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One server per directory, with every server in an OS process of its own, as operators run them: POSIX locks
 * belong to a process, so two servers in one JVM would hide what two processes do to each other. The test's own
 * JVM is a third process: it is a client of the servers, and probes the directory's lock from outside.
 */
@Timeout(120)
class OneServerPerDirectoryTest
{
    static final String POOL = "16m";
    static final long INSTANCE = 7;
    static final int CHUNKS = 4;
    static final long WAIT_MS = 30_000;
    Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldHoldTheDirectoryLockForTheServersWholeLifeWhenAnotherProcessProbesIt() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-lock-held-");
        final Path lockFile = dir.resolve("server.lock");
        try (ServeProcess live = ServeProcess.start(dir, POOL))
        {
            live.awaitReady(WAIT_MS);
            assertTrue(LockProbe.isHeld(lockFile), "the server holds its lock once it has started");
            try (KvStashClient client = connect(dir))
            {
                assertEquals(Status.OK, client.register(INSTANCE, EndToEndWorker.LAYOUT).status());
                store(client, 100, CHUNKS);
                Thread.sleep(1_000);
                assertTrue(LockProbe.isHeld(lockFile), "the server holds its lock while it serves");
            }
            live.kill9();
            assertFalse(LockProbe.isHeld(lockFile), "a killed server's lock is free");
        }
    }

    @Test
    void shouldRefuseASecondServerOnALiveDirectoryAndLeaveTheLiveServerItsFilesChunksAndClients() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-second-server-");
        final Path lockFile = dir.resolve("server.lock");
        try (ServeProcess live = ServeProcess.start(dir, POOL))
        {
            live.awaitReady(WAIT_MS);
            try (KvStashClient client = connect(dir))
            {
                assertEquals(Status.OK, client.register(INSTANCE, EndToEndWorker.LAYOUT).status());
                final byte[][] written = store(client, 100, CHUNKS);
                final Map<String, Object> filesBefore = fileKeys(dir);
                assertTrue(filesBefore.containsKey("pool-" + live.incarnation()), filesBefore.toString());
                assertTrue(filesBefore.containsKey(ControlFileDescriptor.FILE_NAME), filesBefore.toString());
                assertTrue(filesBefore.containsKey(client.clientFile().getFileName().toString()), filesBefore.toString());
                final byte[] lockBytes = Files.readAllBytes(lockFile);

                refuseSecondServer(dir, live.pid());

                assertEquals(filesBefore, fileKeys(dir), "the live server's files: the same names and inodes");
                assertArrayEquals(lockBytes, Files.readAllBytes(lockFile), "the lock file is as it was");
                assertTrue(live.isAlive(), "the live server still runs");
                assertTrue(LockProbe.isHeld(lockFile), "the live server still holds its lock");
                final byte[][] read = retrieve(client, 100, CHUNKS);
                for (int i = 0; i < CHUNKS; i++)
                {
                    assertArrayEquals(written[i], read[i], "chunk " + i + " read back as it was stored");
                }
                assertEquals(Status.OK, client.ping().status(), "the live server answers its client");
                final byte[][] more = store(client, 200, CHUNKS);
                assertArrayEquals(more[1], retrieve(client, 200, CHUNKS)[1], "and stores new chunks");
                try (KvStashClient another = connect(dir))
                {
                    assertEquals(Status.OK, another.ping().status(), "and attaches new clients");
                }
            }
            assertEquals(143, live.terminate(WAIT_MS), "a clean SIGTERM exit: " + live.errorLines());
        }
        assertEquals(List.of("server.lock"), List.copyOf(fileKeys(dir).keySet()),
            "the clean shutdown after a refused second server leaves nothing of either but the lock file");
    }

    @Test
    void shouldLetANewServerTakeTheDirectoryOverOnceTheLiveOneIsKilled() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-take-over-");
        try (ServeProcess dead = ServeProcess.start(dir, POOL))
        {
            dead.awaitReady(WAIT_MS);
            refuseSecondServer(dir, dead.pid());
            dead.kill9();
            assertTrue(Files.exists(dir.resolve("pool-" + dead.incarnation())), "a killed server leaves its pool");
            try (ServeProcess next = ServeProcess.start(dir, POOL))
            {
                next.awaitReady(WAIT_MS);
                assertNotEquals(dead.incarnation(), next.incarnation());
                assertFalse(Files.exists(dir.resolve("pool-" + dead.incarnation())), "the dead server's pool is reclaimed");
                assertTrue(Files.exists(dir.resolve("dead-control-" + dead.incarnation())),
                    "the dead server's control file is kept for its error log");
                assertTrue(LockProbe.isHeld(dir.resolve("server.lock")), "the new server holds the lock");
                try (KvStashClient client = connect(dir))
                {
                    assertEquals(Long.parseUnsignedLong(next.incarnation(), 16), client.incarnation());
                    assertEquals(Status.OK, client.register(INSTANCE, EndToEndWorker.LAYOUT).status());
                    final byte[][] written = store(client, 300, CHUNKS);
                    assertArrayEquals(written[CHUNKS - 1], retrieve(client, 300, CHUNKS)[CHUNKS - 1]);
                }
                assertEquals(143, next.terminate(WAIT_MS), "a clean SIGTERM exit: " + next.errorLines());
            }
        }
    }

    @Test
    void shouldNotDeleteTheFilesOfAnotherServerWhenStoppingAfterItsLockFileWasRemovedByHand() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-lock-removed-");
        try (ServeProcess first = ServeProcess.start(dir, POOL))
        {
            first.awaitReady(WAIT_MS);
            // Only a lock file removed by hand lets a second server in while the first lives.
            Files.delete(dir.resolve("server.lock"));
            try (ServeProcess second = ServeProcess.start(dir, POOL))
            {
                second.awaitReady(WAIT_MS);
                // Frozen while the second server's client attaches: the first would turn it away (its incarnation).
                first.signal("STOP");
                try (KvStashClient client = connect(dir))
                {
                    assertEquals(Long.parseUnsignedLong(second.incarnation(), 16), client.incarnation());
                    final Map<String, Object> secondFiles = fileKeys(dir);
                    secondFiles.keySet().removeIf((name) -> name.startsWith("dead-control-"));
                    assertEquals(5, secondFiles.size(), "lock, control, pool, doorbell and client file: " +
                        secondFiles);
                    first.signal("CONT");
                    assertEquals(143, first.terminate(WAIT_MS), "a clean SIGTERM exit: " + first.errorLines());
                    final Map<String, Object> after = fileKeys(dir);
                    after.keySet().removeIf((name) -> name.startsWith("dead-control-"));
                    assertEquals(secondFiles, after, "the second server's files: the same names and inodes");
                    assertTrue(first.errorLines().stream().anyMatch((l) -> l.contains("no longer the lock file")),
                        first.errorLines().toString());
                }
                assertTrue(second.isAlive());
                try (KvStashClient client = connect(dir))
                {
                    assertEquals(Status.OK, client.ping().status(), "the second server still serves");
                }
                assertEquals(143, second.terminate(WAIT_MS), "a clean SIGTERM exit: " + second.errorLines());
            }
        }
    }

    @Test
    void shouldKeepTheLockOfAServerInThisJvmWhenASecondServerInThisJvmIsRefused() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-second-in-jvm-");
        try (KvStashServer server = KvStashServer.launch(serverContext(dir)))
        {
            final IllegalStateException refused =
                assertThrows(IllegalStateException.class, () -> KvStashServer.launch(serverContext(dir)));
            assertTrue(refused.getMessage().contains("already running on " + dir + " (pid " +
                ProcessHandle.current().pid() + " "), refused.getMessage());
            assertTrue(Files.exists(server.poolPath()));
            // Only another process sees whether this one still holds its lock.
            try (ChildJvm probe = ChildJvm.start(LockProbe.class, dir.resolve("server.lock").toString()))
            {
                assertEquals(LockProbe.HELD, probe.poll(WAIT_MS));
                assertEquals(0, probe.exitCode(WAIT_MS));
            }
        }
    }

    private static ServerContext serverContext(final Path dir)
    {
        return new ServerContext().directory(dir).storeContext(new StoreContext().poolSizeBytes(16L << 20));
    }

    /**
     * Runs {@code kvstash serve} on a live directory and checks it is refused: a non-zero exit and one line naming
     * the live server's pid.
     */
    private static void refuseSecondServer(final Path dir, final long livePid) throws Exception
    {
        try (ServeProcess second = ServeProcess.start(dir, POOL))
        {
            final int exitCode = second.exitCode(WAIT_MS);
            assertTrue(second.awaitEndOfOutput(WAIT_MS));
            assertNotEquals(0, exitCode, "refused: " + second.errorLines());
            final List<String> errors = second.errorLines();
            assertEquals(1, errors.size(), "one line: " + errors);
            assertTrue(errors.get(0).contains("already running on " + dir + " (pid " + livePid + " "), errors.get(0));
            assertTrue(second.outputLines().isEmpty(), second.outputLines().toString());
        }
    }

    private static KvStashClient connect(final Path dir)
    {
        return KvStashClient.connect(new ClientContext().directory(dir));
    }

    private static byte[][] store(final KvStashClient client, final long first, final int count)
    {
        final ChunkPattern pattern = new ChunkPattern();
        final byte[][] written = new byte[count][EndToEndWorker.CHUNK_BYTES];
        for (int i = 0; i < count; i++)
        {
            pattern.fill(new UnsafeBuffer(written[i]), EndToEndWorker.CHUNK_BYTES, first + i, 0);
        }
        final ClientResponse r = client.prepareStore(INSTANCE, EndToEndWorker.range(first, count));
        assertEquals(Status.OK, r.status(), r.toString());
        assertEquals(count, r.slotCount(), r.toString());
        for (int i = 0; i < r.slotCount(); i++)
        {
            assertEquals(Status.OK,
                client.chunks().writeChunk(INSTANCE, r, i, new UnsafeBuffer(written[r.slotRangeIndex(i)]), 0));
        }
        assertEquals(Status.OK, client.commitStore(INSTANCE, r.transferId()).status());
        return written;
    }

    private static byte[][] retrieve(final KvStashClient client, final long first, final int count)
    {
        final ClientResponse r = client.prepareRetrieve(INSTANCE, EndToEndWorker.range(first, count));
        assertEquals(Status.OK, r.status(), r.toString());
        assertEquals(count, r.slotCount(), r.toString());
        final byte[][] read = new byte[count][EndToEndWorker.CHUNK_BYTES];
        for (int i = 0; i < r.slotCount(); i++)
        {
            assertEquals(Status.OK,
                client.chunks().readChunk(INSTANCE, r, i, new UnsafeBuffer(read[r.slotRangeIndex(i)]), 0));
        }
        assertEquals(Status.OK, client.commitRetrieve(INSTANCE, r.transferId()).status());
        return read;
    }

    /**
     * Every file of a directory by name, with its device and inode: from a stat, which opens no descriptor.
     */
    private static Map<String, Object> fileKeys(final Path dir) throws IOException
    {
        try (Stream<Path> files = Files.list(dir))
        {
            return files.collect(Collectors.toMap((f) -> f.getFileName().toString(), (f) ->
            {
                try
                {
                    return Files.readAttributes(f, BasicFileAttributes.class).fileKey();
                }
                catch (final IOException ex)
                {
                    throw new IllegalStateException(ex);
                }
            }, (a, b) -> a, TreeMap::new));
        }
    }
}
