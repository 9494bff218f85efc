package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

/**
 * The Java client's prefix PREPARE_RETRIEVE through a real server: a range whose middle chunk was evicted (least
 * recently used, by other stores) is a MISS without the option and its readable leading chunks with it, pinned
 * until COMMIT_RETRIEVE; a range whose first chunk is gone is a MISS either way and pins nothing.
 */
@Timeout(60)
class PrefixRetrieveClientTest
{
    private static final long WORKER = 5;
    private static final ChunkKeys RANGE = ChunkKeys.ofIds(1, 2, 3, 4, 5);

    private Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldLoadTheLeadingChunksWhenAChunkInTheMiddleWasEvicted() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-prefix-");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.SHARED)
            .storeContext(new StoreContext().poolSizeBytes(8 * 64).alignment(64).chunkTokens(1).slotBytes(64));
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertEquals(EvictionPolicy.LRU, server.context().storeContext().eviction(), "the test evicts LRU");
            assertEquals(Status.OK, client.register(WORKER, Layout.of("prefix", 1, 0, 1, 16, Dtype.UINT8, true))
                .status());
            final ClientResponse stored = client.prepareStore(WORKER, RANGE);
            assertEquals(5, stored.slotCount(), stored.toString());
            final long[] offsets = new long[5];
            for (int i = 0; i < 5; i++)
            {
                offsets[stored.slotRangeIndex(i)] = stored.slotOffset(i);
            }
            assertEquals(Status.OK, client.commitStore(WORKER, stored.transferId()).status());
            // Chunks 0 and 1 read back, so chunk 2 is the least recently used; four new chunks fill the pool of 8
            // and evict it.
            retrieved(client, RANGE.range(0, 2));
            stored(client, ChunkKeys.ofIds(100, 101, 102));
            stored(client, ChunkKeys.ofIds(103));
            assertEquals(0, client.lookup(WORKER, RANGE.range(2, 3), false).hitChunks(), "chunk 2 evicted");
            assertEquals(2, client.lookup(WORKER, RANGE.range(3, 5), false).hitChunks(), "chunks 3, 4 kept");

            assertEquals(Status.MISS, client.prepareRetrieve(WORKER, RANGE).status(), "all or nothing");
            assertEquals(Status.MISS, client.prepareRetrieve(WORKER, RANGE, false).status());
            final ClientResponse prefix = client.prepareRetrieve(WORKER, RANGE, true);
            assertEquals(Status.OK, prefix.status(), prefix.toString());
            final long transferId = prefix.transferId();
            assertNotEquals(0, transferId);
            assertEquals(2, prefix.slotCount());
            for (int i = 0; i < 2; i++)
            {
                assertEquals(i, prefix.slotRangeIndex(i));
                assertEquals(offsets[i], prefix.slotOffset(i), "chunk " + i + " where it was stored");
            }
            // (The client answers every call into one response: read what it needs before the next call.)
            assertEquals(2, client.stats().counter(CountersDescriptor.PINNED_CHUNKS));
            assertEquals(Status.OK, client.commitRetrieve(WORKER, transferId).status());
            assertEquals(0, client.stats().counter(CountersDescriptor.PINNED_CHUNKS));

            final ClientResponse gone = client.prepareRetrieve(WORKER, RANGE.range(2, 5), true);
            assertEquals(Status.MISS, gone.status(), "chunk 0 of this range is the evicted one");
            assertEquals(0, gone.transferId());
            assertEquals(0, gone.slotCount());
            final ClientResponse counters = client.stats();
            assertEquals(0, counters.counter(CountersDescriptor.PINNED_CHUNKS));
            assertEquals(0, counters.counter(CountersDescriptor.PENDING_TRANSFERS));
            assertEquals(4, counters.counter(CountersDescriptor.RETRIEVE_MISSES), "two MISSes, a short prefix, a MISS");
            assertEquals(8, client.clear(false).count(), "nothing pinned: every readable chunk goes");
        }
    }

    private static void stored(final KvStashClient client, final ChunkKeys keys)
    {
        final ClientResponse prepared = client.prepareStore(WORKER, keys);
        assertEquals(Status.OK, prepared.status(), prepared.toString());
        assertEquals(Status.OK, client.commitStore(WORKER, prepared.transferId()).status());
    }

    private static void retrieved(final KvStashClient client, final ChunkKeys keys)
    {
        final ClientResponse prepared = client.prepareRetrieve(WORKER, keys);
        assertEquals(Status.OK, prepared.status(), prepared.toString());
        assertEquals(Status.OK, client.commitRetrieve(WORKER, prepared.transferId()).status());
    }
}
