package io.kvstash.server;

import io.kvstash.client.KvStashClient;
import io.kvstash.process.ChildJvm;
import io.kvstash.process.LockProbe;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.file.ClientFileDescriptor;
import org.agrona.IoUtil;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A client file the server finds before its client published it is attached at a rescan a scan interval later,
 * not at the next full scan a second later; one that stays unpublished with its lock free is deleted; the server
 * never releases the lock of a client in its own process by closing a descriptor of its file. The server's clock
 * is the test's, so the test controls when its timers fire; the client file is written by hand, the way
 * {@code KvStashClient} writes it, so the test decides when it is published. The client that writes it runs in a
 * process of its own ({@link ClientProcess}), as workers do, since a POSIX lock is held per process; only the last
 * test's client is in the server's process, because that case (the second tier's client) is what it is about.
 */
@Timeout(60)
class ClientAttachRescanTest
{
    private static final long MS = 1_000_000L;
    private static final long WAIT_MS = 30_000;

    private final AtomicLong nowNs = new AtomicLong(1_000_000 * MS);
    private Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldAttachAFilePublishedAfterItsFirstScanWithinAFewScanIntervals() throws Exception
    {
        final ServerContext context = serverContext("rescan");
        try (KvStashServer server = KvStashServer.launch(context))
        {
            final AgentInvoker invoker = started(server);
            final int requestCapacity = context.requestRingCapacity();
            final int responseCapacity = context.responseRingCapacity();
            // Created, locked and sized by a client in another process, as a live client holds its file's lock.
            try (ChildJvm client = ClientProcess.start("file", dir.toString(), "42",
                Integer.toString(ClientFileDescriptor.fileLength(requestCapacity, responseCapacity))))
            {
                final Path file = lockedFile(client);

                // A full scan sees the file unpublished (version 0). Then a few more scan intervals pass, real
                // time included, so that the file's creation event is delivered and spent.
                cycles(invoker, 1_001);
                for (int i = 0; i < 5; i++)
                {
                    Thread.sleep(20);
                    cycles(invoker, 11);
                }
                assertEquals(ClientFileDescriptor.ATTACH_PENDING, readAttachState(file));

                client.send("publish " + KvStashClient.currentIncarnation(dir) + " " + requestCapacity + " " +
                    responseCapacity);
                client.await(ClientProcess.PUBLISHED, WAIT_MS);

                // The next full scan is due 1,000 ms after the first, about 945 ms from here: attached well
                // before that, by a rescan whose delay doubles from the 10 ms scan interval.
                long waitedMs = 0;
                while (ClientFileDescriptor.ATTACH_ATTACHED != readAttachState(file) && waitedMs < 500)
                {
                    cycles(invoker, 11);
                    waitedMs += 11;
                }
                assertEquals(ClientFileDescriptor.ATTACH_ATTACHED, readAttachState(file),
                    "not attached " + waitedMs + " ms of the server's clock after it was published");
                assertTrue(waitedMs <= 200, "attached only after " + waitedMs + " ms");
            }
        }
    }

    @Test
    void shouldDeleteAFileLeftUnpublishedWithItsLockFreeButKeepALockedOne() throws Exception
    {
        final ServerContext context = serverContext("abandoned");
        try (KvStashServer server = KvStashServer.launch(context))
        {
            final AgentInvoker invoker = started(server);
            final int length = ClientFileDescriptor.fileLength(context.requestRingCapacity(),
                context.responseRingCapacity());
            // A client that died after creating its file and before locking or publishing it...
            final Path abandoned = dir.resolve(ClientFileDescriptor.fileName(ProcessHandle.current().pid(), 1));
            Files.createFile(abandoned);
            // ...and one that holds its lock but has not published yet (a slow but live client), in a process of its
            // own: a lock this process held would only tell the server's probe about this JVM's lock table.
            try (ChildJvm client = ClientProcess.start("file", dir.toString(), "2", Integer.toString(length)))
            {
                final Path slow = lockedFile(client);

                cycles(invoker, 1_001);
                assertTrue(Files.exists(abandoned), "deleted as soon as it was seen");
                long waitedMs = 0;
                while (Files.exists(abandoned) && waitedMs < 5_000)
                {
                    cycles(invoker, 50);
                    waitedMs += 50;
                }
                assertTrue(!Files.exists(abandoned), "still there " + waitedMs + " ms of the server's clock later");
                assertTrue(waitedMs >= 1_900, "deleted after only " + waitedMs + " ms");
                assertTrue(Files.exists(slow), "a locked file was deleted");
                assertEquals(ClientFileDescriptor.ATTACH_PENDING, readAttachState(slow));
                assertEquals(LockProbe.HELD, probe(slow), "the slow client still holds its lock");
            }
        }
    }

    @Test
    void shouldKeepTheLockOfAClientInTheServersOwnProcessWhenItSeesItsFileUnpublishedAndRejectsIt() throws Exception
    {
        // The second tier's client runs in the server's process: a descriptor of its file that the server closes
        // would release its lock (POSIX locks fall when the process closes any descriptor of the file).
        final ServerContext context = serverContext("own-process-client");
        try (KvStashServer server = KvStashServer.launch(context))
        {
            final AgentInvoker invoker = started(server);
            final int length = ClientFileDescriptor.fileLength(context.requestRingCapacity(),
                context.responseRingCapacity());
            final Path file = dir.resolve(ClientFileDescriptor.fileName(ProcessHandle.current().pid(), 7));
            Files.createFile(file);
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
                FileLock lock = channel.lock())
            {
                assertTrue(lock.isValid());
                channel.write(ByteBuffer.wrap(new byte[1]), length - 1);
                cycles(invoker, 1_001);
                for (int i = 0; i < 5; i++)
                {
                    Thread.sleep(20);
                    cycles(invoker, 11);
                }
                assertEquals(LockProbe.HELD, probe(file), "after the server saw the file unpublished");

                final MappedByteBuffer mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, length);
                try
                {
                    final UnsafeBuffer header = new UnsafeBuffer(mapped, 0, ClientFileDescriptor.HEADER_LENGTH);
                    ClientFileDescriptor.writeHeader(header, ProcessHandle.current().pid(),
                        KvStashClient.currentIncarnation(dir) + 1, context.requestRingCapacity(),
                        context.responseRingCapacity(), 0);
                    long waitedMs = 0;
                    while (ClientFileDescriptor.ATTACH_REJECTED !=
                        header.getIntVolatile(ClientFileDescriptor.ATTACH_STATE_OFFSET) && waitedMs < 2_000)
                    {
                        cycles(invoker, 11);
                        waitedMs += 11;
                    }
                    assertEquals(ClientFileDescriptor.ATTACH_REJECTED,
                        header.getIntVolatile(ClientFileDescriptor.ATTACH_STATE_OFFSET));
                }
                finally
                {
                    IoUtil.unmap(mapped);
                }
                assertEquals(LockProbe.HELD, probe(file), "after the server rejected the file");
            }
            Files.delete(file);
            cycles(invoker, 1_001);
        }
    }

    /**
     * Whether another process finds the file's lock held: only another process can tell.
     */
    private static String probe(final Path file) throws Exception
    {
        try (ChildJvm probe = ChildJvm.start(LockProbe.class, file.toString()))
        {
            final String answer = probe.poll(WAIT_MS);
            assertEquals(0, probe.exitCode(WAIT_MS));
            return answer;
        }
    }

    /**
     * The path of the client file a {@link ClientProcess} made, once it is created, locked and sized.
     */
    private static Path lockedFile(final ChildJvm client) throws InterruptedException
    {
        final Path file = Path.of(client.await(ClientProcess.LOCKED, WAIT_MS).substring(
            ClientProcess.LOCKED.length() + 1));
        assertTrue(Files.exists(file), file.toString());
        return file;
    }

    /**
     * The attach state the server wrote into a client file, read with a descriptor of this process: this process
     * holds no lock on the file (its client is another process), so closing the descriptor releases nobody's.
     */
    private static int readAttachState(final Path file) throws java.io.IOException
    {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ))
        {
            final ByteBuffer state = ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            channel.read(state, ClientFileDescriptor.ATTACH_STATE_OFFSET);
            return state.getInt(0);
        }
    }

    /**
     * An invoked server in a new directory on the test's clock, scanning every 10 ms.
     */
    private ServerContext serverContext(final String name)
    {
        dir = ShmDirectories.newPath("kvstash-test-" + name + "-");
        return InvokedServer.context(dir).nanoClock(nowNs::get).scanIntervalMs(10);
    }

    /**
     * The server's duty cycle, after the first cycles have run its start-up scan.
     */
    private AgentInvoker started(final KvStashServer server)
    {
        final AgentInvoker invoker = server.invoker();
        cycles(invoker, 0);
        return invoker;
    }

    /**
     * Moves the server's clock on, then runs enough duty cycles for its timers to read the clock.
     */
    private void cycles(final AgentInvoker invoker, final long advanceMs)
    {
        nowNs.addAndGet(advanceMs * MS);
        for (int i = 0; i < 64; i++)
        {
            invoker.invoke();
        }
    }
}
