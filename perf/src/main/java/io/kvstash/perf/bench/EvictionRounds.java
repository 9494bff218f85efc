package io.kvstash.perf.bench;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.tools.WorkerResult;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The eviction policy's cost in control pairs: short rounds, each a control run against a fresh lru server and
 * one against a fresh server of the policy, back to back, the order swapped every round (lru first, then the
 * policy first). The host moves between speed states within a minute (see {@link ControlRoundsPart}), so two
 * long runs a minute apart compare states as much as policies; each round's two runs are a second apart, and the
 * summary is the median of the rounds' ratios. A policy other than exact LRU may keep some chunks for good (the
 * default stores the first of a fresh server's chunks warm, and then, learning that none is read again, every
 * later one cold): a prepare that finds its key still held reserves nothing and is no pair ({@code
 * held_key_prepares} counts them), so the keys ({@link #KEYS}) run out only after more prepares than a run
 * sends, and a run never comes round to its first keys (when it did, the default's runs spent about 2 % of
 * their time on held keys). Runs on the coordinator's thread.
 */
final class EvictionRounds
{
    /** Keys of a run: 2,097,152, more than a run's prepares on this machine (about 1.7 million). */
    static final int KEYS = 1 << 21;

    private EvictionRounds()
    {
    }

    /**
     * Runs {@link BenchSettings#evictionRounds} rounds in one wait mode.
     *
     * @param worker   the worker JVM, the client.
     * @param settings settings of the run: the policy, the rounds and their lengths.
     * @param work     the bench's work directory.
     * @param waitMode {@link BenchSupport#BUSY_SPIN} or {@link BenchSupport#BACKOFF}.
     * @param progress where progress lines go.
     * @return the summary: the medians of the rounds' pairs/s and p50 ratios, and every round.
     * @throws Exception when a server or the worker fails.
     */
    static Map<String, Object> run(
        final WorkerProcess worker,
        final BenchSettings settings,
        final Path work,
        final String waitMode,
        final Consumer<String> progress) throws Exception
    {
        final Map<String, Object> command =
            ControlPart.command(waitMode, settings, settings.roundWarmupMs, settings.roundMs, settings.roundMs, 0);
        command.put("keys", KEYS);

        final int n = settings.evictionRounds;
        final List<Object> rounds = new ArrayList<>(n);
        final double[] pairsRatio = new double[n];
        final double[] p50Ratio = new double[n];
        final double[] lruPairs = new double[n];
        final double[] policyPairs = new double[n];
        final double[] lruP50 = new double[n];
        final double[] policyP50 = new double[n];
        long heldKeyPrepares = 0;
        long lruHeldKeyPrepares = 0;
        for (int round = 0; round < n; round++)
        {
            final boolean lruFirst = 0 == (round & 1);
            progress.accept(BenchSupport.fmt("control, %s: lru and eviction %s, alternating: round %d of %d (%s first)",
                waitMode, settings.eviction.label(), round + 1, n, lruFirst ? "lru" : settings.eviction.label()));
            final Map<String, Object> first = ControlPart.control(worker, work, waitMode, command, settings, null,
                false, ThreadingMode.SHARED, lruFirst ? EvictionPolicy.LRU : settings.eviction);
            final Map<String, Object> second = ControlPart.control(worker, work, waitMode, command, settings, null,
                false, ThreadingMode.SHARED, lruFirst ? settings.eviction : EvictionPolicy.LRU);
            final Map<String, Object> lru = lruFirst ? first : second;
            final Map<String, Object> policy = lruFirst ? second : first;
            lruPairs[round] = ((Number)lru.get("pairs_per_s")).doubleValue();
            policyPairs[round] = ((Number)policy.get("pairs_per_s")).doubleValue();
            lruP50[round] = p50Us(lru);
            policyP50[round] = p50Us(policy);
            pairsRatio[round] = policyPairs[round] / lruPairs[round];
            p50Ratio[round] = policyP50[round] / lruP50[round];
            heldKeyPrepares += ((Number)policy.get("held_key_prepares")).longValue();
            lruHeldKeyPrepares += ((Number)lru.get("held_key_prepares")).longValue();

            final Map<String, Object> r = new LinkedHashMap<>();
            r.put("first", lruFirst ? "lru" : settings.eviction.label());
            r.put("lru_pairs_per_s", lruPairs[round]);
            r.put("pairs_per_s", policyPairs[round]);
            r.put("pairs_per_s_vs_lru", pairsRatio[round]);
            r.put("lru_p50_us", lruP50[round]);
            r.put("p50_us", policyP50[round]);
            r.put("p50_vs_lru", p50Ratio[round]);
            rounds.add(r);
        }

        final Map<String, Object> s = new LinkedHashMap<>();
        s.put("eviction", settings.eviction.label());
        s.put("keys", KEYS);
        s.put("window", settings.window);
        s.put("round_ms", settings.roundMs);
        s.put("pairs_per_s_vs_lru", BenchSupport.median(pairsRatio));
        s.put("p50_vs_lru", BenchSupport.median(p50Ratio));
        s.put("pairs_per_s", BenchSupport.median(policyPairs));
        s.put("lru_pairs_per_s", BenchSupport.median(lruPairs));
        s.put("p50_us", BenchSupport.median(policyP50));
        s.put("lru_p50_us", BenchSupport.median(lruP50));
        s.put("held_key_prepares", heldKeyPrepares);
        s.put("lru_held_key_prepares", lruHeldKeyPrepares);
        s.put("rounds", rounds);
        progress.accept(BenchSupport.fmt("control, %s: eviction %s against lru, median of %d rounds: pairs/s x%.3f, " +
            "p50 x%.3f", waitMode, settings.eviction.label(), n, BenchSupport.median(pairsRatio),
            BenchSupport.median(p50Ratio)));
        return s;
    }

    private static double p50Us(final Map<String, Object> run)
    {
        return WorkerResult.decode((String)run.get("latency")).getValueAtPercentile(50) / 1e3;
    }
}
