package io.kvstash.l2;

import io.kvstash.client.KvStashClient;
import io.kvstash.testkit.RedisClusterExtension;
import io.kvstash.tier.L2Keys;
import io.kvstash.tier.L2Tier;
import io.kvstash.tier.TieredServer;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static io.kvstash.l2.L2Hosts.await;
import static io.kvstash.l2.L2Hosts.awaitUp;
import static io.kvstash.l2.L2Hosts.connect;
import static io.kvstash.l2.L2Hosts.keys;
import static io.kvstash.l2.L2Hosts.pattern;
import static io.kvstash.l2.L2Hosts.register;
import static io.kvstash.l2.L2Hosts.store;
import static io.kvstash.l2.L2Hosts.verify;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The second tier against a real Redis Cluster (3 masters, 3 replicas of Debian's redis-server) and two servers
 * in two directories standing for two hosts. No mocks.
 */
@Timeout(180)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class L2TierTest
{
    private static final long POOL_BYTES = 64L << 20;
    private static final long TIMEOUT_MS = 500;
    private static final Layout LAYOUT = Layout.of("l2-test-model", 1, 0, 2, 64, Dtype.FLOAT16, false);
    @RegisterExtension
    static final RedisClusterExtension CLUSTER = new RedisClusterExtension();

    @TempDir
    Path temp;

    @Test
    @Order(1)
    void shouldServeAnotherHostsChunksAndAClearedHostsOwnChunksFromTheCluster() throws Exception
    {
        try (TieredServer a = launch("a"); TieredServer b = launch("b");
            KvStashClient ca = connect(a); KvStashClient cb = connect(b))
        {
            awaitUp(a);
            awaitUp(b);
            final ChunkKeys keys = keys(8);
            register(ca, 1, LAYOUT);
            register(cb, 2, LAYOUT);
            final int chunkBytes = store(ca, 1, keys, 11);
            await(() -> a.server().counters().get(CountersDescriptor.L2_WRITES) >= 8, "host A wrote its chunks through");
            ca.ping(); // the gauges of the tier's last COMMIT_RETRIEVE move just after its answer
            assertEquals(0, a.server().counters().get(CountersDescriptor.PINNED_CHUNKS), "the tier holds a pin only while it writes");
            assertEquals(0, a.server().counters().get(CountersDescriptor.PENDING_TRANSFERS));

            assertEquals(0, cb.lookup(2, keys, false).hitChunks());
            awaitHits(cb, 2, keys, 8);
            verify(cb, 2, keys, chunkBytes, 11);
            assertEquals(8, b.server().counters().get(CountersDescriptor.L2_FETCH_HITS));
            assertEquals(0, b.server().counters().get(CountersDescriptor.L2_CORRUPT_VALUES));
            assertEquals(0, b.server().counters().get(CountersDescriptor.L2_WRITES), "fetched chunks are not written back");

            assertEquals(Status.OK, ca.clear(false).status());
            assertEquals(0, ca.lookup(1, keys, false).hitChunks());
            awaitHits(ca, 1, keys, 8);
            verify(ca, 1, keys, chunkBytes, 11);
            assertEquals(8, a.server().counters().get(CountersDescriptor.L2_WRITES), "each chunk written once");
        }
    }

    @Test
    @Order(2)
    void shouldCountAGarbageValueAsAMissAndNeverServeIt() throws Exception
    {
        try (TieredServer a = launch("a"); TieredServer b = launch("b");
            KvStashClient ca = connect(a); KvStashClient cb = connect(b))
        {
            awaitUp(a);
            awaitUp(b);
            final ChunkKeys keys = keys(4);
            register(ca, 1, LAYOUT);
            register(cb, 2, LAYOUT);
            final int chunkBytes = store(ca, 1, keys, 12);
            await(() -> a.server().counters().get(CountersDescriptor.L2_WRITES) >= 4, "host A wrote its chunks through");
            final String key = new String(L2Keys.key(LAYOUT, keys.salt(), keys.hi(2), keys.lo(2)),
                StandardCharsets.US_ASCII);
            assertEquals("OK", CLUSTER.cluster().cli("SET", key, "garbage that is no chunk"));

            cb.lookup(2, keys, false);
            awaitHits(cb, 2, keys, 2);
            await(() -> b.server().counters().get(CountersDescriptor.L2_CORRUPT_VALUES) >= 1, "the garbage value was counted");
            Thread.sleep(3 * TIMEOUT_MS);
            assertEquals(2, cb.lookup(2, keys, false).hitChunks(), "the chunk behind the garbage is never served");
            verify(cb, 2, keys.range(0, 2), chunkBytes, 12);
        }
    }

    @Test
    @Order(3)
    void shouldKeepServingWhenTheClusterIsDownAndResumeWhenItIsBack() throws Exception
    {
        try (TieredServer a = launch("a"); TieredServer b = launch("b");
            KvStashClient ca = connect(a); KvStashClient cb = connect(b))
        {
            awaitUp(a);
            awaitUp(b);
            register(ca, 1, LAYOUT);
            register(cb, 2, LAYOUT);
            CLUSTER.cluster().stopAll();
            try
            {
                for (int round = 0; round < 5; round++)
                {
                    final ChunkKeys keys = keys(4);
                    final long startNs = System.nanoTime();
                    final int chunkBytes = store(ca, 1, keys, 20 + round);
                    assertEquals(4, ca.lookup(1, keys, false).hitChunks());
                    cb.lookup(2, keys, false); // a miss: its read-through fails in the background
                    verify(ca, 1, keys, chunkBytes, 20 + round);
                    final long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs);
                    assertTrue(tookMs < TIMEOUT_MS, "pool requests took " + tookMs + " ms with the cluster down");
                    Thread.sleep(200);
                }
                await(() -> L2Tier.STATE_DOWN == a.tier().state(), "host A's tier went down");
                assertTrue(a.server().counters().get(CountersDescriptor.L2_WRITE_ERRORS) > 0);
                assertTrue(a.server().counters().get(CountersDescriptor.L2_ERRORS) + a.server().counters().get(CountersDescriptor.L2_TIMEOUTS) > 0);
            }
            finally
            {
                CLUSTER.cluster().restart();
            }
            awaitUp(a);
            awaitUp(b);
            final long written = a.server().counters().get(CountersDescriptor.L2_WRITES);
            final ChunkKeys keys = keys(4);
            final int chunkBytes = store(ca, 1, keys, 30);
            await(() -> a.server().counters().get(CountersDescriptor.L2_WRITES) >= written + 4, "host A writes again");
            cb.lookup(2, keys, false);
            awaitHits(cb, 2, keys, 4);
            verify(cb, 2, keys, chunkBytes, 30);
        }
    }

    // ------------------------------------------------------------------------------------------ helpers

    private TieredServer launch(final String host) throws Exception
    {
        return L2Hosts.launch(temp.resolve(host), CLUSTER.cluster(), POOL_BYTES, TIMEOUT_MS);
    }

    private static void awaitHits(final KvStashClient client, final long instance, final ChunkKeys keys, final int hits)
        throws InterruptedException
    {
        await(() -> client.lookup(instance, keys, false).hitChunks() >= hits, hits + " chunks readable");
    }
}
