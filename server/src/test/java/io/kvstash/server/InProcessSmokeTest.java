package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(60)
class InProcessSmokeTest
{
    Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    private ServerContext serverContext(final String name, final ThreadingMode mode, final long poolBytes)
    {
        dir = ShmDirectories.newPath("kvstash-test-" + name + "-");
        return new ServerContext()
            .directory(dir)
            .threadingMode(mode)
            .storeContext(new StoreContext().poolSizeBytes(poolBytes));
    }

    @ParameterizedTest
    @EnumSource(ThreadingMode.class)
    void shouldStoreAndRetrieveThroughTheMappedPoolWhenServerAndClientShareAProcess(final ThreadingMode mode)
        throws Exception
    {
        final ServerContext serverContext = serverContext("smoke", mode, 64L << 20);
        try (KvStashServer server = KvStashServer.launch(serverContext);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertTrue(server.directory().endsWith(dir.getFileName()));
            final Layout layout = Layout.of("llama", 1, 0, 2, 128, Dtype.BFLOAT16, false);
            final ClientResponse registered = client.register(1, layout);
            assertEquals(Status.OK, registered.status(), registered.toString());
            assertEquals(serverContext.incarnation(), registered.registeredIncarnation());
            assertEquals(64L << 20, registered.registeredPoolSizeBytes());
            assertEquals(256, registered.registeredChunkTokens());
            assertEquals(serverContext.storeContext().leaseNs(), registered.registeredLeaseNs());
            assertEquals(server.poolPath().getFileName().toString(), registered.registeredPoolFileName());
            final long chunkBytes = registered.chunkBytes();
            assertEquals(2L * 2 * 256 * 128 * 2, chunkBytes);

            final ChunkKeys keys = ChunkKeys.ofIds(10, 11, 12);
            ClientResponse r = client.prepareStore(1, keys);
            assertEquals(Status.OK, r.status(), r.toString());
            assertEquals(3, r.slotCount());
            final long transfer = r.transferId();
            final UnsafeBuffer view = new UnsafeBuffer(0, 0);
            for (int i = 0; i < r.slotCount(); i++)
            {
                assertTrue(client.chunks().isStillReserved(r, i));
                client.chunks().slotView(r, i, view);
                for (int b = 0; b < chunkBytes; b += 8)
                {
                    view.putLong(b, (10L + r.slotRangeIndex(i)) * 1_000_003L + b);
                }
            }
            assertEquals(Status.OK, client.commitStore(1, transfer).status());

            r = client.lookup(1, ChunkKeys.ofIds(10, 11, 12, 13), false);
            assertEquals(3, r.hitChunks());

            r = client.prepareRetrieve(1, keys);
            assertEquals(Status.OK, r.status());
            final long retrieve = r.transferId();
            for (int i = 0; i < r.slotCount(); i++)
            {
                client.chunks().slotView(r, i, view);
                for (int b = 0; b < chunkBytes; b += 8)
                {
                    assertEquals((10L + r.slotRangeIndex(i)) * 1_000_003L + b, view.getLong(b));
                }
                assertTrue(client.chunks().isStillReadable(r, i));
            }
            assertEquals(Status.OK, client.commitRetrieve(1, retrieve).status());
            assertEquals(Status.UNKNOWN_TRANSFER, client.commitRetrieve(1, retrieve).status());
            assertNotEquals("", client.commitRetrieve(1, retrieve).message());

            r = client.stats();
            assertEquals(3, r.counter(CountersDescriptor.STORED_CHUNKS));
            assertEquals(3, client.counter(CountersDescriptor.READABLE_CHUNKS));
            assertEquals(Status.OK, client.ping().status());
        }
    }

