package io.kvstash.tools;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Writes percentile plots as one self-contained HTML file (inline SVG, no script, no network): latency on a
 * logarithmic axis against the percentile on HdrHistogram's usual axis, {@code log10(1 / (1 - p))}, so
 * 90%, 99%, 99.9% ... are evenly spaced.
 */
public final class PercentilePlot
{
    private static final String[] COLORS =
        { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
            "#000000", "#aec7e8" };
    private static final int WIDTH = 1000;
    private static final int HEIGHT = 440;
    private static final int LEFT = 80;
    private static final int RIGHT = 290;
    private static final int TOP = 40;
    private static final int BOTTOM = 50;
    private static final double MAX_NINES = 5;

    private final List<String> charts = new ArrayList<>();
    private final String title;
    private final String preamble;

    /**
     * A plot file.
     *
     * @param title    page title.
     * @param preamble an HTML-escaped paragraph under the title (the machine and the command).
     */
    public PercentilePlot(final String title, final String preamble)
    {
        this.title = title;
        this.preamble = preamble;
    }

    /**
     * One named histogram of a chart.
     */
    public static final class Series
    {
        final String name;
        final Histogram histogram;

        /**
         * A series.
         *
         * @param name      legend name.
         * @param histogram values in nanoseconds.
         */
        public Series(final String name, final Histogram histogram)
        {
            this.name = name;
            this.histogram = histogram;
        }
    }

    /**
     * Adds a chart.
     *
     * @param chartTitle title.
     * @param series     histograms in ns; empty ones are left out.
     */
    public void chart(final String chartTitle, final List<Series> series)
    {
        double minUs = Double.MAX_VALUE;
        double maxUs = 0;
        final List<Series> shown = new ArrayList<>();
        for (final Series s : series)
        {
            if (null != s.histogram && s.histogram.getTotalCount() > 0)
            {
                shown.add(s);
                minUs = Math.min(minUs, Math.max(0.01, s.histogram.getMinValue() / 1e3));
                maxUs = Math.max(maxUs, s.histogram.getMaxValue() / 1e3);
            }
        }
        final StringBuilder svg = new StringBuilder(16 * 1024);
        svg.append("<h2>").append(escape(chartTitle)).append("</h2>\n");
        if (shown.isEmpty())
        {
            charts.add(svg.append("<p>no data</p>\n").toString());
            return;
        }
        final double yLow = Math.floor(Math.log10(minUs));
        final double yHigh = Math.max(yLow + 1, Math.ceil(Math.log10(maxUs)));
        final int plotW = WIDTH - LEFT - RIGHT;
        final int plotH = HEIGHT - TOP - BOTTOM;
        svg.append(fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" " +
            "font-family=\"sans-serif\" font-size=\"12\">\n", WIDTH, HEIGHT));
        svg.append(fmt("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"white\" stroke=\"#444\"/>\n",
            LEFT, TOP, plotW, plotH));
        for (int nines = 0; nines <= MAX_NINES; nines++)
        {
            final double x = LEFT + plotW * nines / MAX_NINES;
            svg.append(fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, TOP, x, TOP + plotH));
            svg.append(fmt("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, TOP + plotH + 18,
                percentileLabel(nines)));
        }
        for (double d = yLow; d <= yHigh + 1e-9; d++)
        {
            final double y = TOP + plotH - plotH * (d - yLow) / (yHigh - yLow);
            svg.append(fmt("<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, y,
                LEFT + plotW, y));
            svg.append(fmt("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", LEFT - 6, y + 4,
                microseconds(Math.pow(10, d))));
        }
        svg.append(fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">percentile</text>\n", LEFT + plotW / 2,
            HEIGHT - 10));
        svg.append(fmt("<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" text-anchor=\"middle\">" +
            "latency (microseconds, log scale)</text>\n", TOP + plotH / 2, TOP + plotH / 2));
        int index = 0;
        for (final Series s : shown)
        {
            final String color = COLORS[index % COLORS.length];
            final StringBuilder points = new StringBuilder();
            for (final HistogramIterationValue v : s.histogram.percentiles(5))
            {
                final double p = v.getPercentileLevelIteratedTo() / 100.0;
                final double nines = p >= 1.0 ? MAX_NINES : Math.min(MAX_NINES, Math.log10(1 / (1 - p)));
                final double us = Math.max(Math.pow(10, yLow),
                    s.histogram.highestEquivalentValue(v.getValueIteratedTo()) / 1e3);
                final double x = LEFT + plotW * nines / MAX_NINES;
                final double y = TOP + plotH - plotH * (Math.log10(us) - yLow) / (yHigh - yLow);
                points.append(fmt("%.1f,%.1f ", x, y));
                if (p >= 1.0)
                {
                    break;
                }
            }
            svg.append(fmt("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", color, points));
            final int ly = TOP + 10 + index * 18;
            svg.append(fmt("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n",
                LEFT + plotW + 12, ly, LEFT + plotW + 32, ly, color));
            svg.append(fmt("<text x=\"%d\" y=\"%d\">%s (p50 %s)</text>\n", LEFT + plotW + 38, ly + 4, escape(s.name),
                microseconds(s.histogram.getValueAtPercentile(50) / 1e3)));
            index++;
        }
        svg.append("</svg>\n");
        charts.add(svg.toString());
    }

    /**
     * Writes the HTML file.
     *
     * @param file path.
     * @throws IOException when it cannot be written.
     */
    public void write(final Path file) throws IOException
    {
        final StringBuilder html = new StringBuilder(64 * 1024);
        html.append("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>").append(escape(title))
            .append("</title></head>\n<body style=\"font-family:sans-serif\">\n<h1>").append(escape(title))
            .append("</h1>\n<p>").append(preamble).append("</p>\n");
        for (final String chart : charts)
        {
            html.append(chart);
        }
        html.append("</body></html>\n");
        Files.writeString(file, html, StandardCharsets.UTF_8);
    }

    private static String percentileLabel(final int nines)
    {
        switch (nines)
        {
            case 0:
                return "0%";
            case 1:
                return "90%";
            case 2:
                return "99%";
            default:
                return "99." + "9".repeat(nines - 2) + "%";
        }
    }

    private static String microseconds(final double us)
    {
        if (us >= 1000)
        {
            return fmt("%.0f us", us);
        }
        return us >= 1 ? fmt("%.3g us", us) : fmt("%.2g us", us);
    }

    /**
     * Escapes text for HTML.
     *
     * @param text plain text.
     * @return the text with {@code & < > "} escaped.
     */
    public static String escape(final String text)
    {
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
    }

    private static String fmt(final String format, final Object... args)
    {
        return String.format(Locale.ROOT, format, args);
    }
}
