package io.kvstash.core.book;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ChunkIndexTest
{
    private record Key(long ns, long hi, long lo)
    {
    }

    @Test
    void shouldFindInsertedKeysWhenKeysCollideInOneBucket()
    {
        final int capacity = 64;
        final ChunkIndex index = new ChunkIndex(capacity, 4);
        final int mask = tableLength(capacity) - 1;
        final List<Key> colliding = keysHomingAt(7, mask, 20, 1);
        for (int id = 0; id < colliding.size(); id++)
        {
            final Key k = colliding.get(id);
            index.insert(id, k.ns, k.hi, k.lo);
        }
        assertEquals(colliding.size(), index.size());
        for (int id = 0; id < colliding.size(); id++)
        {
            final Key k = colliding.get(id);
            assertEquals(id, index.find(k.ns, k.hi, k.lo));
        }
        // Remove from the middle, the front and the back of the probe run; the rest must stay reachable.
        final int[] order = { 10, 0, 19, 5, 6, 7, 1, 18, 2 };
        final boolean[] removed = new boolean[colliding.size()];
        for (final int id : order)
        {
            index.remove(id);
            removed[id] = true;
            for (int other = 0; other < colliding.size(); other++)
            {
                final Key k = colliding.get(other);
                assertEquals(removed[other] ? -1 : other, index.find(k.ns, k.hi, k.lo), "after removing " + id);
            }
        }
        assertEquals(colliding.size() - order.length, index.size());
    }

    @Test
    void shouldKeepProbeRunsIntactWhenRunsWrapAroundTheTableEnd()
    {
        final int capacity = 32;
        final ChunkIndex index = new ChunkIndex(capacity, 4);
        final int mask = tableLength(capacity) - 1;
        final List<Key> keys = new ArrayList<>();
        keys.addAll(keysHomingAt(mask, mask, 4, 100));
        keys.addAll(keysHomingAt(mask - 1, mask, 3, 200));
        keys.addAll(keysHomingAt(0, mask, 3, 300));
        keys.addAll(keysHomingAt(1, mask, 2, 400));
        final Map<Key, Integer> model = new HashMap<>();
        for (int id = 0; id < keys.size(); id++)
        {
            final Key k = keys.get(id);
            index.insert(id, k.ns, k.hi, k.lo);
            model.put(k, id);
        }
        final SplittableRandom random = new SplittableRandom(5);
        final List<Integer> live = new ArrayList<>(model.values());
        while (!live.isEmpty())
        {
            final int id = live.remove(random.nextInt(live.size()));
            index.remove(id);
            model.remove(keys.get(id));
            for (int other = 0; other < keys.size(); other++)
            {
                final Key k = keys.get(other);
                assertEquals(model.getOrDefault(k, -1), index.find(k.ns, k.hi, k.lo));
            }
        }
        assertEquals(0, index.size());
    }

    @Test
    void shouldAgreeWithHashMapWhenInsertingAndRemovingRandomKeys()
    {
        final int capacity = 1000;
        final ChunkIndex index = new ChunkIndex(capacity, 4);
        final Map<Key, Integer> model = new HashMap<>();
        final Key[] keyOf = new Key[capacity];
        final List<Integer> freeIds = new ArrayList<>();
        for (int id = capacity - 1; id >= 0; id--)
        {
            freeIds.add(id);
        }
        final SplittableRandom random = new SplittableRandom(42);
        for (int step = 0; step < 200_000; step++)
        {
            // Small key space so that re-inserting a removed key and probing misses are frequent.
            final Key key = randomKey(random);
            final Integer present = model.get(key);
            assertEquals(null == present ? -1 : present, index.find(key.ns, key.hi, key.lo), "step " + step);
            if (null == present && !freeIds.isEmpty() && random.nextInt(100) < 55)
            {
                final int id = freeIds.remove(freeIds.size() - 1);
                index.insert(id, key.ns, key.hi, key.lo);
                model.put(key, id);
                keyOf[id] = key;
            }
            else if (null != present)
            {
                index.remove(present);
                model.remove(key);
                keyOf[present] = null;
                freeIds.add(present);
            }
            assertEquals(model.size(), index.size());
        }
        for (final Map.Entry<Key, Integer> e : model.entrySet())
        {
            final Key k = e.getKey();
            assertEquals(e.getValue(), index.find(k.ns, k.hi, k.lo));
            assertEquals(k.ns, index.ns(e.getValue()));
            assertEquals(k.hi, index.hi(e.getValue()));
            assertEquals(k.lo, index.lo(e.getValue()));
        }
    }

    @Test
    void shouldFillToCapacityAndEmptyWhenEveryIdIsUsed()
    {
        final int capacity = 257;
        final ChunkIndex index = new ChunkIndex(capacity, 4);
        for (int round = 0; round < 3; round++)
        {
            for (int id = 0; id < capacity; id++)
            {
                index.insert(id, round, 0, id);
            }
            assertEquals(capacity, index.size());
            for (int id = 0; id < capacity; id++)
            {
                assertEquals(id, index.find(round, 0, id));
                assertEquals(-1, index.find(round + 1, 0, id));
            }
            for (int id = capacity - 1; id >= 0; id -= 2)
            {
                index.remove(id);
            }
            for (int id = capacity - 2; id >= 0; id -= 2)
            {
                index.remove(id);
            }
            assertEquals(0, index.size());
        }
    }

    @Test
    void shouldSeparateKeysWhenOnlyOneWordDiffers()
    {
        final ChunkIndex index = new ChunkIndex(8, 4);
        index.insert(0, 1, 2, 3);
        index.insert(1, 9, 2, 3);
        index.insert(2, 1, 9, 3);
        index.insert(3, 1, 2, 9);
        assertEquals(0, index.find(1, 2, 3));
        assertEquals(1, index.find(9, 2, 3));
        assertEquals(2, index.find(1, 9, 3));
        assertEquals(3, index.find(1, 2, 9));
        assertEquals(-1, index.find(9, 9, 9));
    }

    @Test
    void shouldComplainWhenRemovingAnIdThatIsNotIndexed()
    {
        final ChunkIndex index = new ChunkIndex(8, 4);
        index.insert(0, 1, 2, 3);
        index.remove(0);
        assertThrows(IllegalStateException.class, () -> index.remove(0));
    }

    @Test
    void shouldStartEmptyWhenResized()
    {
        final ChunkIndex index = new ChunkIndex(4, 4);
        index.insert(3, 1, 1, 1);
        index.resize(100);
        assertEquals(0, index.size());
        assertEquals(-1, index.find(1, 1, 1));
        index.insert(99, 1, 1, 1);
        assertEquals(99, index.find(1, 1, 1));
    }

    @Test
    @Timeout(10)
    void shouldKeepEmptyEntriesWhenEveryIdIsEvictedAndReusedInOneRequest()
    {
        // The book's PREPARE_STORE of a whole pool's worth of new keys on a full pool: every id is evicted (its
        // removal deferred) and re-inserted under a new key. Live and stale entries together would fill the
        // table, and a probe for an absent key would never meet an empty entry: the index runs removals early.
        final int capacity = 8;
        final ChunkIndex index = new ChunkIndex(capacity, capacity);
        for (int id = 0; id < capacity; id++)
        {
            index.insert(id, 1, id, 0);
        }
        for (int id = 0; id < capacity; id++)
        {
            index.removeLater(id);
            index.insert(id, 2, id, 0);
            assertTrue(index.occupiedEntries() < tableLength(capacity), "the table filled after id " + id);
            assertEquals(-1, index.find(3, id, 0));
        }
        index.runPendingRemovals();
        assertEquals(capacity, index.size());
        assertEquals(capacity, index.occupiedEntries());
        for (int id = 0; id < capacity; id++)
        {
            assertEquals(-1, index.find(1, id, 0));
            assertEquals(id, index.find(2, id, 0));
        }
    }

    @Test
    void shouldAnswerLikeHashMapWhenEvictedIdsAreReusedAndTheirRemovalsDeferred()
    {
        // The book's PREPARE_STORE: an evicted id is re-inserted at once under a new key, its old entry removed
        // later; sometimes the new key is rolled back and the old one re-inserted before the removal ran.
        final int capacity = 300;
        final int maxPending = 3;
        final ChunkIndex index = new ChunkIndex(capacity, maxPending);
        final Map<Key, Integer> model = new HashMap<>();
        final Key[] keyOf = new Key[capacity];
        final List<Integer> freeIds = new ArrayList<>();
        for (int id = capacity - 1; id >= 0; id--)
        {
            freeIds.add(id);
        }
        final SplittableRandom random = new SplittableRandom(11);
        int deferred = 0;
        int rolledBack = 0;
        for (int step = 0; step < 200_000; step++)
        {
            final Key key = randomKey(random);
            final Integer present = model.get(key);
            assertEquals(null == present ? -1 : present, index.find(key.ns, key.hi, key.lo), "step " + step);
            final int action = random.nextInt(100);
            if (null == present && !freeIds.isEmpty() && action < 40)
            {
                final int id = freeIds.remove(freeIds.size() - 1);
                index.insert(id, key.ns, key.hi, key.lo);
                model.put(key, id);
                keyOf[id] = key;
            }
            else if (null == present && !model.isEmpty() && action < 80)
            {
                final int victim = anyLiveId(keyOf, random);
                final Key old = keyOf[victim];
                index.removeLater(victim);
                model.remove(old);
                deferred++;
                index.insert(victim, key.ns, key.hi, key.lo);
                model.put(key, victim);
                keyOf[victim] = key;
                if (random.nextInt(4) == 0)
                {
                    index.remove(victim);
                    index.insert(victim, old.ns, old.hi, old.lo);
                    model.remove(key);
                    model.put(old, victim);
                    keyOf[victim] = old;
                    rolledBack++;
                }
            }
            else if (null != present && action < 90)
            {
                index.remove(present);
                model.remove(key);
                keyOf[present] = null;
                freeIds.add(present);
            }
            if (random.nextInt(3) == 0)
            {
                index.runPendingRemovals();
                assertEquals(0, index.pendingRemovals());
            }
            assertTrue(index.pendingRemovals() <= maxPending);
            assertEquals(index.size() + index.pendingRemovals(), index.occupiedEntries(), "step " + step);
            assertEquals(model.size(), index.size(), "step " + step);
        }
        index.runPendingRemovals();
        for (final Map.Entry<Key, Integer> e : model.entrySet())
        {
            final Key k = e.getKey();
            assertEquals(e.getValue(), index.find(k.ns, k.hi, k.lo));
        }
        assertEquals(index.size(), index.occupiedEntries(), "no stale entry left once the removals ran");
        assertTrue(deferred > 10_000 && rolledBack > 2_000, deferred + " deferred, " + rolledBack + " rolled back");
    }

    private static int anyLiveId(final Key[] keyOf, final SplittableRandom random)
    {
        while (true)
        {
            final int id = random.nextInt(keyOf.length);
            if (null != keyOf[id])
            {
                return id;
            }
        }
    }

    private static Key randomKey(final SplittableRandom random)
    {
        return new Key(random.nextInt(3), random.nextInt(2), random.nextInt(700));
    }

    private static int tableLength(final int capacity)
    {
        return Math.max(16, Integer.highestOneBit(Math.max(1, capacity) * 2 - 1) << 1);
    }

    private static List<Key> keysHomingAt(final int bucket, final int mask, final int count, final long ns)
    {
        final List<Key> keys = new ArrayList<>();
        for (long lo = 0; keys.size() < count; lo++)
        {
            if (((int)ChunkIndex.hash(ns, 0, lo) & mask) == bucket)
            {
                keys.add(new Key(ns, 0, lo));
            }
        }
        return keys;
    }
}
