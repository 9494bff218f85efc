package io.kvstash.core.book;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * A LOOKUP asked again with L2_POLL (a LOOKUP that waited for the second tier, asked once more when its
 * read-through is over) is not a second reference of its keys: under the policies with a key history, a range
 * looked up and then polled is kept exactly as one looked up once, while a range looked up twice is kept as
 * popular (it enters protected and outlives a flood of new stores).
 */
class PollLookupHistoryTest
{
    private static final long INSTANCE = 9;
    private static final ChunkKeys RANGE = ChunkKeys.ofIds(1, 2);

    private enum Asked
    {
        ONCE, POLLED, TWICE
    }

    @ParameterizedTest
    @EnumSource(value = EvictionPolicy.class, names = { "SLRU", "SLRU_ADMIT" })
    void aPolledLookupCountsItsKeysOnce(final EvictionPolicy policy)
    {
        final int once = survivors(policy, Asked.ONCE);
        assertEquals(once, survivors(policy, Asked.POLLED), policy.label());
        assertNotEquals(once, survivors(policy, Asked.TWICE),
            policy.label() + ": a range looked up twice is kept longer (the scenario is sensitive to the history)");
    }

    /** RANGE is looked up (and again, plainly or polled), stored, then three new ranges overfill the pool. */
    private static int survivors(final EvictionPolicy policy, final Asked asked)
    {
        final KvStore store = new KvStore(new StoreContext()
            .poolSizeBytes(8 * 64).alignment(64).chunkTokens(1).slotBytes(64).eviction(policy).conclude());
        assertEquals(Status.OK, store.register(INSTANCE, Layout.of("poll", 1, 0, 1, 16, Dtype.UINT8, true)).status);
        assertEquals(0, store.lookup(INSTANCE, RANGE, false).hitChunks);
        if (Asked.TWICE == asked)
        {
            assertEquals(0, store.lookup(INSTANCE, RANGE, false).hitChunks);
        }
        else if (Asked.POLLED == asked)
        {
            final StoreCommand poll = new StoreCommand(store.context());
            poll.type = RequestType.LOOKUP;
            poll.instanceId = INSTANCE;
            poll.flags = RequestFlags.L2_POLL;
            poll.copyKeys(RANGE);
            final StoreCommand answer = store.execute(poll);
            assertEquals(Status.OK, answer.status, answer.message);
            assertEquals(0, answer.hitChunks);
        }
        stored(store, RANGE);
        // Ranges of 1, 3 and 4 new chunks: 8 after RANGE's 2 in a pool of 8. Each has a length of its own, so
        // under slru-admit each is the first of its kind and stored warm, as RANGE was.
        final ChunkKeys[] fills = { ChunkKeys.ofIds(100), ChunkKeys.ofIds(200, 201, 202),
            ChunkKeys.ofIds(300, 301, 302, 303) };
        for (final ChunkKeys fill : fills)
        {
            assertEquals(0, store.lookup(INSTANCE, fill, false).hitChunks);
            stored(store, fill);
        }
        assertNull(store.book().verifyInvariants());
        int survivors = 0;
        for (int i = 0; i < RANGE.count(); i++)
        {
            survivors += store.lookup(INSTANCE, RANGE.range(i, i + 1), false).hitChunks;
        }
        return survivors;
    }

    private static void stored(final KvStore store, final ChunkKeys keys)
    {
        final StoreCommand prepare = store.prepareStore(INSTANCE, keys);
        assertEquals(Status.OK, prepare.status, prepare.message);
        assertEquals(Status.OK, store.commitStore(INSTANCE, prepare.outTransferId).status);
    }
}
