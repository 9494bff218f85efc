package io.kvstash.core.book;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.wire.RequestFlags;

import java.util.Arrays;

/**
 * What the eviction policies learn from the requests, and where each stored or read chunk enters the eviction
 * order ({@link EvictionOrder}). Under {@code lru} nothing is learned and chunks enter as an exact LRU's do.
 * <p>
 * Chains: a chunk's parent is the chunk before it in a range. The first chunk a PREPARE_STORE reserves has its
 * parent in the range when chunks before it are present, or else in a LOOKUP that missed first at its key: a
 * LOOKUP's (or each rank's part of a LOOKUP_ALL_RANKS') first missing key and its last hit are remembered, and a
 * store starting at that key continues that hit. A commit enters a store's chunks deepest first right before their
 * parent (or at the recent end, deepest first, with no parent); a retrieve touches its chunks deepest first. So along
 * a chain the descendants are always older than their ancestors, and a chain is evicted from its tail.
 * <p>
 * History (segmented policies): every LOOKUP key (each rank's, for LOOKUP_ALL_RANKS) is counted in a
 * {@link KeyHistory} aged over {@link #HISTORY_WINDOWS} times the pool's slots of references; a stored chunk whose
 * key was referenced before enters protected. Admission ({@code slru-admit}): each stored chunk is tagged with
 * its kind (continuation of a hit or a new prompt, the store's length class, two per octave ({@link #lengthClass}),
 * whether it is the store's last chunk) and the store counts, per kind, chunks stored and chunks read back (aged by
 * halving every pool's worth of stores); a store's chunks of a kind read back at under {@link #COLD_PERCENT} % of
 * the average rate (its own chunks counted as stored) enter cold, at the evict-first end of probation, and so does
 * its last chunk when the others do.
 * <p>
 * O(1) per chunk, no allocation after REGISTER. Owner: the reserve stage thread (via {@link ChunkBook}).
 */
final class ChainLearner
{
    /** History window in pools' worth of slots of LOOKUP key references. */
    static final int HISTORY_WINDOWS = 20;
    /** Kinds read back at under this percentage of the average rate enter cold. */
    static final int COLD_PERCENT = 50;
    /** Most cells of the key history: 8 MiB. */
    static final int MAX_HISTORY_CELLS = 1 << 23;
    /** Length classes of a store: two per octave of its chunk count, the last one open-ended. */
    static final int LENGTH_CLASSES = 24;
    /** Places from a store's end a kind tells apart: its last chunk, and the others. */
    static final int END_PLACES = 2;
    private static final int KINDS = 2 * LENGTH_CLASSES * END_PLACES;
    /** Chunks of a store whose history verdict its reservation keeps (the rest are judged at the commit). */
    static final int REFERENCED_BITS = 64;
    /** Most entries of the parent hints' table (see {@link #hint}); at least one per instance, and 1,024. */
    static final int MIN_HINTS = 1024;
    private static final long GOLDEN = 0x9E3779B97F4A7C15L;

    private final boolean chain;
    private final boolean segmented;
    private final boolean admit;
    private final SlotStates slots;
    private final SlotRegions regions;
    private final ChunkIndex index;
    private final TransferTable transfers;
    private final KeyHistory history;
    private final long[] hints;
    private final int hintShift;
    private final int[] transferParent;
    private final int[] transferGeneration;
    private final int[] transferKind;
    private final long[] transferReferenced;
    private final long[] kindStores = new long[KINDS];
    private final long[] kindReads = new long[KINDS];
    private long totalStores;
    private long totalReads;
    private long storesSinceHalving;
    private short[] chunkKind = new short[0];

