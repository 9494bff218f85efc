package io.kvstash.core;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.hash.ChunkHasher;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;

import static io.kvstash.core.StoreHarness.RANK0;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The hot requests allocate nothing once warm: measured with the thread's allocated-bytes counter over many
 * iterations. A behaviour check, not a timing test: nothing here looks at the clock.
 */
class AllocationTest
{
    private static final long INSTANCE = 7;
    private static final int WARM_UP = 20_000;
    private static final int ITERATIONS = 20_000;
    /** Noise allowed for a whole measured loop (not per operation). */
    private static final long NOISE_BYTES = 512;
    private static final int PREFIX = 32;
    private static final int CYCLE_KEYS = 256;

    private final StoreHarness h = new StoreHarness(StoreHarness.context(PREFIX + 64).maxChunksPerRequest(64));
    private final com.sun.management.ThreadMXBean threads =
        (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
    private final ChunkKeys[] cycleKeys = new ChunkKeys[CYCLE_KEYS];
    private ChunkKeys prefix;
    private ChunkKeys saltedPrefix;
    private final ChunkKeys absent = ChunkKeys.ofIds(1L << 40);
    private final byte[] llama = "llama".getBytes(java.nio.charset.StandardCharsets.UTF_8);
    private int next;

    @BeforeEach
    void setUp()
    {
        assertTrue(threads.isThreadAllocatedMemorySupported());
        threads.setThreadAllocatedMemoryEnabled(true);
        h.register(INSTANCE, RANK0);
        final long[] ids = new long[PREFIX];
        for (int i = 0; i < PREFIX; i++)
        {
            ids[i] = 1_000 + i;
        }
        prefix = ChunkKeys.ofIds(ids);
        saltedPrefix = prefix.withSalt(ChunkHasher.salt("tenant"));
        for (int i = 0; i < CYCLE_KEYS; i++)
        {
            cycleKeys[i] = ChunkKeys.ofIds(i);
        }
        h.stored(INSTANCE, prefix);
        h.stored(INSTANCE, saltedPrefix);
    }

    @Test
    void shouldAllocateNothingWhenRunningStoreCycles()
    {
        assertAllocationFree("store cycle", this::storeCycle);
        assertTrue(h.counter(CountersDescriptor.EVICTIONS) > 0, "the cycle runs with eviction in steady state");
    }

    @Test
    void shouldAllocateNothingWhenLookingUpAPrefix()
    {
        assertAllocationFree("lookup of 32 chunks", () ->
            assertEquals(PREFIX, h.store.lookup(INSTANCE, prefix, false).hitChunks));
    }

    @Test
    void shouldAllocateNothingWhenLookingUpASaltedPrefix()
    {
        assertAllocationFree("salted lookup of 32 chunks", () ->
            assertEquals(PREFIX, h.store.lookup(INSTANCE, saltedPrefix, false).hitChunks));
    }

    @Test
    void shouldAllocateNothingWhenRunningRetrieveCycles()
    {
        assertAllocationFree("retrieve cycle", this::retrieveCycle);
    }

    @Test
    void shouldAllocateNothingWhenPinningAndTakingOverALookup()
    {
        assertAllocationFree("pinned lookup, retrieve from lookup, commit", () ->
        {
            final long lookup = h.store.lookup(INSTANCE, prefix, true).outTransferId;
            final long retrieve = h.store.prepareRetrieveFromLookup(INSTANCE, lookup).outTransferId;
            check(h.store.commitRetrieve(INSTANCE, retrieve));
        });
    }

    @Test
    void shouldAllocateNothingWhenAMixOfRequestsRuns()
    {
        assertAllocationFree("mixed requests", () ->
        {
            storeCycle();
            retrieveCycle();
            final long aborted = h.store.prepareStore(INSTANCE, cycleKeys[next++ % CYCLE_KEYS]).outTransferId;
            if (0 != aborted)
            {
                check(h.store.abortStore(INSTANCE, aborted));
            }
            check(h.store.release(INSTANCE, h.store.lookup(INSTANCE, prefix, true).outTransferId));
            assertEquals(Status.MISS, h.store.prepareRetrieve(INSTANCE, absent).status);
            check(h.store.sweep());
            h.store.lookupAllRanks(llama, llama.length, 2, prefix);
            assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(INSTANCE, 12345).status);
            assertEquals(Status.UNKNOWN_INSTANCE, h.store.lookup(INSTANCE + 1, prefix, false).status);
        });
    }

    @Test
    void shouldAllocateNothingWhenMovingBytesThroughTheCopyTransport()
    {
        final org.agrona.concurrent.UnsafeBuffer source = new org.agrona.concurrent.UnsafeBuffer(new byte[64]);
        assertAllocationFree("copy transport store and retrieve", () ->
        {
            final StoreCommand prepare = h.store.prepareStore(INSTANCE, cycleKeys[next++ % CYCLE_KEYS]);
            final long store = prepare.outTransferId;
            if (0 != store)
            {
                check(h.store.writeData(INSTANCE, store, 0, 0, source, 0, 64));
                check(h.store.commitStore(INSTANCE, store));
            }
            final long retrieve = h.store.prepareRetrieve(INSTANCE, prefix).outTransferId;
            check(h.store.readData(INSTANCE, retrieve, 31, 0, 64));
            check(h.store.commitRetrieve(INSTANCE, retrieve));
        });
    }

    private void storeCycle()
    {
        final StoreCommand prepare = h.store.prepareStore(INSTANCE, cycleKeys[next++ % CYCLE_KEYS]);
        final long transfer = prepare.outTransferId;
        if (0 != transfer)
        {
            check(h.store.commitStore(INSTANCE, transfer));
        }
    }

    private void retrieveCycle()
    {
        final StoreCommand prepare = h.store.prepareRetrieve(INSTANCE, prefix);
        check(prepare);
        check(h.store.commitRetrieve(INSTANCE, prepare.outTransferId));
    }

    private static void check(final StoreCommand c)
    {
        if (null != c && Status.OK != c.status)
        {
            throw new AssertionError(Status.name(c.status) + ": " + c.message);
        }
    }

    private void assertAllocationFree(final String what, final Runnable operation)
    {
        for (int i = 0; i < WARM_UP; i++)
        {
            operation.run();
        }
        // The least of three rounds: a per-operation allocation shows in every round (at least 16 bytes x
        // ITERATIONS), while a one-off event of the JVM (a deoptimization, a recompilation) shows in one.
        long allocated = Long.MAX_VALUE;
        for (int round = 0; round < 3; round++)
        {
            final long before = threads.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < ITERATIONS; i++)
            {
                operation.run();
            }
            allocated = Math.min(allocated, threads.getCurrentThreadAllocatedBytes() - before);
        }
        assertTrue(allocated <= NOISE_BYTES,
            what + " allocated " + allocated + " bytes over " + ITERATIONS + " iterations");
        h.assertInvariants();
    }
}
