package io.kvstash.client;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.CountersDescriptor;

import java.util.concurrent.locks.LockSupport;

/**
 * A LOOKUP that waits, up to a bound, for the second tier's read-through it starts, so chunks another host
 * stored come back in the same call. The first LOOKUP carries {@link RequestFlags#L2_WAIT}: the server answers
 * with the ticket of the read-through it started and the highest ticket over. While the hit prefix is short of
 * the range and the ticket is not over, the client waits: a yield first, then sleeps of 50 us doubling to 200 us,
 * each followed by a look at the ticket.
 * <ul>
 * <li>A server whose Features include {@link ControlFileDescriptor#FEATURE_COMPLETED_TICKET} keeps the highest
 * ticket over in the control file ({@link CountersDescriptor#L2_COMPLETED_TICKET}): the client reads
 * it there, a load from shared memory that costs the server nothing, and asks the LOOKUP once more (with
 * {@link RequestFlags#L2_POLL}, which starts no read-through) when the ticket is over or the bound is spent. So a
 * wait does not keep the server's threads busy answering polls while the tier fetches on the same cores.</li>
 * <li>Otherwise the LOOKUP itself is asked again with {@link RequestFlags#L2_POLL} after each sleep.</li>
 * </ul>
 * Either way the last answer counts every chunk the read-through stored: the tier marks a ticket over only after
 * the answers to its stores, and the server publishes answers in order.
 * <p>
 * Leases: a pinned first answer that needs no wait is returned as it is. Otherwise its lease is released at
 * once, the polls pin nothing, and one last LOOKUP with PIN (and L2_POLL) pins what is readable when the wait
 * ends; so the caller holds exactly one lease, that of the answer returned, as with a plain pinned LOOKUP.
 * <p>
 * Without a tier on the server (its control file's Features word) it is exactly one plain LOOKUP. Allocation-free
 * while the request ring has room, as every synchronous call. Single-threaded: the client's thread.
 */
final class TierLookups
{
    static final long SLEEP_MIN_NS = 50_000;
    static final long SLEEP_MAX_NS = 200_000;

    private final BlockingCalls calls;
    private final ServerConnection connection;
    private final boolean secondTier;
    private final boolean watchCounter;

    TierLookups(final BlockingCalls calls, final ServerConnection connection)
    {
        this.calls = calls;
        this.connection = connection;
        this.secondTier = connection.secondTier();
        this.watchCounter = connection.completedTicketGauge();
    }

    boolean secondTier()
    {
        return secondTier;
    }

    ClientResponse lookup(final long instanceId, final ChunkKeys keys, final boolean pin, final long waitNs)
    {
        final int pinFlag = pin ? RequestFlags.PIN : 0;
        if (!secondTier)
        {
            return calls.keyed(RequestType.LOOKUP, instanceId, keys, pinFlag);
        }
        final long startNs = System.nanoTime();
        final int count = keys.count();
        ClientResponse r = calls.keyed(RequestType.LOOKUP, instanceId, keys, pinFlag | RequestFlags.L2_WAIT);
        if (!r.isOk() || r.hitChunks() >= count || waitNs <= 0)
        {
            return r;
        }
        final long ticket = r.tierTicket();
        if (0 == ticket || r.tierCompletedTicket() >= ticket)
        {
            return r;
        }
        final long firstLease = r.transferId();
        if (0 != firstLease)
        {
            calls.simple(RequestType.RELEASE, instanceId, firstLease, 0);
        }
        long sleepNs = 0;
        while (true)
        {
            if (0 == sleepNs)
            {
                Thread.yield();
                sleepNs = SLEEP_MIN_NS;
            }
            else
            {
                LockSupport.parkNanos(sleepNs);
                sleepNs = Math.min(2 * sleepNs, SLEEP_MAX_NS);
            }
            final boolean spent = System.nanoTime() - startNs >= waitNs;
            if (watchCounter)
            {
                if (spent || connection.counter(CountersDescriptor.L2_COMPLETED_TICKET) >= ticket)
                {
                    return calls.keyed(RequestType.LOOKUP, instanceId, keys, pinFlag | RequestFlags.L2_POLL);
                }
                continue;
            }
            r = calls.keyed(RequestType.LOOKUP, instanceId, keys, RequestFlags.L2_POLL);
            if (!r.isOk() || r.hitChunks() >= count || r.tierCompletedTicket() >= ticket || spent)
            {
                break;
            }
        }
        if (pin && r.isOk())
        {
            r = calls.keyed(RequestType.LOOKUP, instanceId, keys, RequestFlags.PIN | RequestFlags.L2_POLL);
        }
        return r;
    }
}