    ChainLearner(
        final StoreContext context,
        final SlotStates slots,
        final SlotRegions regions,
        final ChunkIndex index,
        final TransferTable transfers)
    {
        final EvictionPolicy policy = context.eviction();
        this.chain = policy.chainAware();
        this.segmented = policy.segmented();
        this.admit = EvictionPolicy.SLRU_ADMIT == policy;
        this.slots = slots;
        this.regions = regions;
        this.index = index;
        this.transfers = transfers;
        final int hintCount = Integer.highestOneBit(Math.max(MIN_HINTS, context.maxInstances()) - 1) << 1;
        final int transferCount = chain ? context.maxTransfers() : 0;
        hints = new long[chain ? 4 * hintCount : 0];
        hintShift = 64 - Integer.numberOfTrailingZeros(hintCount);
        transferParent = new int[transferCount];
        transferGeneration = new int[transferCount];
        transferKind = new int[transferCount];
        transferReferenced = new long[transferCount];
        final long units = context.poolSizeBytes() / context.alignment();
        // Four cells per reference of a window, so that keys seen once rarely read as seen twice.
        final long cells = Math.min(MAX_HISTORY_CELLS, Math.max(1024, units * HISTORY_WINDOWS * 4));
        history = segmented ?
            new KeyHistory(Integer.highestOneBit((int)cells - 1) << 1, context.maxChunksPerRequest()) : null;
    }

    /**
     * Whether the policy learns from LOOKUPs at all (every policy but {@code lru}).
     *
     * @return true when {@link #onLookup} has work to do.
     */
    boolean learns()
    {
        return chain;
    }

    /**
     * A LOOKUP, or one rank's part of a LOOKUP_ALL_RANKS, was answered: counts its keys in the history and
     * remembers its first missing key's parent, its last hit. A LOOKUP with {@link RequestFlags#L2_POLL} asks a
     * waiting LOOKUP once more (the second tier's read-through is over), and one with {@link RequestFlags#QUIET}
     * says its caller asked about the same request before (an engine's scheduler asks again for a request still
     * waiting): their keys were counted when first asked, and counting them again would make every key a waiting
     * request missed read as referenced twice, so they only leave the hint.
     *
     * @param ns      the keys' namespace.
     * @param command the LOOKUP.
     * @param hits    the readable prefix, in chunks.
     * @param lastHit the prefix's last chunk, or -1 when it is empty.
     */
    void onLookup(final long ns, final StoreCommand command, final int hits, final int lastHit)
    {
        if (!chain)
        {
            return;
        }
        final int n = command.chunkCount;
        if (segmented && 0 == (command.flags & (RequestFlags.L2_POLL | RequestFlags.QUIET)))
        {
            history.referenceAll(ns, command.keyHi, command.keyLo, 0, n,
                (long)HISTORY_WINDOWS * Math.max(1, regions.slotCapacity()));
        }
        if (hits > 0 && hits < n && lastHit >= 0)
        {
            hint(ns, command.keyHi[hits], command.keyLo[hits], lastHit);
        }
    }

    /**
     * A PREPARE_STORE reserved chunks: remembers the parent of its first and its kind, and (segmented policies)
     * which of its first {@link #REFERENCED_BITS} chunks the history says were referenced twice, judged here
     * while the request's keys are at hand (at the commit they would be read back from the index, a cache miss
     * a chunk).
     *
     * @param t           the store's transfer.
     * @param ns          the keys' namespace.
     * @param command     the PREPARE_STORE, with its reserved chunks' range indexes.
     * @param firstAbsent range index of the first chunk reserved.
     * @param reserved    chunks reserved.
     */
    void onReserved(
        final int t,
        final long ns,
        final StoreCommand command,
        final int firstAbsent,
        final int reserved)
    {
        if (!chain)
        {
            return;
        }
        if (segmented)
        {
            long referenced = 0;
            for (int r = 0, n = Math.min(reserved, REFERENCED_BITS); r < n; r++)
            {
                final int i = command.slotRangeIndex[r];
                if (history.atLeastTwice(ns, command.keyHi[i], command.keyLo[i]))
                {
                    referenced |= 1L << r;
                }
            }
            transferReferenced[t] = referenced;
        }
        int parent = -1;
        if (firstAbsent > 0)
        {
            parent = index.find(ns, command.keyHi[firstAbsent - 1], command.keyLo[firstAbsent - 1]);
        }
        else
        {
            parent = hintedParent(ns, command.keyHi[0], command.keyLo[0]);
        }
        if (parent >= 0 && !slots.isReadable(parent))
        {
            parent = -1;
        }
        transferParent[t] = parent;
        transferGeneration[t] = parent >= 0 ? slots.generation(parent) : 0;
        final int length = lengthClass(command.chunkCount - firstAbsent);
        transferKind[t] = ((parent >= 0 ? LENGTH_CLASSES : 0) + length) * END_PLACES;
    }

