package io.kvstash.chaos;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreCounters;
import io.kvstash.server.KvStashServer;
import io.kvstash.tier.L2Keys;
import io.kvstash.testkit.ChunkSeal;
import io.kvstash.testkit.LoadWorker;
import io.kvstash.testkit.RedisCluster;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Layout;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import static io.kvstash.chaos.ChaosRunner.CHUNK_BYTES;

/**
 * The corruption step of the second tier suite. Host A stores two probe prefixes of sealed chunks (ids of their
 * own, which no worker stores) and writes them through; then, in the cluster, the value of one chunk of the first
 * prefix is overwritten with garbage over its payload (its header left intact, so only the payload's checksum can
 * tell) and the value of one chunk of the second is truncated. Every worker then reads the probe prefixes too; a
 * worker of host B (which never held a good copy) that is ever served a corrupted chunk says so. After the load,
 * {@link #check} asks host B for each corrupted chunk alone: the tier must count the value as corrupt and never
 * make the chunk readable.
 */
final class L2Corruption
{
    /** First id of the probe prefixes: far from the workers' key space. */
    static final long PROBE_BASE = 1L << 40;
    /** Chunks of each probe prefix. */
    static final int PROBE_LENGTH = 4;
    /** The corrupted chunk's place in each probe prefix (the chunk before it reads through intact). */
    static final int BAD_INDEX = 1;
    /** Probe prefixes: one with a garbage value, one with a truncated value. */
    static final int PROBES = 2;
    /** Bytes a truncated value keeps. */
    static final int TRUNCATED_LENGTH = 1_000;

    private static final long INSTANCE = 900;
    private static final String TRUNCATE_SCRIPT =
        "return redis.call('SET', KEYS[1], string.sub(redis.call('GET', KEYS[1]), 1, tonumber(ARGV[1])))";

    private final RedisCluster cluster;
    private final Layout layout = LoadWorker.layout(CHUNK_BYTES);

    L2Corruption(final RedisCluster cluster)
    {
        this.cluster = cluster;
    }

    /**
     * The first id of a probe prefix.
     *
     * @param probe 0 to {@link #PROBES} - 1.
     * @return id.
     */
    static long first(final int probe)
    {
        return PROBE_BASE + (long)probe * PROBE_LENGTH;
    }

    /**
     * The id of a probe prefix's corrupted chunk.
     *
     * @param probe 0 to {@link #PROBES} - 1.
     * @return id.
     */
    static long bad(final int probe)
    {
        return first(probe) + BAD_INDEX;
    }

    /**
     * The tier's key of a chunk of the suite's layout (salt 0).
     *
     * @param id chunk id.
     * @return the key as redis-cli takes it.
     */
    String key(final long id)
    {
        return new String(L2Keys.key(layout, 0, 0, id), StandardCharsets.US_ASCII);
    }

    /**
     * Stores the probe prefixes on host A, waits until the cluster holds every chunk of them, then corrupts one
     * chunk of each in the cluster.
     *
     * @param hostA     host A's server.
     * @param timeoutMs longest wait for the write-through.
     * @throws IOException          when the cluster does not get the chunks or refuses a corruption.
     * @throws InterruptedException when interrupted.
     */
    void storeAndCorrupt(final KvStashServer hostA, final long timeoutMs) throws IOException, InterruptedException
    {
        try (KvStashClient client = connect(hostA))
        {
            ChaosRunner.check(client.register(INSTANCE, layout));
            final ChunkSeal seal = new ChunkSeal(CHUNK_BYTES);
            final long deadline = System.currentTimeMillis() + timeoutMs;
            long nextStore = 0;
            while (!allInCluster())
            {
                if (System.currentTimeMillis() > deadline)
                {
                    throw new IOException("host A did not write the probe chunks through in " + timeoutMs + " ms");
                }
                if (System.currentTimeMillis() >= nextStore)
                {
                    // Again every 2 s: a chunk evicted before the tier read it is not written through.
                    for (int probe = 0; probe < PROBES; probe++)
                    {
                        store(client, seal, first(probe));
                    }
                    nextStore = System.currentTimeMillis() + 2_000;
                }
                Thread.sleep(50);
            }
            client.unregister(INSTANCE);
        }
        final String garbageKey = key(bad(0));
        final long length = Long.parseLong(cluster.cli("STRLEN", garbageKey));
        cluster.cli("SETRANGE", garbageKey, "100", "garbage!".repeat(32));
        expectLength(garbageKey, length);
        final String truncatedKey = key(bad(1));
        cluster.cli("EVAL", TRUNCATE_SCRIPT, "1", truncatedKey, Integer.toString(TRUNCATED_LENGTH));
        expectLength(truncatedKey, TRUNCATED_LENGTH);
    }

