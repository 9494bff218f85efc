package io.kvstash.core.book;

import io.kvstash.wire.file.SlotTableDescriptor;

import java.util.Arrays;

/**
 * The structural invariants of a {@link ChunkBook}, checked from scratch: slow and allocating, for tests and
 * diagnostics only, never on a request's path.
 */
final class BookInvariants
{
    private BookInvariants()
    {
    }

    /**
     * Checks every structural invariant. Free + reserved + readable slots equal the cut slots; each class's
     * free stack and LRU list hold only its own slots, and every cut slot lies in a region of its class; the index holds
     * exactly the reserved and readable chunks, each once; the LRU list holds exactly the readable chunks; pins
     * equal the references of pending lookup and retrieve transfers; reserved chunks belong to exactly one
     * pending store of a live instance; every pending transfer has a registered owner and a deadline; the slot
     * table agrees with the states (a free slot's word says FREE).
     *
     * @param regions   regions and size classes, with the slot states.
     * @param index     key index.
     * @param transfers pending transfers.
     * @param instances registered instances.
     * @return null when every invariant holds, else a description of the first violation.
     */
    static String verify(
        final SlotRegions regions, final ChunkIndex index, final TransferTable transfers, final InstanceTable instances)
    {
        final SlotStates slots = regions.slots();
        final int cut = regions.cutSlots();
        final int free = slots.freeCutSlots();
        final int readableChunks = slots.readableChunks();
        final int reservedChunks = slots.reservedChunks();
        if (free + reservedChunks + readableChunks != cut)
        {
            return "free " + free + " + reserved " + reservedChunks + " + readable " + readableChunks +
                " != cut slots " + cut;
        }
        if (index.size() != reservedChunks + readableChunks)
        {
            return "index size " + index.size() + " != reserved + readable";
        }
        if (index.occupiedEntries() != index.size() + index.pendingRemovals())
        {
            return "index table holds " + index.occupiedEntries() + " entries for " + index.size() + " chunks and " +
                index.pendingRemovals() + " pending removals";
        }
        final String classes = verifyClasses(slots, regions);
        if (null != classes)
        {
            return classes;
        }
        final String states = verifyStates(slots, index);
        if (null != states)
        {
            return states;
        }
        return verifyTransfers(slots, transfers, instances);
    }

    private static String verifyClasses(final SlotStates slots, final SlotRegions regions)
    {
        final boolean[] seenFree = new boolean[slots.idCapacity()];
        int free = 0;
        int inLru = 0;
        int cut = 0;
        for (int c = 0; c < regions.classCount(); c++)
        {
            int n = 0;
            for (int id = slots.freeHead(c); id >= 0; id = slots.freeNext(id))
            {
                if (seenFree[id] || SlotStates.FREE != slots.state(id) || slots.slotClass(id) != c)
                {
                    return "slot " + id + " on a free stack twice, not free or of another class";
                }
                seenFree[id] = true;
                n++;
            }
            if (n != slots.freeSlots(c))
            {
                return "class " + c + " free stack holds " + n + " of " + slots.freeSlots(c);
            }
            free += n;
            final int linked = slots.checkOrder(c);
            if (linked < 0)
            {
                return "eviction order of class " + c + " broken";
            }
            inLru += linked;
            cut += regions.cutSlots(c);
        }
        if (free != slots.freeCutSlots() || inLru != slots.readableChunks() || cut != regions.cutSlots())
        {
            return "free stacks hold " + free + " of " + slots.freeCutSlots() + ", LRU lists " + inLru + " of " +
                slots.readableChunks() + " readable, classes " + cut + " of " + regions.cutSlots() + " cut slots";
        }
        int uncut = 0;
        for (int id = 0; id < slots.idLimit(); id++)
        {
            if (SlotStates.UNCUT == slots.state(id))
            {
                uncut++;
            }
            else if (regions.regionClass((int)(slots.offset(id) / regions.regionBytes())) != slots.slotClass(id))
            {
                return "slot " + id + " lies in a region of another class";
            }
        }
        if (slots.idLimit() - uncut != regions.cutSlots())
        {
            return "ids below " + slots.idLimit() + " name " + (slots.idLimit() - uncut) + " slots, " +
                regions.cutSlots() + " are cut";
        }
        return null;
    }

