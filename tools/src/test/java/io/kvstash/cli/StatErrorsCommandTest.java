package io.kvstash.cli;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.server.StartupContext;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.tools.ControlFileReader;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.ControlFileFlyweight;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.IoUtil;
import org.agrona.concurrent.SystemEpochClock;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(60)
class StatErrorsCommandTest
{
    Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldSummariseFirstThenListCountersWhenTheServerRuns() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-stat-");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .storeContext(new StoreContext().poolSizeBytes(8L << 20));
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertEquals(Status.OK, client.register(5, Layout.of("m", 1, 0, 1, 16, Dtype.UINT8, true)).status());
            final ClientResponse r = client.prepareStore(5, ChunkKeys.ofIds(1, 2, 3));
            assertEquals(Status.OK, client.commitStore(5, r.transferId()).status());
            assertTrue(server.awaitDrained(5000));

            final Cli stat = Cli.run("stat", "--dir", dir.toString());
            assertEquals(0, stat.exitCode, stat.toString());
            final String[] lines = stat.out.split("\n");
            assertTrue(lines[0].startsWith("kvstash server: alive, pid " + ProcessHandle.current().pid()), stat.out);
            // The summary first, in the order an operator asks, then the counters.
            final String[] rows = { "uptime", "clients", "pool", "memory", "chunks", "hit ratio", "evictions",
                "bytes in/out", "errors" };
            for (int i = 0; i < rows.length; i++)
            {
                assertTrue(lines[i + 1].startsWith("  " + rows[i] + " "), "row " + rows[i] + " in\n" + stat.out);
            }
            assertTrue(stat.out.contains("incarnation " + Long.toHexString(context.incarnation())), stat.out);
            assertTrue(stat.out.contains("  clients        1 connected"), stat.out);
            assertTrue(stat.out.contains("  chunks         3 readable, 0 being written, 0 pinned; 1 instances"), stat.out);
            assertTrue(stat.out.contains("  hit ratio      no lookups yet"), stat.out);
            assertTrue(stat.out.contains("  errors         none"), stat.out);
            // Prepared before ready (the context's default): committed is the pool.
            assertTrue(stat.out.contains(
                "  memory         8 MiB committed of 8 MiB configured (100.0 %; every page prepared)\n"), stat.out);
            assertTrue(stat.out.contains("  evictions      0 chunks\n"), stat.out);
            assertTrue(stat.out.contains(
                "  config         alignment 4096, chunk tokens 256, lease 30s, eviction lru\n"), stat.out);
            assertTrue(stat.out.matches("(?s).*  pool           8 MiB in pool-\\w+: [0-9.]+ % used \\(3 of [0-9,]+ chunk " +
                "slots\\), about [0-9.]+ MiB free\\n.*"), stat.out);
            assertTrue(stat.out.indexOf("counters (non-zero)") > stat.out.indexOf("  errors "), stat.out);
            assertTrue(stat.out.matches("(?s).*stored_chunks +3  Chunks made readable by COMMIT_STORE\\.\\n.*"),
                stat.out);
            assertTrue(stat.out.contains("requests.commit_store.ok"), stat.out);
            assertTrue(stat.out.contains("Answers to COMMIT_STORE with OK."), stat.out);

            assertEquals(Status.OK, client.lookup(5, ChunkKeys.ofIds(1, 2, 3, 4), false).status());
            assertTrue(server.awaitDrained(5000));
            final Map<?, ?> summary = (Map<?, ?>)Cli.run("stat", "--dir", dir.toString(), "--json").json().get("summary");
            assertEquals(0.75, (Double)summary.get("hit_ratio"), 1e-9);
            assertEquals(8L << 20, summary.get("pool_bytes"));
            assertEquals(3L, summary.get("used_slots"));
            assertEquals(1L, summary.get("clients"));

            final Map<String, Object> json = Cli.run("stat", "--dir", dir.toString(), "--json").json();
            assertEquals("lru", json.get("eviction"));
            final Map<?, ?> counters = (Map<?, ?>)json.get("counters");
            assertEquals(3L, counters.get("readable_chunks"));
            assertEquals(1L, counters.get("instances"));