    /**
     * Asks host B for each corrupted chunk alone (a LOOKUP from it, so the tier's read-through starts there) and
     * waits until host B's tier has counted one more corrupt value each time.
     *
     * @param hostB host B's server, with no other load.
     * @return {chunks whose corrupt value host B counted, chunks host B ever reported readable}.
     * @throws InterruptedException when interrupted.
     */
    long[] check(final KvStashServer hostB) throws InterruptedException
    {
        long counted = 0;
        long served = 0;
        awaitQuiet(hostB);
        try (KvStashClient client = connect(hostB))
        {
            ChaosRunner.check(client.register(INSTANCE, layout));
            for (int probe = 0; probe < PROBES; probe++)
            {
                final ChunkKeys keys = LoadWorker.ids(bad(probe), PROBE_LENGTH - BAD_INDEX);
                final long before = hostB.counters().get(CountersDescriptor.L2_CORRUPT_VALUES);
                final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                boolean seen = false;
                while (!seen && System.nanoTime() - deadline < 0)
                {
                    final ClientResponse r = client.lookup(INSTANCE, keys, false);
                    served += r.isOk() && r.hitChunks() > 0 ? 1 : 0;
                    Thread.sleep(200);
                    seen = hostB.counters().get(CountersDescriptor.L2_CORRUPT_VALUES) > before;
                }
                final ClientResponse after = client.lookup(INSTANCE, keys, false);
                served += after.isOk() && after.hitChunks() > 0 ? 1 : 0;
                counted += seen ? 1 : 0;
            }
            client.unregister(INSTANCE);
        }
        return new long[]{ counted, served };
    }

    /**
     * Waits until the read-throughs the workers left queued are done: host B's corrupt-value count has not
     * changed for a second (at most 10 s), so what {@link #check} sees next is its own.
     */
    private static void awaitQuiet(final KvStashServer server) throws InterruptedException
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        long last = -1;
        long quietSince = System.nanoTime();
        while (System.nanoTime() - deadline < 0 && System.nanoTime() - quietSince < TimeUnit.SECONDS.toNanos(1))
        {
            final StoreCounters c = server.counters();
            final long now = c.get(CountersDescriptor.L2_CORRUPT_VALUES) + c.get(CountersDescriptor.L2_FETCH_HITS) +
                c.get(CountersDescriptor.L2_FETCH_MISSES);
            if (now != last)
            {
                last = now;
                quietSince = System.nanoTime();
            }
            Thread.sleep(50);
        }
    }

    private boolean allInCluster() throws IOException, InterruptedException
    {
        for (int probe = 0; probe < PROBES; probe++)
        {
            for (int i = 0; i < PROBE_LENGTH; i++)
            {
                if (!"1".equals(cluster.cli("EXISTS", key(first(probe) + i))))
                {
                    return false;
                }
            }
        }
        return true;
    }

    private void store(final KvStashClient client, final ChunkSeal seal, final long first)
    {
        final ClientResponse r = client.prepareStore(INSTANCE, LoadWorker.ids(first, PROBE_LENGTH));
        if (Status.OK != r.status() || 0 == r.transferId())
        {
            return; // every chunk already held, or no space this instant: the next round tries again
        }
        final long transfer = r.transferId();
        final int slots = r.slotCount();
        final int[] rangeIndex = new int[slots];
        for (int i = 0; i < slots; i++)
        {
            rangeIndex[i] = r.slotRangeIndex(i);
        }
        for (int i = 0; i < slots; i++)
        {
            client.chunks().writeChunk(INSTANCE, r, i, 0, CHUNK_BYTES, seal.seal(0, first + rangeIndex[i], 0, 0), 0);
        }
        client.commitStore(INSTANCE, transfer);
    }

    private void expectLength(final String key, final long length) throws IOException, InterruptedException
    {
        final long now = Long.parseLong(cluster.cli("STRLEN", key));
        if (now != length)
        {
            throw new IOException("the corrupted value of " + key + " holds " + now + " bytes, not " + length);
        }
    }

    private static KvStashClient connect(final KvStashServer server)
    {
        return KvStashClient.connect(new ClientContext().directory(server.directory()).pretouchPool(false));
    }
}
