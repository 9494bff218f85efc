package io.kvstash.perf.bench;

import io.kvstash.tools.PercentilePlot;
import io.kvstash.tools.WorkerResult;
import org.HdrHistogram.Histogram;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The bench's results as the parts hand them in, on the coordinator's thread: the summaries the report is built
 * from ({@link BenchReport}) and every latency histogram, keyed by contender, for {@code bench.hlog} and the plot
 * ({@link BenchFiles}). Latencies in the summaries are in microseconds, throughputs in GB/s (10^9 bytes per
 * second) or pairs per second.
 */
final class BenchResults
{
    final BenchSettings settings;
    final Map<String, Histogram> histograms = new LinkedHashMap<>();
    final List<Map<String, Object>> sizes = new ArrayList<>();
    final Map<String, Map<String, Object>> control = new LinkedHashMap<>();
    final Map<String, Map<String, Object>> controlJournal = new LinkedHashMap<>();
    final Map<String, Map<String, Object>> controlDedicated = new LinkedHashMap<>();
    final Map<String, Map<String, Object>> controlEviction = new LinkedHashMap<>();
    final Map<String, Map<String, Object>> echo = new LinkedHashMap<>();
    final List<Map<String, Object>> rounds = new ArrayList<>();
    final Map<String, Object> spinGaps = new LinkedHashMap<>();
    private final Map<String, Histogram[]> serverTimes = new LinkedHashMap<>();
    Map<String, Object> machine;
    Map<String, Object> firstTouch;
    /** The second tier's part ({@link L2Part}), or null when it was not asked for. */
    Map<String, Object> l2;
    /** The scaling part's result ({@link ScalePart}), or null when it did not run. */
    Map<String, Object> scale;
    long gcSteady;
    String redisVersion;
    boolean redisInstalled;

    BenchResults(final BenchSettings settings)
    {
        this.settings = settings;
    }

    private double median(final Map<String, Object> series, final String name, final long size)
    {
        return median(series, name, "", size);
    }

    private double median(final Map<String, Object> series, final String name, final String suffix, final long size)
    {
        @SuppressWarnings("unchecked")
        final Map<String, Object> s = (Map<String, Object>)series.get(name);
        histograms.put(name + suffix + " " + BenchSupport.size(size),
            WorkerResult.decode((String)s.get("histogram")));
        return ((Number)s.get("median_gbps")).doubleValue();
    }

    /**
     * Adds the row of one chunk size: the data runs of each wait mode, Redis and the in-process map.
     *
     * @param size    bytes of one chunk.
     * @param chunks  chunks per repetition.
     * @param data    the worker's data result by wait mode.
     * @param benchGc collections of this JVM during the data runs.
     * @param redis   the worker's Redis result, or null when Redis was left out.
     * @param chm     the worker's in-process map result.
     */
    @SuppressWarnings("unchecked")
    void addSize(
        final long size,
        final int chunks,
        final Map<String, Map<String, Object>> data,
        final long benchGc,
        final Map<String, Object> redis,
        final Map<String, Object> chm)
    {
        final Map<String, Object> row = new LinkedHashMap<>();
        row.put("chunk_bytes", size);
        row.put("chunks_per_rep", chunks);
        long workerGc = 0;
        for (final String mode : data.keySet())
        {
            final Map<String, Object> d = data.get(mode);
            final String suffix = BenchSupport.BUSY_SPIN.equals(mode) ? "" : "_" + mode;
            for (final String name : new String[]{ "copy_in", "store", "copy_out", "retrieve", "store_pipelined",
                "retrieve_pipelined", "store_batched", "retrieve_batched" })
            {
                if (!d.containsKey(name))
                {
                    continue;
                }
                row.put(name + suffix + "_gbps", median(d, name, suffix, size));
                final Histogram h = histograms.get(name + suffix + " " + BenchSupport.size(size));
                row.put(name + suffix + "_p50_us", h.getValueAtPercentile(50) / 1e3);
                row.put(name + suffix + "_p99_us", h.getValueAtPercentile(99) / 1e3);
            }
            workerGc += ((Number)d.get("gc_worker")).longValue();
        }
        if (null != redis)
        {
            final Map<String, Object> set = (Map<String, Object>)redis.get("set");
            final Map<String, Object> get = (Map<String, Object>)redis.get("get");
            final Map<String, Object> r = new LinkedHashMap<>();
            r.put("redis_set", set);
            r.put("redis_get", get);
            row.put("redis_set_gbps", median(r, "redis_set", size));
            row.put("redis_get_gbps", median(r, "redis_get", size));
        }
        else
        {
            row.put("redis_set_gbps", null);
            row.put("redis_get_gbps", null);
        }
        final Map<String, Object> m = new LinkedHashMap<>();
        m.put("map_put", chm.get("put"));
        m.put("map_get", chm.get("get"));
        row.put("map_put_gbps", median(m, "map_put", size));
        row.put("map_get_gbps", median(m, "map_get", size));
        row.put("gc_worker", workerGc);
        row.put("gc_bench", benchGc);
        gcSteady += workerGc + benchGc;
        sizes.add(row);
    }

