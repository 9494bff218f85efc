package io.kvstash.core;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.junit.jupiter.api.Test;

import static io.kvstash.core.StoreHarness.RANK0;
import static io.kvstash.core.StoreHarness.ids;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

/**
 * Bad input of any kind gets an error status with a message and leaves everything else
 * untouched.
 */
class BadRequestTest
{
    private static final long A = 11;

    private final StoreHarness h = new StoreHarness(8);

    private long pending;
    private long[] lru;

    private void populate()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3));
        h.pinned(A, ids(1), 1);
        pending = h.prepared(A, ids(4));
        lru = h.lru();
    }

    private void assertUntouched()
    {
        assertArrayEquals(lru, h.lru());
        assertEquals(2, h.book().pendingTransfers());
        assertEquals(1, h.book().reservedChunks());
        assertEquals(1, h.pins(A, 1));
        h.assertInvariants();
        assertEquals(Status.OK, h.store.commitStore(A, pending).status, "the pending store still works");
    }

    @Test
    void shouldAnswerUnknownTypeWhenRequestTypeIsNotKnown()
    {
        populate();
        for (final int type : new int[]{ RequestType.COUNT, 99, -1, Integer.MAX_VALUE })
        {
            final StoreCommand c = h.store.execute(h.raw(type, A));
            assertEquals(Status.UNKNOWN_TYPE, c.status, "type " + type);
            assertNotNull(c.message);
            assertEquals(99, c.correlationId, "the correlation id is kept for the answer");
        }
        assertUntouched();
    }

    @Test
    void shouldAnswerInvalidRequestWhenFlagsAreUnknown()
    {
        populate();
        for (final int flags : new int[]{ 256, 1 << 31, -1, 512 | RequestFlags.PIN })
        {
            final StoreCommand lookup = h.raw(RequestType.LOOKUP, A);
            lookup.flags = flags;
            lookup.chunkCount = 1;
            lookup.keyLo[0] = 1;
            final StoreCommand c = h.store.execute(lookup);
            assertEquals(Status.INVALID_REQUEST, c.status, "flags " + flags);
            assertNotNull(c.message);
            final StoreCommand clear = h.raw(RequestType.CLEAR, 0);
            clear.flags = flags | RequestFlags.FORCE;
            assertEquals(Status.INVALID_REQUEST, h.store.execute(clear).status);
        }
        assertUntouched();
    }

    @Test
    void shouldAnswerInvalidRequestWhenPrefixIsOnAnotherTypeOrWithFromLookup()
    {
        populate();
        for (final int type : new int[]{ RequestType.LOOKUP, RequestType.PREPARE_STORE, RequestType.LOOKUP_ALL_RANKS,
            RequestType.COMMIT_RETRIEVE, RequestType.RELEASE, RequestType.CLEAR })
        {
            final StoreCommand c = h.raw(type, A);
            c.flags = RequestFlags.PREFIX;
            c.chunkCount = 1;
            c.keyLo[0] = 1;
            c.transferId = pending;
            assertEquals(Status.INVALID_REQUEST, h.store.execute(c).status, RequestType.name(type));
            assertEquals("PREFIX is a PREPARE_RETRIEVE flag", c.message);
        }
        final long lookup = h.pinned(A, ids(1, 2), 2);
        final StoreCommand takeOver = h.raw(RequestType.PREPARE_RETRIEVE, A);
        takeOver.flags = RequestFlags.PREFIX | RequestFlags.FROM_LOOKUP;
        takeOver.transferId = lookup;
        assertEquals(Status.INVALID_REQUEST, h.store.execute(takeOver).status);
        assertEquals("PREFIX and FROM_LOOKUP together", takeOver.message);
        assertEquals(Status.OK, h.store.release(A, lookup).status, "the lookup is not taken over");
        assertUntouched();
    }

    @Test
    void shouldAnswerInvalidRequestWhenChunkCountIsOutOfRange()
    {
        populate();
        for (final int count : new int[]{ -1, StoreHarness.MAX_CHUNKS + 1, Integer.MIN_VALUE, Integer.MAX_VALUE })
        {
            for (final int type : new int[]{ RequestType.LOOKUP, RequestType.PREPARE_STORE,
                RequestType.PREPARE_RETRIEVE, RequestType.LOOKUP_ALL_RANKS })
            {
                final StoreCommand c = h.raw(type, A);
                c.chunkCount = count;
                assertEquals(Status.INVALID_REQUEST, h.store.execute(c).status, RequestType.name(type) + " " + count);
            }
        }
        final long[] tooMany = new long[StoreHarness.MAX_CHUNKS + 1];
        assertEquals(Status.INVALID_REQUEST, h.store.lookup(A, ChunkKeys.ofIds(tooMany), false).status);
        assertEquals(Status.INVALID_REQUEST, h.store.prepareStore(A, ChunkKeys.ofIds(tooMany)).status);
        assertEquals(Status.INVALID_REQUEST, h.store.prepareRetrieve(A, ChunkKeys.ofIds(tooMany)).status);
        assertUntouched();
    }

    @Test
    void shouldAnswerUnknownInstanceWhenInstanceIsNotRegistered()
    {
        populate();
        final long stranger = 77;
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.lookup(stranger, ids(1), true).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.prepareStore(stranger, ids(9)).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.commitStore(stranger, pending).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.abortStore(stranger, pending).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.prepareRetrieve(stranger, ids(1)).status);
        assertUntouched();
    }

    @Test
    void shouldAnswerOkAndTouchNothingWhenPingOrStats()
    {
        populate();
        assertEquals(Status.OK, h.store.execute(h.raw(RequestType.PING, 0)).status);
        assertEquals(Status.OK, h.store.execute(h.raw(RequestType.STATS, 0)).status);
        assertEquals(3, h.store.counters().get(CountersDescriptor.READABLE_CHUNKS));
        assertEquals(1, h.store.counters().get(CountersDescriptor.RESERVED_CHUNKS));
        assertEquals(1, h.store.counters().get(CountersDescriptor.PINNED_CHUNKS));
        assertEquals(4, h.store.counters().get(CountersDescriptor.FREE_SLOTS));
        assertEquals(8, h.store.counters().get(CountersDescriptor.SLOT_CAPACITY));
        assertEquals(2, h.store.counters().get(CountersDescriptor.PENDING_TRANSFERS));
        assertEquals(1, h.store.counters().get(CountersDescriptor.INSTANCES));
        assertUntouched();
    }

    @Test
    void shouldPassThroughCommandWhenAnEarlierStageFailedIt()
    {
        populate();
        final StoreCommand c = h.raw(RequestType.PREPARE_STORE, A);
        c.chunkCount = 1;
        c.keyLo[0] = 50;
        c.fail(Status.MALFORMED, "decoder refused it");
        assertEquals(Status.MALFORMED, h.store.execute(c).status);
        assertEquals(0, h.hits(A, ids(50)));
        assertUntouched();
    }
}
