package io.kvstash.core;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.file.SlotTableDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Several chunk sizes in one pool: each layout's chunks take slots of its own size class, regions of the pool
 * are given to a class on first use, so layouts register in any order; a class with no room empties a region
 * of another class whose chunks can all be evicted; NO_SPACE only when nothing can be freed.
 */
class SizeClassScenarioTest
{
    private static final int CHUNK_TOKENS = 16;
    private static final int ALIGNMENT = 4096;
    /** 3 MiB chunks: not a power of two, so a region's end cuts through slots. */
    private static final Layout BIG = Layout.of("big", 1, 0, 3, 16384, Dtype.FLOAT16, false);
    /** 8 KiB chunks. */
    private static final Layout SMALL = Layout.of("small", 1, 0, 1, 128, Dtype.FLOAT16, false);
    private static final long BIG_SLOT = 3L << 20;
    private static final long SMALL_SLOT = 8192;
    private static final long A = 1;
    private static final long B = 2;
    /** Where a real pool's data region starts with the defaults: offsets on the wire must not include it. */
    private static final long DATA_OFFSET = 2_101_248;

    private static StoreHarness harness(final long poolBytes)
    {
        return new StoreHarness(new StoreContext()
            .poolSizeBytes(poolBytes)
            .dataOffset(DATA_OFFSET)
            .alignment(ALIGNMENT)
            .chunkTokens(CHUNK_TOKENS)
            .leaseNs(1_000_000_000L)
            .maxChunksPerRequest(64));
    }

    private static ChunkKeys keys(final long from, final int count)
    {
        final long[] ids = new long[count];
        for (int i = 0; i < count; i++)
        {
            ids[i] = from + i;
        }
        return ChunkKeys.ofIds(ids);
    }

    @Test
    void shouldStoreAndRetrieveTwoLayoutsWhenTheSmallerRegistersFirst()
    {
        twoLayouts(SMALL, BIG);
    }

    @Test
    void shouldStoreAndRetrieveTwoLayoutsWhenTheBiggerRegistersFirst()
    {
        twoLayouts(BIG, SMALL);
    }

    private void twoLayouts(final Layout first, final Layout second)
    {
        final StoreHarness h = harness(64L << 20);
        assertEquals(BIG_SLOT, BIG.chunkBytes(CHUNK_TOKENS));
        assertEquals(SMALL_SLOT, SMALL.chunkBytes(CHUNK_TOKENS));
        h.register(A, first);
        final long firstT = h.prepared(A, keys(100, 4));
        assertEquals(Status.OK, h.store.commitStore(A, firstT).status);
        final StoreCommand r = h.store.register(B, second);
        assertEquals(Status.OK, r.status, "registration order does not matter: " + r.message);
        assertEquals(second.chunkBytes(CHUNK_TOKENS), r.slotBytes);
        final long secondT = h.prepared(B, keys(200, 4));
        assertEquals(Status.OK, h.store.commitStore(B, secondT).status);
        h.assertInvariants();

        // The store answers in one reused command: keep copies.
        final StoreCommand one = copy(h.store.prepareRetrieve(A, keys(100, 4)));
        assertEquals(Status.OK, one.status);
        assertEquals(first.chunkBytes(CHUNK_TOKENS), one.slotBytes);
        final StoreCommand two = copy(h.store.prepareRetrieve(B, keys(200, 4)));
        assertEquals(Status.OK, two.status);
        assertEquals(second.chunkBytes(CHUNK_TOKENS), two.slotBytes);
        final Set<Long> starts = new HashSet<>();
        for (final StoreCommand c : new StoreCommand[]{ one, two })
        {
            for (int i = 0; i < c.slotCount; i++)
            {
                final long relative = c.slotOffset[i];
                assertTrue(starts.add(relative), "offset " + relative + " holds two chunks");
                assertEquals(0, relative % ALIGNMENT);
                assertEquals(relative / (16L << 20), (relative + c.slotBytes - 1) / (16L << 20),
                    "a chunk never straddles a region of another class (here: one region per class)");
                final long word = h.store.slotTable().getLongVolatile(
                    (int)SlotTableDescriptor.wordOffsetAt(relative, ALIGNMENT));
                assertEquals(SlotTableDescriptor.word(SlotTableDescriptor.STATE_READABLE, c.slotGeneration[i]), word);
            }
        }
        assertNoOverlap(one, two);
        assertEquals(Status.OK, h.store.commitRetrieve(A, one.outTransferId).status);
        assertEquals(Status.OK, h.store.commitRetrieve(B, two.outTransferId).status);
        h.assertInvariants();
    }

