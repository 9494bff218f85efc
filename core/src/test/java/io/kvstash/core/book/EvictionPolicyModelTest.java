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

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Randomized model test of every eviction policy: prefix workloads over a forest of chains (LOOKUP, sometimes
 * pinned and held across later requests; RETRIEVE of the hit prefix; STORE of the rest or of the whole range;
 * sometimes an ABORT) run through the store core and through a plain reference of the policy's rules (array
 * lists for probation and protected, maps for the chunks, the same key history class). A pool of 12 slots and
 * chains of up to 8 chunks make eviction frequent and NO_SPACE possible when pins hold the pool. After every
 * request the answers (hits, status) and the whole eviction order must agree, and the book's invariants hold.
 */
class EvictionPolicyModelTest
{
    private static final int SLOTS = 12;
    private static final int SLOT_BYTES = 64;
    private static final int SEEDS = Integer.getInteger("kvstash.eviction.seeds", 12);
    private static final int STEPS = Integer.getInteger("kvstash.eviction.steps", 800);
    private static final long INSTANCE = 7;
    private static final Layout LAYOUT = Layout.of("eviction-model", 1, 0, 1, 16, Dtype.UINT8, true);

    @ParameterizedTest
    @EnumSource(EvictionPolicy.class)
    void storeAgreesWithTheReferenceOfThePolicy(final EvictionPolicy policy)
    {
        for (long seed = 1; seed <= SEEDS; seed++)
        {
            run(policy, seed);
        }
    }

    private static void run(final EvictionPolicy policy, final long seed)
    {
        final StoreContext context = new StoreContext()
            .poolSizeBytes((long)SLOTS * SLOT_BYTES)
            .alignment(SLOT_BYTES)
            .chunkTokens(1)
            .slotBytes(SLOT_BYTES)
            .maxChunksPerRequest(16)
            .eviction(policy)
            .conclude();
        final KvStore store = new KvStore(context);
        assertEquals(Status.OK, store.register(INSTANCE, LAYOUT).status);
        final long ns = store.book().namespaceOf(INSTANCE);
        final Reference model = new Reference(policy, ns);
        final SplittableRandom random = new SplittableRandom(seed);
        // A forest: chain f holds ids f * 100 + depth; a branch b of chain f shares its first chunks.
        long heldLookup = 0;
        List<Long> heldKeys = null;
        for (int step = 0; step < STEPS; step++)
        {
            final String where = policy.label() + " seed " + seed + " step " + step;
            final long[] range = randomRange(random);
            final ChunkKeys keys = ChunkKeys.ofIds(range);
            final boolean pin = random.nextInt(8) == 0 && 0 == heldLookup;
            final StoreCommand lookup = store.lookup(INSTANCE, keys, pin);
            assertEquals(Status.OK, lookup.status, where);
            final int k = model.lookup(range);
            assertEquals(k, lookup.hitChunks, where + " hits");
            if (pin && k > 0)
            {
                heldLookup = lookup.outTransferId;
                heldKeys = new ArrayList<>();
                for (int i = 0; i < k; i++)
                {
                    heldKeys.add(range[i]);
                }
                model.pin(heldKeys, +1);
            }
            else if (k > 0)
            {
                final StoreCommand prepare = store.prepareRetrieve(INSTANCE, keys.range(0, k));
                assertEquals(Status.OK, prepare.status, where);
                assertEquals(Status.OK, store.commitRetrieve(INSTANCE, prepare.outTransferId).status, where);
                model.retrieve(range, k);
            }
            storeTail(store, model, random, keys, range, k, where);
            if (0 != heldLookup && random.nextInt(4) == 0)
            {
                assertEquals(Status.OK, store.release(INSTANCE, heldLookup).status, where);
                model.pin(heldKeys, -1);
                heldLookup = 0;
            }
            assertSameOrder(store, model, where);
        }
    }

    /** Stores the range past its hits (now and then all of it), then aborts or commits, the model alike. */
    private static void storeTail(
        final KvStore store,
        final Reference model,
        final SplittableRandom random,
        final ChunkKeys keys,
        final long[] range,
        final int k,
        final String where)
    {
        final int from = random.nextInt(4) == 0 ? 0 : k;
        final long[] storeRange = java.util.Arrays.copyOfRange(range, from, range.length);
        if (storeRange.length > 0)
        {
            final StoreCommand prepare = store.prepareStore(INSTANCE, keys.range(from, range.length));
            final List<Long> reserved = model.prepareStore(storeRange);
            assertEquals(null == reserved ? Status.NO_SPACE : Status.OK, prepare.status, where + " store");
            if (null != reserved && 0 != prepare.outTransferId)
            {
                if (random.nextInt(10) == 0)
                {
                    assertEquals(Status.OK, store.abortStore(INSTANCE, prepare.outTransferId).status, where);
                    model.abort(reserved);
                }
                else
                {
                    assertEquals(Status.OK, store.commitStore(INSTANCE, prepare.outTransferId).status, where);
                    model.commit(reserved);
                }
            }
        }
    }

