package io.kvstash.perf.bench;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * How often the machine takes a running thread's CPU away, measured with nothing else to do: one thread per
 * core reads the clock in a loop and counts the gaps between two reads longer than {@link #GAP_NS}. A thread
 * that is never interrupted sees none; on the development VMs every vCPU loses about 35 us once per
 * millisecond and more every few milliseconds (about 1,400 gaps a second, 5 % of its time), in a Java loop
 * and in a C loop alike, with no context switch of the process to account for them: the hypervisor's.
 * <p>
 * A pair of round trips with one in flight is delayed by any gap on either of the two vCPUs its client and
 * server spin on while it runs, so a fraction {@code gaps per second (both vCPUs) x pair time} of the pairs
 * carry a gap. Its p99.9 is a gap's length once that fraction passes 0.1 %, whatever the server does: the
 * longest pair that keeps its p99.9 clear of them is {@code 0.001 / gaps per second}
 * ({@code p999_clear_pair_us}).
 * <p>
 * Gaps of half a millisecond and more are counted apart ({@code gaps_over_500us_per_s}): a bare C loop here
 * sees a few a second on some vCPU, up to 3 ms long. One of them on the server's vCPU while a worker waits
 * for an answer stalls a whole repetition of a chunk loop by that much, which the copy loops, needing no
 * second thread, do not suffer.
 */
final class SpinGaps
{
    /** A clock read this much later than the previous one is a gap. */
    static final long GAP_NS = 10_000;
    /** A gap this long or longer is counted apart: it stalls a whole chunk loop, not one pair. */
    static final long LONG_GAP_NS = 500_000;
    private static final int MAX_GAPS = 1 << 16;

    private SpinGaps()
    {
    }

    /**
     * Spins one thread per available processor for a while and summarises the gaps they saw.
     *
     * @param durationMs how long each thread spins.
     * @return per thread and overall figures.
     * @throws InterruptedException when interrupted while waiting for the threads.
     */
    static Map<String, Object> measure(final long durationMs) throws InterruptedException
    {
        final int n = Runtime.getRuntime().availableProcessors();
        final long[][] gaps = new long[n][];
        final Thread[] threads = new Thread[n];
        for (int i = 0; i < n; i++)
        {
            final int id = i;
            threads[i] = new Thread(() -> gaps[id] = spin(durationMs * 1_000_000L), "spin-gaps-" + i);
        }
        for (final Thread t : threads)
        {
            t.start();
        }
        for (final Thread t : threads)
        {
            t.join();
        }
        final double seconds = durationMs / 1e3;
        long count = 0;
        long lostNs = 0;
        long longCount = 0;
        long longNs = 0;
        long[] all = new long[0];
        for (final long[] g : gaps)
        {
            count += g.length;
            for (final long v : g)
            {
                lostNs += v;
                if (v >= LONG_GAP_NS)
                {
                    longCount++;
                    longNs += v;
                }
            }
            all = concat(all, g);
        }
        Arrays.sort(all);
        final Map<String, Object> m = new LinkedHashMap<>();
        m.put("threads", n);
        m.put("duration_ms", durationMs);
        m.put("gap_over_us", GAP_NS / 1000);
        final double perSecond = count / seconds;
        m.put("gaps_per_s", Math.round(perSecond));
        m.put("gap_p50_us", 0 == all.length ? 0.0 : all[all.length / 2] / 1e3);
        m.put("gap_p90_us", 0 == all.length ? 0.0 : all[(int)(all.length * 0.9)] / 1e3);
        m.put("gap_max_us", 0 == all.length ? 0.0 : all[all.length - 1] / 1e3);
        m.put("time_lost_pct", Math.round(1e4 * lostNs / (n * seconds * 1e9)) / 100.0);
        m.put("gaps_over_500us_per_s", Math.round(10 * longCount / seconds) / 10.0);
        m.put("gaps_over_500us_ms_per_s", Math.round(10 * longNs / 1e6 / seconds) / 10.0);
        m.put("p999_clear_pair_us", 0 == count ? null : Math.round(1e6 * 0.001 / perSecond * 1000) / 1000.0);
        return m;
    }

    private static long[] spin(final long durationNs)
    {
        final long[] gaps = new long[MAX_GAPS];
        int count = 0;
        final long deadline = System.nanoTime() + durationNs;
        long t0 = System.nanoTime();
        while (t0 < deadline)
        {
            final long t1 = System.nanoTime();
            if (t1 - t0 > GAP_NS && count < MAX_GAPS)
            {
                gaps[count++] = t1 - t0;
            }
            t0 = t1;
        }
        return Arrays.copyOf(gaps, count);
    }

    private static long[] concat(final long[] a, final long[] b)
    {
        final long[] c = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }
}
