package io.kvstash.core.book;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Under {@code slru-admit} a store enters on one side: its chunks but the last get one verdict, warm or cold, and
 * the last is cold when they are, so along the store's chain every chunk is evicted before its parent. New ranges
 * of 1 to 12 chunks, each the first of its length class (a kind with no history: a long one enters cold), with
 * room for all of them: the eviction order must hold each range deepest first, and the long ones at the
 * evict-first end. Judged chunk by chunk as the kind's counts grew, ranges of 4 and more entered with their deepest
 * chunks warm at the recent end behind a cold head.
 */
class ColdStoreOrderTest
{
    private static final long INSTANCE = 5;

    @Test
    void everyChunkOfAStoreIsEvictedBeforeItsParent()
    {
        final KvStore store = new KvStore(new StoreContext()
            .poolSizeBytes(128 * 64).alignment(64).chunkTokens(1).slotBytes(64)
            .eviction(EvictionPolicy.SLRU_ADMIT).conclude());
        final Layout layout = Layout.of("cold-order", 1, 0, 1, 16, Dtype.UINT8, true);
        assertEquals(Status.OK, store.register(INSTANCE, layout).status);
        final int[] lengths = { 1, 2, 3, 4, 6, 8, 12 };
        for (int r = 0; r < lengths.length; r++)
        {
            final long[] ids = new long[lengths[r]];
            for (int i = 0; i < ids.length; i++)
            {
                ids[i] = 100L * (r + 1) + i;
            }
            final ChunkKeys keys = ChunkKeys.ofIds(ids);
            assertEquals(0, store.lookup(INSTANCE, keys, false).hitChunks);
            final StoreCommand prepare = store.prepareStore(INSTANCE, keys);
            assertEquals(Status.OK, prepare.status, prepare.message);
            assertEquals(Status.OK, store.commitStore(INSTANCE, prepare.outTransferId).status);
        }
        assertNull(store.book().verifyInvariants());
        final long[][] order = store.book().lruOrder();
        final int[] position = new int[100 * (lengths.length + 1)];
        for (int p = 0; p < order.length; p++)
        {
            position[(int)order[p][1]] = p;
        }
        for (int r = 0; r < lengths.length; r++)
        {
            for (int i = 1; i < lengths[r]; i++)
            {
                final long child = 100L * (r + 1) + i;
                assertTrue(position[(int)child] < position[(int)child - 1],
                    "range of " + lengths[r] + ": chunk " + i + " evicted before its parent");
            }
        }
        // A kind with no history counts one read at the average rate: a range of 6 (5 chunks but the last) is
        // under half of it and enters cold, at the evict-first end, ahead of the ranges of 1 and 2, which enter warm.
        for (int i = 0; i < 6; i++)
        {
            assertTrue(position[500 + i] < position[100], "chunk " + i + " of the range of 6 enters cold");
        }
        assertTrue(position[100] < position[201] && position[201] < position[200], "1 and 2 warm, 2 newer");
        // Ranges of 4 and more (3 or more chunks but the last) enter cold, whole; those of 1 to 3 warm.
        assertEquals(4 + 6 + 8 + 12, store.counters().get(CountersDescriptor.COLD_CHUNKS), "chunks counted as stored cold");
    }
}
