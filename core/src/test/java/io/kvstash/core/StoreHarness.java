package io.kvstash.core;

import io.kvstash.core.book.ChunkBook;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.SlotTableDescriptor;
import io.kvstash.wire.hash.ChunkHasher;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * A small store with a test clock and helpers for the scenario tests. Chunks of the default layouts are
 * 64 bytes and the alignment is 64, so a pool of {@code n * 64} bytes holds exactly {@code n} chunks.
 */
final class StoreHarness
{
    static final int CHUNK_TOKENS = 4;
    static final int ALIGNMENT = 64;
    static final long CHUNK_BYTES = 64;
    static final long LEASE_NS = 1_000;
    static final long START_NS = 1_000_000;
    static final int MAX_CHUNKS = 16;

    /** Rank 0 of a two-rank "llama": 2 x 1 layer x 4 tokens x 4 hidden x 2 bytes = 64 bytes. */
    static final Layout RANK0 = Layout.of("llama", 2, 0, 1, 4, Dtype.FLOAT16, false);
    /** Rank 1 of the same model. */
    static final Layout RANK1 = Layout.of("llama", 2, 1, 1, 4, Dtype.FLOAT16, false);
    /** Another model with the same chunk size. */
    static final Layout OTHER_MODEL = Layout.of("mistral", 2, 0, 1, 4, Dtype.FLOAT16, false);
    /** The same model name and rank under another world size. */
    static final Layout OTHER_WORLD = Layout.of("llama", 1, 0, 1, 4, Dtype.FLOAT16, false);

    final TestClock clock = new TestClock(START_NS);
    final StoreContext context;
    final KvStore store;

    StoreHarness(final int slots)
    {
        this(context(slots));
    }

    StoreHarness(final StoreContext context)
    {
        this.context = context;
        this.store = newStore(context, clock);
    }

    /**
     * The store under test: inline by default; with {@code -Dkvstash.store.engine=SHARED} (or DEDICATED,
     * THREAD_PER_STAGE) the pipeline module runs this same suite through a real Disruptor pipeline.
     */
    static KvStore newStore(final StoreContext context, final org.agrona.concurrent.NanoClock clock)
    {
        final String engine = System.getProperty("kvstash.store.engine", "inline");
        if ("inline".equals(engine))
        {
            return new KvStore(context, clock);
        }
        try
        {
            return (KvStore)Class.forName("io.kvstash.pipeline.PipelineKvStores")
                .getMethod("open", StoreContext.class, org.agrona.concurrent.NanoClock.class, String.class)
                .invoke(null, context, clock, engine);
        }
        catch (final ReflectiveOperationException ex)
        {
            throw new IllegalStateException("engine " + engine + " needs the pipeline module on the classpath", ex);
        }
    }

    static StoreContext context(final int slots)
    {
        return new StoreContext()
            .poolSizeBytes(slots * CHUNK_BYTES)
            .alignment(ALIGNMENT)
            .chunkTokens(CHUNK_TOKENS)
            .leaseNs(LEASE_NS)
            .maxChunksPerRequest(MAX_CHUNKS);
    }

    ChunkBook book()
    {
        return store.book();
    }

    static ChunkKeys ids(final long... ids)
    {
        return ChunkKeys.ofIds(ids);
    }

    void register(final long instance, final Layout layout)
    {
        final StoreCommand c = store.register(instance, layout);
        assertEquals(Status.OK, c.status, c.message);
    }

    /** Prepares and commits a range, asserting both succeed; returns the number of chunks reserved. */
    int stored(final long instance, final ChunkKeys keys)
    {
        final StoreCommand prepare = store.prepareStore(instance, keys);
        assertEquals(Status.OK, prepare.status, prepare.message);
        final int reserved = prepare.slotCount;
        final long transfer = prepare.outTransferId;
        if (reserved > 0)
        {
            assertNotEquals(0, transfer);
            assertEquals(Status.OK, store.commitStore(instance, transfer).status);
        }
        return reserved;
    }

    /** Prepares a store, asserting OK with a transfer; returns the transfer id. */
    long prepared(final long instance, final ChunkKeys keys)
    {
        final StoreCommand prepare = store.prepareStore(instance, keys);
        assertEquals(Status.OK, prepare.status, prepare.message);
        assertNotEquals(0, prepare.outTransferId);
        return prepare.outTransferId;
    }

    /** Pins the readable prefix with a lookup, asserting the hit count; returns the transfer id. */
    long pinned(final long instance, final ChunkKeys keys, final int expectedHits)
    {
        final StoreCommand lookup = store.lookup(instance, keys, true);
        assertEquals(Status.OK, lookup.status, lookup.message);
        assertEquals(expectedHits, lookup.hitChunks);
        return lookup.outTransferId;
    }

    int hits(final long instance, final ChunkKeys keys)
    {
        final StoreCommand lookup = store.lookup(instance, keys, false);
        assertEquals(Status.OK, lookup.status, lookup.message);
        assertEquals(0, lookup.outTransferId);
        return lookup.hitChunks;
    }

    /** Pins of a chunk under an instance's unsalted namespace, -1 when not readable. */
    int pins(final long instance, final long id)
    {
        return book().pinsOf(book().namespaceOf(instance), 0, id);
    }

    /** Pins of a chunk of a layout's namespace under a salt, -1 when not readable. */
    static int pins(final ChunkBook book, final Layout layout, final long salt, final long id)
    {
        return book.pinsOf(namespace(layout, salt), 0, id);
    }

    static long namespace(final Layout layout, final long salt)
    {
        final byte[] model = layout.model().getBytes(StandardCharsets.UTF_8);
        return new ChunkHasher().namespace(model, model.length, layout.worldSize(), layout.rank(), salt);
    }

    /** The LRU order as chunk ids (low hash halves), least recently used first. */
    long[] lru()
    {
        final long[][] order = book().lruOrder();
        final long[] ids = new long[order.length];
        for (int i = 0; i < order.length; i++)
        {
            ids[i] = order[i][1];
        }
        return ids;
    }

    long slotWord(final int slot)
    {
        return store.slotTable().getLongVolatile((int)SlotTableDescriptor.wordOffset(slot));
    }

    long counter(final int id)
    {
        return store.counters().get(id);
    }

    void assertInvariants()
    {
        final ChunkBook book = book();
        assertNull(book.verifyInvariants());
        assertEquals(book.slotCapacity(), book.freeSlots() + book.reservedChunks() + book.readableChunks());
    }

    void assertEmptyOfTransfers()
    {
        assertEquals(0, book().pendingTransfers());
        assertEquals(0, book().reservedChunks());
        assertEquals(0, book().pinnedChunks());
    }

    /** A raw command for requests the facade cannot express (bad types, flags, counts). */
    StoreCommand raw(final int type, final long instance)
    {
        final StoreCommand c = new StoreCommand(store.context());
        c.reset();
        c.type = type;
        c.instanceId = instance;
        c.correlationId = 99;
        return c;
    }
}
