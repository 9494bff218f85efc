package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * COMMIT_RETRIEVE and RELEASE with {@link RequestFlags#NO_REPLY} through a real server and the Java client: a
 * retrieve read and checked, then committed without an answer, releases its pins and counts as a commit; failed
 * no-reply requests are counted in {@code no_reply_failures}; a burst of them never fills the response ring or
 * leaves a response behind; and the flag on another type is refused, and that refusal answered.
 */
@Timeout(60)
class NoReplyClientTest
{
    private static final long WORKER = 7;
    private static final ChunkKeys RANGE = ChunkKeys.ofIds(1, 2);
    private static final int BURST = 20_000;

    private Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldReleaseThePinsOfARetrieveCommittedWithoutAnAnswerAndCountWhatFailed() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-noreply-");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.SHARED)
            .storeContext(new StoreContext().poolSizeBytes(8 * 64).alignment(64).chunkTokens(1).slotBytes(64));
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertEquals(ThreadingMode.SHARED, server.context().threadingMode());
            assertTrue(client.noReply(), "a server of this version takes NO_REPLY");
            assertEquals(Status.OK, client.register(WORKER, Layout.of("noreply", 1, 0, 1, 16, Dtype.UINT8, true))
                .status());
            stored(client);
            retrievedInOneRoundTrip(client);

            ClientResponse stats = client.stats();
            assertEquals(0, stats.counter(CountersDescriptor.PINNED_CHUNKS), "the pins went with the commit");
            assertEquals(0, stats.counter(CountersDescriptor.PENDING_TRANSFERS));
            assertEquals(2, stats.counter(CountersDescriptor.RETRIEVED_CHUNKS), "counted as any commit");
            assertEquals(1, stats.counter(CountersDescriptor.requestId(RequestType.COMMIT_RETRIEVE, Status.OK)));
            assertEquals(0, stats.counter(CountersDescriptor.NO_REPLY_FAILURES));

            assertNull(client.commitRetrieve(WORKER, 0xBADL, false));
            assertNull(client.release(WORKER, 0xBAD2L, false));
            stats = client.stats();
            assertEquals(2, stats.counter(CountersDescriptor.NO_REPLY_FAILURES));
            assertEquals(1, stats.counter(
                CountersDescriptor.requestId(RequestType.COMMIT_RETRIEVE, Status.UNKNOWN_TRANSFER)));
            assertEquals(1, stats.counter(CountersDescriptor.requestId(RequestType.RELEASE, Status.UNKNOWN_TRANSFER)));

            for (int i = 0; i < BURST; i++)
            {
                assertNull(client.release(WORKER, 0x10000L + i, false));
            }
            stats = client.stats();
            assertEquals(2 + BURST, stats.counter(CountersDescriptor.NO_REPLY_FAILURES));
            assertEquals(0, stats.counter(CountersDescriptor.WIRE_BACK_PRESSURE), "no response took ring room");
            assertEquals(0, stats.counter(CountersDescriptor.WIRE_RESPONSES_DROPPED));
            assertEquals(0, client.orphanResponses(), "no response came for a request that asked for none");

            final long ping = client.requests().sendSimple(RequestType.PING, 0, 0, RequestFlags.NO_REPLY);
            final ClientResponse refused = client.await(ping);
            assertEquals(Status.INVALID_REQUEST, refused.status(), refused.toString());
            assertEquals("NO_REPLY is a COMMIT_RETRIEVE and RELEASE flag", refused.message());
            assertEquals(Status.UNKNOWN_TRANSFER, client.commitRetrieve(WORKER, 0xBAD3L, true).status(),
                "with a reply the status comes back");
            assertEquals(0, client.orphanResponses());
            assertEquals(2 + BURST, client.stats().counter(CountersDescriptor.NO_REPLY_FAILURES), "answered: not one");
            assertEquals(2, client.clear(false).count(), "nothing left pinned");
        }
    }

    private static void stored(final KvStashClient client)
    {
        final ClientResponse prepared = client.prepareStore(WORKER, RANGE);
        assertEquals(Status.OK, prepared.status(), prepared.toString());
        final UnsafeBuffer source = new UnsafeBuffer(new byte[16]);
        for (int i = 0; i < prepared.slotCount(); i++)
        {
            source.setMemory(0, 16, (byte)(0x40 + prepared.slotRangeIndex(i)));
            assertEquals(Status.OK, client.chunks().writeChunk(WORKER, prepared, i, source, 0));
        }
        assertEquals(Status.OK, client.commitStore(WORKER, prepared.transferId()).status());
    }

    private static void retrievedInOneRoundTrip(final KvStashClient client)
    {
        final ClientResponse prepared = client.prepareRetrieve(WORKER, RANGE);
        assertEquals(Status.OK, prepared.status(), prepared.toString());
        final UnsafeBuffer destination = new UnsafeBuffer(new byte[16]);
        for (int i = 0; i < prepared.slotCount(); i++)
        {
            assertEquals(Status.OK, client.chunks().readChunk(WORKER, prepared, i, destination, 0));
            assertTrue(client.chunks().isStillReadable(prepared, i), "fenced");
            for (int b = 0; b < 16; b++)
            {
                assertEquals((byte)(0x40 + prepared.slotRangeIndex(i)), destination.getByte(b));
            }
        }
        assertNull(client.commitRetrieve(WORKER, prepared.transferId(), false), "nothing to wait for");
    }
}
