package io.kvstash.client;

import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.WireVersion;
import io.kvstash.wire.codec.RequestFlyweight;
import io.kvstash.wire.codec.ResponseFlyweight;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.SecureDirectory;
import io.kvstash.wire.ring.RingConsumer;
import io.kvstash.wire.ring.RingDescriptor;
import io.kvstash.wire.ring.RingProducer;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Stream;

import static io.kvstash.wire.codec.WireDescriptor.RESPONSE_TYPE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The facade over its parts, against a fake server on a background thread: a control file written here and a
 * loop that attaches the client file and answers each request with OK (copy transport, so no pool). The real
 * server's behaviour is covered by the server module's end-to-end tests.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class KvStashClientTest
{
    private static final long INCARNATION = 0x1234_5678L;
    private static final long SESSION_ID = 42;
    private static final int RING_CAPACITY = 4096;
    private static final int COUNTER_ID = 3;
    private static final long COUNTER_VALUE = 777;

    @TempDir
    Path parent;

    private Path directory;
    private MappedByteBuffer controlMapped;
    private UnsafeBuffer control;
    private FakeServer server;

    @AfterEach
    void after() throws InterruptedException
    {
        if (null != server)
        {
            server.halt();
        }
        if (null != controlMapped)
        {
            IoUtil.unmap(controlMapped);
        }
    }

    @Test
    void shouldRaiseServerGoneWhenNoServerIsOnTheDirectory()
    {
        final Path missing = parent.resolve("missing");
        final KvStashException ex = assertThrows(KvStashException.class, () -> connect(missing));
        assertEquals(KvStashException.Reason.SERVER_GONE, ex.reason());
        assertEquals("SERVER_GONE: no kvstash server on " + missing, ex.getMessage());
    }

    @Test
    void shouldRaiseBadFilesWhenTheControlFileHasNoMagic() throws IOException
    {
        writeControlFile();
        control.putLong(ControlFileDescriptor.MAGIC_OFFSET, 0);
        final KvStashException ex = assertThrows(KvStashException.class, () -> connect(directory));
        assertEquals(KvStashException.Reason.BAD_FILES, ex.reason());
    }

    @Test
    void shouldRaiseServerGoneWhenTheServerIsStillStarting() throws IOException
    {
        writeControlFile();
        control.putIntRelease(ControlFileDescriptor.VERSION_OFFSET, 0);
        final KvStashException ex = assertThrows(KvStashException.class, () -> connect(directory));
        assertEquals(KvStashException.Reason.SERVER_GONE, ex.reason());
    }

    @Test
    void shouldAnswerSynchronousAndPolledCallsWhenConnected() throws IOException
    {
        writeControlFile();
        startServer();
        try (KvStashClient client = connect(directory))
        {
            assertEquals(SESSION_ID, client.sessionId());
            assertEquals(INCARNATION, client.incarnation());
            assertEquals(INCARNATION, KvStashClient.currentIncarnation(directory));
            assertTrue(client.isCopyTransport());
            assertTrue(client.alive());
            assertEquals(COUNTER_VALUE, client.counter(COUNTER_ID));
            assertTrue(Files.exists(client.clientFile()));

            final ClientResponse ping = client.ping();
            assertTrue(ping.isOk());
            assertEquals(RequestType.PING, ping.requestType());

            final long first = client.sendSimple(RequestType.STATS, 0, 0, 0);
            final long second = client.sendSimple(RequestType.PING, 0, 0, 0);
            assertEquals(first + 1, second);
            final List<Long> polled = new ArrayList<>();
            while (polled.size() < 2)
            {
                client.poll(response -> polled.add(response.correlationId()), 10);
            }
            assertEquals(List.of(first, second), polled);

            final ClientResponse target = client.newResponse();
            final long third = client.sendSimple(RequestType.PING, 0, 0, 0);
            assertSame(target, client.await(third, target));
            assertEquals(third, target.correlationId());
        }
    }

    @Test
    void shouldHandOtherResponsesToTheAsyncHandlerOrCountThemWhileAwaiting() throws IOException
    {
        writeControlFile();
        startServer();
        try (KvStashClient client = connect(directory))
        {
            final long orphan = client.sendSimple(RequestType.PING, 0, 0, 0);
            assertTrue(client.commitStore(1, 2).isOk());
            assertEquals(1, client.orphanResponses(), "response " + orphan + " had nobody to go to");

            final List<Long> handled = new ArrayList<>();
            client.asyncHandler(response -> handled.add(response.correlationId()));
            final long async = client.sendSimple(RequestType.PING, 0, 0, 0);
            assertTrue(client.clear(true).isOk());
            assertEquals(List.of(async), handled);
            assertEquals(1, client.orphanResponses());
        }
    }

    @Test
    void shouldWaitForRoomAndReadResponsesMeanwhileWhenTheRequestRingIsFull() throws IOException, InterruptedException
    {
        writeControlFile();
        startServer();
        try (KvStashClient client = connect(directory))
        {
            server.stopAnswering();
            int sent = 0;
            while (client.sendSimple(RequestType.PING, 0, 0, 0) > 0)
            {
                sent++;
            }
            assertTrue(sent > 0);
            final List<Long> handled = new ArrayList<>();
            client.asyncHandler(response -> handled.add(response.correlationId()));
            // Resumed later, so that the call below finds the ring full and waits.
            final Thread resume = new Thread(() ->
            {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
                server.resumeAnswering();
            });
            resume.start();
            final ClientResponse stats = client.stats();
            assertTrue(stats.isOk());
            assertEquals(RequestType.STATS, stats.requestType());
            assertEquals(sent, handled.size(), "every earlier answer went to the async handler");
            assertEquals(sent + 1, stats.correlationId());
            resume.join();
        }
    }

    @Test
    void shouldRefuseSendsAndMarkTheFileClosingWhenClosed() throws IOException
    {
        writeControlFile();
        startServer();
        final KvStashClient client = connect(directory);
        client.close();
        assertTrue(server.sawClosing());
        final IllegalStateException ex =
            assertThrows(IllegalStateException.class, () -> client.sendSimple(RequestType.PING, 0, 0, 0));
        assertEquals("client closed", ex.getMessage());
        client.close();
    }

    @Test
    void shouldRaiseDetachedWhenTheServerDetachesTheClientWhileAwaiting() throws IOException
    {
        writeControlFile();
        startServer();
        try (KvStashClient client = connect(directory))
        {
            server.detachInsteadOfAnswering();
            final KvStashException ex = assertThrows(KvStashException.class, client::ping);
            assertEquals(KvStashException.Reason.DETACHED, ex.reason());
        }
    }

    @Test
    void shouldRaiseServerRestartedWhenAnotherIncarnationTakesTheDirectory() throws IOException
    {
        writeControlFile();
        startServer();
        try (KvStashClient client = connect(directory))
        {
            server.stopAnswering();
            control.putLong(ControlFileDescriptor.INCARNATION_OFFSET, INCARNATION + 1);
            control.putIntRelease(ControlFileDescriptor.STATE_OFFSET, ControlFileDescriptor.STATE_CLOSED);
            assertFalse(client.alive());
            final KvStashException ex = assertThrows(KvStashException.class, client::ping);
            assertEquals(KvStashException.Reason.SERVER_RESTARTED, ex.reason());
        }
    }

    private static KvStashClient connect(final Path directory)
    {
        return KvStashClient.connect(new ClientContext()
            .directory(directory)
            .copyTransport(true)
            .timeoutNs(TimeUnit.SECONDS.toNanos(5))
            .livenessCheckNs(TimeUnit.MILLISECONDS.toNanos(10)));
    }

    private void writeControlFile() throws IOException
    {
        directory = SecureDirectory.ensure(parent.resolve("kvstash"));
        final Path path = SecureDirectory.createFile(directory.resolve(ControlFileDescriptor.FILE_NAME));
        final int length = ControlFileDescriptor.fileLength(64, 4096);
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            controlMapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, length);
        }
        control = new UnsafeBuffer(controlMapped);
        control.putLong(ControlFileDescriptor.MAGIC_OFFSET, ControlFileDescriptor.MAGIC);
        control.putInt(ControlFileDescriptor.HEADER_LENGTH_OFFSET, ControlFileDescriptor.HEADER_LENGTH);
        control.putLong(ControlFileDescriptor.PID_OFFSET, ProcessHandle.current().pid());
        control.putLong(ControlFileDescriptor.INCARNATION_OFFSET, INCARNATION);
        control.putLong(ControlFileDescriptor.HEARTBEAT_OFFSET, System.currentTimeMillis());
        control.putInt(ControlFileDescriptor.STATE_OFFSET, ControlFileDescriptor.STATE_RUNNING);
        final int c = ControlFileDescriptor.CONFIG_OFFSET;
        control.putInt(c + ControlFileDescriptor.CHUNK_TOKENS_OFFSET, 16);
        control.putInt(c + ControlFileDescriptor.MAX_CHUNKS_OFFSET, 64);
        control.putInt(c + ControlFileDescriptor.MAX_INLINE_OFFSET, 1024);
        control.putInt(c + ControlFileDescriptor.REQUEST_RING_CAPACITY_OFFSET, RING_CAPACITY);
        control.putInt(c + ControlFileDescriptor.RESPONSE_RING_CAPACITY_OFFSET, RING_CAPACITY);
        control.putInt(c + ControlFileDescriptor.HEARTBEAT_INTERVAL_OFFSET, 10);
        control.putInt(c + ControlFileDescriptor.HEARTBEAT_TIMEOUT_OFFSET, 1000);
        control.putLong(ControlFileDescriptor.COUNTERS_OFFSET + COUNTER_ID * Long.BYTES, COUNTER_VALUE);
        control.putIntRelease(ControlFileDescriptor.VERSION_OFFSET, WireVersion.CURRENT);
    }

    private void startServer()
    {
        server = new FakeServer();
        server.start();
    }

    /**
     * Attaches the first client file it finds, then answers every request OK while beating the heartbeat.
     */
    private final class FakeServer extends Thread
    {
        private final RequestFlyweight request = new RequestFlyweight();
        private final ResponseFlyweight response = new ResponseFlyweight();
        private volatile boolean running = true;
        private volatile boolean answering = true;
        private volatile boolean detach;
        private volatile boolean closing;
        private MappedByteBuffer clientMapped;

        FakeServer()
        {
            super("fake-kvstash-server");
            setDaemon(true);
        }

        void detachInsteadOfAnswering()
        {
            detach = true;
        }

        void stopAnswering()
        {
            answering = false;
        }

        void resumeAnswering()
        {
            answering = true;
        }

        boolean sawClosing()
        {
            final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (!closing && System.nanoTime() - deadlineNs < 0)
            {
                Thread.onSpinWait();
            }
            return closing;
        }

        void halt() throws InterruptedException
        {
            running = false;
            join();
        }

        @Override
        public void run()
        {
            try
            {
                final UnsafeBuffer header = attach();
                if (null == header)
                {
                    return;
                }
                final RingConsumer requests = new RingConsumer(new UnsafeBuffer(clientMapped,
                    ClientFileDescriptor.REQUEST_RING_OFFSET, RingDescriptor.totalLength(RING_CAPACITY)));
                final RingProducer responses = new RingProducer(new UnsafeBuffer(clientMapped,
                    ClientFileDescriptor.responseRingOffset(RING_CAPACITY), RingDescriptor.totalLength(RING_CAPACITY)));
                while (running)
                {
                    if (answering)
                    {
                        control.putLongRelease(ControlFileDescriptor.HEARTBEAT_OFFSET, System.currentTimeMillis());
                    }
                    closing |= 0 != header.getIntAcquire(ClientFileDescriptor.CLOSING_OFFSET);
                    if (answering && requests.next())
                    {
                        if (detach)
                        {
                            header.putIntRelease(
                                ClientFileDescriptor.ATTACH_STATE_OFFSET, ClientFileDescriptor.ATTACH_DETACHED);
                            requests.consume();
                            continue;
                        }
                        // Like the real server: a request is read only when its answer has room.
                        final int length = ResponseFlyweight.length(0, 0);
                        final int at = responses.tryClaim(RESPONSE_TYPE, length);
                        if (at < 0)
                        {
                            continue;
                        }
                        final int type = requests.type();
                        request.wrap(requests.buffer(), requests.payloadOffset(), requests.payloadLength());
                        final long correlationId = request.correlationId();
                        requests.consume();
                        response.wrap(responses.buffer(), at, length)
                            .putHeader(correlationId, Status.OK, type, 0, 0, 0, 0, 0, 0, 0, 0);
                        responses.commit(length);
                    }
                    Thread.onSpinWait();
                }
            }
            catch (final IOException ex)
            {
                throw new IllegalStateException(ex);
            }
            finally
            {
                if (null != clientMapped)
                {
                    IoUtil.unmap(clientMapped);
                }
            }
        }

        private UnsafeBuffer attach() throws IOException
        {
            while (running)
            {
                control.putLongRelease(ControlFileDescriptor.HEARTBEAT_OFFSET, System.currentTimeMillis());
                final Path file;
                try (Stream<Path> files = Files.list(directory))
                {
                    file = files.filter(p -> p.getFileName().toString().startsWith(ClientFileDescriptor.FILE_PREFIX))
                        .findFirst().orElse(null);
                }
                if (null != file)
                {
                    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE))
                    {
                        final long length = ClientFileDescriptor.fileLength(RING_CAPACITY, RING_CAPACITY);
                        while (running && channel.size() < length)
                        {
                            Thread.onSpinWait();
                        }
                        clientMapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, length);
                    }
                    final UnsafeBuffer header = new UnsafeBuffer(clientMapped, 0, ClientFileDescriptor.HEADER_LENGTH);
                    while (running && ClientFileDescriptor.VERSION != header.getIntAcquire(ClientFileDescriptor.VERSION_OFFSET))
                    {
                        Thread.onSpinWait();
                    }
                    header.putLong(ClientFileDescriptor.SESSION_ID_OFFSET, SESSION_ID);
                    header.putIntRelease(ClientFileDescriptor.ATTACH_STATE_OFFSET, ClientFileDescriptor.ATTACH_ATTACHED);
                    return header;
                }
                Thread.onSpinWait();
            }
            return null;
        }
    }
}
