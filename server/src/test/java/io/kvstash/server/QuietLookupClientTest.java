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
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

/**
 * The Java client's QUIET asks, through a real server running the default eviction policy: a range asked about
 * twice is kept as popular (it outlives a flood of new stores), one asked about once is not, and one asked about
 * again with {@code quiet} (by LOOKUP or LOOKUP_ALL_RANKS) is kept exactly as one asked about once. The ranges are
 * stored by rank 1 of two, so a LOOKUP_ALL_RANKS must count them in rank 1's namespace.
 */
@Timeout(60)
class QuietLookupClientTest
{
    private static final long RANK0 = 8;
    private static final long RANK1 = 9;
    private static final String MODEL = "quiet";
    private static final ChunkKeys RANGE = ChunkKeys.ofIds(1, 2);

    private enum Asked
    {
        ONCE, TWICE, QUIET, ALL_RANKS_TWICE, ALL_RANKS_QUIET
    }

    private Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void aQuietAskIsNotCountedAsAnotherReference() throws Exception
    {
        final int once = survivors(Asked.ONCE);
        final int twice = survivors(Asked.TWICE);
        assertNotEquals(once, twice, "a range asked about twice is kept longer (the scenario sees the history)");
        assertEquals(once, survivors(Asked.QUIET), "asked again quietly");
        assertEquals(twice, survivors(Asked.ALL_RANKS_TWICE), "all ranks twice");
        assertEquals(once, survivors(Asked.ALL_RANKS_QUIET), "all ranks, then quietly");
    }

    /** RANGE is asked about as told, stored by rank 1, then three new ranges overfill the pool of 8 chunks. */
    private int survivors(final Asked asked) throws Exception
    {
        ShmDirectories.delete(dir);
        dir = ShmDirectories.newPath("kvstash-test-quiet-");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.SHARED)
            .storeContext(new StoreContext().poolSizeBytes(8 * 64).alignment(64).chunkTokens(1).slotBytes(64)
                .eviction(EvictionPolicy.SLRU_ADMIT));
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertEquals(EvictionPolicy.SLRU_ADMIT, server.context().storeContext().eviction());
            assertEquals(Status.OK, client.register(RANK0, Layout.of(MODEL, 2, 0, 1, 16, Dtype.UINT8, true)).status());
            assertEquals(Status.OK, client.register(RANK1, Layout.of(MODEL, 2, 1, 1, 16, Dtype.UINT8, true)).status());
            switch (asked)
            {
                case ONCE -> assertMiss(client.lookup(RANK1, RANGE, false));
                case TWICE ->
                {
                    assertMiss(client.lookup(RANK1, RANGE, false));
                    assertMiss(client.lookup(RANK1, RANGE, false, false));
                }
                case QUIET ->
                {
                    assertMiss(client.lookup(RANK1, RANGE, false));
                    assertMiss(client.lookup(RANK1, RANGE, false, true));
                }
                case ALL_RANKS_TWICE ->
                {
                    assertMiss(client.lookupAllRanks(MODEL, 2, RANGE));
                    assertMiss(client.lookupAllRanks(MODEL, 2, RANGE, false));
                }
                case ALL_RANKS_QUIET ->
                {
                    assertMiss(client.lookupAllRanks(MODEL, 2, RANGE));
                    assertMiss(client.lookupAllRanks(MODEL, 2, RANGE, true));
                }
                default -> throw new IllegalArgumentException(asked.name());
            }
            stored(client, RANGE);
            // Ranges of 1, 3 and 4 new chunks, each the first of its kind (stored warm, as RANGE was).
            final ChunkKeys[] fills = { ChunkKeys.ofIds(100), ChunkKeys.ofIds(200, 201, 202),
                ChunkKeys.ofIds(300, 301, 302, 303) };
            for (final ChunkKeys fill : fills)
            {
                assertMiss(client.lookup(RANK1, fill, false));
                stored(client, fill);
            }
            int survivors = 0;
            for (int i = 0; i < RANGE.count(); i++)
            {
                survivors += client.lookup(RANK1, RANGE.range(i, i + 1), false, true).hitChunks();
            }
            return survivors;
        }
    }

    private static void assertMiss(final ClientResponse response)
    {
        assertEquals(Status.OK, response.status(), response.toString());
        assertEquals(0, response.hitChunks());
    }

    private static void stored(final KvStashClient client, final ChunkKeys keys)
    {
        final ClientResponse prepared = client.prepareStore(RANK1, keys);
        assertEquals(Status.OK, prepared.status(), prepared.toString());
        assertEquals(Status.OK, client.commitStore(RANK1, prepared.transferId()).status());
    }
}
