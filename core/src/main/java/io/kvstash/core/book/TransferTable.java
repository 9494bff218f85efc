package io.kvstash.core.book;

import java.util.Arrays;

/**
 * Pending transfers: server-issued ids, their kind, owner instance, lease deadline and chunk list. An id is
 * {@code generation << 32 | index}; the generation of an index moves on every time the entry is released,
 * so a stale id (finished, aborted, expired, or from before a reuse) never resolves. Active transfers are
 * kept on two intrusive doubly-linked lists: the lease list in deadline order (leases have one length, so
 * creation order is deadline order and expiry pops the head), and one list per owner instance (UNREGISTER).
 * Grows by doubling up to its limit, so steady state allocates nothing.
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}).
 */
final class TransferTable
{
    static final int KIND_FREE = 0;
    static final int KIND_STORE = 1;
    static final int KIND_RETRIEVE = 2;
    static final int KIND_LOOKUP = 3;

    private static final int INITIAL_CAPACITY = 256;
    private static final int INITIAL_CHUNKS = 8;

    private final int maxCapacity;
    private int capacity;
    private int[] kind;
    private int[] generation;
    private int[] instance;
    private long[] deadlineNs;
    private int[][] chunks;
    private int[] count;
    private int[] leasePrev;
    private int[] leaseNext;
    private int[] instancePrev;
    private int[] instanceNext;
    private int[] freeStack;
    private int freeTop;
    private int leaseHead = -1;
    private int leaseTail = -1;
    private final int[] instanceHead;
    private int active;

    TransferTable(final int maxCapacity, final int maxInstances)
    {
        this.maxCapacity = maxCapacity;
        instanceHead = new int[maxInstances];
        Arrays.fill(instanceHead, -1);
        kind = new int[0];
        generation = new int[0];
        instance = new int[0];
        deadlineNs = new long[0];
        chunks = new int[0][];
        count = new int[0];
        leasePrev = new int[0];
        leaseNext = new int[0];
        instancePrev = new int[0];
        instanceNext = new int[0];
        freeStack = new int[0];
        grow(Math.min(INITIAL_CAPACITY, maxCapacity));
    }

    int active()
    {
        return active;
    }

    /**
     * Takes a free entry, not yet on any list.
     *
     * @return index, or -1 when the limit is reached.
     */
    int allocate()
    {
        if (0 == freeTop)
        {
            if (capacity == maxCapacity)
            {
                return -1;
            }
            grow((int)Math.min((long)capacity * 2, maxCapacity));
        }
        final int index = freeStack[--freeTop];
        count[index] = 0;
        return index;
    }

    /**
     * Returns an entry taken by {@link #allocate()} that was never activated.
     */
    void discard(final int index)
    {
        count[index] = 0;
        freeStack[freeTop++] = index;
    }

    void addChunk(final int index, final int chunkId)
    {
        int[] list = chunks[index];
        final int n = count[index];
        if (n == list.length)
        {
            list = Arrays.copyOf(list, list.length * 2);
            chunks[index] = list;
        }
        list[n] = chunkId;
        count[index] = n + 1;
    }

    /**
     * Makes an allocated entry pending: sets kind, owner and deadline, links it on both lists.
     */
    void activate(final int index, final int transferKind, final int owner, final long deadline)
    {
        kind[index] = transferKind;
        instance[index] = owner;
        deadlineNs[index] = deadline;
        leaseAppend(index);
        instancePrev[index] = -1;
        instanceNext[index] = instanceHead[owner];
        if (instanceHead[owner] >= 0)
        {
            instancePrev[instanceHead[owner]] = index;
        }
        instanceHead[owner] = index;
        active++;
    }

    /**
     * Changes a pending entry's kind under a new id (new generation) and a new deadline.
     */
    void renew(final int index, final int transferKind, final long deadline)
    {
        nextGeneration(index);
        kind[index] = transferKind;
        deadlineNs[index] = deadline;
        leaseUnlink(index);
        leaseAppend(index);
    }

