package io.kvstash.cli;

import io.kvstash.pipeline.PipelineContext;
import io.kvstash.pipeline.latency.LatencySampling;
import io.kvstash.pipeline.latency.LoadWeightedSampler;
import io.kvstash.tools.IntervalLogs;
import io.kvstash.tools.Json;
import io.kvstash.tools.PercentilePlot;
import io.kvstash.tools.ReplayReport;
import org.HdrHistogram.Histogram;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;

/**
 * {@code kvstash latency}: reads HdrHistogram interval logs ({@code .hlog}, as {@code serve --hlog} and
 * {@code replay --hlog} write them), adds up each tag's intervals, and prints count, p50, p90, p99, p99.9 and max
 * per tag in microseconds; {@code --plot} renders the same totals as a percentile plot, one chart per tag group
 * (the part of the tag before its first dot: {@code type}, {@code stage}, {@code client}). Under the table it says
 * how each group was recorded (the server samples, the workers time every request) and flags rows that rest on
 * fewer than {@link #FEW_SAMPLES} timed requests.
 */
@Command(name = "latency", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Reports count, p50, p90, p99, p99.9 and max per tag, in microseconds, of HdrHistogram interval logs " +
            "(.hlog from serve --hlog, replay --hlog or bench); --plot writes a percentile plot." })
public final class LatencyCommand implements Callable<Integer>
{
    /** Timed requests below which a row's percentiles are flagged as resting on a handful of values. */
    static final long FEW_SAMPLES = 100;
    private static final String TYPE_GROUP = "type";

    /** Width of the tag column: the longest tags the bench writes fit. */
    private static final int TAG_WIDTH = 34;

    @Spec
    CommandSpec spec;

    @Parameters(arity = "1..*", paramLabel = "FILE", description = "Interval logs to read; their tags add up.")
    List<Path> files;

    @Option(names = "--plot", paramLabel = "HTML", description = "Also write a percentile plot to this HTML file.")
    Path plot;

    @Option(names = "--json", description = "Print one JSON object instead of the table.")
    boolean json;

    /**
     * A command with default options (picocli sets the fields).
     */
    public LatencyCommand()
    {
    }

    /**
     * Reads the logs and reports.
     *
     * @return 0, or 1 when a file holds no interval.
     * @throws Exception when a file cannot be read.
     */
    @Override
    public Integer call() throws Exception
    {
        final PrintWriter out = spec.commandLine().getOut();
        final PrintWriter err = spec.commandLine().getErr();
        final Map<String, Histogram> totals = new TreeMap<>();
        long intervals = 0;
        double firstSec = Double.MAX_VALUE;
        double lastSec = 0;
        for (final Path file : files)
        {
            final List<Histogram> read = IntervalLogs.read(file);
            for (final Histogram h : read)
            {
                final String tag = null == h.getTag() ? "untagged" : h.getTag();
                totals.computeIfAbsent(tag, (t) -> new Histogram(3)).add(h);
                firstSec = Math.min(firstSec, h.getStartTimeStamp() / 1000.0);
                lastSec = Math.max(lastSec, h.getEndTimeStamp() / 1000.0);
            }
            if (read.isEmpty())
            {
                err.println("kvstash latency: no interval histogram in " + file);
                err.flush();
                return 1;
            }
            intervals += read.size();
        }
        final double spanSec = Math.max(0, lastSec - firstSec);
        if (json)
        {
            final Map<String, Object> map = new LinkedHashMap<>();
            map.put("files", files.stream().map(Path::toString).collect(Collectors.toList()));
            map.put("intervals", intervals);
            map.put("span_s", Math.round(spanSec * 1000) / 1000.0);
            final Map<String, Object> tags = new LinkedHashMap<>();
            totals.forEach((tag, h) -> tags.put(tag, ReplayReport.percentiles(h)));
            map.put("latency_us", tags);
            final Map<String, Object> fewSamples = new LinkedHashMap<>();
            totals.forEach((tag, h) -> fewSamples.put(tag, isFewSamples(tag, h)));
            map.put("few_samples", fewSamples);
            map.put("how_recorded", howRecorded(totals.keySet()));
            out.println(Json.write(map));
        }
        else
        {
            out.printf(Locale.ROOT, "%d intervals over %.1f s from %s%n", intervals, spanSec, files);
            ReportPrinter.latencyHeader(out, "latency (us)", TAG_WIDTH);
            final boolean[] anyFew = new boolean[1];
            totals.forEach((tag, h) ->
            {
                final boolean few = isFewSamples(tag, h);
                anyFew[0] |= few;
                ReportPrinter.latencyLine(out, tag, h, TAG_WIDTH, few ? "  *" : "");
            });
            if (anyFew[0])
            {
                out.println("* fewer than " + FEW_SAMPLES + " timed requests: these percentiles rest on a handful of " +
                    "values");
            }
            final Map<String, String> how = howRecorded(totals.keySet());
            if (!how.isEmpty())
            {
                out.println("how these were recorded:");
                how.forEach((group, text) -> out.printf("  %-8s %s%n", group + ".*", text));
            }
        }
        if (null != plot)
        {
            writePlot(totals);
            err.println("kvstash latency: plot written to " + plot);
        }
        out.flush();
        err.flush();
        return 0;
    }

