package io.kvstash.core;

import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.file.SlotTableDescriptor;
import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Set;

import static io.kvstash.core.StoreHarness.LEASE_NS;
import static io.kvstash.core.StoreHarness.RANK0;
import static io.kvstash.core.StoreHarness.RANK1;
import static io.kvstash.core.StoreHarness.ids;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * PREPARE_STORE / COMMIT_STORE / ABORT_STORE and leases, one edge case per test.
 */
class StoreScenarioTest
{
    private static final long A = 11;
    private static final long B = 22;

    private final StoreHarness h = new StoreHarness(8);

    @Test
    void shouldRecordNothingWhenPrepareStoreFindsEveryChunkReadable()
    {
        h.register(A, RANK0);
        final StoreCommand first = h.store.prepareStore(A, ids(1, 2, 3));
        final long firstId = first.outTransferId;
        assertEquals(Status.OK, h.store.commitStore(A, firstId).status);
        final long pendingBefore = h.book().pendingTransfers();
        final int freeBefore = h.book().freeSlots();

        final StoreCommand again = h.store.prepareStore(A, ids(1, 2, 3));
        assertEquals(Status.OK, again.status);
        assertEquals(0, again.outTransferId, "no transfer id");
        assertEquals(0, again.slotCount);
        assertEquals(0, pendingBefore);
        assertEquals(0, h.book().pendingTransfers(), "nothing recorded");
        assertEquals(freeBefore, h.book().freeSlots());
        assertEquals(1, h.counter(CountersDescriptor.EMPTY_PREPARES));

        // Ids are deterministic: entry 0 was released once, so the id a recorded prepare would get now is
        // generation 2 of entry 0. It, id 0 and the finished id all answer UNKNOWN_TRANSFER.
        final long wouldBe = (2L << 32) | (firstId & 0xFFFF_FFFFL);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, wouldBe).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, 0).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, firstId).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.abortStore(A, wouldBe).status);
        assertEquals(3, h.hits(A, ids(1, 2, 3)), "the failed commits changed nothing");

        // Proof that wouldBe was the next id: the next prepare that does record gets exactly it.
        assertEquals(wouldBe, h.prepared(A, ids(4)));
        h.assertInvariants();
    }

    @Test
    void shouldRecordNothingWhenPrepareStoreFindsEveryChunkReservedOrReadable()
    {
        h.register(A, RANK0);
        h.register(B, RANK0);
        h.stored(A, ids(1));
        final long pending = h.prepared(A, ids(2, 3));

        final StoreCommand skip = h.store.prepareStore(B, ids(1, 2, 3));
        assertEquals(Status.OK, skip.status);
        assertEquals(0, skip.outTransferId);
        assertEquals(1, h.book().pendingTransfers(), "only the first store");
        assertEquals(2, h.book().reservedChunks(), "a reserved chunk is never reserved a second time");
        assertEquals(Status.OK, h.store.commitStore(A, pending).status);
        assertEquals(3, h.hits(B, ids(1, 2, 3)));
        h.assertInvariants();
    }

    @Test
    void shouldRecordNothingWhenPrepareStoreHasAnEmptyRange()
    {
        h.register(A, RANK0);
        final StoreCommand c = h.store.prepareStore(A, ids());
        assertEquals(Status.OK, c.status);
        assertEquals(0, c.outTransferId);
        assertEquals(0, h.book().pendingTransfers());
    }

    @Test
    void shouldReturnRangeIndicesOfReservedChunksOnlyWhenSomeArePresent()
    {
        h.register(A, RANK0);
        h.stored(A, ids(11));
        h.prepared(A, ids(13));

        final StoreCommand c = h.store.prepareStore(A, ids(10, 11, 12, 13, 14));
        assertEquals(Status.OK, c.status);
        assertEquals(3, c.slotCount);
        assertArrayEquals(new int[]{ 0, 2, 4 }, java.util.Arrays.copyOf(c.slotRangeIndex, c.slotCount));
        final Set<Integer> slots = new HashSet<>();
        for (int i = 0; i < c.slotCount; i++)
        {
            assertTrue(slots.add(c.slotChunkId[i]), "distinct slots");
            assertEquals(c.slotChunkId[i] * c.slotBytes, c.slotOffset[i]);
            assertEquals(StoreHarness.CHUNK_BYTES, c.chunkBytes);
        }
        assertEquals(4, h.book().reservedChunks());
        h.assertInvariants();
    }

    @Test
    void shouldAnswerUnknownTransferWhenCommittingWithoutPrepare()
    {
        h.register(A, RANK0);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, 0).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, 1L << 32).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, 0x7FFF_FFFF_0000_0003L).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, -1).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.abortStore(A, 1L << 32).status);
        assertEquals(0, h.book().readableChunks());
        h.assertInvariants();
    }

    @Test
    void shouldAnswerUnknownTransferWhenCommittingTwice()
    {
        h.register(A, RANK0);
        final long t = h.prepared(A, ids(1, 2));
        assertEquals(Status.OK, h.store.commitStore(A, t).status);
        final long[] lruAfterFirst = h.lru();
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, t).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.abortStore(A, t).status, "abort after commit");
        assertArrayEquals(lruAfterFirst, h.lru());
        assertEquals(2, h.book().readableChunks());
        assertEquals(2, h.counter(CountersDescriptor.STORED_CHUNKS));
        h.assertInvariants();
    }

    @Test
    void shouldAnswerUnknownTransferWhenCommittingAfterAbort()
    {
        h.register(A, RANK0);
        final long t = h.prepared(A, ids(1, 2));
        assertEquals(Status.OK, h.store.abortStore(A, t).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, t).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.abortStore(A, t).status, "abort twice");
        assertEquals(0, h.hits(A, ids(1, 2)));
        assertEquals(8, h.book().freeSlots());
        h.assertInvariants();
    }

    @Test
    void shouldFreeSlotsAndPublishNothingWhenAborted()
    {
        h.register(A, RANK0);
        final StoreCommand prepare = h.store.prepareStore(A, ids(1));
        final long t = prepare.outTransferId;
        final int slot = prepare.slotChunkId[0];
        final int generation = prepare.slotGeneration[0];
        assertEquals(7, h.book().freeSlots());

        assertEquals(Status.OK, h.store.abortStore(A, t).status);
        assertEquals(8, h.book().freeSlots());
        assertEquals(0, h.book().reservedChunks());
        assertEquals(0, h.hits(A, ids(1)), "never published");
        assertEquals(Status.MISS, h.store.prepareRetrieve(A, ids(1)).status);
        assertEquals(SlotTableDescriptor.STATE_FREE, SlotTableDescriptor.state(h.slotWord(slot)));
        assertEquals(1, h.counter(CountersDescriptor.ABORTED_CHUNKS));

        final StoreCommand reuse = h.store.prepareStore(A, ids(2));
        assertEquals(slot, reuse.slotChunkId[0], "the freed slot is taken again");
        assertTrue(reuse.slotGeneration[0] > generation, "under a new generation");
        assertEquals(0, h.hits(A, ids(1)));
        h.assertInvariants();
    }

    @Test
    void shouldReclaimStoreWhenSweptAfterLeaseExpiry()
    {
        h.register(A, RANK0);
        final long t = h.prepared(A, ids(1, 2));
        h.clock.advance(LEASE_NS);
        assertEquals(0, h.store.sweep().removedCount, "a lease ends after its deadline, not at it");
        h.clock.advance(1);
        assertEquals(1, h.store.sweep().removedCount);
        assertEquals(0, h.book().reservedChunks());
        assertEquals(8, h.book().freeSlots());
        assertEquals(1, h.counter(CountersDescriptor.RECLAIMED_LEASES));

        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, t).status);
        assertEquals(0, h.hits(A, ids(1, 2)));
        assertEquals(0, h.book().readableChunks(), "the late commit changed nothing");
        h.assertInvariants();
    }

    @Test
    void shouldReclaimStoreWhenCommitArrivesAfterLeaseExpiryWithoutSweep()
    {
        h.register(A, RANK0);
        final long t = h.prepared(A, ids(1, 2));
        h.clock.advance(LEASE_NS + 1);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, t).status);
        assertEquals(0, h.book().pendingTransfers(), "reclaimed by the late commit itself");
        assertEquals(0, h.book().reservedChunks());
        assertEquals(0, h.book().readableChunks());
        assertEquals(1, h.counter(CountersDescriptor.RECLAIMED_LEASES));
        assertEquals(0, h.store.sweep().removedCount);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.abortStore(A, t).status);
        h.assertInvariants();
    }

    @Test
    void shouldCommitWhenCommitArrivesExactlyAtTheDeadline()
    {
        h.register(A, RANK0);
        final long t = h.prepared(A, ids(1));
        h.clock.advance(LEASE_NS);
        assertEquals(Status.OK, h.store.commitStore(A, t).status);
        assertEquals(1, h.hits(A, ids(1)));
    }

    @Test
    void shouldAnswerUnknownTransferWhenCommitComesFromAnotherInstance()
    {
        h.register(A, RANK0);
        h.register(B, RANK0);
        final long t = h.prepared(A, ids(1));
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(B, t).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.abortStore(B, t).status);
        assertEquals(1, h.book().reservedChunks(), "the owner's store is untouched");
        assertEquals(Status.OK, h.store.commitStore(A, t).status);
        assertEquals(1, h.hits(B, ids(1)));

        final long expired = h.prepared(A, ids(2));
        h.clock.advance(LEASE_NS + 1);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(B, expired).status);
        assertEquals(1, h.book().pendingTransfers(), "another instance cannot even reclaim it");
        assertEquals(0, h.counter(CountersDescriptor.RECLAIMED_LEASES));
        assertEquals(1, h.store.sweep().removedCount);
        h.assertInvariants();
    }

    @Test
    void shouldAnswerUnknownInstanceWhenCommitterIsNotRegistered()
    {
        h.register(A, RANK0);
        final long t = h.prepared(A, ids(1));
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.commitStore(B, t).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.prepareStore(B, ids(2)).status);
        assertEquals(1, h.book().reservedChunks());
    }

    @Test
    void shouldNeverActWhenTransferIdIsStaleAfterReuse()
    {
        h.register(A, RANK0);
        final StoreCommand first = h.store.prepareStore(A, ids(1));
        final long stale = first.outTransferId;
        final int staleGeneration = first.slotGeneration[0];
        assertEquals(Status.OK, h.store.abortStore(A, stale).status);

        final StoreCommand second = h.store.prepareStore(A, ids(2));
        final long fresh = second.outTransferId;
        assertEquals(stale & 0xFFFF_FFFFL, fresh & 0xFFFF_FFFFL, "the transfer entry was reused");
        assertEquals(first.slotChunkId[0], second.slotChunkId[0], "and so was the slot");
        assertNotEquals(stale, fresh);
        assertNotEquals(staleGeneration, second.slotGeneration[0]);

        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, stale).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.abortStore(A, stale).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.release(A, stale).status);
        assertEquals(1, h.book().reservedChunks(), "the fresh store is untouched");
        assertEquals(Status.OK, h.store.commitStore(A, fresh).status);
        assertEquals(1, h.hits(A, ids(2)));
        assertEquals(0, h.hits(A, ids(1)));
        h.assertInvariants();
    }

    @Test
    void shouldOnlyAcceptStoreTransfersWhenCommittingOrAbortingStores()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1));
        final long lookup = h.pinned(A, ids(1), 1);
        final long retrieve = h.store.prepareRetrieve(A, ids(1)).outTransferId;
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, lookup).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, retrieve).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.abortStore(A, lookup).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.abortStore(A, retrieve).status);
        assertEquals(2, h.pins(A, 1), "both pins held");

        final long store = h.prepared(A, ids(2));
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.release(A, store).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitRetrieve(A, store).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.prepareRetrieveFromLookup(A, store).status);
        assertEquals(Status.OK, h.store.commitStore(A, store).status);
        h.assertInvariants();
    }

    @Test
    void shouldAbortAndReleaseOnlyTheInstanceWhenUnregistered()
    {
        h.register(A, RANK0);
        h.register(B, RANK1);
        h.stored(A, ids(1, 2));
        h.stored(B, ids(1, 2));
        final long aStore = h.prepared(A, ids(3));
        final long aLookup = h.pinned(A, ids(1, 2), 2);
        final long aRetrieve = h.store.prepareRetrieve(A, ids(1)).outTransferId;
        final long bStore = h.prepared(B, ids(3));
        final long bLookup = h.pinned(B, ids(1, 2), 2);
        assertEquals(5, h.book().pendingTransfers());

        final StoreCommand c = h.store.unregister(A);
        assertEquals(Status.OK, c.status);
        assertEquals(3, c.removedCount);
        assertEquals(2, h.book().pendingTransfers());
        assertEquals(1, h.book().reservedChunks(), "only B's reservation is left");
        assertEquals(0, StoreHarness.pins(h.book(), RANK0, 0, 1));
        assertEquals(0, StoreHarness.pins(h.book(), RANK0, 0, 2));
        assertEquals(1, h.pins(B, 1));
        assertEquals(1, h.pins(B, 2));

        h.register(A, RANK0);
        assertEquals(0, h.hits(A, ids(3)), "A's reservation was never published");
        assertEquals(2, h.hits(A, ids(1, 2, 3)));
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitStore(A, aStore).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.release(A, aLookup).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitRetrieve(A, aRetrieve).status);
        assertEquals(Status.OK, h.store.commitStore(B, bStore).status);
        assertEquals(Status.OK, h.store.release(B, bLookup).status);
        assertEquals(3, h.hits(B, ids(1, 2, 3)));
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldAnswerOkAndCountWhenUnregisteringAnUnknownInstance()
    {
        h.register(A, RANK0);
        final long t = h.prepared(A, ids(1));
        final StoreCommand c = h.store.unregister(B);
        assertEquals(Status.OK, c.status);
        assertEquals(0, c.removedCount);
        assertEquals(1, h.counter(CountersDescriptor.UNREGISTER_UNKNOWN));
        assertEquals(Status.OK, h.store.commitStore(A, t).status);

        assertEquals(Status.OK, h.store.unregister(A).status);
        assertEquals(Status.OK, h.store.unregister(A).status, "twice");
        assertEquals(2, h.counter(CountersDescriptor.UNREGISTER_UNKNOWN));
        assertEquals(0, h.book().instanceCount());
    }

    @Test
    void shouldCountDeadClientWhenUnregisterIsAReap()
    {
        h.register(A, RANK0);
        h.prepared(A, ids(1));
        final StoreCommand reap = h.raw(RequestType.UNREGISTER, A);
        reap.flags = io.kvstash.wire.RequestFlags.REAPED;
        assertEquals(Status.OK, h.store.execute(reap).status);
        assertEquals(1, h.counter(CountersDescriptor.DEAD_CLIENTS));
        assertEquals(0, h.book().reservedChunks());
        assertEquals(0, h.book().instanceCount());
    }

    @Test
    void shouldReclaimOnlyUpToTheLimitWhenSweeping()
    {
        final StoreHarness small = new StoreHarness(StoreHarness.context(8).sweepLimit(2));
        small.register(A, RANK0);
        small.prepared(A, ids(1));
        small.prepared(A, ids(2));
        small.prepared(A, ids(3));
        small.clock.advance(LEASE_NS / 2);
        final long late = small.prepared(A, ids(4));
        small.clock.advance(LEASE_NS / 2 + 1);
        assertEquals(2, small.store.sweep().removedCount);
        assertEquals(1, small.store.sweep().removedCount);
        assertEquals(0, small.store.sweep().removedCount, "the later lease has not ended");
        assertEquals(Status.OK, small.store.commitStore(A, late).status);
        assertEquals(1, small.book().readableChunks());
        small.assertInvariants();
    }

    @Test
    void shouldAnswerBusyAndReserveNothingWhenTransferLimitIsReached()
    {
        final StoreHarness small = new StoreHarness(StoreHarness.context(8).maxTransfers(2));
        small.register(A, RANK0);
        small.stored(A, ids(9));
        small.prepared(A, ids(1));
        small.pinned(A, ids(9), 1);
        final StoreCommand busy = small.store.prepareStore(A, ids(2, 3));
        assertEquals(Status.BUSY, busy.status);
        assertEquals(0, busy.outTransferId);
        assertEquals(1, small.book().reservedChunks());
        assertEquals(Status.BUSY, small.store.lookup(A, ids(9), true).status);
        assertEquals(1, small.pins(A, 9));
        assertEquals(Status.BUSY, small.store.prepareRetrieve(A, ids(9)).status);
        assertEquals(1, small.pins(A, 9));
        assertEquals(Status.OK, small.store.prepareStore(A, ids(9)).status, "nothing to reserve needs no entry");
        small.assertInvariants();
    }
}
