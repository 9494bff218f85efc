package io.kvstash.perf.core;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.file.CountersDescriptor;
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
 * A retrieve cycle of a readable range: PREPARE_RETRIEVE (pin every chunk, return the slots) then
 * COMMIT_RETRIEVE (unpin, make the chunks most recently used).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 4, time = 1)
@Measurement(iterations = 8, time = 1)
@Fork(value = 3, jvmArgsAppend = StoreFixture.ADD_EXPORTS)
@State(Scope.Thread)
public class RetrieveCycleBenchmark
{
    /** Chunks in the retrieved range. */
    @Param({ "1", "32" })
    public int chunks;

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
        keys = StoreFixture.rangeKeys(chunks, 4);
        StoreFixture.storeAll(store, keys);
    }

    /**
     * Records the miss counter the iteration is checked against.
     */
    @Setup(Level.Iteration)
    public void setupIteration()
    {
        missesBefore = StoreFixture.counter(store, CountersDescriptor.RETRIEVE_MISSES);
    }

    /**
     * Fails the run if any retrieve of the iteration missed or left its pins.
     */
    @TearDown(Level.Iteration)
    public void verifyIteration()
    {
        StoreFixture.check(missesBefore == StoreFixture.counter(store, CountersDescriptor.RETRIEVE_MISSES),
            "a retrieve missed");
        StoreFixture.check(0 == store.book().pendingTransfers() && 0 == store.book().pinnedChunks(),
            "pins left after commit");
    }

    /**
     * One retrieve cycle.
     *
     * @return status of the commit.
     */
    @Benchmark
    public int retrieveCycle()
    {
        final StoreCommand prepare = store.prepareRetrieve(StoreFixture.INSTANCE_ID, keys);
        return store.commitRetrieve(StoreFixture.INSTANCE_ID, prepare.outTransferId).status;
    }
}