    /**
     * Keeps the server's own prepare and commit times of a plain control run, for {@link #addControl}.
     *
     * @param waitMode wait mode of the run.
     * @param prepare  the server's PREPARE_STORE times, copied.
     * @param commit   the server's COMMIT_STORE times, copied.
     */
    void serverTime(final String waitMode, final Histogram prepare, final Histogram commit)
    {
        serverTimes.put(waitMode, new Histogram[]{ prepare.copy(), commit.copy() });
    }

    /**
     * Adds the plain control run of a wait mode and the echo run of the same mode.
     *
     * @param waitMode wait mode of both.
     * @param c        the worker's control result.
     * @param e        the worker's echo result.
     */
    void addControl(final String waitMode, final Map<String, Object> c, final Map<String, Object> e)
    {
        final Map<String, Object> s = summary("control " + waitMode, c);
        final Histogram[] server = serverTimes.get(waitMode);
        if (null != server)
        {
            // Includes the warm-up, throughput and paced phases: the server records every request.
            s.put("server_prepare_p50_us", server[0].getValueAtPercentile(50) / 1e3);
            s.put("server_prepare_p99_us", server[0].getValueAtPercentile(99) / 1e3);
            s.put("server_commit_p50_us", server[1].getValueAtPercentile(50) / 1e3);
            s.put("server_commit_p99_us", server[1].getValueAtPercentile(99) / 1e3);
        }
        control.put(waitMode, s);
        echo.put(waitMode, summary("echo " + waitMode, e));
    }

    /**
     * Adds one alternating round (see {@link ControlRoundsPart}).
     *
     * @param control    the worker's control result.
     * @param echo       the worker's echo result, measured right after.
     * @param headerOnly the worker's header-only echo result.
     */
    void addRound(final Map<String, Object> control, final Map<String, Object> echo,
        final Map<String, Object> headerOnly)
    {
        final Histogram c = WorkerResult.decode((String)control.get("latency"));
        final Histogram e = WorkerResult.decode((String)echo.get("latency"));
        final Histogram h = WorkerResult.decode((String)headerOnly.get("latency"));
        histograms.computeIfAbsent("control busy-spin rounds", k -> BenchSupport.newHistogram()).add(c);
        histograms.computeIfAbsent("echo busy-spin rounds", k -> BenchSupport.newHistogram()).add(e);
        final Map<String, Object> r = new LinkedHashMap<>();
        r.put("control_p50_us", c.getValueAtPercentile(50) / 1e3);
        r.put("echo_p50_us", e.getValueAtPercentile(50) / 1e3);
        r.put("control_p50_vs_echo", (double)c.getValueAtPercentile(50) / e.getValueAtPercentile(50));
        r.put("control_p999_us", c.getValueAtPercentile(99.9) / 1e3);
        r.put("echo_p999_us", e.getValueAtPercentile(99.9) / 1e3);
        r.put("echo_header_only_p50_us", h.getValueAtPercentile(50) / 1e3);
        r.put("control_p50_vs_echo_header_only", (double)c.getValueAtPercentile(50) / h.getValueAtPercentile(50));
        // The server's residence (receiver stamp to response written) of the round's requests, with one in
        // flight: what the server adds to the two round trips the echo pair also makes.
        r.put("server_prepare_p50_us", control.get("server_prepare_p50_us"));
        r.put("server_commit_p50_us", control.get("server_commit_p50_us"));
        r.put("control_pairs", c.getTotalCount());
        r.put("echo_pairs", e.getTotalCount());
        rounds.add(r);
    }

    /**
     * The median over the rounds of one of their fields.
     *
     * @param field a numeric field of every round.
     * @return the median, or null when no round ran.
     */
    Double medianRoundRatio(final String field)
    {
        if (rounds.isEmpty())
        {
            return null;
        }
        final double[] r = new double[rounds.size()];
        for (int i = 0; i < r.length; i++)
        {
            r[i] = ((Number)rounds.get(i).get(field)).doubleValue();
        }
        return BenchSupport.median(r);
    }

