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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * A COMMIT_RETRIEVE with QUIET (the second tier copying a chunk elsewhere) is not a use: under every eviction
 * policy the pool evicts exactly as if the chunks had not been read, while a plain retrieve of the same chunks
 * changes what survives.
 */
class QuietRetrieveTest
{
    private static final long INSTANCE = 5;
    private static final ChunkKeys OLDER = ChunkKeys.ofIds(1, 2);
    /** Ranges of 3 chunks or fewer, which {@code slru-admit} takes warm while their kinds have no history. */
    private static final ChunkKeys[] NEWER = {
        ChunkKeys.ofIds(20, 21, 22), ChunkKeys.ofIds(30, 31), ChunkKeys.ofIds(40) };
    private static final ChunkKeys FILL = ChunkKeys.ofIds(9, 10);

    private enum Read
    {
        NONE, QUIET, PLAIN
    }

    @ParameterizedTest
    @EnumSource(EvictionPolicy.class)
    void aQuietRetrieveLeavesTheEvictionOrderAsIfNothingWasRead(final EvictionPolicy policy)
    {
        final int untouched = survivorsOfOlder(policy, Read.NONE);
        assertEquals(untouched, survivorsOfOlder(policy, Read.QUIET), policy.label());
        assertNotEquals(untouched, survivorsOfOlder(policy, Read.PLAIN),
            policy.label() + ": a plain retrieve keeps the chunks it read (the scenario is sensitive to reads)");
    }

    @Test
    void quietIsRefusedOnEveryOtherType()
    {
        final KvStore store = store(EvictionPolicy.LRU);
        stored(store, OLDER);
        final long lease = store.lookup(INSTANCE, OLDER, true).outTransferId;
        final StoreCommand release = new StoreCommand(store.context());
        release.type = RequestType.RELEASE;
        release.instanceId = INSTANCE;
        release.transferId = lease;
        release.flags = RequestFlags.QUIET;
        assertEquals(Status.INVALID_REQUEST, store.execute(release).status);
        assertEquals("QUIET is a COMMIT_RETRIEVE, LOOKUP and LOOKUP_ALL_RANKS flag", release.message);
        assertEquals(Status.OK, store.release(INSTANCE, lease).status, "the refused RELEASE changed nothing");
        assertNull(store.book().verifyInvariants());
    }

    /** OLDER then NEWER fill the pool of 8; OLDER is read (or not); FILL then needs two slots. */
    private static int survivorsOfOlder(final EvictionPolicy policy, final Read read)
    {
        final KvStore store = store(policy);
        stored(store, OLDER);
        for (final ChunkKeys newer : NEWER)
        {
            stored(store, newer);
        }
        if (Read.NONE != read)
        {
            final StoreCommand pinned = store.prepareRetrieve(INSTANCE, OLDER);
            assertEquals(Status.OK, pinned.status, pinned.message);
            final StoreCommand done = store.commitRetrieve(INSTANCE, pinned.outTransferId,
                Read.QUIET == read ? RequestFlags.QUIET : 0);
            assertEquals(Status.OK, done.status, done.message);
        }
        stored(store, FILL);
        assertEquals(FILL.count(), store.lookup(INSTANCE, FILL, false).hitChunks);
        assertNull(store.book().verifyInvariants());
        int survivors = 0;
        for (int i = 0; i < OLDER.count(); i++)
        {
            survivors += store.lookup(INSTANCE, OLDER.range(i, i + 1), false).hitChunks;
        }
        return survivors;
    }

    private static KvStore store(final EvictionPolicy policy)
    {
        final KvStore store = new KvStore(new StoreContext()
            .poolSizeBytes(8 * 64).alignment(64).chunkTokens(1).slotBytes(64).eviction(policy).conclude());
        assertEquals(Status.OK, store.register(INSTANCE, Layout.of("quiet", 1, 0, 1, 16, Dtype.UINT8, true)).status);
        return store;
    }

    private static void stored(final KvStore store, final ChunkKeys keys)
    {
        final StoreCommand prepare = store.prepareStore(INSTANCE, keys);
        assertEquals(Status.OK, prepare.status, prepare.message);
        assertEquals(Status.OK, store.commitStore(INSTANCE, prepare.outTransferId).status);
    }
}
