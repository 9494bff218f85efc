package io.kvstash.l2;

import io.kvstash.cli.KvStashCommand;
import io.kvstash.client.KvStashClient;
import io.kvstash.testkit.RedisClusterExtension;
import io.kvstash.tier.L2Keys;
import io.kvstash.tier.L2Tier;
import io.kvstash.tier.TieredServer;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

import static io.kvstash.l2.L2Hosts.await;
import static io.kvstash.l2.L2Hosts.awaitUp;
import static io.kvstash.l2.L2Hosts.keys;
import static io.kvstash.l2.L2Hosts.store;
import static io.kvstash.l2.L2Hosts.verify;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A cluster smaller than what the hosts write, against a real Redis Cluster sized with {@code maxmemory}: under
 * {@code noeviction} the cluster refuses writes once full (error replies), which the tier counts while it stays up
 * and the pool serves as ever; under {@code allkeys-lru}, the configuration the operator docs give, writes keep
 * succeeding as the least recently used values go.
 */
@Timeout(300)
class L2CapacityTest
{
    private static final long POOL_BYTES = 128L << 20;
    private static final long TIMEOUT_MS = 2_000;
    private static final long NODE_MAX_MEMORY = 8L << 20;
    private static final int CHUNKS = 60;
    /** 1 MiB chunks: 2 x 8 layers x 256 tokens x 128 x 2 bytes. */
    private static final Layout LAYOUT = Layout.of("l2-capacity-model", 1, 0, 8, 128, Dtype.FLOAT16, false);
    @RegisterExtension
    static final RedisClusterExtension CLUSTER = new RedisClusterExtension();

    @TempDir
    Path temp;

    @BeforeEach
    void emptyCluster() throws Exception
    {
        CLUSTER.cluster().maxMemory(0, "noeviction");
        L2Hosts.flushAll(CLUSTER.cluster());
    }

    @Test
    void shouldCountRefusedWritesOfAFullClusterAndKeepTheTierUpAndThePoolServing() throws Exception
    {
        try (TieredServer a = L2Hosts.launch(temp.resolve("a"), CLUSTER.cluster(), POOL_BYTES, TIMEOUT_MS);
            KvStashClient ca = L2Hosts.connect(a))
        {
            awaitUp(a);
            L2Hosts.register(ca, 1, LAYOUT);
            CLUSTER.cluster().maxMemory(NODE_MAX_MEMORY, "noeviction");
            final long oomBefore = L2Hosts.sumInfo(CLUSTER.cluster(), "errorstats", "errorstat_OOM");
            final ChunkKeys[] batches = new ChunkKeys[CHUNKS / 10];
            int chunkBytes = 0;
            for (int b = 0; b < batches.length; b++)
            {
                batches[b] = keys(10);
                chunkBytes = store(ca, 1, batches[b], 100 + b);
            }
            assertEquals(1 << 20, chunkBytes);
            await(() -> settled(a) >= CHUNKS, "every chunk was written, skipped or refused");
            for (int b = 0; b < batches.length; b++)
            {
                assertEquals(10, ca.lookup(1, batches[b], false).hitChunks());
                verify(ca, 1, batches[b], chunkBytes, 100 + b);
            }
            final long writes = a.server().counters().get(CountersDescriptor.L2_WRITES);
            final long errors = a.server().counters().get(CountersDescriptor.L2_WRITE_ERRORS);
            assertTrue(writes > 0, "the cluster took chunks until it was full");
            assertTrue(errors > 0, "a full cluster refused chunks");
            assertEquals(CHUNKS, writes + errors + a.server().counters().get(CountersDescriptor.L2_WRITE_SKIPS));
            assertEquals(errors, L2Hosts.sumInfo(CLUSTER.cluster(), "errorstats", "errorstat_OOM") - oomBefore,
                "each write error is one refusal of the cluster: nothing was dropped");
            assertEquals(0, a.server().counters().get(CountersDescriptor.L2_TIMEOUTS));
            assertEquals(L2Tier.STATE_UP, a.tier().state(), "error replies do not take the tier down");
            final String stat = cli("stat", "--dir", a.server().directory().toString());
            assertTrue(stat.contains("  second tier    up; written " + writes + " ("), stat);
            assertTrue(stat.contains("write errors " + errors + ";"), stat);
            assertTrue(stat.matches("(?s).*l2_write_errors +" + errors + "  .*"), stat);

            CLUSTER.cluster().maxMemory(0, "noeviction");
            final ChunkKeys more = keys(4);
            store(ca, 1, more, 200);
            await(() -> a.server().counters().get(CountersDescriptor.L2_WRITES) >= writes + 4, "writes resume with room");
        }
    }

