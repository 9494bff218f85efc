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

import java.lang.management.ManagementFactory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every eviction policy runs the replay's request cycle (LOOKUP a chain's prefix, RETRIEVE the hits, STORE the
 * rest) without allocating once warm: the key history, the kinds, the hints and the eviction order live in
 * arrays sized at construction or REGISTER.
 */
class EvictionAllocationTest
{
    private static final long INSTANCE = 5;
    private static final int ITERATIONS = 20_000;
    private static final long NOISE_BYTES = 512;
    private static final int CHAINS = 40;
    private static final int DEPTH = 12;

    @ParameterizedTest
    @EnumSource(EvictionPolicy.class)
    void theReplayCycleAllocatesNothingOnceWarm(final EvictionPolicy policy)
    {
        final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        threads.setThreadAllocatedMemoryEnabled(true);
        final KvStore store = new KvStore(new StoreContext()
            .poolSizeBytes(64 * 64).alignment(64).chunkTokens(1).slotBytes(64).eviction(policy).conclude());
        assertEquals(Status.OK, store.register(INSTANCE, Layout.of("alloc", 1, 0, 1, 16, Dtype.UINT8, true)).status);
        // Chains of several lengths over a pool smaller than them all: hits, stores, evictions every cycle.
        final ChunkKeys[] prompts = new ChunkKeys[CHAINS * 4];
        for (int p = 0; p < prompts.length; p++)
        {
            final long[] ids = new long[1 + (p * 7) % DEPTH];
            for (int i = 0; i < ids.length; i++)
            {
                ids[i] = (p % CHAINS) * 100L + i;
            }
            prompts[p] = ChunkKeys.ofIds(ids);
        }
        final ChunkKeys[][] tails = new ChunkKeys[prompts.length][DEPTH + 1];
        final ChunkKeys[][] heads = new ChunkKeys[prompts.length][DEPTH + 1];
        for (int p = 0; p < prompts.length; p++)
        {
            for (int k = 0; k <= prompts[p].count(); k++)
            {
                tails[p][k] = prompts[p].range(k, prompts[p].count());
                heads[p][k] = prompts[p].range(0, k);
            }
        }
        final int[] next = { 0 };
        final Runnable cycle = () ->
        {
            final int p = (next[0]++ * 13) % prompts.length;
            final int k = store.lookup(INSTANCE, prompts[p], false).hitChunks;
            if (k > 0)
            {
                final long retrieve = check(store.prepareRetrieve(INSTANCE, heads[p][k])).outTransferId;
                check(store.commitRetrieve(INSTANCE, retrieve));
            }
            if (k < prompts[p].count())
            {
                final long transfer = check(store.prepareStore(INSTANCE, tails[p][k])).outTransferId;
                if (0 != transfer)
                {
                    check(store.commitStore(INSTANCE, transfer));
                }
            }
        };
        for (int i = 0; i < ITERATIONS; i++)
        {
            cycle.run();
        }
        long allocated = Long.MAX_VALUE;
        for (int round = 0; round < 3; round++)
        {
            final long before = threads.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < ITERATIONS; i++)
            {
                cycle.run();
            }
            allocated = Math.min(allocated, threads.getCurrentThreadAllocatedBytes() - before);
        }
        assertTrue(allocated <= NOISE_BYTES, policy.label() + " allocated " + allocated + " bytes");
        assertTrue(store.book().readableChunks() > 0);
        assertNull(store.book().verifyInvariants());
    }

    private static StoreCommand check(final StoreCommand command)
    {
        assertEquals(Status.OK, command.status, command.message);
        return command;
    }
}