    /**
     * The id space grew (REGISTER only; allocates): room for a kind per chunk id under {@code slru-admit}.
     *
     * @param idCapacity chunk ids the slots may hand out.
     */
    void grow(final int idCapacity)
    {
        if (admit && chunkKind.length < idCapacity)
        {
            chunkKind = Arrays.copyOf(chunkKind, idCapacity);
        }
    }

    /**
     * A COMMIT_STORE is applied: makes its chunks readable where the policy enters them.
     *
     * @param t the store's transfer.
     * @return how many of its chunks entered cold.
     */
    int commit(final int t)
    {
        final int n = transfers.count(t);
        if (!chain)
        {
            for (int i = 0; i < n; i++)
            {
                slots.makeReadable(transfers.chunk(t, i), SlotStates.ENTER_RECENT);
            }
            return 0;
        }
        int parent = transferParent[t];
        if (parent >= 0 && (!slots.isReadable(parent) || slots.generation(parent) != transferGeneration[t]))
        {
            parent = -1;
        }
        final double average = (totalReads + 1.0) / (totalStores + 2.0);
        final int capacity = admit ? Math.max(1, regions.slotCapacity()) : 1;
        // One verdict for the store's chunks but its last, with all of them counted, and the last is cold when they
        // are: never a warm chunk behind a cold ancestor, newer than it and read by nobody once the ancestor is
        // evicted. (Judged chunk by chunk as they were counted, a long store of a kind with little history turned
        // cold part way and entered with its deepest chunks warm behind a cold head.)
        final int lastKind = transferKind[t];
        final boolean othersCold = admit && n > 1 && cold(lastKind + 1, n - 1, average);
        final boolean lastCold = othersCold || admit && cold(lastKind, 1, average);
        int coldCursor = -1;
        int cold = 0;
        for (int i = n - 1; i >= 0; i--)
        {
            final int id = transfers.chunk(t, i);
            final int kind = lastKind + Math.min(n - 1 - i, END_PLACES - 1);
            // Before the parent keeps the chain's order; a chunk that is not hot never enters protected, so one
            // whose parent is protected enters probation's recent end (still evicted before its parent).
            int where = parent >= 0 && !slots.isProtected(parent) ? parent : SlotStates.ENTER_RECENT;
            if (segmented && (i < REFERENCED_BITS ? 0 != (transferReferenced[t] & (1L << i)) :
                history.atLeastTwice(index.ns(id), index.hi(id), index.lo(id))))
            {
                where = parent >= 0 ? parent : SlotStates.ENTER_HOT;
            }
            else if (i == n - 1 ? lastCold : othersCold)
            {
                where = coldCursor < 0 ? SlotStates.ENTER_COLD : -4 - coldCursor;
                coldCursor = id;
                cold++;
            }
            slots.makeReadable(id, where);
            if (admit)
            {
                stored(id, kind, capacity);
            }
        }
        return cold;
    }

    /**
     * A COMMIT_RETRIEVE: unpins its chunks and touches them, deepest first under a chain-aware policy; a quiet
     * one only unpins them (the read does not count as a use).
     *
     * @param t     the retrieve's transfer.
     * @param quiet whether the retrieve carried {@link io.kvstash.wire.RequestFlags#QUIET}.
     */
    void retrieved(final int t, final boolean quiet)
    {
        final int n = transfers.count(t);
        if (quiet)
        {
            for (int i = 0; i < n; i++)
            {
                slots.unpin(transfers.chunk(t, i));
            }
            return;
        }
        if (!chain)
        {
            for (int i = 0; i < n; i++)
            {
                final int id = transfers.chunk(t, i);
                slots.unpin(id);
                slots.touch(id);
            }
            return;
        }
        for (int i = n - 1; i >= 0; i--)
        {
            final int id = transfers.chunk(t, i);
            slots.unpin(id);
            slots.touch(id);
            if (admit && chunkKind[id] > 0)
            {
                kindReads[chunkKind[id] - 1]++;
                totalReads++;
                chunkKind[id] = 0;
            }
        }
    }

