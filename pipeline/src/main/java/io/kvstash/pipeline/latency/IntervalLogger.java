package io.kvstash.pipeline.latency;

import io.kvstash.wire.RequestType;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;
import org.HdrHistogram.SingleWriterRecorder;

import java.io.PrintStream;
import java.util.Locale;

/**
 * Reads interval histograms from {@link LatencyRecorders}, writes them tagged to an {@code .hlog} interval
 * log ({@link HistogramLogWriter}) and accumulates totals for a report. Tags: {@code type.<REQUEST_TYPE>},
 * {@code stage.<name>.service}, {@code stage.<name>.queued}. {@link #poll(long)} is called by one thread
 * (the server's conductor, a test); it allocates nothing after construction except what the log writer's
 * compression does. {@link #poll(long)} and {@link #copyRequestTotal(int)} are synchronized so another
 * thread may take copies; the other accessors are for the polling thread or after it stopped.
 */
public final class IntervalLogger implements AutoCloseable
{
    private final LatencyRecorders recorders;
    private final HistogramLogWriter writer;
    private final Histogram[] totals;
    private final Histogram[] intervals;
    private final String[] tags;
    private final SingleWriterRecorder[] sources;
    private long intervalStartMs;

    /**
     * A logger over recorders.
     *
     * @param recorders recorders to read.
     * @param writer    interval log writer, or null to only accumulate totals.
     * @param nowMs     wall clock now, start of the first interval.
     */
    public IntervalLogger(final LatencyRecorders recorders, final HistogramLogWriter writer, final long nowMs)
    {
        this.recorders = recorders;
        this.writer = writer;
        final int n = RequestType.COUNT + 2 * LatencyRecorders.STAGE_COUNT;
        totals = new Histogram[n];
        intervals = new Histogram[n];
        tags = new String[n];
        sources = new SingleWriterRecorder[n];
        int i = 0;
        for (int type = 0; type < RequestType.COUNT; type++, i++)
        {
            tags[i] = "type." + RequestType.name(type);
            sources[i] = recorders.request(type);
        }
        for (int stage = 0; stage < LatencyRecorders.STAGE_COUNT; stage++)
        {
            tags[i] = "stage." + LatencyRecorders.STAGE_NAMES[stage] + ".service";
            sources[i++] = recorders.stageService(stage);
            tags[i] = "stage." + LatencyRecorders.STAGE_NAMES[stage] + ".queued";
            sources[i++] = recorders.stageQueued(stage);
        }
        for (int k = 0; k < n; k++)
        {
            totals[k] = LatencyRecorders.newHistogram();
            intervals[k] = LatencyRecorders.newHistogram();
            totals[k].setTag(tags[k]);
        }
        // A recorder allocates the spare histogram it swaps in at its first interval. Take that interval here,
        // so the two dozen spares (about 5 MiB) are allocated with the logger and not by the first poll of a
        // running server; whatever was recorded before the logger existed goes into the totals.
        for (int k = 0; k < n; k++)
        {
            sources[k].getIntervalHistogramInto(intervals[k]);
            totals[k].add(intervals[k]);
        }
        intervalStartMs = nowMs;
        if (null != writer)
        {
            writer.outputLogFormatVersion();
            writer.outputStartTime(nowMs);
            writer.setBaseTime(nowMs);
            writer.outputLegend();
        }
    }

    /**
     * Closes the current interval: logs every non-empty interval histogram and adds it to the totals.
     *
     * @param nowMs wall clock now, end of the interval.
     * @return number of values recorded in the interval.
     */
    public synchronized long poll(final long nowMs)
    {
        long values = 0;
        for (int k = 0; k < sources.length; k++)
        {
            final Histogram interval = intervals[k];
            sources[k].getIntervalHistogramInto(interval);
            if (interval.getTotalCount() > 0)
            {
                values += interval.getTotalCount();
                interval.setTag(tags[k]);
                interval.setStartTimeStamp(intervalStartMs);
                interval.setEndTimeStamp(nowMs);
                if (null != writer)
                {
                    writer.outputIntervalHistogram(interval);
                }
                totals[k].add(interval);
            }
        }
        intervalStartMs = nowMs;
        return values;
    }

    /**
     * A copy of the accumulated histogram of a request type, safe to take while another thread polls.
     *
     * @param type request type.
     * @return a copy of the totals so far.
     */
    public synchronized Histogram copyRequestTotal(final int type)
    {
        return totals[type].copy();
    }

    /**
     * Accumulated histogram of a request type.
     *
     * @param type request type.
     * @return totals so far.
     */
    public Histogram requestTotal(final int type)
    {
        return totals[type];
    }

    /**
     * Accumulated service-time histogram of a stage.
     *
     * @param stage stage index.
     * @return totals so far.
     */
    public Histogram stageServiceTotal(final int stage)
    {
        return totals[RequestType.COUNT + 2 * stage];
    }

    /**
     * Accumulated queue-time histogram of a stage.
     *
     * @param stage stage index.
     * @return totals so far.
     */
    public Histogram stageQueuedTotal(final int stage)
    {
        return totals[RequestType.COUNT + 2 * stage + 1];
    }

    /**
     * Prints p50/p90/p99/p99.9/max in microseconds for every request type and stage that has values.
     *
     * @param out where to print.
     */
    public void report(final PrintStream out)
    {
        out.printf("%-28s %10s %9s %9s %9s %9s %9s%n", "latency (us)", "count", "p50", "p90", "p99", "p99.9", "max");
        for (final Histogram h : totals)
        {
            if (h.getTotalCount() > 0)
            {
                out.println(reportLine(h.getTag(), h));
            }
        }
    }

    /**
     * One report line for a histogram.
     *
     * @param name label.
     * @param h    histogram in ns.
     * @return the formatted line.
     */
    public static String reportLine(final String name, final Histogram h)
    {
        return String.format(Locale.ROOT, "%-28s %10d %9.2f %9.2f %9.2f %9.2f %9.2f", name, h.getTotalCount(),
            h.getValueAtPercentile(50) / 1000.0, h.getValueAtPercentile(90) / 1000.0,
            h.getValueAtPercentile(99) / 1000.0, h.getValueAtPercentile(99.9) / 1000.0, h.getMaxValue() / 1000.0);
    }

    /**
     * The recorders read.
     *
     * @return recorders.
     */
    public LatencyRecorders recorders()
    {
        return recorders;
    }

    /**
     * Closes the interval log writer.
     */
    @Override
    public void close()
    {
        if (null != writer)
        {
            writer.close();
        }
    }
}
