package io.kvstash.tier;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.server.ResponseObserver;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

/**
 * The request pipeline's side of the second tier, the server's {@link ResponseObserver}: after a response is
 * written, the publish stage leaves a notice
 * of what the tier needs (a layout registered, a store reserved, committed or aborted, a LOOKUP that missed past
 * its hit prefix, unless it was a waiting LOOKUP's poll) in a one-to-one ring that the tier's thread drains. For
 * a LOOKUP that waits for the tier the notice is left just before the answer is written, so the answer carries
 * its ticket. Never waits and never allocates: a full ring
 * drops the notice and counts {@link CountersDescriptor#L2_NOTICES_DROPPED}. The tier's own requests leave none.
 * <p>
 * Owner: the publish stage thread (writer); {@link L2Tier}'s thread reads.
 * <pre>
 * REGISTERED: instance i64 | world size i32 | rank i32 | layers i32 | hidden i32 | dtype i32 | mla i32 |
 *             model length i32 | model bytes
 * RESERVED: instance i64 | transfer i64 | salt i64 | count i32 | pad i32 | count x (key hi i64, key lo i64)
 * MISSED:   instance i64 | ticket i64 | salt i64 | count i32 | pad i32 | count x (key hi i64, key lo i64)
 * COMMITTED, ABORTED, UNREGISTERED: instance i64 | transfer i64
 * </pre>
 */
public final class L2Tap implements ResponseObserver
{
    /** Notice: an instance registered a layout. */
    static final int REGISTERED = 1;
    /** Notice: a PREPARE_STORE reserved chunks. */
    static final int RESERVED = 2;
    /** Notice: a COMMIT_STORE made a transfer's chunks readable. */
    static final int COMMITTED = 3;
    /** Notice: a store transfer was aborted. */
    static final int ABORTED = 4;
    /** Notice: a LOOKUP missed; the keys after its hit prefix follow. */
    static final int MISSED = 5;
    /** Notice: an instance unregistered. */
    static final int UNREGISTERED = 6;

    static final int INSTANCE_OFFSET = 0;
    static final int TRANSFER_OFFSET = 8;
    static final int TICKET_OFFSET = 8;
    static final int SALT_OFFSET = 16;
    static final int COUNT_OFFSET = 24;
    static final int KEYS_OFFSET = 32;
    static final int LAYOUT_OFFSET = 8;
    static final int MODEL_LENGTH_OFFSET = 32;
    static final int MODEL_OFFSET = 36;

    /** Default ring capacity (a power of two). */
    public static final int CAPACITY_DEFAULT = 1 << 20;

    private final OneToOneRingBuffer ring;
    private StoreCounters counters;
    private final int fetchAheadChunks;
    private final boolean writeThrough;
    private volatile long tierSession = Long.MIN_VALUE;
    private long ticketSequence;
    private long lastTicket;

    /**
     * A tap with its ring.
     *
     * @param capacity         ring capacity, a power of two.
     * @param fetchAheadChunks how many keys after a LOOKUP's hit prefix a MISSED notice carries.
     * @param writeThrough     whether store notices are left (write-through on).
     */
    public L2Tap(final int capacity, final int fetchAheadChunks, final boolean writeThrough)
    {
        this.ring = new OneToOneRingBuffer(new UnsafeBuffer(BufferUtil.allocateDirectAligned(
            capacity + RingBufferDescriptor.TRAILER_LENGTH, 64)));
        this.fetchAheadChunks = fetchAheadChunks;
        this.writeThrough = writeThrough;
    }

    /**
     * The server's counters, which the tap counts dropped notices into and reads the tier's gauges from. Launching
     * thread, before the publish stage starts.
     *
     * @param counters the server's counters.
     */
    @Override
    public void onStart(final StoreCounters counters)
    {
        this.counters = counters;
    }

    OneToOneRingBuffer ring()
    {
        return ring;
    }

    StoreCounters counters()
    {
        return counters;
    }

    /**
     * The tier's own client session, whose requests leave no notice (its fetches are not written back).
     *
     * @param sessionId session id of the tier's client.
     */
    void tierSession(final long sessionId)
    {
        tierSession = sessionId;
    }

    /**
     * Leaves the notice of one answered request, if the tier needs it. Publish stage thread.
     *
     * @param command       the answered request and its outcome.
     * @param clientSession the session of the client that sent it.
     */
    @Override
    public void onResponse(final StoreCommand command, final long clientSession)
    {
        lastTicket = 0;
        if (Status.OK != command.status || clientSession == tierSession)
        {
            return;
        }
        switch (command.type)
        {
            case RequestType.REGISTER:
                register(command);
                break;
            case RequestType.UNREGISTER:
                pair(UNREGISTERED, command.instanceId, 0);
                break;
            case RequestType.PREPARE_STORE:
                if (writeThrough && command.slotCount > 0)
                {
                    reserved(command);
                }
                break;
            case RequestType.COMMIT_STORE:
                if (writeThrough)
                {
                    pair(COMMITTED, command.instanceId, command.transferId);
                }
                break;
            case RequestType.ABORT_STORE:
                if (writeThrough)
                {
                    pair(ABORTED, command.instanceId, command.transferId);
                }
                break;
            case RequestType.LOOKUP:
                if (command.hitChunks < command.chunkCount && (command.flags & RequestFlags.L2_POLL) == 0)
                {
                    missed(command);
                }
                break;
            default:
                break;
        }
    }

