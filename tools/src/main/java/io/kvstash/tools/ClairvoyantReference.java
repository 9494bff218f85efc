package io.kvstash.tools;

import io.kvstash.core.trace.MooncakeTrace;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;

/**
 * The clairvoyant reference of a Mooncake trace: the hit chunks of an ordered replay (LOOKUP the prefix, count
 * its hits, store the rest) through a cache of N chunks that evicts the chunk whose next use is farthest
 * (Belady's farthest-next-use, with the future known). A chunk's next use is the index of the next request
 * naming it (never: after every request); ties go to the smaller block id; a stored chunk is in the cache at
 * once, so a store may evict a chunk the same request stored. It is an upper reference for online policies,
 * not a bound: with prefix hits, farthest-next-use is not optimal. Computed offline here, never by a server.
 * O(chunk references log N); the bundled trace takes well under a second.
 */
public final class ClairvoyantReference
{
    private static final int NEVER = Integer.MAX_VALUE;

    private ClairvoyantReference()
    {
    }

    /**
     * Hit chunks of the farthest-next-use replay.
     *
     * @param requests       trace requests in file order.
     * @param capacityChunks capacity in chunks, at least 1.
     * @return chunks counted as hits.
     */
    public static long hitChunks(final List<MooncakeTrace.Request> requests, final int capacityChunks)
    {
        final int count = requests.size();
        // nextUse[r][i]: the next request after r naming chunk i of request r.
        final int[][] nextUse = new int[count][];
        final Map<Long, Integer> following = new HashMap<>();
        for (int r = count - 1; r >= 0; r--)
        {
            final long[] ids = requests.get(r).hashIds();
            nextUse[r] = new int[ids.length];
            for (int i = 0; i < ids.length; i++)
            {
                nextUse[r][i] = following.getOrDefault(ids[i], NEVER);
            }
            for (final long id : ids)
            {
                following.put(id, r);
            }
        }
        final Map<Long, Integer> cached = new HashMap<>();
        final PriorityQueue<long[]> farthest = new PriorityQueue<>((a, b) ->
            a[0] != b[0] ? Long.compare(b[0], a[0]) : Long.compare(a[1], b[1]));
        long hits = 0;
        for (int r = 0; r < count; r++)
        {
            final long[] ids = requests.get(r).hashIds();
            int k = 0;
            while (k < ids.length && cached.containsKey(ids[k]))
            {
                k++;
            }
            hits += k;
            for (int i = 0; i < ids.length; i++)
            {
                if (cached.containsKey(ids[i]))
                {
                    cached.put(ids[i], nextUse[r][i]);
                    farthest.add(new long[]{ nextUse[r][i], ids[i] });
                }
            }
            for (int i = k; i < ids.length; i++)
            {
                if (cached.containsKey(ids[i]))
                {
                    continue;
                }
                if (cached.size() >= capacityChunks)
                {
                    while (true)
                    {
                        final long[] top = farthest.poll();
                        final Integer use = cached.get(top[1]);
                        if (null != use && use == top[0])
                        {
                            cached.remove(top[1]);
                            break;
                        }
                    }
                }
                cached.put(ids[i], nextUse[r][i]);
                farthest.add(new long[]{ nextUse[r][i], ids[i] });
            }
        }
        return hits;
    }
}
