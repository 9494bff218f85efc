package io.kvstash.perf.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The bench's verdict: every target judged against its bound, what each compares in words, and whether the
 * machine was loaded when the run began (a load average above half its cores, or spin gaps that took more than
 * {@link #LOADED_TIME_LOST_PCT} % of the time) so that a miss is read with that in mind. A full run fails (exit
 * code 1) when a measured target is missed; a {@code --quick} run is too short to judge targets, and passes once
 * every contender ran.
 */
final class BenchVerdict
{
    /** Spin gaps taking more than this share of the time mean another load shared the cores. */
    static final double LOADED_TIME_LOST_PCT = 1.0;

    /** What each target compares, in the words of a reader who has not seen the code. */
    static final Map<String, String> DESCRIPTIONS = new LinkedHashMap<>();

    static
    {
        DESCRIPTIONS.put("store_vs_copy", "store through kvstash / a plain memory copy, GB/s (256 KiB-32 MiB chunks)");
        DESCRIPTIONS.put("retrieve_vs_copy", "retrieve through kvstash / a plain memory copy, GB/s (256 KiB-32 MiB)");
        DESCRIPTIONS.put("store_vs_redis_small", "store through kvstash / Redis SET, GB/s (256 KiB and 2 MiB chunks)");
        DESCRIPTIONS.put("retrieve_vs_redis_small", "retrieve through kvstash / Redis GET, GB/s (256 KiB and 2 MiB)");
        DESCRIPTIONS.put("store_vs_redis_large", "store through kvstash / Redis SET, GB/s (32 MiB chunks)");
        DESCRIPTIONS.put("retrieve_vs_redis_large", "retrieve through kvstash / Redis GET, GB/s (32 MiB chunks)");
        DESCRIPTIONS.put("control_p50_vs_echo", "prepare+commit round trip / a bare ring echo round trip, p50");
        DESCRIPTIONS.put("control_p999_us", "prepare+commit round trip p99.9, microseconds");
        DESCRIPTIONS.put("control_pairs_per_s", "prepare+commit pairs per second, one client");
        DESCRIPTIONS.put("gc_count_steady", "garbage collections while measuring");
        DESCRIPTIONS.put("eviction_pairs_per_s_vs_lru_busy_spin", "control pairs/s under --eviction's policy / under " +
            "lru, busy-spin (median of alternating rounds)");
        DESCRIPTIONS.put("eviction_pairs_per_s_vs_lru_backoff", "the same, server and client in backoff");
        DESCRIPTIONS.put("l2_fetch_vs_get", "read-through into the pool / a bare cluster GET loop, GB/s (2, 32 MiB)");
        DESCRIPTIONS.put("l2_write_vs_set", "write-through of stored chunks / a bare cluster SET loop, GB/s (2, 32 MiB)");
        DESCRIPTIONS.put("store_vs_copy_l2", "store / a plain memory copy with write-through on, GB/s (2, 32 MiB)");
        DESCRIPTIONS.put("retrieve_vs_copy_l2", "retrieve / a plain memory copy with write-through on, GB/s (2, 32 MiB)");
        DESCRIPTIONS.put("store_vs_copy_l2_backoff", "the same, server and worker in backoff (no target)");
        DESCRIPTIONS.put("retrieve_vs_copy_l2_backoff", "the same, server and worker in backoff (no target)");
    }

    final String verdict;
    final List<String> missed;
    final String loaded;
    final String line;

    private BenchVerdict(final String verdict, final List<String> missed, final String loaded, final String line)
    {
        this.verdict = verdict;
        this.missed = missed;
        this.loaded = loaded;
        this.line = line;
    }

    /**
     * Judges a report's targets.
     *
     * @param targets the report's {@code targets}: name to {@code value}, {@code target}, {@code met}.
     * @param machine the report's {@code machine} facts ({@code cores}, {@code load_average}, {@code spin_gaps}).
     * @param quick   a {@code --quick} run.
     * @return the verdict.
     */
    @SuppressWarnings("unchecked")
    static BenchVerdict of(final Map<String, Object> targets, final Map<String, Object> machine, final boolean quick)
    {
        final List<String> missed = new ArrayList<>();
        final List<String> unmeasured = new ArrayList<>();
        int met = 0;
        for (final Map.Entry<String, Object> e : targets.entrySet())
        {
            final Map<String, Object> t = (Map<String, Object>)e.getValue();
            final Object isMet = t.get("met");
            if (null == isMet)
            {
                unmeasured.add(e.getKey());
            }
            else if (Boolean.TRUE.equals(isMet))
            {
                met++;
            }
            else
            {
                missed.add(e.getKey() + " " + format(t.get("value")) + " (want " + t.get("target") + ")");
            }
        }
        final String loaded = loadedReason(machine);
        final String loadNote = null == loaded ? "" :
            "; the machine was loaded (" + loaded + "): rerun on an idle machine before trusting a miss";
        final int judged = met + missed.size();
        final String notMeasured = unmeasured.isEmpty() ? "" : "; not measured in this run: " +
            String.join(", ", unmeasured);
        if (quick)
        {
            return new BenchVerdict("PASS", missed, loaded, "PASS: quick smoke run, every contender ran; targets are " +
                "judged by the full run (" + met + " of " + judged + " met here)" + notMeasured + loadNote);
        }
        if (missed.isEmpty())
        {
            return new BenchVerdict("PASS", missed, loaded, "PASS: all " + met + " measured targets met" + notMeasured +
                (null == loaded ? "" : " (the machine was loaded: " + loaded + ")"));
        }
        return new BenchVerdict("FAIL", missed, loaded, "FAIL: " + missed.size() + " of " + judged +
            " targets missed: " + String.join(", ", missed) + notMeasured + loadNote);
    }

    @SuppressWarnings("unchecked")
    private static String loadedReason(final Map<String, Object> machine)
    {
        final List<String> reasons = new ArrayList<>();
        final Object cores = machine.get("cores");
        final Object load = machine.get("load_average");
        if (cores instanceof Number && load instanceof Number &&
            ((Number)load).doubleValue() > 0.5 * ((Number)cores).doubleValue())
        {
            reasons.add(String.format(Locale.ROOT, "load average %.2f at the start on %d cores",
                ((Number)load).doubleValue(), ((Number)cores).intValue()));
        }
        final Object gaps = machine.get("spin_gaps");
        if (gaps instanceof Map)
        {
            for (final Map.Entry<String, Object> e : ((Map<String, Object>)gaps).entrySet())
            {
                final Object lost = e.getValue() instanceof Map ? ((Map<String, Object>)e.getValue()).get("time_lost_pct") :
                    null;
                if (lost instanceof Number && ((Number)lost).doubleValue() > LOADED_TIME_LOST_PCT)
                {
                    reasons.add(String.format(Locale.ROOT, "spin gaps %s took %.1f %% of the time",
                        e.getKey().replace('_', ' '), ((Number)lost).doubleValue()));
                }
            }
        }
        return reasons.isEmpty() ? null : String.join(", ", reasons);
    }

    private static String format(final Object value)
    {
        return value instanceof Number ? String.format(Locale.ROOT, "%.3g", ((Number)value).doubleValue()) :
            String.valueOf(value);
    }

    /**
     * The verdict as JSON-ready fields.
     *
     * @return verdict, missed targets, the load note (null when idle) and the line.
     */
    Map<String, Object> toMap()
    {
        final Map<String, Object> map = new LinkedHashMap<>();
        map.put("verdict", verdict);
        map.put("missed", missed);
        map.put("machine_loaded", loaded);
        map.put("line", line);
        return map;
    }
}
