package io.kvstash.core.book;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Pins and NO_SPACE under every eviction policy: a pinned chunk is never the victim, a store that finds every
 * readable chunk pinned is refused whole (NO_SPACE, nothing changed), and once the pins are released the same
 * store succeeds by evicting.
 */
class EvictionPinsTest
{
    private static final long INSTANCE = 3;

    @ParameterizedTest
    @EnumSource(EvictionPolicy.class)
    void pinnedChunksAreNeverEvictedAndAFullyPinnedPoolAnswersNoSpace(final EvictionPolicy policy)
    {
        final KvStore store = new KvStore(new StoreContext()
            .poolSizeBytes(8 * 64).alignment(64).chunkTokens(1).slotBytes(64).eviction(policy).conclude());
        assertEquals(Status.OK, store.register(INSTANCE, Layout.of("pins", 1, 0, 1, 16, Dtype.UINT8, true)).status);
        final ChunkKeys full = ChunkKeys.ofIds(1, 2, 3, 4, 5, 6, 7, 8);
        stored(store, full);
        stored(store, ChunkKeys.ofIds(1, 2, 3, 4, 5, 6, 7, 8));
        final StoreCommand pinAll = store.lookup(INSTANCE, full, true);
        assertEquals(8, pinAll.hitChunks);
        final long pins = pinAll.outTransferId;

        final StoreCommand refused = store.prepareStore(INSTANCE, ChunkKeys.ofIds(20, 21));
        assertEquals(Status.NO_SPACE, refused.status, policy.label());
        assertEquals(8, store.lookup(INSTANCE, full, false).hitChunks, "nothing evicted by a refused store");
        assertNull(store.book().verifyInvariants());

        assertEquals(Status.OK, store.release(INSTANCE, pins).status);
        stored(store, ChunkKeys.ofIds(20, 21));
        assertEquals(2, store.lookup(INSTANCE, ChunkKeys.ofIds(20, 21), false).hitChunks);
        assertNull(store.book().verifyInvariants());
    }

    @ParameterizedTest
    @EnumSource(EvictionPolicy.class)
    void aStoreEvictsOnlyUnpinnedChunks(final EvictionPolicy policy)
    {
        final KvStore store = new KvStore(new StoreContext()
            .poolSizeBytes(8 * 64).alignment(64).chunkTokens(1).slotBytes(64).eviction(policy).conclude());
        assertEquals(Status.OK, store.register(INSTANCE, Layout.of("pins", 1, 0, 1, 16, Dtype.UINT8, true)).status);
        final ChunkKeys held = ChunkKeys.ofIds(1, 2, 3, 4);
        stored(store, held);
        stored(store, ChunkKeys.ofIds(50, 51, 52, 53));
        final StoreCommand pin = store.lookup(INSTANCE, held, true);
        assertEquals(4, pin.hitChunks);
        final long pinned = pin.outTransferId;
        stored(store, ChunkKeys.ofIds(60, 61, 62, 63));
        assertEquals(4, store.lookup(INSTANCE, held, false).hitChunks, policy.label() + ": pinned chunks stay");
        assertEquals(4, store.lookup(INSTANCE, ChunkKeys.ofIds(60, 61, 62, 63), false).hitChunks);
        assertEquals(0, store.lookup(INSTANCE, ChunkKeys.ofIds(50), false).hitChunks);
        final StoreCommand tooMany = store.prepareStore(INSTANCE, ChunkKeys.ofIds(70, 71, 72, 73, 74));
        assertEquals(Status.NO_SPACE, tooMany.status, "five new chunks need a pinned slot");
        assertEquals(4, store.lookup(INSTANCE, ChunkKeys.ofIds(60, 61, 62, 63), false).hitChunks, "refused whole");
        assertEquals(Status.OK, store.release(INSTANCE, pinned).status);
        stored(store, ChunkKeys.ofIds(70, 71, 72, 73, 74));
        assertNull(store.book().verifyInvariants());
    }

    private static void stored(final KvStore store, final ChunkKeys keys)
    {
        final StoreCommand prepare = store.prepareStore(INSTANCE, keys);
        assertEquals(Status.OK, prepare.status, prepare.message);
        if (0 != prepare.outTransferId)
        {
            assertEquals(Status.OK, store.commitStore(INSTANCE, prepare.outTransferId).status);
        }
    }
}