    /**
     * Ends a pending entry: unlinks it, moves its generation on and frees it.
     */
    void release(final int index)
    {
        leaseUnlink(index);
        final int owner = instance[index];
        final int prev = instancePrev[index];
        final int next = instanceNext[index];
        if (prev >= 0)
        {
            instanceNext[prev] = next;
        }
        else
        {
            instanceHead[owner] = next;
        }
        if (next >= 0)
        {
            instancePrev[next] = prev;
        }
        kind[index] = KIND_FREE;
        count[index] = 0;
        nextGeneration(index);
        freeStack[freeTop++] = index;
        active--;
    }

    /**
     * Resolves an id to a pending entry.
     *
     * @return index, or -1 when the id is not pending (never issued, ended, or stale).
     */
    int resolve(final long transferId)
    {
        final long index = transferId & 0xFFFF_FFFFL;
        if (index >= capacity)
        {
            return -1;
        }
        final int i = (int)index;
        return KIND_FREE != kind[i] && generation[i] == (int)(transferId >>> 32) ? i : -1;
    }

    long id(final int index)
    {
        return ((long)generation[index] << 32) | index;
    }

    int kind(final int index)
    {
        return kind[index];
    }

    int instance(final int index)
    {
        return instance[index];
    }

    long deadlineNs(final int index)
    {
        return deadlineNs[index];
    }

    int count(final int index)
    {
        return count[index];
    }

    int chunk(final int index, final int i)
    {
        return chunks[index][i];
    }

    /**
     * Oldest pending entry (the first to expire).
     *
     * @return index or -1.
     */
    int leaseHead()
    {
        return leaseHead;
    }

    int leaseNext(final int index)
    {
        return leaseNext[index];
    }

    /**
     * First pending entry of an instance.
     *
     * @return index or -1.
     */
    int instanceHead(final int owner)
    {
        return instanceHead[owner];
    }

    int instanceNext(final int index)
    {
        return instanceNext[index];
    }

    private void nextGeneration(final int index)
    {
        int g = generation[index] + 1;
        if (0 == g)
        {
            g = 1;
        }
        generation[index] = g;
    }

    private void leaseAppend(final int index)
    {
        leasePrev[index] = leaseTail;
        leaseNext[index] = -1;
        if (leaseTail >= 0)
        {
            leaseNext[leaseTail] = index;
        }
        else
        {
            leaseHead = index;
        }
        leaseTail = index;
    }

    private void leaseUnlink(final int index)
    {
        final int prev = leasePrev[index];
        final int next = leaseNext[index];
        if (prev >= 0)
        {
            leaseNext[prev] = next;
        }
        else
        {
            leaseHead = next;
        }
        if (next >= 0)
        {
            leasePrev[next] = prev;
        }
        else
        {
            leaseTail = prev;
        }
    }

    private void grow(final int newCapacity)
    {
        final int old = capacity;
        kind = Arrays.copyOf(kind, newCapacity);
        generation = Arrays.copyOf(generation, newCapacity);
        instance = Arrays.copyOf(instance, newCapacity);
        deadlineNs = Arrays.copyOf(deadlineNs, newCapacity);
        chunks = Arrays.copyOf(chunks, newCapacity);
        count = Arrays.copyOf(count, newCapacity);
        leasePrev = Arrays.copyOf(leasePrev, newCapacity);
        leaseNext = Arrays.copyOf(leaseNext, newCapacity);
        instancePrev = Arrays.copyOf(instancePrev, newCapacity);
        instanceNext = Arrays.copyOf(instanceNext, newCapacity);
        freeStack = Arrays.copyOf(freeStack, newCapacity);
        // Push new entries so the lowest index is taken first: ids are deterministic for a request order.
        for (int i = newCapacity - 1; i >= old; i--)
        {
            generation[i] = 1;
            chunks[i] = new int[INITIAL_CHUNKS];
            freeStack[freeTop++] = i;
        }
        capacity = newCapacity;
    }
}
