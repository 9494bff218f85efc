package io.kvstash.core.book;

import io.kvstash.core.PoolCommitment;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The hand-out rule of a pool committed on demand: a free region goes to a size class only when it lies wholly in
 * the committed prefix. One not committed yet is committed on the spot; when that fails (a full file system) the
 * store evicts as in a full pool, or answers NO_SPACE with nothing to evict. The commitment is told the highest end
 * in use.
 */
class PoolCommitmentTest
{
    private static final long MIB = 1L << 20;
    private static final long REGION = SlotRegions.REGION_BYTES;
    private static final long INSTANCE = 3;

    /** A commitment the test moves by hand; it records what the store told it. */
    private static final class ManualCommitment implements PoolCommitment
    {
        long committed;
        long givenEnd;
        long wantedEnd;
        int wanted;
        /** What the file system lets commitTo reach: at most this. */
        long limit;

        public long committedBytes()
        {
            return committed;
        }

        public void onRegionGiven(final long endBytes)
        {
            givenEnd = Math.max(givenEnd, endBytes);
        }

        public boolean commitTo(final long endBytes)
        {
            wantedEnd = Math.max(wantedEnd, endBytes);
            wanted++;
            if (endBytes <= limit)
            {
                committed = Math.max(committed, endBytes);
                return true;
            }
            return false;
        }
    }

    private final ManualCommitment commitment = new ManualCommitment();
    private long nextKey = 1;

    /** A pool of three regions, chunks of {@code slotBytes} (MLA layout, one token, one layer). */
    private KvStore store(final long slotBytes, final PoolCommitment poolCommitment)
    {
        final KvStore store = new KvStore(new StoreContext().poolSizeBytes(3 * REGION).chunkTokens(1)
            .slotBytes(slotBytes).poolCommitment(poolCommitment).conclude());
        assertEquals(Status.OK, store.register(INSTANCE,
            Layout.of("commit", 1, 0, 1, (int)slotBytes, Dtype.UINT8, true)).status);
        return store;
    }

    private StoreCommand storeOne(final KvStore store)
    {
        final StoreCommand prepared = store.prepareStore(INSTANCE, ChunkKeys.ofIds(nextKey++));
        if (Status.OK == prepared.status)
        {
            final long offset = prepared.slotOffset[0];
            assertEquals(Status.OK, store.commitStore(INSTANCE, prepared.outTransferId).status);
            prepared.slotOffset[0] = offset;
        }
        return prepared;
    }

    @Test
    void shouldHandOutOnlyCommittedRegionsAndEvictWhenTheNextCannotBeCommitted()
    {
        final KvStore store = store(4 * MIB, commitment);
        commitment.committed = REGION;
        for (int i = 0; i < 4; i++)
        {
            final StoreCommand r = storeOne(store);
            assertEquals(Status.OK, r.status);
            assertTrue(r.slotOffset[0] < REGION, "in the committed region: " + r.slotOffset[0]);
        }
        assertEquals(REGION, commitment.givenEnd);
        assertEquals(0, commitment.wanted);

        final StoreCommand fifth = storeOne(store);
        assertEquals(Status.OK, fifth.status);
        assertTrue(fifth.slotOffset[0] < REGION, "evicted within the committed region: " + fifth.slotOffset[0]);
        store.lookup(INSTANCE, ChunkKeys.ofIds(0), false);
        assertEquals(1, store.counters().get(io.kvstash.wire.file.CountersDescriptor.EVICTIONS));
        assertEquals(2 * REGION, commitment.wantedEnd, "the next region is asked for");
        assertTrue(commitment.wanted >= 1);

        commitment.committed = 2 * REGION;
        final StoreCommand sixth = storeOne(store);
        assertEquals(Status.OK, sixth.status);
        assertTrue(sixth.slotOffset[0] >= REGION && sixth.slotOffset[0] < 2 * REGION, "" + sixth.slotOffset[0]);
        assertEquals(2 * REGION, commitment.givenEnd);
        store.lookup(INSTANCE, ChunkKeys.ofIds(0), false);
        assertEquals(1, store.counters().get(io.kvstash.wire.file.CountersDescriptor.EVICTIONS));
    }

    @Test
    void shouldAnswerNoSpaceWhenNothingCanBeCommittedOrEvicted()
    {
        final KvStore store = store(4 * MIB, commitment);
        assertEquals(Status.NO_SPACE, storeOne(store).status);
        assertEquals(REGION, commitment.wantedEnd);
        assertEquals(0, commitment.givenEnd, "no region handed out");

        commitment.committed = REGION;
        assertEquals(Status.OK, storeOne(store).status);
        assertEquals(REGION, commitment.givenEnd);
    }

    @Test
    void shouldGiveASlotAcrossTwoRegionsOnlyWhenBothAreCommitted()
    {
        // 12 MiB slots: the second one spans regions 0 and 1.
        final KvStore store = store(12 * MIB, commitment);
        commitment.committed = REGION;
        assertEquals(Status.OK, storeOne(store).status);
        final StoreCommand second = storeOne(store);
        assertEquals(Status.OK, second.status);
        assertEquals(0, second.slotOffset[0], "the first chunk evicted: the straddling slot is not cut");
        assertEquals(2 * REGION, commitment.wantedEnd);

        commitment.committed = 2 * REGION;
        final StoreCommand third = storeOne(store);
        assertEquals(Status.OK, third.status);
        assertEquals(12 * MIB, third.slotOffset[0], "the straddling slot, once both regions are committed");
    }

    @Test
    void shouldCommitTheNextRegionOnTheSpotRatherThanEvict()
    {
        final KvStore store = store(4 * MIB, commitment);
        commitment.committed = REGION;
        commitment.limit = 3 * REGION;
        for (int i = 0; i < 12; i++)
        {
            final StoreCommand r = storeOne(store);
            assertEquals(Status.OK, r.status);
        }
        store.lookup(INSTANCE, ChunkKeys.ofIds(0), false);
        assertEquals(0, store.counters().get(io.kvstash.wire.file.CountersDescriptor.EVICTIONS));
        assertEquals(3 * REGION, commitment.committed);
        assertEquals(2, commitment.wanted, "regions 1 and 2, each once");
        assertEquals(3 * REGION, commitment.givenEnd);
    }

    @Test
    void shouldHandOutTheWholePoolWithoutACommitment()
    {
        final KvStore store = store(4 * MIB, null);
        for (int i = 0; i < 12; i++)
        {
            assertEquals(Status.OK, storeOne(store).status);
        }
        store.lookup(INSTANCE, ChunkKeys.ofIds(0), false);
        assertEquals(0, store.counters().get(io.kvstash.wire.file.CountersDescriptor.EVICTIONS));
    }
}