    private static StoreCommand copy(final StoreCommand from)
    {
        return new StoreCommand(64, 0).copyOutcomeFrom(from);
    }

    private static void assertNoOverlap(final StoreCommand one, final StoreCommand two)
    {
        for (int i = 0; i < one.slotCount; i++)
        {
            for (int j = 0; j < two.slotCount; j++)
            {
                final long a0 = one.slotOffset[i];
                final long b0 = two.slotOffset[j];
                assertTrue(a0 + one.slotBytes <= b0 || b0 + two.slotBytes <= a0, "chunks overlap");
            }
        }
    }

    @Test
    void shouldCutOneLayoutsSlotsExactlyAsAWholePoolWhenOnlyOneClassExists()
    {
        final StoreHarness h = harness(64L << 20);
        h.register(A, BIG);
        assertEquals(21, h.book().slotCapacity(), "64 MiB / 3 MiB, regions notwithstanding");
        final long t = h.prepared(A, keys(0, 21));
        assertEquals(Status.OK, h.store.commitStore(A, t).status);
        final StoreCommand all = h.store.prepareRetrieve(A, keys(0, 21));
        for (int i = 0; i < 21; i++)
        {
            assertEquals(i * BIG_SLOT, all.slotOffset[i], "slot " + i + ": offsets are data-relative (PROTOCOL 3.2)");
        }
        assertEquals(0, h.book().freeSlots());
        h.assertInvariants();
    }

    @Test
    void shouldReclaimARegionOfAnotherClassWhenOneClassFillsThePool()
    {
        final StoreHarness h = harness(64L << 20);
        h.register(A, BIG);
        assertEquals(Status.OK, h.store.commitStore(A, h.prepared(A, keys(0, 21))).status);
        assertEquals(0, h.book().freeSlots());
        h.register(B, SMALL);
        final StoreCommand small = h.store.prepareStore(B, keys(500, 8));
        assertEquals(Status.OK, small.status, small.message);
        assertEquals(8, small.slotCount);
        assertTrue(h.counter(CountersDescriptor.EVICTIONS) > 0, "the big chunks of one region were evicted");
        assertEquals(Status.OK, h.store.commitStore(B, small.outTransferId).status);
        final long left = h.book().readableChunks() - 8;
        assertEquals(21 - h.counter(CountersDescriptor.EVICTIONS), left);
        h.assertInvariants();
        // The big class evicts its own least recently used chunks again.
        final StoreCommand big = h.store.prepareStore(A, keys(100, 1));
        assertEquals(Status.OK, big.status);
        assertEquals(Status.OK, h.store.commitStore(A, big.outTransferId).status);
        assertEquals(Status.OK, h.store.prepareRetrieve(B, keys(500, 8)).status, "the small chunks stay");
        assertNull(h.book().verifyInvariants());
    }

    @Test
    void shouldAnswerNoSpaceWhenEveryChunkOfTheOtherClassIsPinned()
    {
        final StoreHarness h = harness(64L << 20);
        h.register(A, BIG);
        assertEquals(Status.OK, h.store.commitStore(A, h.prepared(A, keys(0, 21))).status);
        final StoreCommand pins = h.store.prepareRetrieve(A, keys(0, 21));
        assertEquals(Status.OK, pins.status);
        final long pinning = pins.outTransferId;
        assertEquals(21, h.book().pinnedChunks());
        h.register(B, SMALL);
        assertEquals(21, h.book().pinnedChunks());
        final StoreCommand refused = h.store.prepareStore(B, keys(500, 1));
        assertEquals(Status.NO_SPACE, refused.status, refused.message);
        assertEquals(0, h.counter(CountersDescriptor.EVICTIONS));
        assertEquals(21, h.book().readableChunks());
        h.assertInvariants();
        assertEquals(Status.OK, h.store.commitRetrieve(A, pinning).status);
        assertEquals(Status.OK, h.store.prepareStore(B, keys(500, 1)).status, "unpinned: a region can go");
        h.assertInvariants();
    }
}
