package io.kvstash.l2;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.server.ServerContext;
import io.kvstash.testkit.RedisCluster;
import io.kvstash.tier.L2Tier;
import io.kvstash.tier.TierContext;
import io.kvstash.tier.TieredServer;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Helpers of the second tier's tests: servers standing for hosts on one cluster, chunks stored and verified
 * through a worker's client, the cluster's own statistics.
 */
final class L2Hosts
{
    private L2Hosts()
    {
    }

    static TieredServer launch(
        final Path directory, final RedisCluster cluster, final long poolBytes, final long timeoutMs) throws Exception
    {
        return TieredServer.launch(new ServerContext()
            .directory(directory)
            .storeContext(new StoreContext().poolSizeBytes(poolBytes)),
            new TierContext().seeds(cluster.seeds()).timeoutMs(timeoutMs));
    }

    static KvStashClient connect(final TieredServer server)
    {
        return KvStashClient.connect(new ClientContext().directory(server.server().directory()).pretouchPool(false));
    }

    static void register(final KvStashClient client, final long instance, final Layout layout)
    {
        assertEquals(Status.OK, client.register(instance, layout).status());
    }

    static ChunkKeys keys(final int count)
    {
        final long base = new SplittableRandom().nextLong() & 0x0FFF_FFFF_FFFF_FFFFL;
        final long[] ids = new long[count];
        for (int i = 0; i < count; i++)
        {
            ids[i] = base + i;
        }
        return ChunkKeys.ofIds(ids);
    }

    static byte[] pattern(final int chunkBytes, final long seed, final int chunk)
    {
        final byte[] bytes = new byte[chunkBytes];
        new SplittableRandom(seed * 1_000_003L + chunk).nextBytes(bytes);
        return bytes;
    }

    /**
     * Stores a range as a worker does, each chunk's bytes a pattern of the seed and its index.
     *
     * @return chunk bytes.
     */
    static int store(final KvStashClient client, final long instance, final ChunkKeys keys, final long seed)
    {
        final ClientResponse r = client.prepareStore(instance, keys);
        assertEquals(Status.OK, r.status(), r.toString());
        final int chunkBytes = (int)r.chunkBytes();
        final long transfer = r.transferId();
        final int slots = r.slotCount();
        assertEquals(keys.count(), slots);
        final int[] chunks = new int[slots];
        for (int i = 0; i < slots; i++)
        {
            chunks[i] = r.slotRangeIndex(i);
        }
        for (int i = 0; i < slots; i++)
        {
            client.chunks().writeChunk(instance, r, i, new UnsafeBuffer(pattern(chunkBytes, seed, chunks[i])), 0);
        }
        assertEquals(Status.OK, client.commitStore(instance, transfer).status());
        return chunkBytes;
    }

    /**
     * Reads a range back and checks every chunk's bytes.
     */
    static void verify(
        final KvStashClient client, final long instance, final ChunkKeys keys, final int chunkBytes, final long seed)
    {
        verify(client, instance, keys, chunkBytes, seed, 0);
    }

    /**
     * Reads a range back and checks every chunk's bytes, the range's first chunk being chunk {@code first} of the
     * range that was stored.
     */
    static void verify(
        final KvStashClient client,
        final long instance,
        final ChunkKeys keys,
        final int chunkBytes,
        final long seed,
        final int first)
    {
        final ClientResponse r = client.prepareRetrieve(instance, keys);
        assertEquals(Status.OK, r.status(), r.toString());
        final long transfer = r.transferId();
        final int slots = r.slotCount();
        final int[] chunks = new int[slots];
        for (int i = 0; i < slots; i++)
        {
            chunks[i] = r.slotRangeIndex(i);
        }
        final byte[] read = new byte[chunkBytes];
        for (int i = 0; i < slots; i++)
        {
            client.chunks().readChunk(instance, r, i, new UnsafeBuffer(read), 0);
            assertArrayEquals(pattern(chunkBytes, seed, first + chunks[i]), read, "chunk " + (first + chunks[i]));
        }
        assertEquals(Status.OK, client.commitRetrieve(instance, transfer).status());
    }

    static void awaitUp(final TieredServer server) throws InterruptedException
    {
        await(() -> L2Tier.STATE_UP == server.tier().state(), "the tier is up");
    }

    static void await(final BooleanSupplier condition, final String what) throws InterruptedException
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!condition.getAsBoolean())
        {
            if (System.nanoTime() - deadline > 0)
            {
                throw new AssertionError("timed out waiting until " + what);
            }
            Thread.sleep(20);
        }
    }

    /**
     * Sums one field of {@code INFO <section>} over every node, e.g. {@code evicted_keys} or the count of
     * {@code errorstat_OOM}.
     */
    static long sumInfo(final RedisCluster cluster, final String section, final String field)
        throws IOException, InterruptedException
    {
        long sum = 0;
        for (int node = 0; node < RedisCluster.NODES; node++)
        {
            for (final String line : cluster.nodeCli(node, "INFO", section).split("\n"))
            {
                final String l = line.trim();
                if (l.startsWith(field + ":"))
                {
                    final String v = l.substring(field.length() + 1);
                    final int count = v.indexOf("count=");
                    final int calls = v.indexOf("calls=");
                    final int at = count >= 0 ? count + 6 : calls >= 0 ? calls + 6 : 0;
                    int end = at;
                    while (end < v.length() && Character.isDigit(v.charAt(end)))
                    {
                        end++;
                    }
                    sum += Long.parseLong(v.substring(at, end));
                }
            }
        }
        return sum;
    }

    /**
     * Empties every master (replicas follow; they refuse the command themselves).
     */
    static void flushAll(final RedisCluster cluster) throws InterruptedException
    {
        for (int node = 0; node < RedisCluster.NODES; node++)
        {
            try
            {
                cluster.nodeCli(node, "FLUSHALL");
            }
            catch (final IOException replica)
            {
                // A replica answers READONLY; its master's flush reaches it.
            }
        }
    }
}