            final Cli errors = Cli.run("errors", "--dir", dir.toString());
            assertEquals(0, errors.exitCode, errors.toString());
            assertTrue(errors.out.contains("RUNNING, alive): 0 distinct errors"), errors.out);
        }
    }

    @Test
    void shouldLabelEveryNamedCounterInTheControlFileOfAStartedServer() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-labels-");
        try (KvStashServer server = KvStashServer.launch(new ServerContext()
            .directory(dir)
            .storeContext(new StoreContext().poolSizeBytes(8L << 20)));
            ControlFileReader reader = ControlFileReader.open(dir.resolve(ControlFileDescriptor.FILE_NAME)))
        {
            assertTrue(server.awaitDrained(5000));
            assertEquals(CountersDescriptor.COUNT, reader.counterCount());
            withControlFile(dir.resolve(ControlFileDescriptor.FILE_NAME), (controlFile) ->
            {
                assertEquals(CountersDescriptor.COUNT, controlFile.counterLabels().count());
                for (int id = 0; id < CountersDescriptor.COUNT; id++)
                {
                    final String name = CountersDescriptor.name(id);
                    assertEquals(null == name ? "" : name, controlFile.counterLabel(id), "label of counter " + id);
                    assertEquals(name, reader.counterName(id));
                }
            });
        }
    }

    @Test
    void shouldPrintTheNamesTheControlFileLabelsItsCountersWith() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-stat-labels-");
        try (Cli.Child serve = Cli.Child.start("serve", "--dir", dir.toString(), "--pool-size", "8m"))
        {
            serve.awaitLine("kvstash ready:", 30_000);
            serve.process.destroyForcibly();
            assertTrue(serve.process.waitFor(10, TimeUnit.SECONDS));
        }
        // A server of another version: it names counter 4 otherwise and counts under an id this kvstash leaves unused;
        // a damaged file: no label for counter 3. Each of them counted 7.
        final Map<Integer, String> labels = Map.of(CountersDescriptor.SLOT_CAPACITY, "slots_cut",
            CountersDescriptor.COUNT - 1, "newer_counter", CountersDescriptor.FREE_SLOTS, "");
        withControlFile(dir.resolve(ControlFileDescriptor.FILE_NAME), (controlFile) -> labels.forEach((id, label) ->
        {
            controlFile.counterLabels().label(id, label);
            controlFile.buffer().putLong(controlFile.countersOffset() + id * Long.BYTES, 7);
        }));

        final Map<?, ?> counters = (Map<?, ?>)Cli.run("stat", "--dir", dir.toString(), "--json").json().get("counters");
        assertEquals(7L, counters.get("slots_cut"), counters.toString());
        assertEquals(null, counters.get("slot_capacity"), counters.toString());
        assertEquals(7L, counters.get("newer_counter"), counters.toString());
        assertEquals(7L, counters.get("free_slots"), "an empty label falls back to the table: " + counters);
        final Cli text = Cli.run("stat", "--dir", dir.toString());
        assertTrue(text.out.matches("(?s).*\\n  slots_cut +7  \\n.*"), "no sentence of another counter: " + text.out);
        assertTrue(text.out.matches("(?s).*\\n  newer_counter +7  \\n.*"), text.out);
        assertTrue(text.out.matches("(?s).*\\n  free_slots +7  Free slots\\.\\n.*"), text.out);
    }

    @Test
    void shouldCountLookupsOfAllRanksWhenTheServerAnsweredNoOtherLookup() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-stat-all-ranks-");
        try (Cli.Child serve = Cli.Child.start("serve", "--dir", dir.toString(), "--pool-size", "8m",
            "--prometheus-port", "0"))
        {
            final Matcher metrics = Pattern.compile("metrics=(http://\\S+/metrics)")
                .matcher(serve.awaitLine("kvstash ready:", 30_000));
            assertTrue(metrics.find(), "the ready line names the metrics address");
            try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
            {
                // The two ranks of a tensor-parallel engine store a prompt's first three chunks each...
                for (int rank = 0; rank < 2; rank++)
                {
                    assertEquals(Status.OK,
                        client.register(10 + rank, Layout.of("m", 2, rank, 1, 16, Dtype.UINT8, true)).status());
                    final ClientResponse r = client.prepareStore(10 + rank, ChunkKeys.ofIds(1, 2, 3));
                    assertEquals(Status.OK, client.commitStore(10 + rank, r.transferId()).status());
                }
                // ... and its scheduler asks with LOOKUP_ALL_RANKS only, as the vLLM connector's does.
                assertEquals(3, client.lookupAllRanks("m", 2, ChunkKeys.ofIds(1, 2, 3, 4)).hitChunks());
                assertEquals(0, client.lookupAllRanks("m", 2, ChunkKeys.ofIds(7, 8), true).hitChunks());
                // Counted once a later request is answered (PROTOCOL 2.3).
                assertEquals(Status.OK, client.ping().status());
            }

            final Cli stat = Cli.run("stat", "--dir", dir.toString());
            assertEquals(0, stat.exitCode, stat.toString());
            assertTrue(stat.out.contains("  hit ratio      50.00 % of looked-up chunks (3 of 6)\n"), stat.out);
            assertTrue(stat.out.matches("(?s).*lookup_hit_chunks +3  .*"), stat.out);
            final Map<String, Object> json = Cli.run("stat", "--dir", dir.toString(), "--json").json();
            assertEquals(0.5, (Double)((Map<?, ?>)json.get("summary")).get("hit_ratio"), 1e-9);
            final Map<?, ?> counters = (Map<?, ?>)json.get("counters");
            assertEquals(3L, counters.get("lookup_hit_chunks"));
            assertEquals(3L, counters.get("lookup_miss_chunks"));
            assertEquals(null, counters.get("requests.lookup.ok"), "no LOOKUP was asked");

            final String text = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(metrics.group(1)))
                .build(), HttpResponse.BodyHandlers.ofString()).body();
            assertTrue(text.contains("\nkvstash_lookup_hit_chunks_total 3\n"), text);
            assertTrue(text.contains("\nkvstash_lookup_miss_chunks_total 3\n"), text);
        }
    }

    @Test
    void shouldSayThePolicyAndHowManyStoredChunksWentInCold() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-stat-cold-");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .storeContext(new StoreContext().poolSizeBytes(8L << 20).eviction(EvictionPolicy.SLRU_ADMIT));
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertEquals(Status.OK, client.register(5, Layout.of("m", 1, 0, 1, 16, Dtype.UINT8, true)).status());
            // New prompts of a kind with no history: 5 chunks but the last enter cold, 1 enters warm.
            final ClientResponse cold = client.prepareStore(5, ChunkKeys.ofIds(1, 2, 3, 4, 5, 6));
            assertEquals(Status.OK, client.commitStore(5, cold.transferId()).status());
            final ClientResponse warm = client.prepareStore(5, ChunkKeys.ofIds(11, 12));
            assertEquals(Status.OK, client.commitStore(5, warm.transferId()).status());
            assertTrue(server.awaitDrained(5000));

            final Cli stat = Cli.run("stat", "--dir", dir.toString());
            assertEquals(0, stat.exitCode, stat.toString());
            assertTrue(
                stat.out.contains("  evictions      0 chunks; 6 of the 8 chunks stored went in cold (admission)\n"),
                stat.out);
            assertTrue(stat.out.contains(", eviction slru-admit\n"), stat.out);
            assertTrue(stat.out.matches("(?s).*cold_chunks +6  Chunks COMMIT_STORE made readable cold.*"), stat.out);

            final Map<String, Object> json = Cli.run("stat", "--dir", dir.toString(), "--json").json();
            assertEquals("slru-admit", json.get("eviction"));
            final Map<?, ?> summary = (Map<?, ?>)json.get("summary");
            assertEquals(6L, summary.get("cold_chunks"));
            assertEquals(8L, summary.get("stored_chunks"));
        }
    }

    @Test
    void shouldExitTwoForADeadServerAndReadItsErrorLogAndTheDeadControlFileTheNextServerKeeps() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-errors-");
        final long deadPid;
        try (Cli.Child serve = Cli.Child.start("serve", "--dir", dir.toString(), "--pool-size", "8m"))
        {
            serve.awaitLine("kvstash ready:", 30_000);
            deadPid = serve.process.pid();
            serve.process.destroyForcibly();
            assertTrue(serve.process.waitFor(10, TimeUnit.SECONDS));
        }
        final Path control = dir.resolve(ControlFileDescriptor.FILE_NAME);
        recordError(control, new IllegalStateException("disk on fire"));
        recordError(control, new IllegalStateException("disk on fire"));

        final Cli stat = Cli.run("stat", "--dir", dir.toString(), "--json");
        assertEquals(2, stat.exitCode, "a dead server: " + stat);
        assertEquals(Boolean.FALSE, stat.json().get("alive"));
        assertEquals("dead", stat.json().get("server"));
        assertEquals(deadPid, stat.json().get("pid"));
        final Cli text = Cli.run("stat", "--dir", dir.toString());
        assertEquals(2, text.exitCode, text.toString());
        assertTrue(text.out.startsWith("kvstash server: DEAD (process gone), pid " + deadPid), text.out);

        Cli errors = Cli.run("errors", "--dir", dir.toString());
        assertEquals(0, errors.exitCode, errors.toString());
        assertTrue(errors.out.contains("not alive): 1 distinct error"), errors.out);
        assertTrue(errors.out.contains("2 time(s)"), errors.out);
        assertTrue(errors.out.contains("java.lang.IllegalStateException: disk on fire"), errors.out);

        final List<String> startupLog = new java.util.ArrayList<>();
        try (KvStashServer next = KvStashServer.launch(new ServerContext()
            .directory(dir)
            .startupContext(new StartupContext().startupLog(startupLog::add))
            .storeContext(new StoreContext().poolSizeBytes(8L << 20))))
        {
            assertTrue(startupLog.stream().anyMatch((line) -> line.matches("kvstash: removed " + dir + "/pool-\\w+ " +
                "\\(8[.0-9]* MiB\\), the pool of a server that did not shut down cleanly")), "reclaiming is said: " + startupLog);
            assertTrue(startupLog.stream().anyMatch((line) -> line.startsWith("kvstash: kept the control file of the " +
                "server before")), startupLog.toString());
            assertTrue(next.awaitDrained(1000));
            errors = Cli.run("errors", "--dir", dir.toString(), "--json");
            assertEquals(0, errors.exitCode, errors.toString());
            final List<?> files = (List<?>)errors.json().get("files");
            assertEquals(2, files.size(), errors.out);
            final Map<?, ?> current = (Map<?, ?>)files.get(0);
            final Map<?, ?> dead = (Map<?, ?>)files.get(1);
            assertTrue(String.valueOf(current.get("file")).endsWith("/control"), errors.out);
            assertEquals(Boolean.TRUE, current.get("alive"));
            assertEquals(0, ((List<?>)current.get("errors")).size());
            assertTrue(String.valueOf(dead.get("file")).contains("dead-control-"), errors.out);
            assertEquals(deadPid, dead.get("pid"));
            final Map<?, ?> error = (Map<?, ?>)((List<?>)dead.get("errors")).get(0);
            assertEquals(2L, error.get("count"));
        }
    }

    @Test
    void shouldExitOneAndStillPrintJsonWhenThereIsNoServer() throws IOException
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-nothing-");
        Files.createDirectories(dir);
        final Cli stat = Cli.run("stat", "--dir", dir.toString());
        assertEquals(1, stat.exitCode, stat.toString());
        assertTrue(stat.err.startsWith("kvstash stat: no server: " + dir.resolve("control") + " does not exist"),
            stat.err);
        final Cli json = Cli.run("stat", "--dir", dir.toString(), "--json");
        assertEquals(1, json.exitCode, json.toString());
        assertEquals("none", json.json().get("server"), "a JSON object on standard output with no server too");
        assertEquals(Boolean.FALSE, json.json().get("alive"));
        assertEquals(1, Cli.run("errors", "--dir", dir.toString()).exitCode);
        try (Stream<Path> files = Files.list(dir))
        {
            assertEquals(0, files.count());
        }
    }

    /**
     * Maps a control file read-write and hands it to {@code action} through the flyweight.
     */
    private static void withControlFile(final Path control, final Consumer<ControlFileFlyweight> action)
        throws IOException
    {
        final MappedByteBuffer mapped;
        try (FileChannel channel = FileChannel.open(control, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, channel.size());
        }
        try
        {
            action.accept(new ControlFileFlyweight().wrap(new UnsafeBuffer(mapped)));
        }
        finally
        {
            IoUtil.unmap(mapped);
        }
    }

    /**
     * Plays the dead server's error handler: records into the error log section of its control file.
     */
    private static void recordError(final Path control, final Throwable error) throws IOException
    {
        final MappedByteBuffer mapped;
        try (FileChannel channel = FileChannel.open(control, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, channel.size());
        }
        try
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(mapped);
            final int offset = buffer.getInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET);
            final int length = buffer.getInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET + 4);
            assertTrue(new DistinctErrorLog(new UnsafeBuffer(buffer, offset, length), new SystemEpochClock())
                .record(error));
        }
        finally
        {
            IoUtil.unmap(mapped);
        }
    }
}
