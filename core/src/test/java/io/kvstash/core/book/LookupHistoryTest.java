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

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Which asks count as references in the key history of the policies that keep one. A range looked up twice is kept
 * as popular (it enters protected and outlives a flood of new stores), one looked up once is not. Asked again with
 * L2_POLL (a waiting LOOKUP's last ask) or with QUIET (a caller asking again about a request it asked about before)
 * it is kept exactly as one looked up once. LOOKUP_ALL_RANKS counts for every rank of its world: the ranges are
 * stored by rank 1 of two, so an ask that counted rank 0's namespace only would read as no ask at all.
 */
class LookupHistoryTest
{
    private static final long RANK0 = 8;
    private static final long RANK1 = 9;
    private static final String MODEL = "history";
    private static final ChunkKeys RANGE = ChunkKeys.ofIds(1, 2);

    private enum Asked
    {
        ONCE, POLLED, QUIET, TWICE, ALL_RANKS_ONCE, ALL_RANKS_QUIET, ALL_RANKS_TWICE, ALL_RANKS_AND_LOOKUP
    }

    @ParameterizedTest
    @EnumSource(value = EvictionPolicy.class, names = { "SLRU", "SLRU_ADMIT" })
    void onlyAFirstAskCountsItsKeys(final EvictionPolicy policy)
    {
        final int once = survivors(policy, Asked.ONCE);
        final int twice = survivors(policy, Asked.TWICE);
        assertNotEquals(once, twice,
            policy.label() + ": a range looked up twice is kept longer (the scenario is sensitive to the history)");
        assertEquals(once, survivors(policy, Asked.POLLED), policy.label() + " polled");
        assertEquals(once, survivors(policy, Asked.QUIET), policy.label() + " asked again quietly");
        assertEquals(once, survivors(policy, Asked.ALL_RANKS_ONCE), policy.label() + " all ranks once");
        assertEquals(once, survivors(policy, Asked.ALL_RANKS_QUIET), policy.label() + " all ranks, then quietly");
        assertEquals(twice, survivors(policy, Asked.ALL_RANKS_TWICE), policy.label() + " all ranks twice");
        assertEquals(twice, survivors(policy, Asked.ALL_RANKS_AND_LOOKUP), policy.label() + " all ranks and rank 1");
    }

    /** RANGE is asked about as told, stored by rank 1, then three new ranges overfill the pool. */
    private static int survivors(final EvictionPolicy policy, final Asked asked)
    {
        final KvStore store = new KvStore(new StoreContext()
            .poolSizeBytes(8 * 64).alignment(64).chunkTokens(1).slotBytes(64).eviction(policy).conclude());
        assertEquals(Status.OK, store.register(RANK0, Layout.of(MODEL, 2, 0, 1, 16, Dtype.UINT8, true)).status);
        assertEquals(Status.OK, store.register(RANK1, Layout.of(MODEL, 2, 1, 1, 16, Dtype.UINT8, true)).status);
        switch (asked)
        {
            case ONCE -> ask(store, RequestType.LOOKUP, 0);
            case POLLED -> asks(store, RequestType.LOOKUP, RequestType.LOOKUP, RequestFlags.L2_POLL);
            case QUIET -> asks(store, RequestType.LOOKUP, RequestType.LOOKUP, RequestFlags.QUIET);
            case TWICE -> asks(store, RequestType.LOOKUP, RequestType.LOOKUP, 0);
            case ALL_RANKS_ONCE -> ask(store, RequestType.LOOKUP_ALL_RANKS, 0);
            case ALL_RANKS_QUIET ->
                asks(store, RequestType.LOOKUP_ALL_RANKS, RequestType.LOOKUP_ALL_RANKS, RequestFlags.QUIET);
            case ALL_RANKS_TWICE -> asks(store, RequestType.LOOKUP_ALL_RANKS, RequestType.LOOKUP_ALL_RANKS, 0);
            case ALL_RANKS_AND_LOOKUP -> asks(store, RequestType.LOOKUP_ALL_RANKS, RequestType.LOOKUP, 0);
            default -> throw new IllegalArgumentException(asked.name());
        }
        stored(store, RANGE);
        // Ranges of 1, 3 and 4 new chunks: 8 after RANGE's 2 in a pool of 8. Each has a length of its own, so
        // under slru-admit each is the first of its kind and stored warm, as RANGE was.
        final ChunkKeys[] fills = { ChunkKeys.ofIds(100), ChunkKeys.ofIds(200, 201, 202),
            ChunkKeys.ofIds(300, 301, 302, 303) };
        for (final ChunkKeys fill : fills)
        {
            assertEquals(0, store.lookup(RANK1, fill, false).hitChunks);
            stored(store, fill);
        }
        assertNull(store.book().verifyInvariants());
        int survivors = 0;
        for (int i = 0; i < RANGE.count(); i++)
        {
            survivors += store.lookup(RANK1, RANGE.range(i, i + 1), false).hitChunks;
        }
        return survivors;
    }

    private static void asks(final KvStore store, final int first, final int again, final int againFlags)
    {
        ask(store, first, 0);
        ask(store, again, againFlags);
    }

    /** A LOOKUP by rank 1's instance, or a LOOKUP_ALL_RANKS of both ranks, of RANGE (none of it stored yet). */
    private static void ask(final KvStore store, final int type, final int flags)
    {
        final StoreCommand command = new StoreCommand(store.context());
        command.type = type;
        command.flags = flags;
        if (RequestType.LOOKUP == type)
        {
            command.instanceId = RANK1;
        }
        else
        {
            final byte[] model = MODEL.getBytes(StandardCharsets.UTF_8);
            System.arraycopy(model, 0, command.model, 0, model.length);
            command.modelLength = model.length;
            command.worldSize = 2;
        }
        command.copyKeys(RANGE);
        final StoreCommand answer = store.execute(command);
        assertEquals(Status.OK, answer.status, answer.message);
        assertEquals(0, answer.hitChunks);
    }

    private static void stored(final KvStore store, final ChunkKeys keys)
    {
        final StoreCommand prepare = store.prepareStore(RANK1, keys);
        assertEquals(Status.OK, prepare.status, prepare.message);
        assertEquals(Status.OK, store.commitStore(RANK1, prepare.outTransferId).status);
    }
}