    @ParameterizedTest
    @EnumSource(ThreadingMode.class)
    void shouldHoldTheNextPrepareWhileWritingTheCurrentChunkWithCommitsNotAwaited(final ThreadingMode mode)
        throws Exception
    {
        final ServerContext serverContext = serverContext("pipelined", mode, 16L << 20);
        try (KvStashServer server = KvStashServer.launch(serverContext);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            final long chunkBytes = client.register(1, Layout.of("llama", 1, 0, 1, 16, Dtype.BFLOAT16, false))
                .chunkBytes();
            final int chunks = 40;
            final long[] commitStatus = new long[chunks];
            final int[] commitsAnswered = new int[1];
            final KvStashClient.ResponseHandler handler = response ->
            {
                assertEquals(RequestType.COMMIT_STORE, response.requestType(), response.toString());
                commitStatus[commitsAnswered[0]++] = response.status();
            };
            client.asyncHandler(handler);
            final ClientResponse[] ahead = { client.newResponse(), client.newResponse() };
            final UnsafeBuffer view = new UnsafeBuffer(0, 0);
            long next = client.requests().sendKeyed(RequestType.PREPARE_STORE, 1, ChunkKeys.ofIds(1000), 0);
            long previousTransfer = 0;
            for (int i = 0; i < chunks; i++)
            {
                final ClientResponse prepared = client.await(next, ahead[i & 1]);
                assertEquals(Status.OK, prepared.status(), prepared.toString());
                assertNotEquals(previousTransfer, prepared.transferId());
                previousTransfer = prepared.transferId();
                if (i + 1 < chunks)
                {
                    // The next chunk's prepare goes out before this chunk is written; its answer lands in the
                    // other flyweight and leaves this one intact.
                    next = client.requests().sendKeyed(RequestType.PREPARE_STORE, 1, ChunkKeys.ofIds(1001 + i), 0);
                    assertTrue(next > 0);
                }
                assertTrue(client.chunks().isStillReserved(prepared, 0));
                client.chunks().slotView(prepared, 0, view);
                for (int b = 0; b < chunkBytes; b += 8)
                {
                    view.putLong(b, (1000L + i) * 31 + b);
                }
                assertTrue(client.requests().sendSimple(RequestType.COMMIT_STORE, 1, prepared.transferId(), 0) > 0);
            }
            final long deadline = System.nanoTime() + 10_000_000_000L;
            while (commitsAnswered[0] < chunks && System.nanoTime() < deadline)
            {
                client.poll(handler, 16);
            }
            assertEquals(chunks, commitsAnswered[0]);
            for (final long status : commitStatus)
            {
                assertEquals(Status.OK, status);
            }
            client.asyncHandler(null);
            for (int i = 0; i < chunks; i++)
            {
                final ClientResponse r = client.prepareRetrieve(1, ChunkKeys.ofIds(1000 + i));
                assertEquals(Status.OK, r.status(), r.toString());
                client.chunks().slotView(r, 0, view);
                for (int b = 0; b < chunkBytes; b += 8)
                {
                    assertEquals((1000L + i) * 31 + b, view.getLong(b));
                }
                assertEquals(Status.OK, client.commitRetrieve(1, r.transferId()).status());
            }
            assertEquals(chunks, server.counters().get(CountersDescriptor.STORED_CHUNKS));
            assertEquals(0, client.orphanResponses());
        }
    }

