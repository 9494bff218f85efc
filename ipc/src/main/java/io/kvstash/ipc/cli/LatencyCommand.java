package io.kvstash.ipc.cli;

import io.kvstash.ipc.tools.IntervalLogs;
import io.kvstash.ipc.tools.Json;
import io.kvstash.ipc.tools.PercentilePlot;
import io.kvstash.ipc.tools.TraceReplay;
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
 * (the part of the tag before its first dot: {@code type}, {@code stage}, {@code client}).
 */
@Command(name = "latency", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Reports count, p50, p90, p99, p99.9 and max per tag, in microseconds, of HdrHistogram interval logs " +
            "(.hlog from serve --hlog, replay --hlog or bench); --plot writes a percentile plot." })
public final class LatencyCommand implements Callable<Integer>
{
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
            totals.forEach((tag, h) -> tags.put(tag, TraceReplay.Report.percentiles(h)));
            map.put("latency_us", tags);
            out.println(Json.write(map));
        }
        else
        {
            out.printf(Locale.ROOT, "%d intervals over %.1f s from %s%n", intervals, spanSec, files);
            ReportPrinter.latencyHeader(out, "latency (us)", TAG_WIDTH);
            totals.forEach((tag, h) -> ReportPrinter.latencyLine(out, tag, h, TAG_WIDTH));
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
