package io.kvstash.core.book;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.file.SlotTableDescriptor;

/**
 * The ends of pending transfers other than their commit: resolving a command's transfer id (an expired one
 * is reclaimed on sight), ending a transfer without completing it, ending every transfer of an instance, and
 * the sweep of expired leases. Ending a store frees its reserved chunks, never published; ending a lookup or
 * retrieve releases its pins with recency unchanged.
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}). Not thread safe.
 */
final class TransferLeases
{
    private final TransferTable transfers;
    private final SlotStates slots;
    private final ChunkIndex index;
    private final StoreCounters counters;
    private final long leaseNs;

    TransferLeases(
        final TransferTable transfers,
        final SlotStates slots,
        final ChunkIndex index,
        final StoreCounters counters,
        final long leaseNs)
    {
        this.transfers = transfers;
        this.slots = slots;
        this.index = index;
        this.counters = counters;
        this.leaseNs = leaseNs;
    }

    /**
     * The lease deadline of a transfer a command opens or renews: its time plus the configured lease.
     *
     * @param command the request.
     * @return deadline in nanoseconds on the command clock.
     */
    long deadlineNs(final StoreCommand command)
    {
        return command.timestampNs + leaseNs;
    }

    /**
     * Resolves the command's transfer for an instance and one of two kinds. An expired transfer found here
     * (before its sweep) is reclaimed now and answered as unknown, so a late commit never acts.
     *
     * @param command  the request; failed with UNKNOWN_TRANSFER when there is no such transfer.
     * @param instance the command's instance index, or -1 when the command was already failed (left as it is).
     * @param kindA    a {@code TransferTable.KIND_*} accepted.
     * @param kindB    another accepted, or kindA again.
     * @return the transfer's index, or -1 when the command was failed.
     */
    int resolveOrFail(final StoreCommand command, final int instance, final int kindA, final int kindB)
    {
        if (instance < 0)
        {
            return -1;
        }
        final int t = transfers.resolve(command.transferId);
        if (t < 0 || transfers.instance(t) != instance ||
            (transfers.kind(t) != kindA && transfers.kind(t) != kindB))
        {
            command.fail(Status.UNKNOWN_TRANSFER, "transfer not pending for this instance");
            return -1;
        }
        if (transfers.deadlineNs(t) - command.timestampNs < 0)
        {
            end(t);
            counters.increment(CountersDescriptor.RECLAIMED_LEASES);
            command.fail(Status.UNKNOWN_TRANSFER, "transfer lease expired");
            return -1;
        }
        return t;
    }

    /**
     * RELEASE and ABORT_STORE: ends the command's transfer when it belongs to the command's instance and is of
     * one of two kinds (its pins released, its reservations freed and never published), answering OK; otherwise
     * the command is failed as {@link #resolveOrFail} failed it.
     *
     * @param command  the request.
     * @param instance the command's instance index, or -1 when the command was already failed.
     * @param kindA    a {@code TransferTable.KIND_*} accepted.
     * @param kindB    another accepted, or kindA again.
     */
    void endOrFail(final StoreCommand command, final int instance, final int kindA, final int kindB)
    {
        final int t = resolveOrFail(command, instance, kindA, kindB);
        if (t < 0)
        {
            return;
        }
        end(t);
        command.status = Status.OK;
        command.done = true;
    }

    /**
     * Opens a lookup or retrieve transfer that pins readable chunks until it ends.
     *
     * @param ids        the chunks, each readable.
     * @param count      how many of ids.
     * @param kind       {@code TransferTable.KIND_LOOKUP} or {@code KIND_RETRIEVE}.
     * @param instance   the owning instance's index.
     * @param deadlineNs lease deadline on the command clock.
     * @return the transfer's index, or -1 when the pending transfer limit is reached (nothing pinned).
     */
    int openPinned(final int[] ids, final int count, final int kind, final int instance, final long deadlineNs)
    {
        final int t = transfers.allocate();
        if (t < 0)
        {
            return -1;
        }
        for (int i = 0; i < count; i++)
        {
            slots.pin(ids[i]);
            transfers.addChunk(t, ids[i]);
        }
        transfers.activate(t, kind, instance, deadlineNs);
        return t;
    }

    /**
     * The id a worker names a transfer by.
     *
     * @param t the transfer's index.
     * @return its id, valid while it is pending.
     */
    long transferId(final int t)
    {
        return transfers.id(t);
    }

    /**
     * Ends a pending transfer without completing it: a store's reserved chunks are freed (never published),
     * a lookup's or retrieve's pins are released with recency unchanged.
     *
     * @param t the transfer's index.
     */
    void end(final int t)
    {
        final int n = transfers.count(t);
        if (TransferTable.KIND_STORE == transfers.kind(t))
        {
            for (int i = 0; i < n; i++)
            {
                final int id = transfers.chunk(t, i);
                index.remove(id);
                slots.unreserve(id);
                slots.putSlotWord(id, SlotTableDescriptor.STATE_FREE, slots.generation(id));
            }
            counters.add(CountersDescriptor.ABORTED_CHUNKS, n);
        }
        else
        {
            for (int i = 0; i < n; i++)
            {
                slots.unpin(transfers.chunk(t, i));
            }
        }
        transfers.release(t);
    }

    /**
     * Ends every pending transfer of an instance.
     *
     * @param instance instance index.
     * @return transfers ended.
     */
    long endAllOf(final int instance)
    {
        long ended = 0;
        for (int t = transfers.instanceHead(instance); t >= 0; t = transfers.instanceHead(instance))
        {
            end(t);
            ended++;
        }
        return ended;
    }

    /**
     * Ends every pending transfer (CLEAR with RequestFlags.FORCE).
     */
    void endAll()
    {
        for (int t = transfers.leaseHead(); t >= 0; t = transfers.leaseHead())
        {
            end(t);
        }
    }

    /**
     * Ends transfers whose lease ended before a time, oldest deadline first.
     *
     * @param nowNs the command clock.
     * @param limit most transfers to end.
     * @return transfers ended.
     */
    int sweep(final long nowNs, final int limit)
    {
        int reclaimed = 0;
        for (int t = transfers.leaseHead(); t >= 0 && reclaimed < limit; t = transfers.leaseHead())
        {
            if (transfers.deadlineNs(t) - nowNs >= 0)
            {
                break;
            }
            end(t);
            reclaimed++;
        }
        return reclaimed;
    }
}
