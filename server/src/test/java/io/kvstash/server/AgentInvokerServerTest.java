package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.pipeline.PipelineContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.WireDescriptor;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.ring.RingDescriptor;
import org.agrona.IoUtil;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A server whose duty cycle the caller runs ({@link ServerContext#useAgentInvoker(boolean)}), and the
 * Disruptor ring size each threading mode defaults to.
 */
@Timeout(60)
class AgentInvokerServerTest
{
    /** The fields of an answer this test checks (a response is valid only during the handler's call). */
    private record Answer(int status, long correlationId, int slotCount, long transferId, int hitChunks)
    {
    }

    private final List<Answer> answers = new ArrayList<>();
    private Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    private void answer(final ClientResponse response)
    {
        answers.add(new Answer(response.status(), response.correlationId(), response.slotCount(),
            response.transferId(), response.hitChunks()));
    }

    @Test
    void shouldAnswerOnlyWhenTheCallerRunsTheServersDutyCycle() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-invoker-");
        try (KvStashServer server = KvStashServer.launch(InvokedServer.context(dir)))
        {
            final AgentInvoker invoker = server.invoker();
            assertNotNull(invoker);
            final KvStashClient client = InvokedServer.connectAndRegister(invoker, dir, null);
            try
            {
                final long ping = client.requests().sendSimple(RequestType.PING, 0, 0, 0);
                assertTrue(ping > 0);
                assertEquals(0, client.poll(this::answer, 16), "answered before its duty cycle ran");
                invoker.invoke();
                assertEquals(1, client.poll(this::answer, 16));
                assertEquals(Status.OK, answers.get(0).status());
                assertEquals(ping, answers.get(0).correlationId());

                assertTrue(client.requests().sendKeyed(RequestType.PREPARE_STORE, 1, ChunkKeys.ofIds(7, 8), 0) > 0);
                invoker.invoke();
                assertEquals(1, client.poll(this::answer, 16));
                final Answer prepared = answers.get(1);
                assertEquals(Status.OK, prepared.status(), prepared.toString());
                assertEquals(2, prepared.slotCount());
                assertTrue(client.requests().sendSimple(RequestType.COMMIT_STORE, 1, prepared.transferId(), 0) > 0);
                assertTrue(client.requests().sendKeyed(RequestType.LOOKUP, 1, ChunkKeys.ofIds(7, 8, 9), 0) > 0);
                invoker.invoke();
                assertEquals(2, client.poll(this::answer, 16));
                assertEquals(Status.OK, answers.get(2).status(), answers.get(2).toString());
                assertEquals(2, answers.get(3).hitChunks(), answers.get(3).toString());
            }
            finally
            {
                client.close();
            }
        }
    }

    @Test
    void shouldReleaseARequestRecordOnlyAfterItsAnswerIsWritten() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-invoker-release-");
        try (KvStashServer server = KvStashServer.launch(InvokedServer.context(dir)))
        {
            final AgentInvoker invoker = server.invoker();
            final KvStashClient client = InvokedServer.connectAndRegister(invoker, dir, null);
            // Kept open until the client has closed: closing a descriptor of the client's file in the client's
            // process would release the client's lock on it (IoUtil.mapExistingFile closes the one it opens).
            final FileChannel channel = FileChannel.open(client.clientFile(), StandardOpenOption.READ,
                StandardOpenOption.WRITE);
            final MappedByteBuffer mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, channel.size());
            try
            {
                // The request ring as the client's file holds it: the head the server publishes, then the records.
                final UnsafeBuffer ring = new UnsafeBuffer(mapped, ClientFileDescriptor.REQUEST_RING_OFFSET,
                    mapped.capacity() - ClientFileDescriptor.REQUEST_RING_OFFSET);
                invoker.invoke();
                final long head = ring.getLongVolatile(RingDescriptor.HEAD_POSITION_OFFSET);
                final int record = RingDescriptor.HEADER_LENGTH + (int)head;
                final long ping = client.requests().sendSimple(RequestType.PING, 0, 0, 0);

                invoker.invoke();
                assertEquals(1, client.poll(this::answer, 16), "answered in the cycle that read it");
                assertEquals(ping, answers.get(0).correlationId());
                assertEquals(head, ring.getLongVolatile(RingDescriptor.HEAD_POSITION_OFFSET), "released already");
                assertEquals(RingDescriptor.RECORD_HEADER_LENGTH + WireDescriptor.REQUEST_HEADER_LENGTH,
                    ring.getIntVolatile(record + RingDescriptor.RECORD_LENGTH_OFFSET), "zeroed already");

                invoker.invoke();
                final int aligned =
                    RingDescriptor.align(RingDescriptor.RECORD_HEADER_LENGTH + WireDescriptor.REQUEST_HEADER_LENGTH);
                assertEquals(head + aligned, ring.getLongVolatile(RingDescriptor.HEAD_POSITION_OFFSET));
                for (int i = 0; i < aligned; i += 8)
                {
                    assertEquals(0, ring.getLongVolatile(record + i), "byte " + i + " of the released record");
                }
            }
            finally
            {
                IoUtil.unmap(mapped);
                client.close();
                channel.close();
            }
        }
    }

    @Test
    void shouldRunItsOwnThreadWhenNoInvokerIsAsked() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-no-invoker-");
        try (KvStashServer server = KvStashServer.launch(InvokedServer.context(dir).useAgentInvoker(false));
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertNull(server.invoker());
            assertEquals(Status.OK, client.ping().status());
        }
    }

    @Test
    void shouldRefuseAnInvokerWithoutSharedThreading()
    {
        dir = ShmDirectories.newPath("kvstash-test-invoker-dedicated-");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.DEDICATED)
            .useAgentInvoker(true);
        assertThrows(IllegalArgumentException.class, context::conclude);
    }

    @Test
    void shouldSizeTheDisruptorRingByThreadingModeUnlessGiven()
    {
        dir = ShmDirectories.newPath("kvstash-test-ring-size-");
        assertEquals(ServerConfiguration.RING_SIZE_SHARED_DEFAULT,
            ringSizeConcluded(new ServerContext().directory(dir).threadingMode(ThreadingMode.SHARED)));
        assertEquals(PipelineContext.RING_SIZE_DEFAULT,
            ringSizeConcluded(new ServerContext().directory(dir).threadingMode(ThreadingMode.DEDICATED)));
        assertEquals(PipelineContext.RING_SIZE_DEFAULT,
            ringSizeConcluded(new ServerContext().directory(dir).threadingMode(ThreadingMode.THREAD_PER_STAGE)));
        final ServerContext given = new ServerContext().directory(dir).threadingMode(ThreadingMode.SHARED);
        given.pipelineContext().ringSize(256);
        assertEquals(256, ringSizeConcluded(given));
    }

    private static int ringSizeConcluded(final ServerContext context)
    {
        return context.conclude().pipelineContext().ringSize();
    }
}
