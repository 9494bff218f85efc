package io.kvstash.tools;

import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;

import java.io.FileNotFoundException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads HdrHistogram interval logs ({@code .hlog}) as the server, the replay and the bench write them.
 */
public final class IntervalLogs
{
    private IntervalLogs()
    {
    }

    /**
     * The interval histograms of a log, in file order, their start and end time stamps absolute (epoch ms) and
     * their tags kept; double-valued histograms, which kvstash never writes, are left out.
     *
     * @param file the log.
     * @return its intervals.
     * @throws FileNotFoundException when there is no such file.
     */
    public static List<Histogram> read(final Path file) throws FileNotFoundException
    {
        final List<Histogram> intervals = new ArrayList<>();
        final HistogramLogReader reader = new HistogramLogReader(file.toFile());
        EncodableHistogram interval;
        while (null != (interval = reader.nextIntervalHistogram()))
        {
            if (interval instanceof Histogram)
            {
                intervals.add((Histogram)interval);
            }
        }
        return intervals;
    }
}
