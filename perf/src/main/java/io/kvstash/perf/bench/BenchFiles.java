package io.kvstash.perf.bench;

import io.kvstash.tools.Json;
import io.kvstash.tools.PercentilePlot;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * The files a bench run leaves in its output directory: every histogram in {@link #HLOG} (values in ns, one
 * tagged interval per contender), their percentile plots in {@link #PLOT} and the report in {@link #JSON}.
 */
final class BenchFiles
{
    /** The histogram log. */
    static final String HLOG = "bench.hlog";
    /** The percentile plots. */
    static final String PLOT = "bench-plot.html";
    /** The report, as {@code --json} prints it. */
    static final String JSON = "result.json";

    private BenchFiles()
    {
    }

    /**
     * Writes the three files, replacing any there.
     *
     * @param results the results, with the histograms and the machine's facts.
     * @param report  the report, verdict included.
     * @param outDir  the output directory, which exists.
     * @param quick   whether the run was {@code --quick}, for the plot's title.
     * @throws IOException when a file cannot be written.
     */
    static void write(final BenchResults results, final Map<String, Object> report, final Path outDir,
        final boolean quick) throws IOException
    {
        final long nowMs = System.currentTimeMillis();
        try (PrintStream hlog = new PrintStream(Files.newOutputStream(outDir.resolve(HLOG)), false,
            StandardCharsets.UTF_8))
        {
            final HistogramLogWriter writer = new HistogramLogWriter(hlog);
            writer.outputComment("kvstash bench: one histogram per contender, tagged; values in ns");
            writer.outputLogFormatVersion();
            writer.outputStartTime(nowMs);
            writer.setBaseTime(nowMs);
            writer.outputLegend();
            for (final Map.Entry<String, Histogram> e : results.histograms.entrySet())
            {
                final Histogram h = e.getValue();
                h.setTag(e.getKey().replace(' ', '_'));
                h.setStartTimeStamp(nowMs);
                h.setEndTimeStamp(nowMs);
                writer.outputIntervalHistogram(h);
            }
        }
        final PercentilePlot plot = new PercentilePlot("kvstash bench" + (quick ? " --quick" : ""),
            PercentilePlot.escape(BenchTables.machineLine(results.machine)));
        plot.chart("Control pairs (PREPARE_STORE + COMMIT_STORE of one chunk) and bare ring echo pairs, " +
            "one in flight", results.controlSeries(false));
        plot.chart("Paced at " + results.settings.pacedRate + " pairs/s (coordinated omission corrected)",
            results.controlSeries(true));
        for (final long size : BenchSettings.SIZES)
        {
            plot.chart("Time per " + BenchSupport.size(size) + " chunk", results.sizeSeries(size));
        }
        plot.write(outDir.resolve(PLOT));
        Files.writeString(outDir.resolve(JSON), Json.write(report) + "\n", StandardCharsets.UTF_8);
    }
}
