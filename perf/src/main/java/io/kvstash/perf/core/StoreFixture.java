package io.kvstash.perf.core;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;

import java.util.SplittableRandom;

/**
 * Stores and keys shared by the core benchmarks, built outside any measurement. Every store has 4 KiB slots
 * holding a chunk of exactly 4 KiB ({@code [2, 1, 256, 4]} float16), one registered instance, and the
 * system clock, as the synchronous facade is used in production.
 * <p>
 * Setup failures throw {@link IllegalStateException}, so a broken benchmark fails its run instead of
 * timing error answers.
 */
public final class StoreFixture
{
    /** Agrona 2.x on JDK 17 needs this export on every JVM that uses it; for {@code @Fork(jvmArgsAppend)}. */
    public static final String ADD_EXPORTS = "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED";
    /** Tokens per chunk, the server default. */
    public static final int CHUNK_TOKENS = StoreContext.CHUNK_TOKENS_DEFAULT;
    /** Bytes of one slot, also the slot alignment. */
    public static final int SLOT_BYTES = 4096;
    /** The one registered instance. */
    public static final long INSTANCE_ID = 1;
    /** A layout whose chunk is exactly one slot: 2 x 1 layer x 256 tokens x 4 hidden x 2 bytes = 4 KiB. */
    public static final Layout LAYOUT = Layout.of("kvstash-bench", 1, 0, 1, 4, Dtype.FLOAT16, false);

    private StoreFixture()
    {
    }

    /**
     * A store of a given number of slots with {@link #INSTANCE_ID} registered under {@link #LAYOUT}.
     *
     * @param slots pool capacity in chunks.
     * @return the store.
     */
    public static KvStore newStore(final int slots)
    {
        return newStore(slots, EvictionPolicy.LRU);
    }

    /**
     * A store of a given number of slots and eviction policy with {@link #INSTANCE_ID} registered under
     * {@link #LAYOUT}.
     *
     * @param slots    pool capacity in chunks.
     * @param eviction the eviction policy.
     * @return the store.
     */
    public static KvStore newStore(final int slots, final EvictionPolicy eviction)
    {
        final StoreContext context = new StoreContext()
            .poolSizeBytes((long)slots * SLOT_BYTES)
            .alignment(SLOT_BYTES)
            .chunkTokens(CHUNK_TOKENS)
            .eviction(eviction)
            .conclude();
        final KvStore store = new KvStore(context);
        final StoreCommand register = store.register(INSTANCE_ID, LAYOUT);
        check(Status.OK == register.status, "register failed: status " + register.status);
        check(SLOT_BYTES == register.chunkBytes && SLOT_BYTES == register.slotBytes, "chunk does not fill a slot");
        check(slots == register.slotCapacity, "slot capacity " + register.slotCapacity + " != " + slots);
        return store;
    }

    /**
     * Single-chunk key ranges with random 128-bit hashes, as SHA-256 chunk hashes look.
     *
     * @param count number of ranges.
     * @param seed  random seed, so every fork sees the same keys.
     * @return the ranges.
     */
    public static ChunkKeys[] singleChunkKeys(final int count, final long seed)
    {
        final SplittableRandom random = new SplittableRandom(seed);
        final ChunkKeys[] keys = new ChunkKeys[count];
        for (int i = 0; i < count; i++)
        {
            keys[i] = ChunkKeys.ofHashes(new long[]{ random.nextLong() }, new long[]{ random.nextLong() });
        }
        return keys;
    }

    /**
     * One key range of random 128-bit hashes.
     *
     * @param count chunks in the range.
     * @param seed  random seed.
     * @return the range.
     */
    public static ChunkKeys rangeKeys(final int count, final long seed)
    {
        final SplittableRandom random = new SplittableRandom(seed);
        final long[] hi = new long[count];
        final long[] lo = new long[count];
        for (int i = 0; i < count; i++)
        {
            hi[i] = random.nextLong();
            lo[i] = random.nextLong();
        }
        return ChunkKeys.ofHashes(hi, lo);
    }

    /**
     * Stores a range (prepare + commit) and checks every chunk was new and is now readable.
     *
     * @param store store.
     * @param keys  range of absent chunks.
     */
    public static void storeAll(final KvStore store, final ChunkKeys keys)
    {
        final StoreCommand prepare = store.prepareStore(INSTANCE_ID, keys);
        check(Status.OK == prepare.status && keys.count() == prepare.slotCount, "prepare store failed");
        final StoreCommand commit = store.commitStore(INSTANCE_ID, prepare.outTransferId);
        check(Status.OK == commit.status, "commit store failed: status " + commit.status);
    }

    /**
     * A counter's current value.
     *
     * @param store store.
     * @param id    {@link StoreCounters} id.
     * @return value.
     */
    public static long counter(final KvStore store, final int id)
    {
        return store.counters().get(id);
    }

    /**
     * Throws when a benchmark's precondition or post-condition does not hold.
     *
     * @param condition what must hold.
     * @param message   what went wrong.
     */
    public static void check(final boolean condition, final String message)
    {
        if (!condition)
        {
            throw new IllegalStateException(message);
        }
    }
}