    /** The store's invariants hold and its eviction order is the reference's. */
    private static void assertSameOrder(final KvStore store, final Reference model, final String where)
    {
        store.book().afterAnswer();
        assertNull(store.book().verifyInvariants(), where);
        final long[][] order = store.book().lruOrder();
        final List<Long> expected = model.order();
        assertEquals(expected.size(), order.length, where + " readable chunks");
        for (int i = 0; i < order.length; i++)
        {
            assertEquals(expected.get(i), order[i][1], where + " eviction order position " + i);
        }
    }

    private static long[] randomRange(final SplittableRandom random)
    {
        final int chain = random.nextInt(6);
        final int length = 1 + random.nextInt(8);
        final int branchAt = random.nextInt(3) == 0 ? 1 + random.nextInt(length) : length;
        final int branch = 1 + random.nextInt(2);
        final long[] range = new long[length];
        for (int i = 0; i < length; i++)
        {
            range[i] = i < branchAt ? chain * 100L + i : chain * 100L + branch * 10_000L + i;
        }
        return range;
    }

    /** The policies' rules on plain lists: readable keys in probation and protected, evict-first at index 0. */
    /** The length class of a store as {@code slru-admit} defines it, written out: 1, 2, 3, then two a doubling. */
    private static int halfOctave(final int chunks)
    {
        int lower = 4;
        int c = 4;
        while (c < 23)
        {
            if (chunks < lower + lower / 2)
            {
                return chunks < 4 ? chunks : c;
            }
            if (chunks < 2 * lower)
            {
                return c + 1;
            }
            lower *= 2;
            c += 2;
        }
        return 23;
    }

    private static final class Reference
    {
        private final EvictionPolicy policy;
        private final long ns;
        private final List<Long> probation = new ArrayList<>();
        private final List<Long> protectedList = new ArrayList<>();
        private final Map<Long, Integer> pins = new HashMap<>();
        private final Map<Long, Integer> incarnation = new HashMap<>();
        private final Map<Long, Integer> kindOf = new HashMap<>();
        private final java.util.Set<Long> reservedKeys = new java.util.HashSet<>();
        private final KeyHistory history;
        private final long[] kindStores = new long[96];
        private final long[] kindReads = new long[96];
        private long totalStores;
        private long totalReads;
        private long storesSinceHalving;
        private int incarnations;
        /** A LOOKUP's first missing key: its last hit and that chunk's incarnation then. */
        private final Map<Long, long[]> hints = new HashMap<>();
        private long parent = -1;
        private int parentIncarnation;
        private int kindBase;

        Reference(final EvictionPolicy policy, final long ns)
        {
            this.policy = policy;
            this.ns = ns;
            final long cells = Math.min(ChainLearner.MAX_HISTORY_CELLS,
                Math.max(1024, (long)SLOTS * ChainLearner.HISTORY_WINDOWS * 4));
            history = new KeyHistory(Integer.highestOneBit((int)cells - 1) << 1);
        }

        boolean readable(final long key)
        {
            return probation.contains(key) || protectedList.contains(key);
        }

        int lookup(final long[] range)
        {
            int k = 0;
            while (k < range.length && readable(range[k]))
            {
                k++;
            }
            if (policy.segmented())
            {
                for (final long key : range)
                {
                    history.reference(ns, 0, key, (long)ChainLearner.HISTORY_WINDOWS * SLOTS);
                }
            }
            if (k > 0 && k < range.length)
            {
                hints.put(range[k], new long[]{ range[k - 1], incarnation.get(range[k - 1]) });
            }
            return k;
        }

        void pin(final List<Long> keys, final int delta)
        {
            for (final long key : keys)
            {
                pins.merge(key, delta, Integer::sum);
            }
        }

        void retrieve(final long[] range, final int k)
        {
            for (int j = 0; j < k; j++)
            {
                final int i = policy.chainAware() ? k - 1 - j : j;
                final long key = range[i];
                final Integer kind = kindOf.remove(key);
                remove(key);
                appendHot(key);
                if (EvictionPolicy.SLRU_ADMIT == policy && null != kind)
                {
                    kindReads[kind]++;
                    totalReads++;
                }
            }
        }

