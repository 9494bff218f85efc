package io.kvstash.perf.core;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.tools.BundledTrace;
import io.kvstash.tools.PolicyReplay;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The bundled synthetic Mooncake trace replayed through the store core under an eviction policy, as
 * {@code kvstash replay --compare-policies} does ({@link PolicyReplay}): every request a LOOKUP of its prefix, a
 * retrieve of the hit chunks and a store of the rest, on a full pool of 16,384 chunks. Unlike the store cycle's
 * new keys, these are the requests a policy's bookkeeping is for (its key history counts every LOOKUP key), so
 * lru and the default side by side give the policy's cost per request of a real workload. Each operation is the
 * whole trace (3,993 requests, 121,877 chunk references) from a fresh store; the replay's own allocation of keys
 * per request is the same under both policies. The trace is the bundled one ({@link BundledTrace#locate()}), or
 * the file in the system property {@code kvstash.trace}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 5, time = 1)
@Measurement(iterations = 8, time = 1)
@Fork(value = 2, jvmArgsAppend = StoreFixture.ADD_EXPORTS)
@State(Scope.Thread)
public class TraceReplayBenchmark
{
    /** Capacity of the replay, in chunks: where the policies' hit counts differ most. */
    public static final int CAPACITY_CHUNKS = 16_384;

    /** The eviction policy. */
    @Param({ "lru", "slru-admit" })
    public String eviction = "lru";

    List<MooncakeTrace.Request> requests;
    EvictionPolicy policy;
    long hits = -1;

    /**
     * Reads the trace.
     *
     * @throws IOException when the trace cannot be read.
     */
    @Setup(Level.Trial)
    public void setupTrial() throws IOException
    {
        requests = MooncakeTrace.read(tracePath()).requests();
        policy = EvictionPolicy.ofName(eviction);
    }

    /**
     * Fails the run unless every replay of the trial counted the same hits, which is more than none.
     */
    @TearDown(Level.Iteration)
    public void verifyIteration()
    {
        StoreFixture.check(hits > 0, "the replay hit nothing");
    }

    /**
     * One replay of the whole trace.
     *
     * @return hit chunks.
     */
    @Benchmark
    public long replay()
    {
        final long h = PolicyReplay.hitChunks(requests, CAPACITY_CHUNKS, policy);
        StoreFixture.check(hits < 0 || hits == h, "the replay counted " + h + " hits after " + hits);
        hits = h;
        return h;
    }

    static Path tracePath() throws IOException
    {
        final String property = System.getProperty("kvstash.trace");
        return null != property ? Path.of(property) : BundledTrace.locate();
    }
}
