package io.kvstash.cli;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code replay} end to end: the coordinator runs in process, the server is embedded, the workers are real
 * JVM processes that write and read every chunk through the mapped pool.
 */
@Timeout(120)
class ReplayCommandTest
{
    @TempDir
    Path temp;

    Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @ParameterizedTest
    @CsvSource({ "1024, 10219", "4096, 28871", "16384, 64724" })
    void shouldReproduceTheExactLruHitCountsWhenOneWorkerReplaysTheBundledTraceInFileOrder(
        final int capacityChunks, final long expectedHits)
    {
        final Cli cli = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--capacity-chunks",
            String.valueOf(capacityChunks), "--workers", "1", "--json");
        assertEquals(0, cli.exitCode, cli.toString());
        final Map<String, Object> json = cli.json();
        assertEquals(3993L, json.get("requests"));
        assertEquals(121877L, json.get("chunks"));
        assertEquals(expectedHits, json.get("hit_chunks"), cli.out);
        assertEquals((long)capacityChunks, ((Number)json.get("capacity_chunks")).longValue());
        assertEquals(expectedHits, json.get("reference_hit_chunks_at_capacity"));
        assertEquals(expectedHits, json.get("lru_hit_chunks"));
        assertEquals(0L, json.get("checksum_mismatches"));
        assertEquals(expectedHits, json.get("retrieved_chunks"));
        assertEquals(0L, json.get("no_space"));
        assertEquals(0L, json.get("other_errors"));
        assertEquals(0L, json.get("fence_failures"));
        assertTrue(((Number)json.get("evictions")).longValue() > 0);
        for (final String field : List.of("hit_rate", "gbps", "p50_us", "p99_us", "p999_us", "workers"))
        {
            assertTrue(json.containsKey(field), field);
        }
        assertEquals(1L, json.get("workers"));
    }

    @Test
    void shouldReadEveryChunkBackIntactWhenTwoWorkersReplayConcurrently()
    {
        final Cli cli = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--capacity-chunks", "4096",
            "--payload-bytes", "8k", "--workers", "2", "--json");
        assertEquals(0, cli.exitCode, cli.toString());
        final Map<String, Object> json = cli.json();
        assertEquals(2L, json.get("workers"));
        assertEquals(3993L, json.get("requests"));
        assertEquals(121877L, json.get("chunks"));
        assertEquals(0L, json.get("checksum_mismatches"));
        assertEquals(0L, json.get("fence_failures"));
        final long retrieved = ((Number)json.get("retrieved_chunks")).longValue();
        assertTrue(retrieved > 10_000, cli.out);
        assertEquals(retrieved * 8192, ((Number)json.get("bytes_read")).longValue());
        assertTrue(cli.err.contains("replay: "), "progress on standard error: " + cli.err);
    }

    @Test
    void shouldReadEveryChunkBackIntactWhenWorkersUseTheCopyTransport() throws Exception
    {
        final Path trace = temp.resolve("head.jsonl");
        Files.write(trace, Files.readAllLines(Cli.TRACE).subList(0, 600));
        final Path hlog = temp.resolve("replay.hlog");
        final Cli cli = Cli.run("replay", "--trace", trace.toString(), "--capacity-chunks", "2048",
            "--payload-bytes", "40k", "--workers", "2", "--copy-transport", "--json", "--hlog", hlog.toString());
        assertEquals(0, cli.exitCode, cli.toString());
        final Map<String, Object> json = cli.json();
        assertEquals(600L, json.get("requests"));
        assertEquals(0L, json.get("checksum_mismatches"));
        assertTrue(((Number)json.get("retrieved_chunks")).longValue() > 0, cli.out);
        assertEquals(json.get("hit_chunks"), json.get("retrieved_chunks"), cli.out);
        assertFalse(json.containsKey("reference_hit_chunks"), "not the bundled trace");

        // The interval log holds the workers' end-to-end latency of every request and the server's by type.
        final Cli latency = Cli.run("latency", "--json", hlog.toString());
        assertEquals(0, latency.exitCode, latency.toString());
        final Map<?, ?> tags = (Map<?, ?>)latency.json().get("latency_us");
        assertEquals(600L, ((Map<?, ?>)tags.get("client.request")).get("count"), tags.toString());
        assertEquals(600L, ((Map<?, ?>)tags.get("client.lookup")).get("count"), tags.toString());
        assertTrue(((Number)((Map<?, ?>)tags.get("type.LOOKUP")).get("count")).longValue() > 0, tags.toString());
        try (Stream<Path> left = Files.list(temp))
        {
            assertEquals(List.of(hlog), left.filter((f) -> f.toString().endsWith(".hlog")).collect(Collectors.toList()),
                "the server's own log is gone");
        }
    }

    @Test
    void shouldPrintAHumanReportWithTheReferenceWhenNotJson()
    {
        final Cli cli = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--capacity-chunks", "1024");
        assertEquals(0, cli.exitCode, cli.toString());
        assertTrue(cli.out.contains("10,219 hits"), cli.out);
        assertTrue(cli.out.contains("identical to the reference"), cli.out);
        assertTrue(cli.out.contains("client latency (us)"), cli.out);
    }

    @Test
    void shouldFailWithUsageWhenPoolSizeAndCapacityAreBothGiven()
    {
        final Cli cli = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--pool-size", "1g",
            "--capacity-chunks", "10");
        assertEquals(2, cli.exitCode, cli.toString());
        assertTrue(cli.err.contains("mutually exclusive"), cli.err);
    }

    @Test
    void shouldWarnLikeServeWhenItsServerWouldSpinMoreThreadsThanTheCoresAllow()
    {
        // the warning comes before the trace is read: a missing trace ends the run right after it
        final Cli cli = Cli.run("replay", "--trace", "/no/such/trace.jsonl", "--threading", "dedicated",
            "--wait", "busy-spin");
        final boolean expected = null != ServeCommand.spinWarning(
            ThreadingMode.DEDICATED, WaitMode.BUSY_SPIN, Runtime.getRuntime().availableProcessors());
        assertEquals(expected, cli.err.contains("warning: --threading dedicated --wait busy-spin"), cli.toString());
        assertTrue(cli.err.contains("no such file"), cli.toString());
        assertFalse(Cli.run("replay", "--trace", "/no/such/trace.jsonl").err.contains("warning"));
    }

    @Test
    void shouldFailWithUsageWhenThePayloadIsNotAMultipleOfTheChunkTokens()
    {
        final Cli cli = Cli.run("replay", "--trace", Cli.TRACE.toString(), "--payload-bytes", "1000");
        assertEquals(2, cli.exitCode, cli.toString());
        assertTrue(cli.err.contains("not a multiple"), cli.err);
    }

    @Test
    void shouldFailWithAClearMessageWhenTheTraceIsMissing()
    {
        final Cli cli = Cli.run("replay", "--trace", temp.resolve("absent.jsonl").toString());
        assertEquals(1, cli.exitCode, cli.toString());
        assertTrue(cli.err.contains("absent.jsonl"), cli.err);
    }

    @Test
    void shouldReproduceEveryResponseWhenReplayingACapturedJournal() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-journal-");
        final Path journal = temp.resolve("capture.journal");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .storeContext(new StoreContext().poolSizeBytes(8L << 20).chunkTokens(16));
        context.pipelineContext().journalFile(journal);
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertEquals(Status.OK, client.register(7, Layout.of("m", 1, 0, 2, 8, Dtype.FLOAT16, false)).status());
            for (int round = 0; round < 20; round++)
            {
                final ChunkKeys keys = ChunkKeys.ofIds(round, round + 1, round + 2);
                ClientResponse r = client.lookup(7, keys, false);
                r = client.prepareStore(7, keys.range(r.hitChunks(), keys.count()));
                if (0 != r.transferId())
                {
                    assertEquals(Status.OK, client.commitStore(7, r.transferId()).status());
                }
            }
            assertTrue(server.awaitDrained(5000));
        }

        final Cli differentPool = Cli.run("replay", "--format", "kvstash", "--trace", journal.toString(),
            "--pool-size", "16m");
        assertEquals(2, differentPool.exitCode, differentPool.toString());
        assertTrue(differentPool.err.contains("--pool-size does not apply"), differentPool.err);

        // No store options: the journal's header says how it was captured.
        final Cli cli = Cli.run("replay", "--format", "kvstash", "--trace", journal.toString(), "--json");
        assertEquals(0, cli.exitCode, cli.toString());
        final Map<String, Object> json = cli.json();
        assertEquals(Boolean.TRUE, json.get("identical"), cli.out);
        assertEquals(0L, json.get("mismatches"));
        assertTrue(((Number)json.get("records")).longValue() >= 60, cli.out);
    }
}
