package io.kvstash.tools;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.trace.MooncakeTrace;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * {@code kvstash replay --compare-policies}: the hit chunks of one trace at one capacity under every eviction
 * policy ({@link PolicyReplay}, offline, in file order: what a one-worker replay through a server counts), beside
 * the clairvoyant farthest-next-use reference ({@link ClairvoyantReference}). Deterministic: the same trace and
 * capacity give the same figures on any machine.
 */
public final class PolicyComparison
{
    private final Path trace;
    private final int capacityChunks;
    private final long requests;
    private final long chunks;
    private final Map<EvictionPolicy, Long> hitChunks = new LinkedHashMap<>();
    private final long clairvoyantHitChunks;

    private PolicyComparison(
        final Path trace,
        final int capacityChunks,
        final long requests,
        final long chunks,
        final long clairvoyantHitChunks)
    {
        this.trace = trace;
        this.capacityChunks = capacityChunks;
        this.requests = requests;
        this.chunks = chunks;
        this.clairvoyantHitChunks = clairvoyantHitChunks;
    }

    /**
     * Replays a trace offline under every policy and computes the clairvoyant reference.
     *
     * @param trace          Mooncake trace.
     * @param capacityChunks capacity in chunks, at least 1.
     * @return the comparison.
     * @throws java.io.IOException when the trace cannot be read or parsed.
     */
    public static PolicyComparison run(final Path trace, final int capacityChunks) throws java.io.IOException
    {
        if (capacityChunks < 1)
        {
            throw new IllegalArgumentException("capacity " + capacityChunks + " is not a pool: give at least 1 chunk");
        }
        final MooncakeTrace mooncake = MooncakeTrace.read(trace);
        final PolicyComparison comparison = new PolicyComparison(trace.toAbsolutePath(), capacityChunks,
            mooncake.requests().size(), mooncake.chunkReferences(),
            ClairvoyantReference.hitChunks(mooncake.requests(), capacityChunks));
        for (final EvictionPolicy policy : EvictionPolicy.values())
        {
            comparison.hitChunks.put(policy, PolicyReplay.hitChunks(mooncake.requests(), capacityChunks, policy));
        }
        return comparison;
    }

    /**
     * Hit chunks under a policy.
     *
     * @param policy policy.
     * @return chunks.
     */
    public long hitChunks(final EvictionPolicy policy)
    {
        return hitChunks.get(policy);
    }

    /**
     * Hit chunks of the clairvoyant reference.
     *
     * @return chunks.
     */
    public long clairvoyantHitChunks()
    {
        return clairvoyantHitChunks;
    }

    /**
     * The comparison as a JSON-ready map: {@code hit_chunks} by policy name (exact LRU is {@code lru}), the
     * default policy's name, and {@code clairvoyant_hit_chunks}.
     *
     * @return ordered map.
     */
    public Map<String, Object> toMap()
    {
        final Map<String, Object> map = new LinkedHashMap<>();
        map.put("trace", trace.toString());
        map.put("format", "mooncake");
        map.put("capacity_chunks", capacityChunks);
        map.put("requests", requests);
        map.put("chunks", chunks);
        final Map<String, Object> byPolicy = new LinkedHashMap<>();
        hitChunks.forEach((policy, hits) -> byPolicy.put(policy.label(), hits));
        map.put("hit_chunks", byPolicy);
        map.put("default", EvictionPolicy.DEFAULT.label());
        map.put("clairvoyant_hit_chunks", clairvoyantHitChunks);
        return map;
    }

    /**
     * Prints the comparison as a table: hits, hit rate, change against exact LRU and share of the way from exact
     * LRU to the clairvoyant reference.
     *
     * @param out where to print.
     */
    public void print(final PrintWriter out)
    {
        final Locale l = Locale.ROOT;
        final long lru = hitChunks(EvictionPolicy.LRU);
        out.printf(l, "kvstash eviction policies: %s%n", trace);
        out.printf(l, "  %,d requests, %,d chunk references, capacity %,d chunks, replayed in file order%n%n",
            requests, chunks, capacityChunks);
        out.printf(l, "  %-26s %12s %9s %10s %12s%n", "policy", "hit chunks", "hit rate", "vs lru", "of the gap");
        hitChunks.forEach((policy, hits) -> row(out, policy.label() +
            (EvictionPolicy.DEFAULT == policy ? " (default)" : ""), hits, lru));
        row(out, "clairvoyant (reference)", clairvoyantHitChunks, lru);
    }

    private void row(final PrintWriter out, final String name, final long hits, final long lru)
    {
        final long gap = clairvoyantHitChunks - lru;
        out.printf(Locale.ROOT, "  %-26s %,12d %8.2f%% %+9.1f%% %11s%n", name, hits, 100.0 * hits / Math.max(1, chunks),
            100.0 * hits / Math.max(1, lru) - 100, gap > 0 ? String.format(Locale.ROOT, "%.0f%%", 100.0 * (hits - lru) / gap) : "-");
    }
}
