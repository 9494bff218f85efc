package io.kvstash.core;

import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.hash.ChunkHasher;
import org.junit.jupiter.api.Test;

import static io.kvstash.core.StoreHarness.LEASE_NS;
import static io.kvstash.core.StoreHarness.OTHER_MODEL;
import static io.kvstash.core.StoreHarness.OTHER_WORLD;
import static io.kvstash.core.StoreHarness.RANK0;
import static io.kvstash.core.StoreHarness.RANK1;
import static io.kvstash.core.StoreHarness.ids;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

/**
 * LOOKUP / LOOKUP_ALL_RANKS / RELEASE / PREPARE_RETRIEVE (with and without PREFIX) / COMMIT_RETRIEVE and key
 * namespaces, one edge case per test.
 */
class LookupRetrieveScenarioTest
{
    private static final long A = 11;
    private static final long B = 22;
    private static final long C = 33;

    private final StoreHarness h = new StoreHarness(16);

    @Test
    void shouldStopAtFirstMissWhenLookingUp()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 4, 5));
        assertEquals(2, h.hits(A, ids(1, 2, 3, 4, 5)));
        assertEquals(0, h.hits(A, ids(3, 1, 2)));
        assertEquals(4, h.hits(A, ids(1, 2, 4, 5)));
        assertEquals(0, h.hits(A, ids()));
        assertEquals(6, h.counter(CountersDescriptor.LOOKUP_HIT_CHUNKS));
        assertEquals(6, h.counter(CountersDescriptor.LOOKUP_MISS_CHUNKS));
        assertEquals(0, h.book().pendingTransfers(), "a lookup without pin records nothing");
    }

    @Test
    void shouldPinExactlyThePrefixWhenLookingUpWithPin()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 4, 5));
        final long t = h.pinned(A, ids(1, 2, 3, 4, 5), 2);
        assertNotEquals(0, t);
        assertEquals(1, h.pins(A, 1));
        assertEquals(1, h.pins(A, 2));
        assertEquals(0, h.pins(A, 4), "after the first miss nothing is pinned");
        assertEquals(0, h.pins(A, 5));
        assertEquals(-1, h.pins(A, 3));
        assertEquals(2, h.book().pinnedChunks());
        assertEquals(1, h.book().pendingTransfers());

        assertEquals(Status.OK, h.store.release(A, t).status);
        assertEquals(0, h.pins(A, 1));
        assertEquals(0, h.book().pinnedChunks());
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.release(A, t).status, "released twice");
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldIssueNoTransferWhenPinnedLookupHasNoHit()
    {
        h.register(A, RANK0);
        h.stored(A, ids(2));
        final StoreCommand c = h.store.lookup(A, ids(1, 2), true);
        assertEquals(Status.OK, c.status);
        assertEquals(0, c.hitChunks);
        assertEquals(0, c.outTransferId);
        assertEquals(0, h.book().pendingTransfers());
        assertEquals(0, h.pins(A, 2));
    }

    @Test
    void shouldNotCountReservedChunksWhenLookingUp()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1));
        final long t = h.prepared(A, ids(2));
        h.stored(A, ids(3));
        assertEquals(1, h.hits(A, ids(1, 2, 3)), "a reserved chunk is invisible to lookups");
        assertEquals(Status.MISS, h.store.prepareRetrieve(A, ids(1, 2)).status);
        assertEquals(Status.OK, h.store.commitStore(A, t).status);
        assertEquals(3, h.hits(A, ids(1, 2, 3)));
    }

    @Test
    void shouldAddPinsWhenSeveralLookupsPinTheSameChunk()
    {
        h.register(A, RANK0);
        h.register(B, RANK0);
        h.stored(A, ids(1, 2));
        final long t1 = h.pinned(A, ids(1, 2), 2);
        final long t2 = h.pinned(B, ids(1), 1);
        final long t3 = h.pinned(A, ids(1, 1), 2);
        assertEquals(4, h.pins(A, 1));
        assertEquals(1, h.pins(A, 2));
        assertEquals(Status.OK, h.store.release(A, t3).status);
        assertEquals(2, h.pins(A, 1));
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.release(A, t2).status, "B's lookup is not A's");
        assertEquals(Status.OK, h.store.release(B, t2).status);
        assertEquals(Status.OK, h.store.release(A, t1).status);
        assertEquals(0, h.pins(A, 1));
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldLeaveNoPinHeldWhenPrepareRetrieveMisses()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 4));
        final long lookup = h.pinned(A, ids(1), 1);
        final StoreCommand c = h.store.prepareRetrieve(A, ids(1, 2, 3, 4));
        assertEquals(Status.MISS, c.status);
        assertEquals(0, c.outTransferId);
        assertEquals(0, c.slotCount);
        assertEquals(1, h.pins(A, 1), "only the lookup's pin");
        assertEquals(0, h.pins(A, 2));
        assertEquals(0, h.pins(A, 4));
        assertEquals(1, h.book().pendingTransfers());
        assertEquals(1, h.counter(CountersDescriptor.RETRIEVE_MISSES));

        assertEquals(Status.MISS, h.store.prepareRetrieve(A, ids(3)).status);
        assertEquals(Status.MISS, h.store.prepareRetrieve(A, ids(1, 2, 4, 3)).status, "miss in the last place");
        assertEquals(1, h.book().pinnedChunks());
        assertEquals(Status.OK, h.store.release(A, lookup).status);
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldPinEveryChunkAndReturnSlotsInRangeOrderWhenPrepareRetrieveHits()
    {
        h.register(A, RANK0);
        final StoreCommand store = h.store.prepareStore(A, ids(5, 6, 7));
        final int[] slots = java.util.Arrays.copyOf(store.slotChunkId, 3);
        final int[] generations = java.util.Arrays.copyOf(store.slotGeneration, 3);
        assertEquals(Status.OK, h.store.commitStore(A, store.outTransferId).status);

        final StoreCommand c = h.store.prepareRetrieve(A, ids(7, 5, 6));
        assertEquals(Status.OK, c.status);
        assertEquals(3, c.slotCount);
        assertArrayEquals(new int[]{ slots[2], slots[0], slots[1] }, java.util.Arrays.copyOf(c.slotChunkId, 3));
        assertArrayEquals(new int[]{ 0, 1, 2 }, java.util.Arrays.copyOf(c.slotRangeIndex, 3));
        assertArrayEquals(new int[]{ generations[2], generations[0], generations[1] },
            java.util.Arrays.copyOf(c.slotGeneration, 3));
        for (int i = 0; i < 3; i++)
        {
            assertEquals(c.slotChunkId[i] * c.slotBytes, c.slotOffset[i]);
        }
        final long t = c.outTransferId;
        assertEquals(1, h.pins(A, 5));
        assertEquals(Status.OK, h.store.commitRetrieve(A, t).status);
        assertEquals(0, h.pins(A, 5));
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitRetrieve(A, t).status, "twice");
        assertEquals(3, h.counter(CountersDescriptor.RETRIEVED_CHUNKS));
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldReleaseRetrievePinsWithoutCommitWhenReleased()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2));
        final long t = h.store.prepareRetrieve(A, ids(1, 2)).outTransferId;
        final long[] lru = h.lru();
        assertEquals(Status.OK, h.store.release(A, t).status);
        assertEquals(0, h.pins(A, 1));
        assertArrayEquals(lru, h.lru(), "RELEASE leaves recency alone");
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitRetrieve(A, t).status);
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldTakeOverLookupPinsUnderANewIdWhenRetrievingFromALookup()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3));
        final long lookup = h.pinned(A, ids(1, 2, 9), 2);
        final StoreCommand c = h.store.prepareRetrieveFromLookup(A, lookup);
        assertEquals(Status.OK, c.status);
        final long retrieve = c.outTransferId;
        assertNotEquals(0, retrieve);
        assertNotEquals(lookup, retrieve);
        assertEquals(2, c.slotCount, "the lookup's prefix");
        assertEquals(1, h.pins(A, 1), "pins taken over, not added");
        assertEquals(1, h.pins(A, 2));
        assertEquals(1, h.book().pendingTransfers());

        assertEquals(Status.UNKNOWN_TRANSFER, h.store.release(A, lookup).status, "the lookup id is gone");
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.prepareRetrieveFromLookup(A, lookup).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitRetrieve(A, lookup).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.prepareRetrieveFromLookup(A, retrieve).status,
            "a retrieve is not a lookup");
        assertEquals(Status.OK, h.store.commitRetrieve(A, retrieve).status);
        assertEquals(0, h.book().pinnedChunks());
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldRenewLeaseWhenRetrievingFromALookup()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1));
        final long lookup = h.pinned(A, ids(1), 1);
        h.clock.advance(LEASE_NS - 10);
        final long retrieve = h.store.prepareRetrieveFromLookup(A, lookup).outTransferId;
        h.clock.advance(LEASE_NS - 10);
        assertEquals(0, h.store.sweep().removedCount, "past the lookup's deadline, within the retrieve's");
        assertEquals(Status.OK, h.store.commitRetrieve(A, retrieve).status);
    }

    @Test
    void shouldRefuseTakeoverWhenLookupIsOfAnotherInstanceOrExpired()
    {
        h.register(A, RANK0);
        h.register(B, RANK0);
        h.stored(A, ids(1));
        final long lookup = h.pinned(A, ids(1), 1);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.prepareRetrieveFromLookup(B, lookup).status);
        assertEquals(1, h.pins(A, 1));
        h.clock.advance(LEASE_NS + 1);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.prepareRetrieveFromLookup(A, lookup).status);
        assertEquals(0, h.pins(A, 1), "the expired lookup was reclaimed");
        assertEquals(1, h.counter(CountersDescriptor.RECLAIMED_LEASES));
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldReleasePinsWhenLookupLeaseExpires()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2));
        final long lookup = h.pinned(A, ids(1, 2), 2);
        final long retrieve = h.store.prepareRetrieve(A, ids(2)).outTransferId;
        h.clock.advance(LEASE_NS + 1);
        assertEquals(2, h.store.sweep().removedCount);
        assertEquals(0, h.book().pinnedChunks());
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.release(A, lookup).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitRetrieve(A, retrieve).status);
        assertEquals(2, h.book().readableChunks(), "expiry of pins removes no chunk");
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldReclaimRetrieveWhenCommitRetrieveArrivesLate()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2));
        final long[] lru = h.lru();
        final long retrieve = h.store.prepareRetrieve(A, ids(1)).outTransferId;
        h.clock.advance(LEASE_NS + 1);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.commitRetrieve(A, retrieve).status);
        assertEquals(0, h.pins(A, 1));
        assertArrayEquals(lru, h.lru(), "a late commit does not touch recency");
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldPinTheReadablePrefixUpToTheGapWhenPrepareRetrieveWithPrefixFindsAChunkAbsent()
    {
        h.register(A, RANK0);
        final StoreCommand store = h.store.prepareStore(A, ids(1, 2, 4, 5));
        final int[] slots = java.util.Arrays.copyOf(store.slotChunkId, 2);
        final int[] generations = java.util.Arrays.copyOf(store.slotGeneration, 2);
        assertEquals(Status.OK, h.store.commitStore(A, store.outTransferId).status);
        final long[] lru = h.lru();
        assertEquals(Status.MISS, h.store.prepareRetrieve(A, ids(1, 2, 3, 4, 5)).status, "all or nothing without it");
        assertEquals(1, h.counter(CountersDescriptor.RETRIEVE_MISSES));

        final StoreCommand c = h.store.prepareRetrieve(A, ids(1, 2, 3, 4, 5), RequestFlags.PREFIX);
        assertEquals(Status.OK, c.status, c.message);
        assertNotEquals(0, c.outTransferId);
        assertEquals(2, c.slotCount, "chunks 0 and 1 of the range, up to the absent chunk 2");
        assertArrayEquals(new int[]{ 0, 1 }, java.util.Arrays.copyOf(c.slotRangeIndex, 2));
        assertArrayEquals(slots, java.util.Arrays.copyOf(c.slotChunkId, 2));
        assertArrayEquals(generations, java.util.Arrays.copyOf(c.slotGeneration, 2));
        assertEquals(StoreHarness.CHUNK_BYTES, c.chunkBytes);
        assertEquals(1, h.pins(A, 1));
        assertEquals(1, h.pins(A, 2));
        assertEquals(0, h.pins(A, 4), "after the gap nothing is pinned");
        assertEquals(0, h.pins(A, 5));
        assertEquals(-1, h.pins(A, 3));
        assertEquals(2, h.book().pinnedChunks());
        assertEquals(2, h.counter(CountersDescriptor.RETRIEVE_HIT_CHUNKS));
        assertEquals(2, h.counter(CountersDescriptor.RETRIEVE_MISSES), "a range answered short counts a retrieve miss");
        assertArrayEquals(lru, h.lru(), "PREPARE_RETRIEVE leaves recency alone");

        assertEquals(Status.OK, h.store.commitRetrieve(A, c.outTransferId).status);
        assertEquals(0, h.pins(A, 1));
        assertEquals(0, h.pins(A, 2));
        assertEquals(2, h.counter(CountersDescriptor.RETRIEVED_CHUNKS));
        assertArrayEquals(new long[]{ 4, 5, 1, 2 }, h.lru(), "only the prefix is used; the chunks after the gap stay");
        assertEquals(2, h.hits(A, ids(4, 5)), "the chunks after the gap are still there");
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldEndThePrefixAtAReservedChunkWhenPrepareRetrieveWithPrefix()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2));
        final long pending = h.prepared(A, ids(3));
        h.stored(A, ids(4));
        final StoreCommand c = h.store.prepareRetrieve(A, ids(1, 2, 3, 4), RequestFlags.PREFIX);
        assertEquals(Status.OK, c.status, c.message);
        assertEquals(2, c.slotCount, "a reserved chunk is not readable");
        assertEquals(0, h.pins(A, 4));
        assertEquals(Status.OK, h.store.release(A, c.outTransferId).status);
        assertEquals(Status.OK, h.store.commitStore(A, pending).status);
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldMissAndPinNothingWhenPrepareRetrieveWithPrefixFindsChunkZeroAbsent()
    {
        h.register(A, RANK0);
        h.stored(A, ids(2, 3));
        final StoreCommand c = h.store.prepareRetrieve(A, ids(1, 2, 3), RequestFlags.PREFIX);
        assertEquals(Status.MISS, c.status);
        assertEquals("a chunk of the range is not readable", c.message, "the MISS of a range without the flag");
        assertEquals(0, c.outTransferId);
        assertEquals(0, c.slotCount);
        assertEquals(0, h.pins(A, 2));
        assertEquals(0, h.pins(A, 3));
        assertEquals(1, h.counter(CountersDescriptor.RETRIEVE_MISSES));
        assertEquals(0, h.counter(CountersDescriptor.RETRIEVE_HIT_CHUNKS));
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldAnswerAsWithoutTheFlagWhenPrepareRetrieveWithPrefixFindsEveryChunk()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3));
        final StoreCommand plain = h.store.prepareRetrieve(A, ids(3, 1, 2));
        final int[] chunks = java.util.Arrays.copyOf(plain.slotChunkId, 3);
        assertEquals(Status.OK, h.store.commitRetrieve(A, plain.outTransferId).status);
        final StoreCommand c = h.store.prepareRetrieve(A, ids(3, 1, 2), RequestFlags.PREFIX);
        assertEquals(Status.OK, c.status, c.message);
        assertEquals(3, c.slotCount);
        assertArrayEquals(chunks, java.util.Arrays.copyOf(c.slotChunkId, 3));
        assertEquals(0, h.counter(CountersDescriptor.RETRIEVE_MISSES), "the whole range: no miss");
        assertEquals(6, h.counter(CountersDescriptor.RETRIEVE_HIT_CHUNKS));
        assertEquals(Status.OK, h.store.commitRetrieve(A, c.outTransferId).status);
        final StoreCommand empty = h.store.prepareRetrieve(A, ids(), RequestFlags.PREFIX);
        assertEquals(Status.OK, empty.status);
        assertEquals(0, empty.outTransferId);
        h.assertInvariants();
        h.assertEmptyOfTransfers();
    }

    @Test
    void shouldAnswerOkWithoutTransferWhenPrepareRetrieveHasAnEmptyRange()
    {
        h.register(A, RANK0);
        final StoreCommand c = h.store.prepareRetrieve(A, ids());
        assertEquals(Status.OK, c.status);
        assertEquals(0, c.outTransferId);
        assertEquals(0, h.book().pendingTransfers());
    }

    @Test
    void shouldCountPrefixReadableForEveryRankWhenLookingUpAllRanks()
    {
        h.register(A, RANK0);
        h.register(B, RANK1);
        h.stored(A, ids(1, 2, 3, 4));
        h.stored(B, ids(1, 2, 4));
        final StoreCommand c = h.store.lookupAllRanks("llama", 2, ids(1, 2, 3, 4));
        assertEquals(Status.OK, c.status);
        assertEquals(2, c.hitChunks, "rank 1 misses chunk 3");
        assertEquals(0, c.outTransferId);
        assertEquals(0, h.book().pinnedChunks(), "pins nothing");
        assertEquals(0, h.book().pendingTransfers());
        assertEquals(1, h.store.lookupAllRanks("llama", 2, ids(1)).hitChunks);
        assertEquals(1, h.store.lookupAllRanks("llama", 2, ids(4)).hitChunks);
        assertEquals(0, h.store.lookupAllRanks("llama", 2, ids(3, 4)).hitChunks);
        assertEquals(0, h.store.lookupAllRanks("llama", 2, ids()).hitChunks);
    }

    @Test
    void shouldCountNothingWhenARankIsMissingFromLookUpAllRanks()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2));
        assertEquals(0, h.store.lookupAllRanks("llama", 2, ids(1, 2)).hitChunks, "rank 1 stored nothing");
        assertEquals(0, h.store.lookupAllRanks("llama", 1, ids(1, 2)).hitChunks, "other world size");
        assertEquals(0, h.store.lookupAllRanks("mistral", 2, ids(1, 2)).hitChunks, "other model");
        h.register(C, OTHER_WORLD);
        h.stored(C, ids(1, 2));
        assertEquals(2, h.store.lookupAllRanks("llama", 1, ids(1, 2)).hitChunks);
    }

    @Test
    void shouldMatchSaltOnlyWhenLookingUpAllRanksWithTheSameSalt()
    {
        final long salt = ChunkHasher.salt("tenant");
        h.register(A, OTHER_WORLD);
        h.stored(A, ids(1, 2).withSalt(salt));
        assertEquals(2, h.store.lookupAllRanks("llama", 1, ids(1, 2).withSalt(salt)).hitChunks);
        assertEquals(0, h.store.lookupAllRanks("llama", 1, ids(1, 2)).hitChunks);
    }

    @Test
    void shouldRejectLookupAllRanksWhenWorldSizeOrModelIsOutOfRange()
    {
        assertEquals(Status.INVALID_REQUEST, h.store.lookupAllRanks("llama", 0, ids(1)).status);
        assertEquals(Status.INVALID_REQUEST, h.store.lookupAllRanks("llama", -2, ids(1)).status);
        assertEquals(Status.INVALID_REQUEST, h.store.lookupAllRanks("llama", 4097, ids(1)).status);
        assertEquals(Status.INVALID_REQUEST, h.store.lookupAllRanks("", 1, ids(1)).status);
        assertEquals(Status.INVALID_REQUEST, h.store.lookupAllRanks("x".repeat(256), 1, ids(1)).status);
    }

    @Test
    void shouldNeverMatchWhenModelsRanksWorldSizesOrSaltsDiffer()
    {
        final long salt = ChunkHasher.salt("tenant-a");
        final long otherSalt = ChunkHasher.salt("tenant-b");
        h.register(A, RANK0);
        h.register(B, RANK1);
        h.register(C, OTHER_MODEL);
        final long d = 44;
        h.register(d, OTHER_WORLD);
        h.stored(A, ids(1, 2));

        assertEquals(2, h.hits(A, ids(1, 2)));
        assertEquals(0, h.hits(B, ids(1, 2)), "another rank");
        assertEquals(0, h.hits(C, ids(1, 2)), "another model");
        assertEquals(0, h.hits(d, ids(1, 2)), "another world size");
        assertEquals(0, h.hits(A, ids(1, 2).withSalt(salt)), "a salt");
        assertEquals(Status.MISS, h.store.prepareRetrieve(B, ids(1)).status);

        h.stored(A, ids(1, 2).withSalt(salt));
        assertEquals(2, h.hits(A, ids(1, 2).withSalt(salt)));
        assertEquals(0, h.hits(A, ids(1, 2).withSalt(otherSalt)), "another salt");
        assertEquals(4, h.book().readableChunks(), "same hashes under two namespaces are two chunks");
        assertEquals(2, h.stored(B, ids(1, 2)), "rank 1 stores its own");
        assertEquals(2, h.stored(C, ids(1, 2)));
        assertEquals(2, h.stored(d, ids(1, 2)));
        assertEquals(10, h.book().readableChunks());
        h.assertInvariants();
    }

    @Test
    void shouldShareChunksWhenTwoInstancesHaveTheSameIdentity()
    {
        h.register(A, RANK0);
        h.register(B, RANK0);
        h.stored(A, ids(1, 2));
        assertEquals(2, h.hits(B, ids(1, 2)));
        final long t = h.store.prepareRetrieve(B, ids(1, 2)).outTransferId;
        assertEquals(Status.OK, h.store.commitRetrieve(B, t).status);
    }

    @Test
    void shouldAnswerUnknownInstanceWhenInstanceIsNotRegistered()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1));
        final long t = h.pinned(A, ids(1), 1);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.lookup(B, ids(1), true).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.release(B, t).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.prepareRetrieve(B, ids(1)).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.prepareRetrieveFromLookup(B, t).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.commitRetrieve(B, t).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.abortStore(B, t).status);
        assertEquals(1, h.pins(A, 1));
        assertEquals(1, h.book().pendingTransfers());
    }
}
