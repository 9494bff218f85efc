package io.kvstash.core;

import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.file.SlotTableDescriptor;
import org.junit.jupiter.api.Test;

import static io.kvstash.core.StoreHarness.RANK0;
import static io.kvstash.core.StoreHarness.ids;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Eviction, NO_SPACE (all or nothing), LRU recency and CLEAR, one edge case per test.
 */
class EvictionScenarioTest
{
    private static final long A = 11;
    private static final long B = 22;

    @Test
    void shouldEvictLeastRecentlyUsedWhenPoolIsFull()
    {
        final StoreHarness h = new StoreHarness(3);
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3));
        h.stored(A, ids(4));
        assertArrayEquals(new long[]{ 2, 3, 4 }, h.lru());
        assertEquals(0, h.hits(A, ids(1)));
        assertEquals(1, h.counter(CountersDescriptor.EVICTIONS));
        h.assertInvariants();
    }

    @Test
    void shouldReserveLaterChunkOfTheSameRangeWhenTheRangeEvictedIt()
    {
        final StoreHarness h = new StoreHarness(3);
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3));
        // 4 is absent and evicts 1 (the LRU); then 1 is absent and evicts 2; 3 is skipped.
        final StoreCommand c = h.store.prepareStore(A, ids(4, 1, 3));
        assertEquals(Status.OK, c.status);
        assertEquals(2, c.slotCount);
        assertArrayEquals(new int[]{ 0, 1 }, java.util.Arrays.copyOf(c.slotRangeIndex, 2));
        assertArrayEquals(new long[]{ 3 }, h.lru());
        assertEquals(2, h.counter(CountersDescriptor.EVICTIONS));
        assertEquals(Status.OK, h.store.commitStore(A, c.outTransferId).status);
        assertArrayEquals(new long[]{ 3, 4, 1 }, h.lru());
        h.assertInvariants();
    }

    @Test
    void shouldEvictASkippedChunkOfTheSameRangeWhenItIsTheLeastRecentlyUsed()
    {
        // Skipped chunks keep their recency, so the walk may evict a chunk it has just skipped: the
        // exact-LRU semantics the trace figures depend on. The store still answers OK.
        final StoreHarness h = new StoreHarness(2);
        h.register(A, RANK0);
        h.stored(A, ids(1));
        h.stored(A, ids(2));
        final StoreCommand c = h.store.prepareStore(A, ids(1, 3));
        assertEquals(Status.OK, c.status);
        assertEquals(1, c.slotCount);
        assertEquals(1, c.slotRangeIndex[0]);
        assertEquals(Status.OK, h.store.commitStore(A, c.outTransferId).status);
        assertArrayEquals(new long[]{ 2, 3 }, h.lru());
        assertEquals(0, h.hits(A, ids(1, 3)), "1 was skipped, then evicted for 3");
        h.assertInvariants();
    }

    @Test
    void shouldReserveNothingWhenEveryChunkIsPinned()
    {
        final StoreHarness h = new StoreHarness(2);
        h.register(A, RANK0);
        h.stored(A, ids(1, 2));
        h.pinned(A, ids(1, 2), 2);
        final int freeBefore = h.book().freeSlots();
        final StoreCommand c = h.store.prepareStore(A, ids(3));
        assertEquals(Status.NO_SPACE, c.status);
        assertEquals(0, c.outTransferId);
        assertEquals(0, c.slotCount);
        assertEquals(freeBefore, h.book().freeSlots());
        assertEquals(0, h.book().reservedChunks());
        assertEquals(1, h.book().pendingTransfers(), "only the lookup");
        assertEquals(1, h.counter(CountersDescriptor.NO_SPACE));
        h.assertInvariants();
    }

    @Test
    void shouldRestoreEvictedChunksAndLruOrderExactlyWhenNoSpace()
    {
        final StoreHarness h = new StoreHarness(4);
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3, 4));
        h.pinned(A, ids(3, 4), 2);
        final long[] words = new long[4];
        for (int slot = 0; slot < 4; slot++)
        {
            words[slot] = h.slotWord(slot);
        }
        // 5 and 6 evict 1 and 2; 7 finds nothing evictable: the whole request rolls back.
        final StoreCommand c = h.store.prepareStore(A, ids(5, 6, 7));
        assertEquals(Status.NO_SPACE, c.status);
        assertArrayEquals(new long[]{ 1, 2, 3, 4 }, h.lru());
        assertEquals(4, h.hits(A, ids(1, 2, 3, 4)));
        assertEquals(0, h.hits(A, ids(5)));
        assertEquals(0, h.book().reservedChunks());
        assertEquals(0, h.counter(CountersDescriptor.EVICTIONS));
        for (int slot = 0; slot < 4; slot++)
        {
            assertEquals(words[slot], h.slotWord(slot), "slot word " + slot + " untouched");
        }
        final StoreCommand retrieve = h.store.prepareRetrieve(A, ids(1, 2));
        assertEquals(Status.OK, retrieve.status, "restored chunks are readable under their generations");
        for (int i = 0; i < 2; i++)
        {
            assertEquals(SlotTableDescriptor.generation(words[retrieve.slotChunkId[i]]), retrieve.slotGeneration[i]);
        }
        h.assertInvariants();
    }

    @Test
    void shouldRestoreLruPositionWhenRollbackUndoesEvictionOfAMiddleChunk()
    {
        final StoreHarness h = new StoreHarness(4);
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3, 4));
        h.pinned(A, ids(1), 1);
        h.pinned(A, ids(3), 1);
        // 5 evicts 2 (1 is pinned), 6 evicts 4, 7 finds nothing: 2 and 4 go back between their neighbours.
        assertEquals(Status.NO_SPACE, h.store.prepareStore(A, ids(5, 6, 7)).status);
        assertArrayEquals(new long[]{ 1, 2, 3, 4 }, h.lru());
        h.stored(A, ids(8));
        assertArrayEquals(new long[]{ 1, 3, 4, 8 }, h.lru(), "2 is again the first evictable");
        h.assertInvariants();
    }

    @Test
    void shouldRestoreChunkOfTheSameRangeWhenRollbackUndoesItsEviction()
    {
        final StoreHarness h = new StoreHarness(2);
        h.register(A, RANK0);
        h.stored(A, ids(1, 2));
        h.pinned(A, ids(2), 1);
        // 3 evicts 1; 1 is then absent and finds nothing evictable.
        assertEquals(Status.NO_SPACE, h.store.prepareStore(A, ids(3, 1)).status);
        assertArrayEquals(new long[]{ 1, 2 }, h.lru());
        assertEquals(1, h.hits(A, ids(1)));
        assertEquals(0, h.hits(A, ids(3)));
        h.assertInvariants();
    }

    @Test
    void shouldEvictOnlyUnpinnedReadableChunksWhenSomeArePinnedOrReserved()
    {
        final StoreHarness h = new StoreHarness(4);
        h.register(A, RANK0);
        h.register(B, RANK0);
        h.stored(A, ids(1, 2, 3));
        h.pinned(A, ids(1), 1);
        final long retrieve = h.store.prepareRetrieve(B, ids(2)).outTransferId;
        final long reserved = h.prepared(A, ids(4));
        final StoreCommand c = h.store.prepareStore(A, ids(5));
        assertEquals(Status.OK, c.status);
        final long five = c.outTransferId;
        assertArrayEquals(new long[]{ 1, 2 }, h.lru(), "3 was the only evictable chunk");
        assertEquals(Status.NO_SPACE, h.store.prepareStore(A, ids(6)).status);
        assertEquals(Status.OK, h.store.commitStore(A, reserved).status);
        assertEquals(Status.OK, h.store.commitRetrieve(B, retrieve).status);
        assertEquals(Status.OK, h.store.commitStore(A, five).status);
        assertArrayEquals(new long[]{ 1, 4, 2, 5 }, h.lru());
        assertEquals(Status.OK, h.store.prepareStore(A, ids(6)).status);
        assertArrayEquals(new long[]{ 1, 2, 5 }, h.lru(), "1 is pinned, 4 goes");
        h.assertInvariants();
    }

    @Test
    void shouldKeepRecencyExactlyAsSpecWhenRequestsTouchChunks()
    {
        final StoreHarness h = new StoreHarness(8);
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3));
        assertArrayEquals(new long[]{ 1, 2, 3 }, h.lru(), "COMMIT_STORE appends in range order");

        h.hits(A, ids(1, 2));
        final long lookup = h.pinned(A, ids(1), 1);
        h.store.lookupAllRanks("llama", 2, ids(1));
        assertArrayEquals(new long[]{ 1, 2, 3 }, h.lru(), "LOOKUP leaves recency alone");

        h.stored(A, ids(2, 4, 1));
        assertArrayEquals(new long[]{ 1, 2, 3, 4 }, h.lru(), "skipped chunks leave recency alone");

        final long retrieve = h.store.prepareRetrieve(A, ids(2, 1)).outTransferId;
        assertArrayEquals(new long[]{ 1, 2, 3, 4 }, h.lru(), "PREPARE_RETRIEVE leaves recency alone");
        assertEquals(Status.OK, h.store.commitRetrieve(A, retrieve).status);
        assertArrayEquals(new long[]{ 3, 4, 2, 1 }, h.lru(), "COMMIT_RETRIEVE moves to MRU in range order");

        assertEquals(Status.OK, h.store.release(A, lookup).status);
        assertArrayEquals(new long[]{ 3, 4, 2, 1 }, h.lru(), "RELEASE leaves recency alone");

        final long fromLookup = h.store.prepareRetrieveFromLookup(A, h.pinned(A, ids(3, 4), 2)).outTransferId;
        assertEquals(Status.OK, h.store.commitRetrieve(A, fromLookup).status);
        assertArrayEquals(new long[]{ 2, 1, 3, 4 }, h.lru());

        final long aborted = h.prepared(A, ids(5));
        assertEquals(Status.OK, h.store.abortStore(A, aborted).status);
        assertArrayEquals(new long[]{ 2, 1, 3, 4 }, h.lru(), "ABORT_STORE leaves recency alone");
        h.assertInvariants();
    }

    @Test
    void shouldEvictEveryUnpinnedReadableChunkWhenCleared()
    {
        final StoreHarness h = new StoreHarness(8);
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3, 4));
        final long lookup = h.pinned(A, ids(1), 1);
        final long retrieve = h.store.prepareRetrieve(A, ids(3)).outTransferId;
        final long store = h.prepared(A, ids(5, 6));

        final StoreCommand c = h.store.clear(false);
        assertEquals(Status.OK, c.status);
        assertEquals(2, c.removedCount);
        assertArrayEquals(new long[]{ 1, 3 }, h.lru(), "pinned chunks stay");
        assertEquals(2, h.book().reservedChunks(), "reservations stay");
        assertEquals(3, h.book().pendingTransfers());
        assertEquals(2, h.counter(CountersDescriptor.CLEARED_CHUNKS));

        assertEquals(Status.OK, h.store.commitStore(A, store).status);
        assertEquals(Status.OK, h.store.release(A, lookup).status);
        assertEquals(Status.OK, h.store.commitRetrieve(A, retrieve).status);
        assertEquals(4, h.store.clear(false).removedCount);
        assertEquals(8, h.book().freeSlots());
        h.assertInvariants();
    }

    @Test
    void shouldAbortStoresAndDropPinsWhenClearedWithForce()
    {
        final StoreHarness h = new StoreHarness(8);
        h.register(A, RANK0);
        h.register(B, RANK0);
        h.stored(A, ids(1, 2, 3, 4));
        final long lookup = h.pinned(A, ids(1), 1);
        final long retrieve = h.store.prepareRetrieve(B, ids(3)).outTransferId;
        final long store = h.prepared(B, ids(5, 6));

        final StoreCommand c = h.store.clear(true);
        assertEquals(Status.OK, c.status);
        assertEquals(4, c.removedCount);
        assertEquals(8, h.book().freeSlots());
        assertEquals(0, h.book().readableChunks());
        h.assertEmptyOfTransfers();
        assertEquals(2, h.counter(CountersDescriptor.ABORTED_CHUNKS));

        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(B, store).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.release(A, lookup).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitRetrieve(B, retrieve).status);
        assertEquals(0, h.hits(A, ids(5)), "aborted reservations were never published");
        assertEquals(2, h.book().instanceCount(), "instances stay registered");
        h.stored(A, ids(1));
        h.assertInvariants();
    }

    @Test
    void shouldMarkSlotsFreeWhenChunksAreClearedOrEvicted()
    {
        final StoreHarness h = new StoreHarness(2);
        h.register(A, RANK0);
        final StoreCommand c = h.store.prepareStore(A, ids(1, 2));
        final int slot1 = c.slotChunkId[0];
        final int slot2 = c.slotChunkId[1];
        final int gen2 = c.slotGeneration[1];
        assertEquals(Status.OK, h.store.commitStore(A, c.outTransferId).status);
        assertEquals(SlotTableDescriptor.STATE_READABLE, SlotTableDescriptor.state(h.slotWord(slot1)));

        final StoreCommand evicting = h.store.prepareStore(A, ids(3));
        assertEquals(slot1, evicting.slotChunkId[0], "1 was the LRU");
        assertEquals(SlotTableDescriptor.STATE_RESERVED, SlotTableDescriptor.state(h.slotWord(slot1)));
        assertEquals(evicting.slotGeneration[0], SlotTableDescriptor.generation(h.slotWord(slot1)));

        h.store.clear(false);
        assertEquals(SlotTableDescriptor.word(SlotTableDescriptor.STATE_FREE, gen2), h.slotWord(slot2));
        assertEquals(SlotTableDescriptor.STATE_RESERVED, SlotTableDescriptor.state(h.slotWord(slot1)));
        h.assertInvariants();
    }
}
