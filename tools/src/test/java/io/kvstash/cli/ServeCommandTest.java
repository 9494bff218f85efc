package io.kvstash.cli;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(60)
class ServeCommandTest
{
    Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldPrintTheResolvedConfigurationWithoutStartingWhenAskedTo()
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-config-");
        final Cli cli = Cli.run("serve", "--print-config", "--dir", dir.toString(), "--pool-size", "512m",
            "--lease", "500ms", "--threading", "thread-per-stage", "--wait", "busy-spin", "--chunk-tokens", "128");
        assertEquals(0, cli.exitCode, cli.toString());
        assertTrue(cli.out.contains("pool-size:         536870912 (512 MiB)"), cli.out);
        assertTrue(cli.out.contains("lease:             500ms"), cli.out);
        assertTrue(cli.out.contains("threading:         thread-per-stage"), cli.out);
        assertTrue(cli.out.contains("wait:              busy-spin"), cli.out);
        assertTrue(cli.out.contains("chunk-tokens:      128"), cli.out);
        assertTrue(cli.out.contains("dir:               " + dir), cli.out);
        assertTrue(cli.out.contains("prometheus-port:   off"), cli.out);
        assertFalse(Files.exists(dir), "nothing is created");
        final Cli metrics = Cli.run("serve", "--print-config", "--dir", dir.toString(), "--prometheus-port", "9464");
        assertTrue(metrics.out.contains("prometheus-port:   9464 on 127.0.0.1"), metrics.toString());
    }

    @Test
    void shouldWarnWhenBusySpinningServerThreadsAndAClientNeedMoreCoresThanThereAre()
    {
        assertNull(ServeCommand.spinWarning(ThreadingMode.SHARED, WaitMode.BUSY_SPIN, 2));
        assertNull(ServeCommand.spinWarning(ThreadingMode.DEDICATED, WaitMode.BACKOFF, 2));
        assertNull(ServeCommand.spinWarning(ThreadingMode.DEDICATED, WaitMode.BUSY_SPIN, 3));
        assertNull(ServeCommand.spinWarning(ThreadingMode.THREAD_PER_STAGE, WaitMode.BUSY_SPIN, 6));
        final String dedicated = ServeCommand.spinWarning(ThreadingMode.DEDICATED, WaitMode.BUSY_SPIN, 2);
        assertTrue(dedicated.contains("--threading dedicated --wait busy-spin spins 2 server threads"), dedicated);
        assertTrue(dedicated.contains("this machine's 2 cores"), dedicated);
        assertTrue(ServeCommand.spinWarning(ThreadingMode.THREAD_PER_STAGE, WaitMode.BUSY_SPIN, 5).contains("spins 5"));
        assertTrue(ServeCommand.spinWarning(ThreadingMode.SHARED, WaitMode.BUSY_SPIN, 1).contains("1 core,"));

        // and serve prints it on standard error, as this machine's cores call for
        dir = ShmDirectories.newPath("kvstash-test-cli-spin-");
        final Cli cli = Cli.run("serve", "--print-config", "--dir", dir.toString(), "--threading", "dedicated",
            "--wait", "busy-spin");
        assertEquals(0, cli.exitCode, cli.toString());
        final boolean expected = null != ServeCommand.spinWarning(
            ThreadingMode.DEDICATED, WaitMode.BUSY_SPIN, Runtime.getRuntime().availableProcessors());
        assertEquals(expected, cli.err.contains("warning: --threading dedicated --wait busy-spin"), cli.toString());
        assertFalse(Cli.run("serve", "--print-config", "--dir", dir.toString()).err.contains("warning"));
    }

    @Test
    void shouldFailWithUsageWhenAnOptionIsInvalid()
    {
        assertEquals(2, Cli.run("serve", "--print-config", "--alignment", "3000").exitCode);
        assertEquals(2, Cli.run("serve", "--print-config", "--lease", "30").exitCode);
        assertEquals(2, Cli.run("serve", "--print-config", "--threading", "many").exitCode);
        assertEquals(2, Cli.run("serve", "--print-config", "--prometheus-port", "70000").exitCode);
        assertEquals(2, Cli.run("serve", "--no-such-option").exitCode);
        assertEquals(2, Cli.run().exitCode);
        assertEquals(0, Cli.run("serve", "--help").exitCode);
    }

    @Test
    void shouldAnswerAClientAndRemoveItsFilesWhenServeRunsAsAProcessAndGetsSigterm() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-serve-");
        try (Cli.Child serve = Cli.Child.start("serve", "--dir", dir.toString(), "--pool-size", "16m",
            "--prometheus-port", "0"))
        {
            final String ready = serve.awaitLine("kvstash ready:", 30_000);
            final Matcher metrics = Pattern.compile("metrics=(http://127\\.0\\.0\\.1:\\d+/metrics)").matcher(ready);
            assertTrue(metrics.find(), ready);
            assertTrue(ready.contains("dir=" + dir), ready);
            assertTrue(ready.contains("incarnation="), ready);
            assertTrue(ready.matches(".*, started in \\d+\\.\\d s$"), ready);
            assertTrue(Files.exists(dir.resolve(ControlFileDescriptor.FILE_NAME)));

            try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
            {
                assertEquals(Status.OK, client.ping().status());
                assertEquals(Status.OK, client.register(3, Layout.of("m", 1, 0, 1, 16, Dtype.UINT8, true)).status());
                final ClientResponse r = client.prepareStore(3, ChunkKeys.ofIds(1, 2));
                assertEquals(Status.OK, r.status());
                assertEquals(Status.OK, client.commitStore(3, r.transferId()).status());
                assertEquals(2, client.lookup(3, ChunkKeys.ofIds(1, 2, 3), false).hitChunks());

                final Cli stat = Cli.run("stat", "--dir", dir.toString(), "--json");
                assertEquals(0, stat.exitCode, stat.toString());
                final Map<String, Object> json = stat.json();
                assertEquals(Boolean.TRUE, json.get("alive"));
                assertEquals("RUNNING", json.get("state"));
                assertEquals(serve.process.pid(), json.get("pid"));
                assertEquals(2L, ((Map<?, ?>)json.get("counters")).get("stored_chunks"));

                final HttpResponse<String> scrape = HttpClient.newHttpClient().send(
                    HttpRequest.newBuilder(URI.create(metrics.group(1))).build(), HttpResponse.BodyHandlers.ofString());
                assertEquals(200, scrape.statusCode());
                assertTrue(scrape.body().contains("\nkvstash_stored_chunks_total 2\n"), scrape.body());
            }

            // SIGTERM through the handle: Process.destroy() would also close the pipe we read the last line from.
            serve.process.toHandle().destroy();
            assertTrue(serve.process.waitFor(20, TimeUnit.SECONDS));
            serve.awaitLine("kvstash stopped", 5_000);
        }
        try (Stream<Path> files = Files.list(dir))
        {
            assertEquals(0, files.filter((f) -> !f.getFileName().toString().equals("server.lock")).count(),
                "only the lock file is left");
        }
        final Cli stat = Cli.run("stat", "--dir", dir.toString());
        assertEquals(1, stat.exitCode, stat.toString());
        assertTrue(stat.err.contains("no server"), stat.err);
    }

    @Test
    @Timeout(120)
    void shouldLeaveNoFileWhenSignalledWhileThePoolIsPrepared() throws Exception
    {
        for (final String signal : new String[]{ "INT", "TERM" })
        {
            dir = ShmDirectories.newPath("kvstash-test-cli-interrupt-");
            try (Cli.Child serve = Cli.Child.start("serve", "--dir", dir.toString(), "--pool-size", "2g",
                "--prepare-pool", "foreground"))
            {
                final long deadline = System.currentTimeMillis() + 30_000;
                while (!hasPoolFile(dir))
                {
                    assertTrue(System.currentTimeMillis() < deadline, "no pool file: " + serve.lines());
                    assertTrue(serve.process.isAlive(), "exited: " + serve.lines());
                    Thread.sleep(5);
                }
                // A process started in the background of a non-interactive shell (a CI runner, nohup ... &) inherits
                // SIGINT ignored, and the JVM keeps an ignored SIGINT ignored, as daemons should: then the same
                // shutdown is asked for with SIGTERM.
                final String sent = "INT".equals(signal) && ignoresSigint(serve.process.pid()) ? "TERM" : signal;
                final Process kill = new ProcessBuilder("kill", "-" + sent, String.valueOf(serve.process.pid())).start();
                assertEquals(0, kill.waitFor());
                assertTrue(serve.process.waitFor(30, TimeUnit.SECONDS), "exits on SIG" + sent);
                assertTrue(serve.lines().stream().noneMatch((l) -> l.startsWith("kvstash ready")),
                    "interrupted before ready: " + serve.lines());
            }
            assertFalse(Files.exists(dir), "SIG" + signal + " during preparation leaves no pool, lock or directory");
        }
    }

    @Test
    @Timeout(120)
    void shouldBeReadyAtOnceAndPrepareThePoolInTheBackgroundWhenThePoolIsLarge() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-background-");
        try (Cli.Child serve = Cli.Child.start("serve", "--dir", dir.toString(), "--pool-size", "4g"))
        {
            final String ready = serve.awaitLine("kvstash ready:", 30_000);
            final Matcher started = Pattern.compile("started in (\\d+\\.\\d) s$").matcher(ready);
            assertTrue(started.find(), ready);
            // Preparing 4 GiB before ready takes seconds on these machines; ready no longer waits for it.
            assertTrue(Double.parseDouble(started.group(1)) < 1.0, ready);
            serve.awaitErrorLine("kvstash: the 4 GiB pool's pages are prepared in the background", 5_000);

            try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir).pretouchPool(false)))
            {
                assertEquals(Status.OK, client.register(3, Layout.of("m", 1, 0, 1, 16, Dtype.UINT8, true)).status());
                final ClientResponse r = client.prepareStore(3, ChunkKeys.ofIds(1, 2));
                assertEquals(Status.OK, client.commitStore(3, r.transferId()).status());
                assertEquals(2, client.lookup(3, ChunkKeys.ofIds(1, 2), false).hitChunks(), "served while preparing");
            }
            final String prepared = serve.awaitErrorLine("kvstash: the pool's pages are prepared (4 GiB in", 90_000);
            assertTrue(prepared.matches(".* in \\d+\\.\\d s\\)$"), prepared);

            serve.process.toHandle().destroy();
            assertTrue(serve.process.waitFor(20, TimeUnit.SECONDS));
            serve.awaitLine("kvstash stopped", 5_000);
        }
        assertFalse(hasPoolFile(dir), "the pool is removed at the stop");
    }

    @Test
    @Timeout(120)
    void shouldCommitThePoolOnDemandAndNotHaveAJavaClientCommitIt() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-on-demand-");
        try (Cli.Child serve = Cli.Child.start("serve", "--dir", dir.toString(), "--pool-size", "1g",
            "--prepare-pool", "on-demand"))
        {
            serve.awaitLine("kvstash ready:", 30_000);
            final long before = rssShmem();
            try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
            {
                final long mapped = rssShmem() - before;
                assertTrue(mapped < 128L << 20, "a client touches only the committed prefix, not 1 GiB: " + mapped);
                final Map<?, ?> atStart = (Map<?, ?>)Cli.run("stat", "--dir", dir.toString(), "--json").json()
                    .get("summary");
                final long committedAtStart = ((Number)atStart.get("pool_committed_bytes")).longValue();
                assertTrue(committedAtStart >= 64L << 20 && committedAtStart <= 80L << 20, "" + committedAtStart);

                // 1 MiB chunks (MLA, 256 tokens x 4096 bytes), 160 of them: past the start's 64 MiB.
                assertEquals(Status.OK, client.register(3, Layout.of("m", 1, 0, 1, 4096, Dtype.UINT8, true)).status());
                final org.agrona.concurrent.UnsafeBuffer chunk =
                    new org.agrona.concurrent.UnsafeBuffer(new byte[1 << 20]);
                for (int k = 0; k < 160; k++)
                {
                    final ClientResponse r = client.prepareStore(3, ChunkKeys.ofIds(k));
                    chunk.putInt(0, k);
                    chunk.putInt((1 << 20) - 4, ~k);
                    assertEquals(Status.OK, client.chunks().writeChunk(3, r, 0, chunk, 0));
                    assertEquals(Status.OK, client.commitStore(3, r.transferId()).status());
                }
                final ClientResponse back = client.prepareRetrieve(3, ChunkKeys.ofIds(150));
                final org.agrona.concurrent.UnsafeBuffer read =
                    new org.agrona.concurrent.UnsafeBuffer(new byte[1 << 20]);
                assertEquals(Status.OK, client.chunks().readChunk(3, back, 0, read, 0));
                assertEquals(150, read.getInt(0));
                assertEquals(~150, read.getInt((1 << 20) - 4));
                assertEquals(Status.OK, client.commitRetrieve(3, back.transferId()).status());
                assertTrue(rssShmem() - before < 256L << 20, "the client maps what it used: " + (rssShmem() - before));
            }
            final Cli stat = Cli.run("stat", "--dir", dir.toString());
            assertTrue(stat.out.contains("committed on demand"), stat.toString());
            final Map<?, ?> summary = (Map<?, ?>)Cli.run("stat", "--dir", dir.toString(), "--json").json()
                .get("summary");
            final long committed = ((Number)summary.get("pool_committed_bytes")).longValue();
            assertTrue(committed >= 160L << 20 && committed <= 256L << 20, "grows with the store: " + committed);
        }
    }

    @Test
    @Timeout(60)
    void shouldStopCleanlyWhenSignalledWhileThePoolIsPreparedInTheBackground() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-background-stop-");
        try (Cli.Child serve = Cli.Child.start("serve", "--dir", dir.toString(), "--pool-size", "4g"))
        {
            serve.awaitLine("kvstash ready:", 30_000);
            serve.process.toHandle().destroy();
            assertTrue(serve.process.waitFor(20, TimeUnit.SECONDS));
            assertEquals(143, serve.process.exitValue(), "a clean SIGTERM exit, no crash: " + serve.errorLines());
            serve.awaitLine("kvstash stopped", 5_000);
            assertTrue(serve.errorLines().stream().noneMatch((l) -> l.startsWith("kvstash: the pool's pages are " +
                "prepared (")), "stopped before the end: " + serve.errorLines());
        }
        assertFalse(hasPoolFile(dir), "the pool is removed at the stop");
    }

    /**
     * Whether the process ignores SIGINT: bit 1 (signal 2) of the SigIgn mask in /proc/PID/status.
     */
    private static boolean ignoresSigint(final long pid) throws java.io.IOException
    {
        for (final String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status")))
        {
            if (line.startsWith("SigIgn:"))
            {
                return (Long.parseUnsignedLong(line.substring("SigIgn:".length()).trim(), 16) & 0x2L) != 0;
            }
        }
        return false;
    }

    /**
     * Bytes of shared memory mapped in this process's page tables (RssShmem of /proc/self/status).
     */
    private static long rssShmem() throws java.io.IOException
    {
        for (final String line : Files.readAllLines(Path.of("/proc/self/status")))
        {
            if (line.startsWith("RssShmem:"))
            {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        throw new IllegalStateException("no RssShmem in /proc/self/status");
    }

    private static boolean hasPoolFile(final Path dir) throws java.io.IOException
    {
        if (!Files.isDirectory(dir))
        {
            return false;
        }
        try (Stream<Path> files = Files.list(dir))
        {
            return files.anyMatch((f) -> f.getFileName().toString().startsWith("pool-"));
        }
        catch (final java.nio.file.NoSuchFileException ex)
        {
            return false;
        }
    }

    @Test
    void shouldRefuseAPoolLargerThanTheFreeSpaceBeforeWritingAnything() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-too-big-");
        final long free = Files.getFileStore(dir.getParent()).getUsableSpace();
        final long poolBytes = (free / (1 << 30) + 2) << 30;
        final Cli cli = Cli.run("serve", "--dir", dir.toString(), "--pool-size", String.valueOf(poolBytes));
        assertEquals(1, cli.exitCode, cli.toString());
        assertEquals(1, cli.err.strip().split("\n").length, cli.toString());
        assertTrue(cli.err.contains("(" + poolBytes + " bytes"), cli.err);
        assertTrue(cli.err.matches("(?s).*has [0-9.]+ GiB \\(\\d+ bytes\\) free.*"), cli.err);
        assertTrue(cli.err.contains(dir.toString()), cli.err);
        assertFalse(cli.err.contains("preparing"), cli.err);
        assertFalse(Files.exists(dir), "nothing written");
    }

    @Test
    void shouldNameThePathOrPortWhenTheServerCannotStart() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-cli-deep-");
        final Path deep = dir.resolve("not").resolve("there");
        final Cli missingParent = Cli.run("serve", "--dir", deep.toString(), "--pool-size", "16m");
        assertEquals(1, missingParent.exitCode, missingParent.toString());
        assertTrue(missingParent.err.contains(deep + ": its parent directory does not exist"), missingParent.err);
        assertFalse(Files.exists(dir), "no parent created");
        final Path file = Files.createTempFile("kvstash-not-a-dir", ".txt");
        try
        {
            final Cli underFile = Cli.run("serve", "--dir", file.resolve("kv").toString(), "--pool-size", "16m");
            assertEquals(1, underFile.exitCode, underFile.toString());
            assertTrue(underFile.err.contains(file + " is not a directory"), underFile.err);
        }
        finally
        {
            Files.deleteIfExists(file);
        }

        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress()))
        {
            final Cli portInUse = Cli.run("serve", "--dir", dir.toString(), "--pool-size", "16m",
                "--prometheus-port", String.valueOf(taken.getLocalPort()));
            assertEquals(1, portInUse.exitCode, portInUse.toString());
            assertTrue(portInUse.err.contains("--prometheus-port " + taken.getLocalPort() + ": 127.0.0.1:" +
                taken.getLocalPort() + " is not free"), portInUse.err);
            assertFalse(portInUse.err.contains("preparing"), "refused before the pool is prepared: " + portInUse.err);
            assertFalse(Files.exists(dir), "nothing made for a refused start");
        }
    }
}