    private static String verifyStates(final SlotStates slots, final ChunkIndex index)
    {
        int readable = 0;
        int reserved = 0;
        int pinned = 0;
        int evictable = 0;
        for (int id = 0; id < slots.idLimit(); id++)
        {
            final byte state = slots.state(id);
            if (SlotStates.UNCUT == state)
            {
                continue;
            }
            if (SlotStates.FREE != state)
            {
                if (index.find(index.ns(id), index.hi(id), index.lo(id)) != id)
                {
                    return "chunk " + id + " not found under its own key";
                }
                if (SlotStates.READABLE == state)
                {
                    readable++;
                    pinned += slots.pins(id) > 0 ? 1 : 0;
                    evictable += 0 == slots.pins(id) ? 1 : 0;
                }
                else
                {
                    reserved++;
                }
            }
            final long word = slots.slotWord(id);
            final int expected = SlotStates.READABLE == state ? SlotTableDescriptor.STATE_READABLE :
                SlotStates.RESERVED == state ? SlotTableDescriptor.STATE_RESERVED : SlotTableDescriptor.STATE_FREE;
            if (SlotStates.FREE != state && (SlotTableDescriptor.state(word) != expected ||
                SlotTableDescriptor.generation(word) != slots.generation(id)))
            {
                return "slot word of " + id + " disagrees with its state";
            }
            if (SlotStates.FREE == state && SlotTableDescriptor.STATE_FREE != SlotTableDescriptor.state(word))
            {
                return "slot word of free slot " + id + " is not FREE";
            }
        }
        if (readable != slots.readableChunks() || reserved != slots.reservedChunks() ||
            pinned != slots.pinnedChunks() || evictable != slots.evictableChunks())
        {
            return "state counts disagree: readable " + readable + "/" + slots.readableChunks() + " reserved " +
                reserved + "/" + slots.reservedChunks() + " pinned " + pinned + "/" + slots.pinnedChunks() +
                " evictable " + evictable + "/" + slots.evictableChunks();
        }
        return null;
    }

    private static String verifyTransfers(
        final SlotStates slots, final TransferTable transfers, final InstanceTable instances)
    {
        final int slotCapacity = slots.idLimit();
        final int[] pinRefs = new int[slotCapacity];
        final int[] reservedBy = new int[slotCapacity];
        Arrays.fill(reservedBy, -1);
        int active = 0;
        for (int t = transfers.leaseHead(); t >= 0; t = transfers.leaseNext(t))
        {
            active++;
            final int instance = transfers.instance(t);
            if (null == instances.layout(instance))
            {
                return "transfer " + t + " has no registered owner";
            }
            if (0 == transfers.count(t))
            {
                return "transfer " + t + " is pending with no chunk";
            }
            for (int i = 0; i < transfers.count(t); i++)
            {
                final int id = transfers.chunk(t, i);
                if (TransferTable.KIND_STORE == transfers.kind(t))
                {
                    if (SlotStates.RESERVED != slots.state(id) || slots.owner(id) != t || reservedBy[id] >= 0)
                    {
                        return "store transfer " + t + " holds chunk " + id + " that it does not reserve";
                    }
                    reservedBy[id] = t;
                }
                else
                {
                    pinRefs[id]++;
                }
            }
        }
        if (active != transfers.active())
        {
            return "lease list holds " + active + " of " + transfers.active() + " pending transfers";
        }
        for (int id = 0; id < slotCapacity; id++)
        {
            final boolean readable = slots.isReadable(id);
            if (SlotStates.RESERVED == slots.state(id) && reservedBy[id] < 0)
            {
                return "reserved chunk " + id + " belongs to no pending store";
            }
            if (pinRefs[id] != (readable ? slots.pins(id) : 0))
            {
                return "chunk " + id + " has " + slots.pins(id) + " pins but " + pinRefs[id] + " references";
            }
        }
        return null;
    }

    /**
     * Readable chunk keys from least to most recently used, size class by size class, for tests.
     *
     * @param regions the book's regions and size classes, with its slots.
     * @param index   the book's key index.
     * @return {@code [hi, lo]} pairs in LRU order.
     */
    static long[][] lruOrder(final SlotRegions regions, final ChunkIndex index)
    {
        final SlotStates slots = regions.slots();
        final long[][] order = new long[slots.readableChunks()][];
        int i = 0;
        for (int c = 0; c < regions.classCount(); c++)
        {
            for (int id = slots.lruHead(c); id >= 0; id = slots.lruNext(id))
            {
                order[i++] = new long[]{ index.hi(id), index.lo(id) };
            }
        }
        return order;
    }
}