        List<Long> prepareStore(final long[] range)
        {
            int firstAbsent = -1;
            for (int i = 0; i < range.length; i++)
            {
                if (!readable(range[i]) && !reservedKeys.contains(range[i]))
                {
                    firstAbsent = i;
                    break;
                }
            }
            if (firstAbsent < 0)
            {
                return List.of();
            }
            final List<Long> oldProbation = new ArrayList<>(probation);
            final List<Long> oldProtected = new ArrayList<>(protectedList);
            // The store's undo puts its victims back as they were, kinds included.
            final Map<Long, Integer> oldKinds = new HashMap<>(kindOf);
            final List<Long> reserved = new ArrayList<>();
            for (int i = firstAbsent; i < range.length; i++)
            {
                final long key = range[i];
                if (i > firstAbsent && (readable(key) || reservedKeys.contains(key)))
                {
                    continue;
                }
                if (probation.size() + protectedList.size() + reservedKeys.size() >= SLOTS)
                {
                    final Long victim = victim();
                    if (null == victim)
                    {
                        probation.clear();
                        probation.addAll(oldProbation);
                        protectedList.clear();
                        protectedList.addAll(oldProtected);
                        kindOf.clear();
                        kindOf.putAll(oldKinds);
                        reservedKeys.removeAll(reserved);
                        return null;
                    }
                    remove(victim);
                }
                reservedKeys.add(key);
                reserved.add(key);
            }
            for (final long key : reserved)
            {
                incarnation.put(key, ++incarnations);
            }
            parent = -1;
            if (firstAbsent > 0)
            {
                parent = readable(range[firstAbsent - 1]) ? range[firstAbsent - 1] : -1;
            }
            else
            {
                final long[] hint = hints.get(range[0]);
                if (null != hint && readable(hint[0]) && incarnation.get(hint[0]) == hint[1])
                {
                    parent = hint[0];
                }
            }
            parentIncarnation = parent >= 0 ? incarnation.get(parent) : 0;
            kindBase = ((parent >= 0 ? 24 : 0) + halfOctave(range.length - firstAbsent)) * 2;
            return reserved;
        }

        void abort(final List<Long> reserved)
        {
            reservedKeys.removeAll(reserved);
        }

        void commit(final List<Long> reserved)
        {
            reservedKeys.removeAll(reserved);
            final int n = reserved.size();
            if (!policy.chainAware())
            {
                probation.addAll(reserved);
                return;
            }
            final long p =
                parent >= 0 && readable(parent) && incarnation.get(parent) == parentIncarnation ? parent : -1;
            final double average = (totalReads + 1.0) / (totalStores + 2.0);
            // One verdict for the store's chunks but its last, with all of them counted; the last is cold when they
            // are, or when its own kind is.
            final int percent = ChainLearner.COLD_PERCENT;
            final boolean othersCold = n > 1 &&
                (kindReads[kindBase + 1] + average) * 100 < percent * average * (kindStores[kindBase + 1] + n - 1);
            final boolean lastCold = othersCold ||
                (kindReads[kindBase] + average) * 100 < percent * average * (kindStores[kindBase] + 1);
            long coldCursor = -1;
            for (int i = n - 1; i >= 0; i--)
            {
                final long key = reserved.get(i);
                final int kind = kindBase + Math.min(n - 1 - i, 1);
                if (policy.segmented() && history.count(ns, 0, key) >= 2)
                {
                    if (p >= 0)
                    {
                        insertBefore(key, p);
                    }
                    else
                    {
                        appendHot(key);
                    }
                }
                else if (EvictionPolicy.SLRU_ADMIT == policy && (i == n - 1 ? lastCold : othersCold))
                {
                    probation.add(coldCursor < 0 ? 0 : probation.indexOf(coldCursor) + 1, key);
                    coldCursor = key;
                }
                else if (p >= 0 && probation.contains(p))
                {
                    probation.add(probation.indexOf(p), key);
                }
                else
                {
                    probation.add(key);
                }
                if (EvictionPolicy.SLRU_ADMIT == policy)
                {
                    kindOf.put(key, kind);
                    kindStores[kind]++;
                    totalStores++;
                    if (++storesSinceHalving >= SLOTS)
                    {
                        storesSinceHalving = 0;
                        for (int j = 0; j < kindStores.length; j++)
                        {
                            kindStores[j] >>= 1;
                            kindReads[j] >>= 1;
                        }
                        totalStores >>= 1;
                        totalReads >>= 1;
                    }
                }
            }
        }

        List<Long> order()
        {
            final List<Long> order = new ArrayList<>(probation);
            order.addAll(protectedList);
            return order;
        }

        private Long victim()
        {
            for (final List<Long> list : List.of(probation, protectedList))
            {
                for (final long key : list)
                {
                    if (pins.getOrDefault(key, 0) == 0)
                    {
                        return key;
                    }
                }
            }
            return null;
        }

        private void remove(final long key)
        {
            if (!probation.remove(key))
            {
                protectedList.remove(key);
            }
            kindOf.remove(key);
        }

        private void insertBefore(final long key, final long before)
        {
            final List<Long> list = probation.contains(before) ? probation : protectedList;
            list.add(list.indexOf(before), key);
            trim();
        }

        private void appendHot(final long key)
        {
            if (policy.segmented())
            {
                protectedList.add(key);
                trim();
            }
            else
            {
                probation.add(key);
            }
        }

        private void trim()
        {
            while (protectedList.size() > SLOTS * policy.protectedSharePercent() / 100)
            {
                probation.add(protectedList.remove(0));
            }
        }
    }
}