    /**
     * Whether a tag's percentiles rest on fewer than {@link #FEW_SAMPLES} timed requests: a server row counts each
     * timed request as the requests it stands for, at least {@link LatencySampling#PRODUCER_MIN_WEIGHT}.
     */
    static boolean isFewSamples(final String tag, final Histogram h)
    {
        final long perSample = tag.startsWith(TYPE_GROUP + ".") ? LatencySampling.PRODUCER_MIN_WEIGHT : 1;
        return h.getTotalCount() / perSample < FEW_SAMPLES;
    }

    /**
     * What each group of tags present measures and how it was sampled, so that counts and percentiles are read
     * right: the server times a sample of its requests, the replay's workers time every one.
     *
     * @param tags the tags read.
     * @return group ({@code type}, {@code stage}, {@code client}) to one sentence, for the groups present.
     */
    static Map<String, String> howRecorded(final java.util.Collection<String> tags)
    {
        final Map<String, String> how = new LinkedHashMap<>();
        if (tags.stream().anyMatch((tag) -> tag.startsWith(TYPE_GROUP + ".")))
        {
            how.put(TYPE_GROUP, "the server's time from reading a request to writing its answer, by request type; " +
                "sampled: one request of each type in " + LatencySampling.PRODUCER_MIN_WEIGHT + " (down to one in " +
                LoadWeightedSampler.MAX_WEIGHT + " under load) is timed and counted as the requests it stands for, " +
                "so a count is an estimate (2 LOOKUPs can count as " + LatencySampling.PRODUCER_MIN_WEIGHT + ")");
        }
        if (tags.stream().anyMatch((tag) -> tag.startsWith("stage.")))
        {
            how.put("stage", "time queued before and spent in each pipeline stage, of one request in " +
                String.format(Locale.ROOT, "%,d", PipelineContext.STAGE_SAMPLE_MASK_DEFAULT + 1) +
                "; each count is one timed request");
        }
        if (tags.stream().anyMatch((tag) -> tag.startsWith("client.")))
        {
            how.put("client", "the replay workers' end-to-end time of every request, counted exactly");
        }
        return how;
    }

    private void writePlot(final Map<String, Histogram> totals) throws IOException
    {
        final PercentilePlot page = new PercentilePlot("kvstash latency",
            PercentilePlot.escape("kvstash latency " + files));
        final Map<String, List<PercentilePlot.Series>> groups = new TreeMap<>();
        totals.forEach((tag, h) ->
        {
            final int dot = tag.indexOf('.');
            groups.computeIfAbsent(dot < 0 ? tag : tag.substring(0, dot), (g) -> new ArrayList<>())
                .add(new PercentilePlot.Series(tag, h));
        });
        groups.forEach((group, series) -> page.chart(group, series));
        page.write(plot);
    }
}