    @ParameterizedTest
    @EnumSource(ThreadingMode.class)
    void shouldCountThePrefixEveryRankHoldsWhenASchedulerLooksUpAllRanks(final ThreadingMode mode) throws Exception
    {
        final ServerContext serverContext = serverContext("all-ranks", mode, 16L << 20);
        try (KvStashServer server = KvStashServer.launch(serverContext);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            for (int rank = 0; rank < 2; rank++)
            {
                assertEquals(Status.OK, client.register(10 + rank, Layout.of("llama", 2, rank, 1, 16, Dtype.BFLOAT16,
                    false)).status());
            }
            // Rank 0 holds chunks 1..4, rank 1 only 1..2: every rank holds a prefix of two.
            storeAndCommit(client, 10, ChunkKeys.ofIds(1, 2, 3, 4));
            storeAndCommit(client, 11, ChunkKeys.ofIds(1, 2));

            ClientResponse r = client.lookupAllRanks("llama", 2, ChunkKeys.ofIds(1, 2, 3, 4, 5));
            assertEquals(Status.OK, r.status(), r.toString());
            assertEquals(2, r.hitChunks());
            r = client.lookupAllRanks("llama", 2, ChunkKeys.ofIds(3, 4));
            assertEquals(0, r.hitChunks());
            r = client.lookupAllRanks("other-model", 2, ChunkKeys.ofIds(1, 2));
            assertEquals(0, r.hitChunks());
            assertEquals(4, client.lookup(10, ChunkKeys.ofIds(1, 2, 3, 4), false).hitChunks());
            assertEquals(6, server.counters().get(CountersDescriptor.READABLE_CHUNKS));
        }
    }

    @ParameterizedTest
    @ValueSource(booleans = { false, true })
    void shouldWriteAndReadAChunkInPartsOnEitherTransport(final boolean copyTransport) throws Exception
    {
        final ServerContext serverContext = serverContext("parts", ThreadingMode.SHARED, 16L << 20);
        try (KvStashServer server = KvStashServer.launch(serverContext);
            KvStashClient client = KvStashClient.connect(
                new ClientContext().directory(dir).copyTransport(copyTransport)))
        {
            assertEquals(copyTransport, client.isCopyTransport());
            final long chunkBytes = client.register(1, Layout.of("llama", 1, 0, 1, 64, Dtype.UINT8, true)).chunkBytes();
            final int length = (int)chunkBytes;
            final UnsafeBuffer source = new UnsafeBuffer(new byte[length]);
            for (int i = 0; i < length; i++)
            {
                source.putByte(i, (byte)(i * 31 + 7));
            }
            final ClientResponse prepared = client.prepareStore(1, ChunkKeys.ofIds(5));
            assertEquals(Status.OK, prepared.status(), prepared.toString());
            final long storeTransfer = prepared.transferId();
            assertEquals(0L, prepared.slotOffset(0),
                "the first slot of an empty pool starts its data region: offsets are data-relative (PROTOCOL 3.2)");
            // Written back to front in two uneven parts.
            final int cut = length / 3;
            assertEquals(Status.OK, client.chunks().writeChunk(1, prepared, 0, cut, length - cut, source, cut));
            assertEquals(Status.OK, client.chunks().writeChunk(1, prepared, 0, 0, cut, source, 0));
            assertEquals(Status.OK, client.commitStore(1, storeTransfer).status());

            final ClientResponse retrieve = client.prepareRetrieve(1, ChunkKeys.ofIds(5));
            assertEquals(Status.OK, retrieve.status(), retrieve.toString());
            final long retrieveTransfer = retrieve.transferId();
            final UnsafeBuffer read = new UnsafeBuffer(new byte[length]);
            final int[] cuts = { 0, 100, length / 2, length };
            for (int k = 0; k + 1 < cuts.length; k++)
            {
                assertEquals(Status.OK,
                    client.chunks().readChunk(1, retrieve, 0, cuts[k], cuts[k + 1] - cuts[k], read, cuts[k]));
            }
            assertEquals(Status.OK, client.commitRetrieve(1, retrieveTransfer).status());
            assertEquals(source, read, "every byte read back where it was written");
            assertEquals(copyTransport ? chunkBytes : 0, server.counters().get(CountersDescriptor.COPY_BYTES_IN));
        }
    }

    private static void storeAndCommit(final KvStashClient client, final long instance, final ChunkKeys keys)
    {
        final ClientResponse prepared = client.prepareStore(instance, keys);
        assertEquals(Status.OK, prepared.status(), prepared.toString());
        assertEquals(keys.count(), prepared.slotCount());
        assertEquals(Status.OK, client.commitStore(instance, prepared.transferId()).status());
    }
}
