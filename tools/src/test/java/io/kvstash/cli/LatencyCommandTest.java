package io.kvstash.cli;

import io.kvstash.process.ShmDirectories;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code kvstash latency} over interval logs written here with known values: each tag's intervals, across files,
 * add up to the histogram the test builds itself, and the plot has a chart per tag group.
 */
class LatencyCommandTest
{
    private final List<Path> files = new ArrayList<>();

    @AfterEach
    void cleanup() throws Exception
    {
        for (final Path file : files)
        {
            Files.deleteIfExists(file);
        }
    }

    @Test
    void shouldAddUpEveryIntervalOfATagAcrossFilesAndReportItsPercentiles() throws Exception
    {
        final SplittableRandom random = new SplittableRandom(7);
        final Histogram pings = new Histogram(3);
        final Histogram reserve = new Histogram(3);
        final Path first = log(random, pings, reserve, 3, 1_000);
        final Path second = log(random, pings, reserve, 2, 10_000);

        final Cli cli = Cli.run("latency", "--json", first.toString(), second.toString());
        assertEquals(0, cli.exitCode, cli.toString());
        final Map<String, Object> json = cli.json();
        assertEquals(10L, json.get("intervals"));
        final Map<?, ?> latency = (Map<?, ?>)json.get("latency_us");
        assertEquals(2, latency.size(), latency.toString());
        check(pings, (Map<?, ?>)latency.get("type.PING"));
        check(reserve, (Map<?, ?>)latency.get("stage.reserve.service"));

        final Path html = temp(".html");
        final Cli table = Cli.run("latency", "--plot", html.toString(), first.toString());
        assertEquals(0, table.exitCode, table.toString());
        assertTrue(table.out.contains("6 intervals over"), table.out);
        assertTrue(table.out.lines().anyMatch((line) -> line.startsWith("type.PING ") && line.contains(" 3,000 ")),
            table.out);
        final String page = Files.readString(html);
        assertTrue(page.contains("<h2>type</h2>") && page.contains("<h2>stage</h2>"), "a chart per tag group");
        assertTrue(page.contains("<svg"), "charts drawn");
    }

    @Test
    void shouldSayWhatWasSampledAndFlagRowsOfFewSamplesWhenReadingAServersLog() throws Exception
    {
        final Path hlog = temp(".hlog");
        final Path dir = ShmDirectories.newPath("kvstash-test-latency-sampled-");
        try
        {
            try (io.kvstash.server.KvStashServer server = io.kvstash.server.KvStashServer.launch(
                    new io.kvstash.server.ServerContext().directory(dir).latencyLogFile(hlog)
                        .storeContext(new io.kvstash.core.StoreContext().poolSizeBytes(4L << 20)));
                io.kvstash.client.KvStashClient client = io.kvstash.client.KvStashClient.connect(
                    new io.kvstash.client.ClientContext().directory(dir)))
            {
                client.register(1, io.kvstash.wire.layout.Layout.of("m", 1, 0, 1, 16,
                    io.kvstash.wire.layout.Dtype.UINT8, true));
                client.lookup(1, io.kvstash.wire.ChunkKeys.ofIds(1, 2), false);
                client.lookup(1, io.kvstash.wire.ChunkKeys.ofIds(3), false);
                assertTrue(server.awaitDrained(5_000));
            }
        }
        finally
        {
            ShmDirectories.delete(dir);
        }
        final Cli table = Cli.run("latency", hlog.toString());
        assertEquals(0, table.exitCode, table.toString());
        assertTrue(table.out.lines().anyMatch((line) -> line.startsWith("type.LOOKUP ") && line.endsWith("  *")),
            "two timed requests are flagged: " + table.out);
        assertTrue(table.out.contains("* fewer than 100 timed requests"), table.out);
        assertTrue(table.out.contains("how these were recorded:\n  type.*   the server's time from reading a request " +
            "to writing its answer, by request type; sampled: one request of each type in 8"), table.out);

        final Map<String, Object> json = Cli.run("latency", "--json", hlog.toString()).json();
        assertTrue(String.valueOf(((Map<?, ?>)json.get("how_recorded")).get("type")).contains("a count is an estimate"),
            json.toString());
        assertEquals(Boolean.TRUE, ((Map<?, ?>)json.get("few_samples")).get("type.LOOKUP"));
    }

    @Test
    void shouldFailOnALogWithoutIntervalsAndOnAMissingFile() throws Exception
    {
        final Path empty = temp(".hlog");
        try (PrintStream out = new PrintStream(empty.toFile()))
        {
            new HistogramLogWriter(out).outputLegend();
        }
        final Cli cli = Cli.run("latency", empty.toString());
        assertEquals(1, cli.exitCode, cli.toString());
        assertTrue(cli.err.contains("no interval histogram"), cli.err);
        assertTrue(0 != Cli.run("latency", empty.resolveSibling("no-such.hlog").toString()).exitCode);
        assertEquals(2, Cli.run("latency").exitCode);
    }

    /**
     * Writes {@code intervals} PING and reserve-stage intervals of random values in ns, 1,000 values each, adding
     * the same values to the test's own histograms.
     */
    private Path log(
        final SplittableRandom random, final Histogram pings, final Histogram reserve, final int intervals,
        final long scaleNs) throws Exception
    {
        final Path file = temp(".hlog");
        try (PrintStream out = new PrintStream(file.toFile()))
        {
            final HistogramLogWriter writer = new HistogramLogWriter(out);
            writer.outputLogFormatVersion();
            writer.outputLegend();
            for (int i = 0; i < intervals; i++)
            {
                final Histogram ping = new Histogram(3);
                final Histogram stage = new Histogram(3);
                for (int v = 0; v < 1_000; v++)
                {
                    final long p = 1 + random.nextLong(scaleNs * 100);
                    final long s = 1 + random.nextLong(scaleNs);
                    ping.recordValue(p);
                    pings.recordValue(p);
                    stage.recordValue(s);
                    reserve.recordValue(s);
                }
                for (final Histogram h : new Histogram[]{ ping, stage })
                {
                    h.setStartTimeStamp(1_000L * i);
                    h.setEndTimeStamp(1_000L * (i + 1));
                }
                ping.setTag("type.PING");
                stage.setTag("stage.reserve.service");
                writer.outputIntervalHistogram(ping);
                writer.outputIntervalHistogram(stage);
            }
        }
        return file;
    }

    private static void check(final Histogram expected, final Map<?, ?> reported)
    {
        assertEquals(expected.getTotalCount(), ((Number)reported.get("count")).longValue());
        assertEquals(expected.getValueAtPercentile(50) / 1e3, ((Number)reported.get("p50")).doubleValue(), 0.01);
        assertEquals(expected.getValueAtPercentile(99) / 1e3, ((Number)reported.get("p99")).doubleValue(), 0.01);
        assertEquals(expected.getValueAtPercentile(99.9) / 1e3, ((Number)reported.get("p999")).doubleValue(), 0.01);
        assertEquals(expected.getMaxValue() / 1e3, ((Number)reported.get("max")).doubleValue(), 0.01);
    }

    private Path temp(final String suffix) throws Exception
    {
        final Path file = Files.createTempFile("kvstash-latency-test", suffix);
        files.add(file);
        return file;
    }
}
