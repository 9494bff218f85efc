package io.kvstash.perf.core;

import io.kvstash.core.StoreCommand;
import io.kvstash.tools.BundledTrace;
import io.kvstash.wire.Status;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Runs each benchmark's setup, a few operations and its checks directly (not through JMH), so a benchmark
 * that would time error answers fails the build. Nothing here is timed.
 */
class CoreBenchmarksTest
{
    private static final int OPERATIONS = 3;

    @Test
    void shouldHashTheSameChunkWhenTokensComeFromAnArrayOrABuffer()
    {
        final ChunkHasherBenchmark benchmark = new ChunkHasherBenchmark();
        benchmark.setup();

        assertEquals(1, benchmark.hashIntArray());
        final long[] fromArray = { benchmark.hi[0], benchmark.lo[0] };
        assertEquals(1, benchmark.hashDirectBuffer());
        assertArrayEquals(fromArray, new long[]{ benchmark.hi[0], benchmark.lo[0] });
    }

    @Test
    void shouldCommitEveryStoreCycleWhenThePoolHasFreeSlots()
    {
        final StoreCycleBenchmark benchmark = new StoreCycleBenchmark();
        final StoreCycleBenchmark.EmptyPool pool = new StoreCycleBenchmark.EmptyPool();
        pool.setupTrial();
        for (int iteration = 0; iteration < 2; iteration++)
        {
            pool.setupIteration();
            for (int i = 0; i < OPERATIONS; i++)
            {
                assertEquals(Status.OK, benchmark.storeCycleNoEviction(pool));
            }
            pool.verifyIteration();
            assertEquals(OPERATIONS, pool.store.book().readableChunks());
        }
    }

    @Test
    void shouldCommitEveryStoreCycleWhenEachEvictsOneChunk()
    {
        final StoreCycleBenchmark benchmark = new StoreCycleBenchmark();
        final StoreCycleBenchmark.FullPool pool = new StoreCycleBenchmark.FullPool();
        pool.setupTrial();
        pool.setupIteration();
        for (int i = 0; i < OPERATIONS; i++)
        {
            assertEquals(Status.OK, benchmark.storeCycleWithEviction(pool));
        }
        pool.verifyIteration();
        assertEquals(pool.slots, pool.store.book().readableChunks());
    }

    @ParameterizedTest
    @ValueSource(strings = { "lru", "slru-admit" })
    void shouldCountTheSameHitsOnEveryReplayOfTheTrace(final String eviction) throws Exception
    {
        final TraceReplayBenchmark benchmark = new TraceReplayBenchmark();
        benchmark.eviction = eviction;
        benchmark.setupTrial();
        final long first = benchmark.replay();
        assertEquals(first, benchmark.replay());
        benchmark.verifyIteration();
        // The exact-LRU reference of the bundled trace at the benchmark's capacity; the default policy keeps more.
        final long lru = BundledTrace.referenceHitChunks().get(TraceReplayBenchmark.CAPACITY_CHUNKS);
        if ("lru".equals(eviction))
        {
            assertEquals(lru, first);
        }
        else
        {
            assertTrue(first > lru, "hits " + first + ", exact LRU " + lru);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = { "", "tenant-a" })
    void shouldHitTheWholePrefixWhenItIsPresent(final String salt)
    {
        final LookupBenchmark benchmark = new LookupBenchmark();
        benchmark.salt = salt;
        benchmark.setupTrial();
        benchmark.setupIteration();
        for (int i = 0; i < OPERATIONS; i++)
        {
            final StoreCommand lookup = benchmark.lookup32();
            assertEquals(Status.OK, lookup.status);
            assertEquals(LookupBenchmark.CHUNKS, lookup.hitChunks);
        }
        benchmark.verifyIteration();
    }

    @ParameterizedTest
    @ValueSource(ints = { 1, 32 })
    void shouldCommitEveryRetrieveCycleWhenTheRangeIsReadable(final int chunks)
    {
        final RetrieveCycleBenchmark benchmark = new RetrieveCycleBenchmark();
        benchmark.chunks = chunks;
        benchmark.setupTrial();
        benchmark.setupIteration();
        for (int i = 0; i < OPERATIONS; i++)
        {
            assertEquals(Status.OK, benchmark.retrieveCycle());
        }
        benchmark.verifyIteration();
    }
}