    @Test
    void shouldKeepWritingUnderAllKeysLruAsOlderValuesAreEvicted() throws Exception
    {
        try (TieredServer a = L2Hosts.launch(temp.resolve("a"), CLUSTER.cluster(), POOL_BYTES, TIMEOUT_MS);
            TieredServer b = L2Hosts.launch(temp.resolve("b"), CLUSTER.cluster(), POOL_BYTES, TIMEOUT_MS);
            KvStashClient ca = L2Hosts.connect(a); KvStashClient cb = L2Hosts.connect(b))
        {
            awaitUp(a);
            awaitUp(b);
            L2Hosts.register(ca, 1, LAYOUT);
            L2Hosts.register(cb, 2, LAYOUT);
            CLUSTER.cluster().maxMemory(NODE_MAX_MEMORY, "allkeys-lru");
            final long evictedBefore = L2Hosts.sumInfo(CLUSTER.cluster(), "stats", "evicted_keys");
            ChunkKeys last = null;
            int chunkBytes = 0;
            for (int batch = 0; batch < CHUNKS / 10; batch++)
            {
                last = keys(10);
                chunkBytes = store(ca, 1, last, 300 + batch);
                final long target = 10L * (batch + 1);
                await(() -> a.server().counters().get(CountersDescriptor.L2_WRITES) >= target, "batch written");
            }
            assertEquals(CHUNKS, a.server().counters().get(CountersDescriptor.L2_WRITES));
            assertEquals(0, a.server().counters().get(CountersDescriptor.L2_WRITE_ERRORS));
            assertTrue(L2Hosts.sumInfo(CLUSTER.cluster(), "stats", "evicted_keys") > evictedBefore,
                "the cluster made room by evicting");
            assertEquals(L2Tier.STATE_UP, a.tier().state());

            // Redis's LRU is sampled, so a recent value may go too: host B fetches one the cluster still holds.
            int held = -1;
            for (int i = 9; i >= 0 && held < 0; i--)
            {
                final String key = new String(L2Keys.key(LAYOUT, last.salt(), last.hi(i), last.lo(i)),
                    StandardCharsets.US_ASCII);
                held = "1".equals(CLUSTER.cluster().cli("EXISTS", key)) ? i : -1;
            }
            assertTrue(held >= 0, "the cluster holds some of the newest chunks");
            final ChunkKeys newest = last.range(held, held + 1);
            cb.lookup(2, newest, false);
            await(() -> cb.lookup(2, newest, false).hitChunks() == 1, "host B fetched a newest chunk");
            L2Hosts.verify(cb, 2, newest, chunkBytes, 300 + CHUNKS / 10 - 1, held);
        }
    }

    @Test
    void shouldPrintTheTierSettingsInTheResolvedConfiguration()
    {
        final String config = cli("serve", "--print-config", "--dir", temp.resolve("c").toString(),
            "--l2", CLUSTER.cluster().seeds(), "--l2-timeout", "250ms", "--l2-write", "off");
        assertTrue(config.matches("(?s).*  l2: +" + java.util.regex.Pattern.quote(CLUSTER.cluster().seeds()) +
            "\\n.*"), config);
        assertTrue(config.matches("(?s).*  l2-timeout: +250ms\\n.*"), config);
        assertTrue(config.matches("(?s).*  l2-write: +off\\n.*"), config);
    }

    private static String cli(final String... args)
    {
        final StringWriter out = new StringWriter();
        final CommandLine commandLine = KvStashCommand.newCommandLine();
        commandLine.setOut(new PrintWriter(out, true));
        final int exitCode = commandLine.execute(args);
        assertEquals(0, exitCode, out.toString());
        return out.toString();
    }

    private static long settled(final TieredServer server)
    {
        return server.server().counters().get(CountersDescriptor.L2_WRITES) + server.server().counters().get(CountersDescriptor.L2_WRITE_ERRORS) +
            server.server().counters().get(CountersDescriptor.L2_WRITE_SKIPS);
    }
}