    /**
     * A control run that differs from the plain one in one setting (the journal on, another threading
     * mode), summarised with its pairs/s and p50 as ratios to the plain run's of the same wait mode.
     *
     * @param into     {@link #controlJournal}, {@link #controlDedicated} or {@link #controlEviction}.
     * @param name     the variant's name, for its histograms.
     * @param waitMode wait mode of the run.
     * @param c        the worker's control result.
     * @param baseline what the plain run is called in the ratios' names.
     */
    void addControlVariant(
        final Map<String, Map<String, Object>> into,
        final String name,
        final String waitMode,
        final Map<String, Object> c,
        final String baseline)
    {
        final Map<String, Object> s = summary(name + " " + waitMode, c);
        final Object pairs = value(control, waitMode, "pairs_per_s");
        final Object p50 = value(control, waitMode, "p50_us");
        s.put("pairs_per_s_vs_" + baseline, pairs instanceof Number ?
            ((Number)s.get("pairs_per_s")).doubleValue() / ((Number)pairs).doubleValue() : null);
        s.put("p50_vs_" + baseline, p50 instanceof Number ?
            ((Number)s.get("p50_us")).doubleValue() / ((Number)p50).doubleValue() : null);
        into.put(waitMode, s);
    }

    private Map<String, Object> summary(final String name, final Map<String, Object> r)
    {
        final Histogram latency = WorkerResult.decode((String)r.get("latency"));
        final Histogram paced = WorkerResult.decode((String)r.get("paced"));
        histograms.put(name, latency);
        histograms.put(name + " paced", paced);
        final Map<String, Object> s = new LinkedHashMap<>();
        s.put("pairs_timed", latency.getTotalCount());
        s.put("p50_us", latency.getValueAtPercentile(50) / 1e3);
        s.put("p99_us", latency.getValueAtPercentile(99) / 1e3);
        s.put("p999_us", latency.getValueAtPercentile(99.9) / 1e3);
        s.put("max_us", latency.getMaxValue() / 1e3);
        s.put("pairs_per_s", ((Number)r.get("pairs_per_s")).doubleValue());
        s.put("window", r.get("window"));
        s.put("paced_rate", r.get("paced_rate"));
        s.put("paced_p50_us", paced.getValueAtPercentile(50) / 1e3);
        s.put("paced_p99_us", paced.getValueAtPercentile(99) / 1e3);
        s.put("paced_p999_us", paced.getValueAtPercentile(99.9) / 1e3);
        s.put("paced_max_us", paced.getMaxValue() / 1e3);
        return s;
    }

    /**
     * The control and echo histograms of both wait modes, for the plot.
     *
     * @param paced the paced runs' instead of the one-in-flight runs'.
     * @return the series, a null histogram where that run did not happen.
     */
    List<PercentilePlot.Series> controlSeries(final boolean paced)
    {
        final List<PercentilePlot.Series> series = new ArrayList<>();
        for (final String mode : new String[]{ BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF })
        {
            for (final String who : new String[]{ "control", "echo" })
            {
                final String name = who + " " + mode + (paced ? " paced" : "");
                series.add(new PercentilePlot.Series(name, histograms.get(name)));
            }
        }
        return series;
    }

    /**
     * The per-chunk histograms of every contender of a chunk size, for the plot.
     *
     * @param size bytes of one chunk.
     * @return the series, a null histogram where that contender did not run.
     */
    List<PercentilePlot.Series> sizeSeries(final long size)
    {
        final List<PercentilePlot.Series> series = new ArrayList<>();
        for (final String name : new String[]{ "copy_in", "store", "store_pipelined", "store_batched",
            "store_backoff", "store_pipelined_backoff", "copy_out", "retrieve", "retrieve_pipelined",
            "retrieve_batched", "retrieve_backoff", "retrieve_pipelined_backoff", "redis_set", "redis_get",
            "map_put", "map_get" })
        {
            final String key = name + " " + BenchSupport.size(size);
            series.add(new PercentilePlot.Series(key, histograms.get(key)));
        }
        return series;
    }

    /**
     * A field of the summary of a wait mode.
     *
     * @param m    summaries by wait mode ({@link #control}, {@link #echo}).
     * @param mode wait mode.
     * @param key  field.
     * @return the value, or null when that mode did not run.
     */
    static Object value(final Map<String, Map<String, Object>> m, final String mode, final String key)
    {
        final Map<String, Object> s = m.get(mode);
        return null == s ? null : s.get(key);
    }
}
