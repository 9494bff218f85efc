package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.WireDescriptor;
import io.kvstash.wire.ring.RingDescriptor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A synchronous call that waits while many answers of the non-blocking form arrive first: it hands them to
 * the async handler, in order, and keeps the response ring moving although they are several times what the
 * ring holds (the server stops reading requests while the ring lacks room for their answers, so a client
 * that held them would never see its own).
 */
@Timeout(120)
class ClientAwaitFloodTest
{
    private Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldHandOnAnswersBeyondTheRingsCapacityWhenACallWaitsBehindThem() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-await-flood-");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.SHARED)
            .storeContext(new StoreContext().poolSizeBytes(16L << 20));
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(server.directory())))
        {
            // The server's default rings, which this one has (the client takes their sizes from its control file).
            final int requestCapacity = ServerConfiguration.REQUEST_RING_CAPACITY_DEFAULT;
            final int responseCapacity = ServerConfiguration.RESPONSE_RING_CAPACITY_DEFAULT;
            // Half the request ring of PINGs, all sent before the one call that waits (the server stops reading
            // requests while the response ring lacks room, so they must fit), answered with several times what
            // the response ring holds: every answer but the last reaches the async handler inside that await.
            final int requestBytes =
                RingDescriptor.align(RingDescriptor.RECORD_HEADER_LENGTH + WireDescriptor.REQUEST_HEADER_LENGTH);
            final int answerBytes =
                RingDescriptor.align(RingDescriptor.RECORD_HEADER_LENGTH + WireDescriptor.RESPONSE_HEADER_LENGTH);
            final int count = requestCapacity / 2 / requestBytes;
            assertTrue((long)count * answerBytes > 3L * responseCapacity, count + " answers");
            final long[] delivered = new long[1];
            final long[] lastSeen = { 0 };
            final boolean[] inOrder = { true };
            client.asyncHandler(r ->
            {
                inOrder[0] &= r.correlationId() > lastSeen[0] && Status.OK == r.status();
                lastSeen[0] = r.correlationId();
                delivered[0]++;
            });
            long last = 0;
            for (int i = 0; i < count; i++)
            {
                final long id = client.requests().sendSimple(RequestType.PING, 0, 0, 0);
                assertTrue(id > 0, "the request ring holds them all");
                last = id;
            }
            final ClientResponse answer = client.await(last);
            assertEquals(last, answer.correlationId());
            assertEquals(Status.OK, answer.status());
            assertEquals(count - 1, delivered[0], "every other answer went to the async handler");
            assertTrue(inOrder[0], "in order, each OK");
            assertEquals(Status.OK, client.ping().status(), "the ring still works");
        }
    }
}
