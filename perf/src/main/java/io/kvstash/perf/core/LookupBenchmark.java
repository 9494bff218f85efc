package io.kvstash.perf.core;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.hash.ChunkHasher;
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

import java.util.concurrent.TimeUnit;

/**
 * LOOKUP (no pin) of a 32-chunk prefix that is fully present: 32 index probes, nothing changes. With a
 * cache salt the range lives in the salted namespace of the instance, the way vLLM's {@code cache_salt}
 * separates tenants.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 4, time = 1)
@Measurement(iterations = 8, time = 1)
@Fork(value = 3, jvmArgsAppend = StoreFixture.ADD_EXPORTS)
@State(Scope.Thread)
public class LookupBenchmark
{
    /** Chunks in the looked-up range. */
    public static final int CHUNKS = 32;

    /** Cache salt of the range: empty for none. */
    @Param({ "", "tenant-a" })
    public String salt;

    KvStore store;
    ChunkKeys keys;
    private long missesBefore;

    /**
     * Stores the range in a pool that holds it.
     */
    @Setup(Level.Trial)
    public void setupTrial()
    {
        store = StoreFixture.newStore(1024);
        keys = StoreFixture.rangeKeys(CHUNKS, 3).withSalt(ChunkHasher.salt(salt));
        StoreFixture.storeAll(store, keys);
    }

    /**
     * Records the miss counter the iteration is checked against.
     */
    @Setup(Level.Iteration)
    public void setupIteration()
    {
        missesBefore = StoreFixture.counter(store, CountersDescriptor.LOOKUP_MISS_CHUNKS);
    }

    /**
     * Fails the run if any lookup of the iteration missed a chunk.
     */
    @TearDown(Level.Iteration)
    public void verifyIteration()
    {
        StoreFixture.check(missesBefore == StoreFixture.counter(store, CountersDescriptor.LOOKUP_MISS_CHUNKS),
            "a lookup missed");
    }

    /**
     * One lookup.
     *
     * @return the facade's command: status OK and {@link #CHUNKS} hit chunks.
     */
    @Benchmark
    public StoreCommand lookup32()
    {
        return store.lookup(StoreFixture.INSTANCE_ID, keys, false);
    }
}