    /**
     * The length class of a store of some chunks: 1 to 3 chunks have their own classes, then two classes per
     * octave ([4, 6), [6, 8), [8, 12), [12, 16), [16, 24), ...), up to {@link #LENGTH_CLASSES} - 1 for the longest.
     * Half octaves, not octaves, because prompt lengths of different origins share octaves (the synthetic trace's
     * new prompts of 16-23 chunks are read again at about 65 %, those of 24-31 at about 20 %).
     *
     * @param chunks the store's chunks, at least 1.
     * @return class, 1 to {@link #LENGTH_CLASSES} - 1.
     */
    static int lengthClass(final int chunks)
    {
        final int bits = 32 - Integer.numberOfLeadingZeros(chunks);
        if (bits <= 2)
        {
            return chunks;
        }
        final int half = (chunks >>> (bits - 2)) & 1;
        return Math.min(LENGTH_CLASSES - 1, 2 * bits - 2 + half);
    }

    /**
     * Remembers that the chunk after {@code parent} in a LOOKUP's range is the missing key (ns, hi, lo), so that a
     * store whose range starts at that key continues the chain. The table is direct-mapped on the key, so a
     * store finds the hint of the latest LOOKUP that missed first at its key, whichever instance or rank asked; a
     * later hint whose key maps to the same entry replaces it (the store then starts a chain of its own).
     */
    private void hint(final long ns, final long hi, final long lo, final int parent)
    {
        final int e = hintEntry(ns, hi, lo);
        hints[e] = ns;
        hints[e + 1] = hi;
        hints[e + 2] = lo;
        hints[e + 3] = ((long)(parent + 1) << 32) | (slots.generation(parent) & 0xFFFF_FFFFL);
    }

    /**
     * The parent a LOOKUP left for a store starting at (ns, hi, lo), while it is the same chunk.
     *
     * @return the parent's id, or -1.
     */
    private int hintedParent(final long ns, final long hi, final long lo)
    {
        final int e = hintEntry(ns, hi, lo);
        final long parentAndGeneration = hints[e + 3];
        if (0 == parentAndGeneration || hints[e] != ns || hints[e + 1] != hi || hints[e + 2] != lo)
        {
            return -1;
        }
        final int parent = (int)(parentAndGeneration >>> 32) - 1;
        return slots.generation(parent) == (int)parentAndGeneration ? parent : -1;
    }

    private int hintEntry(final long ns, final long hi, final long lo)
    {
        return (int)(((ns ^ hi ^ lo * GOLDEN) * GOLDEN) >>> hintShift) << 2;
    }

    /**
     * Whether a store's chunks of a kind enter cold: the kind's read-back rate, counting those chunks as stored and
     * not read, with one read at the average rate as a prior, is under {@link #COLD_PERCENT} % of the average.
     *
     * @param kind    the kind.
     * @param chunks  the store's chunks of that kind.
     * @param average the average rate, reads per chunk stored.
     * @return true to enter them cold.
     */
    private boolean cold(final int kind, final int chunks, final double average)
    {
        return (kindReads[kind] + average) * 100 < COLD_PERCENT * average * (kindStores[kind] + chunks);
    }

    private void stored(final int id, final int kind, final int capacity)
    {
        chunkKind[id] = (short)(kind + 1);
        kindStores[kind]++;
        totalStores++;
        if (++storesSinceHalving >= capacity)
        {
            storesSinceHalving = 0;
            for (int k = 0; k < KINDS; k++)
            {
                kindStores[k] >>= 1;
                kindReads[k] >>= 1;
            }
            totalStores >>= 1;
            totalReads >>= 1;
        }
    }
}