    private void register(final StoreCommand c)
    {
        final int length = MODEL_OFFSET + c.modelLength;
        final int index = ring.tryClaim(REGISTERED, length);
        if (index <= 0)
        {
            dropped();
            return;
        }
        final UnsafeBuffer b = (UnsafeBuffer)ring.buffer();
        b.putLong(index + INSTANCE_OFFSET, c.instanceId);
        b.putInt(index + LAYOUT_OFFSET, c.worldSize);
        b.putInt(index + LAYOUT_OFFSET + 4, c.rank);
        b.putInt(index + LAYOUT_OFFSET + 8, c.layers);
        b.putInt(index + LAYOUT_OFFSET + 12, c.hidden);
        b.putInt(index + LAYOUT_OFFSET + 16, c.dtypeCode);
        b.putInt(index + LAYOUT_OFFSET + 20, c.mla ? 1 : 0);
        b.putInt(index + MODEL_LENGTH_OFFSET, c.modelLength);
        b.putBytes(index + MODEL_OFFSET, c.model, 0, c.modelLength);
        ring.commit(index);
    }

    private void reserved(final StoreCommand c)
    {
        final int count = c.slotCount;
        final int index = ring.tryClaim(RESERVED, KEYS_OFFSET + 16 * count);
        if (index <= 0)
        {
            dropped();
            return;
        }
        final UnsafeBuffer b = (UnsafeBuffer)ring.buffer();
        header(b, index, c.instanceId, c.outTransferId, c.salt, count);
        for (int i = 0; i < count; i++)
        {
            final int rangeIndex = c.slotRangeIndex[i];
            b.putLong(index + KEYS_OFFSET + 16 * i, c.keyHi[rangeIndex]);
            b.putLong(index + KEYS_OFFSET + 16 * i + 8, c.keyLo[rangeIndex]);
        }
        ring.commit(index);
    }

    /**
     * Leaves the notice of a waiting LOOKUP before its answer is written, and says the ticket of the read-through it
     * started (a LOOKUP that missed past its hit prefix): 0 when it started none or when the tier is not up, where
     * no read-through is worth waiting for. Tickets grow by one per read-through. Publish stage thread.
     *
     * @param command       the LOOKUP and its outcome.
     * @param clientSession the session of the client that sent it.
     * @return ticket or 0.
     */
    @Override
    public long onWaitingLookup(final StoreCommand command, final long clientSession)
    {
        onResponse(command, clientSession);
        return isTierUp() ? lastTicket : 0;
    }

    /**
     * Whether the tier is up ({@link CountersDescriptor#L2_STATE} is {@link L2Tier#STATE_UP}): a read-through is then
     * worth waiting for. Any thread.
     *
     * @return true when up.
     */
    public boolean isTierUp()
    {
        return L2Tier.STATE_UP == counters.get(CountersDescriptor.L2_STATE);
    }

    /**
     * The highest ticket whose read-through is over (fetched, found nothing, failed or dropped): the gauge
     * {@link CountersDescriptor#L2_COMPLETED_TICKET}, which a waiting worker also reads from the control file. Any
     * thread.
     *
     * @return completed ticket.
     */
    @Override
    public long completedTicket()
    {
        return counters.get(CountersDescriptor.L2_COMPLETED_TICKET);
    }

    /**
     * Marks a read-through over. The tier handles them in ticket order, so this only moves forward. Tier thread
     * (the gauge's single writer), after the answers to the read-through's stores.
     *
     * @param ticket the read-through's ticket.
     */
    void fetchCompleted(final long ticket)
    {
        if (ticket > counters.get(CountersDescriptor.L2_COMPLETED_TICKET))
        {
            counters.set(CountersDescriptor.L2_COMPLETED_TICKET, ticket);
        }
    }

    private void missed(final StoreCommand c)
    {
        final int from = c.hitChunks;
        final int count = Math.min(c.chunkCount - from, fetchAheadChunks);
        final int index = ring.tryClaim(MISSED, KEYS_OFFSET + 16 * count);
        if (index <= 0)
        {
            dropped();
            return;
        }
        final UnsafeBuffer b = (UnsafeBuffer)ring.buffer();
        final long ticket = ++ticketSequence;
        header(b, index, c.instanceId, ticket, c.salt, count);
        for (int i = 0; i < count; i++)
        {
            b.putLong(index + KEYS_OFFSET + 16 * i, c.keyHi[from + i]);
            b.putLong(index + KEYS_OFFSET + 16 * i + 8, c.keyLo[from + i]);
        }
        ring.commit(index);
        lastTicket = ticket;
    }

    private void pair(final int type, final long instance, final long transfer)
    {
        final int index = ring.tryClaim(type, 16);
        if (index <= 0)
        {
            dropped();
            return;
        }
        final UnsafeBuffer b = (UnsafeBuffer)ring.buffer();
        b.putLong(index + INSTANCE_OFFSET, instance);
        b.putLong(index + TRANSFER_OFFSET, transfer);
        ring.commit(index);
    }

    private static void header(
        final UnsafeBuffer b, final int index, final long instance, final long transfer, final long salt,
        final int count)
    {
        b.putLong(index + INSTANCE_OFFSET, instance);
        b.putLong(index + TRANSFER_OFFSET, transfer);
        b.putLong(index + SALT_OFFSET, salt);
        b.putInt(index + COUNT_OFFSET, count);
        b.putInt(index + COUNT_OFFSET + 4, 0);
    }

    private void dropped()
    {
        counters.add(CountersDescriptor.L2_NOTICES_DROPPED, 1);
    }
}
