package io.kvstash.l2;

import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreCounters;
import io.kvstash.testkit.RedisClusterExtension;
import io.kvstash.tier.TieredServer;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Arrays;

import static io.kvstash.l2.L2Hosts.await;
import static io.kvstash.l2.L2Hosts.awaitUp;
import static io.kvstash.l2.L2Hosts.keys;
import static io.kvstash.l2.L2Hosts.pattern;
import static io.kvstash.l2.L2Hosts.store;
import static io.kvstash.l2.L2Hosts.verify;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Values that arrive after the tier's deadline, against a real Redis Cluster: host B's tier waits 3 ms for 8 MiB
 * values, so its GETs run past the deadline and are decoded later, after the tier gave their slots back and a
 * worker stored its own chunks in every slot of the pool. The worker's chunks must stay exactly as written, and
 * whatever B serves of A's chunks must be A's bytes.
 */
@Timeout(300)
class L2LateValueTest
{
    /** 8 MiB chunks: 2 x 8 layers x 256 tokens x 1024 x 2 bytes. */
    private static final Layout LAYOUT = Layout.of("l2-late-model", 1, 0, 8, 1024, Dtype.FLOAT16, false);
    private static final int CHUNKS = 8;
    @RegisterExtension
    static final RedisClusterExtension CLUSTER = new RedisClusterExtension();

    @TempDir
    Path temp;

    @Test
    void shouldNeverLetAValueDecodedAfterTheDeadlineWriteIntoASlotOrBeServed() throws Exception
    {
        try (TieredServer a = L2Hosts.launch(temp.resolve("a"), CLUSTER.cluster(), 128L << 20, 5_000);
            TieredServer b = L2Hosts.launch(temp.resolve("b"), CLUSTER.cluster(), 64L << 20, 3);
            KvStashClient ca = L2Hosts.connect(a); KvStashClient cb = L2Hosts.connect(b))
        {
            awaitUp(a);
            L2Hosts.register(ca, 1, LAYOUT);
            L2Hosts.register(cb, 2, LAYOUT);
            final ChunkKeys shared = keys(CHUNKS);
            final int chunkBytes = store(ca, 1, shared, 41);
            assertEquals(8 << 20, chunkBytes);
            await(() -> a.server().counters().get(CountersDescriptor.L2_WRITES) >= CHUNKS, "host A wrote its chunks through");

            boolean lateGets = false;
            for (int attempt = 0; attempt < 20 && !lateGets; attempt++)
            {
                awaitUp(b);
                final long getsBefore = L2Hosts.sumInfo(CLUSTER.cluster(), "commandstats", "cmdstat_get");
                final long timeoutsBefore = b.server().counters().get(CountersDescriptor.L2_TIMEOUTS);
                assertEquals(0, cb.lookup(2, shared, false).hitChunks());
                await(() -> b.server().counters().get(CountersDescriptor.L2_TIMEOUTS) > timeoutsBefore ||
                    b.server().counters().get(CountersDescriptor.L2_FETCH_HITS) > 0, "host B's fetch ran past its deadline");
                await(() -> noStorePending(b), "host B's fetch gave back or committed every slot it reserved");
                // The worker takes every slot of B's pool now, while late values may still be decoded.
                final ChunkKeys own = keys(CHUNKS);
                store(cb, 2, own, 500 + attempt);
                Thread.sleep(1_000);
                verify(cb, 2, own, chunkBytes, 500 + attempt);
                checkServedAreAs(cb, shared, chunkBytes);
                lateGets = L2Hosts.sumInfo(CLUSTER.cluster(), "commandstats", "cmdstat_get") > getsBefore &&
                    b.server().counters().get(CountersDescriptor.L2_TIMEOUTS) > timeoutsBefore;
                assertEquals(Status.OK, cb.clear(false).status());
            }
            assertTrue(lateGets, "some GETs ran past the deadline");
        }
    }

    private static boolean noStorePending(final TieredServer server)
    {
        final StoreCounters c = server.server().counters();
        final long prepared = c.get(CountersDescriptor.requestId(RequestType.PREPARE_STORE, Status.OK)) -
            c.get(CountersDescriptor.EMPTY_PREPARES);
        return prepared == c.get(CountersDescriptor.requestId(RequestType.COMMIT_STORE, Status.OK)) +
            c.get(CountersDescriptor.requestId(RequestType.ABORT_STORE, Status.OK));
    }

    /**
     * Whatever prefix of A's chunks B holds is A's bytes.
     */
    private static void checkServedAreAs(final KvStashClient cb, final ChunkKeys shared, final int chunkBytes)
    {
        final int hits = cb.lookup(2, shared, false).hitChunks();
        if (0 == hits)
        {
            return;
        }
        final ClientResponse r = cb.prepareRetrieve(2, shared.range(0, hits));
        assertEquals(Status.OK, r.status());
        final byte[] read = new byte[chunkBytes];
        final long transfer = r.transferId();
        final int slots = r.slotCount();
        final int[] chunks = new int[slots];
        for (int i = 0; i < slots; i++)
        {
            chunks[i] = r.slotRangeIndex(i);
        }
        for (int i = 0; i < slots; i++)
        {
            Arrays.fill(read, (byte)0);
            cb.chunks().readChunk(2, r, i, new UnsafeBuffer(read), 0);
            assertArrayEquals(pattern(chunkBytes, 41, chunks[i]), read, "served chunk " + chunks[i]);
        }
        assertEquals(Status.OK, cb.commitRetrieve(2, transfer).status());
    }
}
