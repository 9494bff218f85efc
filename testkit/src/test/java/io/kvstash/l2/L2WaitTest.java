package io.kvstash.l2;

import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.server.ServerContext;
import io.kvstash.testkit.RedisClusterExtension;
import io.kvstash.tier.TierContext;
import io.kvstash.tier.TieredServer;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

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
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A LOOKUP that waits for the second tier's read-through, against a real Redis Cluster and two servers in two
 * directories standing for two hosts (as {@link L2TierTest}). No mocks.
 */
@Timeout(180)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class L2WaitTest
{
    private static final long POOL_BYTES = 64L << 20;
    private static final long TIMEOUT_MS = 500;
    private static final long BOUND_NS = TimeUnit.SECONDS.toNanos(20);
    private static final Layout LAYOUT = Layout.of("l2-wait-model", 1, 0, 2, 64, Dtype.FLOAT16, false);
    @RegisterExtension
    static final RedisClusterExtension CLUSTER = new RedisClusterExtension();

    @TempDir
    Path temp;

    @Test
    @Order(1)
    void shouldAnswerAnotherHostsChunksInOneWaitingLookup() throws Exception
    {
        try (TieredServer a = launch("a", true); TieredServer b = launch("b", true);
            KvStashClient ca = connect(a); KvStashClient cb = connect(b))
        {
            awaitUp(a);
            awaitUp(b);
            assertTrue(cb.secondTier(), "the control file says the tier is on");
            register(ca, 1, LAYOUT);
            register(cb, 2, LAYOUT);
            final ChunkKeys keys = keys(8);
            final int chunkBytes = store(ca, 1, keys, 11);
            await(() -> a.server().counters().get(CountersDescriptor.L2_WRITES) >= 8, "host A wrote its chunks through");

            final ClientResponse r = cb.lookupWaitingForTier(2, keys, false, BOUND_NS);
            assertEquals(Status.OK, r.status(), r.toString());
            assertEquals(8, r.hitChunks(), "every chunk of host A in the one call");
            assertTrue(r.hasTierTickets());
            assertEquals(0, r.transferId());
            verify(cb, 2, keys, chunkBytes, 11);
            assertEquals(8, b.server().counters().get(CountersDescriptor.L2_FETCH_HITS));
        }
    }

    @Test
    @Order(2)
    void shouldHoldOnlyTheLeaseOfTheAnswerReturnedWhenAPinnedLookupWaits() throws Exception
    {
        try (TieredServer a = launch("a", true); TieredServer b = launch("b", true);
            KvStashClient ca = connect(a); KvStashClient cb = connect(b))
        {
            awaitUp(a);
            awaitUp(b);
            register(ca, 1, LAYOUT);
            register(cb, 2, LAYOUT);
            final ChunkKeys keys = keys(6);
            final int chunkBytes = store(ca, 1, keys, 12);
            await(() -> a.server().counters().get(CountersDescriptor.L2_WRITES) >= 6, "host A wrote its chunks through");
            store(cb, 2, keys.range(0, 2), 12); // host B holds the first two itself: its first answer pins them
            assertEquals(0, pendingTransfers(cb, b));
            final int releases = CountersDescriptor.requestId(RequestType.RELEASE, Status.OK);
            final long releasedBefore = b.server().counters().get(releases);
            final int lookupsOk = CountersDescriptor.requestId(RequestType.LOOKUP, Status.OK);
            final long lookupsBefore = b.server().counters().get(lookupsOk);

            final ClientResponse r = cb.lookupWaitingForTier(2, keys, true, BOUND_NS);
            assertEquals(Status.OK, r.status(), r.toString());
            assertEquals(6, r.hitChunks());
            final long lease = r.transferId();
            assertNotEquals(0, lease);
            cb.ping(); // (the answer object is the client's: read before the next call)
            assertEquals(lookupsBefore + 2, b.server().counters().get(lookupsOk), "the wait watched the completed ticket in " +
                "the control file: the LOOKUP with L2_WAIT and the last one, no polls in between");
            assertEquals(1, pendingTransfers(cb, b), "the first answer's lease was released");
            assertEquals(releasedBefore + 1, b.server().counters().get(releases), "the first answer (2 hits, pinned) waited");

            final ClientResponse retrieve = cb.prepareRetrieveFromLookup(2, lease);
            assertEquals(Status.OK, retrieve.status(), retrieve.toString());
            assertEquals(6, retrieve.slotCount());
            final long transfer = retrieve.transferId();
            final int[] chunks = new int[6];
            for (int i = 0; i < 6; i++)
            {
                chunks[i] = retrieve.slotRangeIndex(i);
            }
            final byte[] read = new byte[chunkBytes];
            for (int i = 0; i < 6; i++)
            {
                cb.chunks().readChunk(2, retrieve, i, new UnsafeBuffer(read), 0);
                assertArrayEquals(pattern(chunkBytes, 12, chunks[i]), read, "chunk " + chunks[i]);
            }
            assertEquals(Status.OK, cb.commitRetrieve(2, transfer).status());
            assertEquals(0, pendingTransfers(cb, b));
        }
    }

    @Test
    @Order(3)
    void shouldReturnWellBeforeTheBoundForKeysNobodyStored() throws Exception
    {
        try (TieredServer b = launch("b", true); KvStashClient cb = connect(b))
        {
            awaitUp(b);
            register(cb, 2, LAYOUT);
            final long fetchMisses = b.server().counters().get(CountersDescriptor.L2_FETCH_MISSES);
            final long startNs = System.nanoTime();
            final ClientResponse r = cb.lookupWaitingForTier(2, keys(4), true, BOUND_NS);
            final long tookNs = System.nanoTime() - startNs;
            assertEquals(Status.OK, r.status(), r.toString());
            assertEquals(0, r.hitChunks());
            assertEquals(0, r.transferId());
            assertTrue(r.tierCompletedTicket() > 0, "the read-through is over: " + r.tierCompletedTicket());
            assertTrue(cb.counter(CountersDescriptor.L2_COMPLETED_TICKET) >= r.tierCompletedTicket(),
                "the control file's gauge has the ticket too");
            assertTrue(tookNs < BOUND_NS / 2, "returned once the read-through found nothing, not at the bound: " +
                TimeUnit.NANOSECONDS.toMillis(tookNs) + " ms");
            assertTrue(b.server().counters().get(CountersDescriptor.L2_FETCH_MISSES) > fetchMisses);
            assertEquals(0, pendingTransfers(cb, b));
        }
    }

    @Test
    @Order(4)
    void shouldAskOncePlainlyWithoutATier() throws Exception
    {
        try (TieredServer plain = launch("plain", false); KvStashClient c = connect(plain))
        {
            assertFalse(c.secondTier());
            register(c, 3, LAYOUT);
            final ChunkKeys keys = keys(4);
            final int lookupsOk = CountersDescriptor.requestId(RequestType.LOOKUP, Status.OK);
            final long before = plain.server().counters().get(lookupsOk);
            final ClientResponse r = c.lookupWaitingForTier(3, keys, false, BOUND_NS);
            assertEquals(Status.OK, r.status());
            assertEquals(0, r.hitChunks());
            assertEquals(0, r.extraLength());
            assertFalse(r.hasTierTickets());
            c.ping();
            assertEquals(before + 1, plain.server().counters().get(lookupsOk), "exactly one LOOKUP");

            // The flag itself, sent to a server without a tier: the plain answer.
            final ClientResponse waited = c.await(c.requests().sendKeyed(RequestType.LOOKUP, 3, keys, RequestFlags.L2_WAIT));
            assertEquals(Status.OK, waited.status());
            assertEquals(0, waited.extraLength());
        }
    }

    @Test
    @Order(5)
    void shouldRefuseTheTierFlagsOnEveryOtherRequest() throws Exception
    {
        try (TieredServer b = launch("b", true); KvStashClient cb = connect(b))
        {
            register(cb, 2, LAYOUT);
            final ChunkKeys keys = keys(2);
            for (final int flag : new int[]{ RequestFlags.L2_WAIT, RequestFlags.L2_POLL })
            {
                assertEquals(Status.INVALID_REQUEST,
                    cb.await(cb.requests().sendKeyed(RequestType.PREPARE_STORE, 2, keys, flag)).status());
                assertEquals(Status.INVALID_REQUEST,
                    cb.await(cb.requests().sendKeyed(RequestType.PREPARE_RETRIEVE, 2, keys, flag)).status());
                assertEquals(Status.INVALID_REQUEST, cb.await(cb.requests().sendSimple(RequestType.PING, 0, 0, flag)).status());
                assertEquals(Status.INVALID_REQUEST, cb.await(cb.requests().sendSimple(RequestType.CLEAR, 0, 0, flag)).status());
            }
            assertEquals(Status.INVALID_REQUEST, cb.await(cb.requests().sendKeyed(
                RequestType.LOOKUP, 2, keys, RequestFlags.L2_WAIT | RequestFlags.L2_POLL)).status());
            final ClientResponse poll = cb.await(cb.requests().sendKeyed(RequestType.LOOKUP, 2, keys, RequestFlags.L2_POLL));
            assertEquals(Status.OK, poll.status());
            assertTrue(poll.hasTierTickets());
            assertEquals(0, poll.tierTicket(), "a poll starts no read-through");
        }
    }

    @Test
    @Order(6)
    void shouldReturnWithinTheBoundWithTheClusterStopped() throws Exception
    {
        try (TieredServer b = launch("b", true); KvStashClient cb = connect(b))
        {
            awaitUp(b);
            register(cb, 2, LAYOUT);
            CLUSTER.cluster().stopAll();
            try
            {
                final long boundNs = TimeUnit.SECONDS.toNanos(2);
                for (int round = 0; round < 6; round++)
                {
                    final long startNs = System.nanoTime();
                    final ClientResponse r = cb.lookupWaitingForTier(2, keys(4), round % 2 == 0, boundNs);
                    final long tookNs = System.nanoTime() - startNs;
                    assertEquals(Status.OK, r.status(), r.toString());
                    assertEquals(0, r.hitChunks());
                    // The bound, plus the one LOOKUP and pause that may straddle it.
                    assertTrue(tookNs < boundNs + TimeUnit.MILLISECONDS.toNanos(500),
                        "round " + round + " took " + TimeUnit.NANOSECONDS.toMillis(tookNs) + " ms");
                }
                assertEquals(0, pendingTransfers(cb, b));
            }
            finally
            {
                CLUSTER.cluster().restart();
            }
        }
    }

    // ------------------------------------------------------------------------------------------ helpers

    private TieredServer launch(final String host, final boolean tier) throws Exception
    {
        final ServerContext context = new ServerContext()
            .directory(temp.resolve(host))
            .storeContext(new StoreContext().poolSizeBytes(POOL_BYTES));
        return TieredServer.launch(context,
            tier ? new TierContext().seeds(CLUSTER.cluster().seeds()).timeoutMs(TIMEOUT_MS) : null);
    }

    private static long pendingTransfers(final KvStashClient client, final TieredServer server)
    {
        client.ping(); // the gauges are updated just after each answer, and before a later PING's
        return server.server().counters().get(CountersDescriptor.PENDING_TRANSFERS);
    }
}
