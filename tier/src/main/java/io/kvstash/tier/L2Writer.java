package io.kvstash.tier;

import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.output.StatusOutput;
import io.lettuce.core.protocol.CommandType;
import org.agrona.ErrorHandler;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;
import java.util.zip.CRC32C;

/**
 * Write-through, pipelined: committed chunks queue here, and up to {@link #LANES} of them are in flight at once,
 * bounded by {@link #BYTES_IN_FLIGHT_MAX} bytes. Each lane checks its chunk's key (EXISTS; the lanes filled together
 * send theirs together), then pins the chunk as the tier's client (PREPARE_RETRIEVE; the lanes ready together send
 * theirs together), writes the value's header (its checksum read from the slot) and sends {@code SET NX} of the
 * header and the slot itself: Netty copies the chunk once, from the pool into its network buffer, with no staging
 * copy. The pin holds until the SET is over (answered, failed or past its deadline) and the encoder can no longer
 * read the slot ({@link L2SetNx#release()}); then the lane releases it with COMMIT_RETRIEVE and
 * {@link RequestFlags#QUIET} (the copy does not count as a use in the pool's eviction order) and counts the write
 * only if the chunk was readable under the same generation all along. The tier's thread does not wait on the
 * cluster: it polls the lanes each cycle and a completed call wakes it.
 * <p>
 * An error reply of the cluster (out of memory under {@code noeviction}) is a counted write error and the lane
 * moves on; timeouts and connection failures also count toward the tier going down (see {@link L2Link}).
 * <p>
 * Owner: the tier's thread.
 */
final class L2Writer
{
    /** Chunks in flight at most. */
    static final int LANES = 8;
    /** Bytes of chunks in flight at most (a single chunk bigger than this still goes, alone). */
    static final long BYTES_IN_FLIGHT_MAX = 64L << 20;

    private static final int FREE = 0;
    private static final int CHECKING = 1;
    private static final int READY = 2;
    private static final int WRITING = 3;
    private static final int UNPINNING = 4;

    private static final int OUTCOME_WRITTEN = 0;
    private static final int OUTCOME_SKIPPED = 1;
    private static final int OUTCOME_FAILED = 2;

    private final L2Link link;
    private final StoreCounters counters;
    private final ErrorHandler errorHandler;
    private final ArrayDeque<L2Job> jobPool;
    private final ArrayDeque<L2Job> queue = new ArrayDeque<>();
    private final Lane[] lanes = new Lane[LANES];
    private final CRC32C crc = new CRC32C();
    private final long[] oneHi = new long[1];
    private final long[] oneLo = new long[1];
    private final Lane[] ready = new Lane[LANES];
    private final Lane[] unpinning = new Lane[LANES];
    private int readyCount;
    private int unpinCount;
    private KvStashClient responsesFor;
    private BiConsumer<Object, Throwable> wakeUp;
    private int queuedChunks;
    private int busyLanes;
    private long bytesInFlight;

    L2Writer(final L2Link link, final StoreCounters counters, final ErrorHandler errorHandler,
        final ArrayDeque<L2Job> jobPool)
    {
        this.link = link;
        this.counters = counters;
        this.errorHandler = errorHandler;
        this.jobPool = jobPool;
        for (int i = 0; i < LANES; i++)
        {
            lanes[i] = new Lane();
        }
    }

    /**
     * Queues a committed store's chunks, or counts them as write errors beyond
     * {@link L2Tier#WRITE_QUEUE_CHUNKS_MAX}.
     *
     * @param job the chunks; the writer returns it to the job pool when done.
     */
    void queue(final L2Job job)
    {
        if (queuedChunks + job.count > L2Tier.WRITE_QUEUE_CHUNKS_MAX)
        {
            counters.add(CountersDescriptor.L2_WRITE_ERRORS, job.count);
            jobPool.add(job);
            return;
        }
        queuedChunks += job.count;
        queue.add(job);
    }

    /**
     * Whether nothing is queued or in flight.
     *
     * @return true when idle.
     */
    boolean isIdle()
    {
        return 0 == busyLanes && queue.isEmpty();
    }

    /**
     * One cycle: completes the lanes whose calls are done or past their deadline, then fills free lanes.
     *
     * @param client the tier's client of its own server.
     * @return work done.
     */
    int poll(final KvStashClient client)
    {
        if (null == wakeUp)
        {
            final Thread tier = Thread.currentThread();
            wakeUp = (v, e) -> java.util.concurrent.locks.LockSupport.unpark(tier);
        }
        ensureResponses(client);
        int work = 0;
        final long nowNs = System.nanoTime();
        readyCount = 0;
        unpinCount = 0;
        for (final Lane lane : lanes)
        {
            if ((CHECKING == lane.state || WRITING == lane.state) && link.isUp())
            {
                work += advance(lane, nowNs);
            }
        }
        if (readyCount > 0 && link.isUp())
        {
            writeReady(client);
        }
        if (unpinCount > 0)
        {
            unpin(client);
        }
        if (!link.isUp())
        {
            return work + drop(client);
        }
        for (int i = 0; i < LANES && !queue.isEmpty(); i++)
        {
            if (FREE == lanes[i].state)
            {
                if (!start(client, lanes[i]))
                {
                    break;
                }
                work++;
            }
        }
        return work;
    }

    /**
     * Drops everything queued and in flight as write errors (the tier went down or stops). A lane holding a pin
     * releases it through {@code client}; with no client (the tier's session is closing, and the server reaps
     * what it held) the pins are left to that.
     *
     * @param client the tier's client, or null.
     * @return chunks dropped.
     */
    int drop(final KvStashClient client)
    {
        int dropped = 0;
        unpinCount = 0;
        for (final Lane lane : lanes)
        {
            if (FREE != lane.state)
            {
                if (WRITING == lane.state)
                {
                    lane.args.release();
                }
                if (null != lane.future)
                {
                    lane.future.cancel(true);
                }
                dropped++;
                if (0 != lane.transfer && null != client)
                {
                    lane.outcome = OUTCOME_FAILED;
                    lane.state = UNPINNING;
                    unpinning[unpinCount++] = lane;
                }
                else
                {
                    counters.add(CountersDescriptor.L2_WRITE_ERRORS, 1);
                    free(lane);
                }
            }
        }
        if (unpinCount > 0)
        {
            unpin(client);
        }
        L2Job job;
        while (null != (job = queue.poll()))
        {
            final int left = job.count - job.next;
            counters.add(CountersDescriptor.L2_WRITE_ERRORS, left);
            dropped += left;
            jobPool.add(job);
        }
        queuedChunks = 0;
        return dropped;
    }

    private boolean start(final KvStashClient client, final Lane lane)
    {
        final L2Job job = queue.peek();
        final L2Layout layout = job.layout;
        if (!layout.ensureRegistered(client, errorHandler))
        {
            final int left = job.count - job.next;
            counters.add(CountersDescriptor.L2_WRITE_ERRORS, left);
            queuedChunks -= left;
            jobPool.add(queue.poll());
            return true;
        }
        final int chunkBytes = layout.chunkBytes();
        if (busyLanes > 0 && bytesInFlight + chunkBytes > BYTES_IN_FLIGHT_MAX)
        {
            return false;
        }
        final int i = job.next++;
        queuedChunks--;
        lane.layout = layout;
        lane.salt = job.salt;
        lane.hi = job.hi[i];
        lane.lo = job.lo[i];
        if (job.next >= job.count)
        {
            jobPool.add(queue.poll());
        }
        lane.key = layout.key(lane.salt, lane.hi, lane.lo);
        lane.bytes = chunkBytes;
        lane.state = CHECKING;
        lane.deadlineNs = System.nanoTime() + link.timeoutNs();
        lane.future = link.commands().exists(lane.key);
        lane.future.whenComplete(wakeUp);
        busyLanes++;
        bytesInFlight += chunkBytes;
        return true;
    }

    private int advance(final Lane lane, final long nowNs)
    {
        final RedisFuture<?> future = lane.future;
        final CompletableFuture<?> f = future.toCompletableFuture();
        if (!f.isDone())
        {
            if (nowNs - lane.deadlineNs < 0)
            {
                return 0;
            }
            if (WRITING == lane.state)
            {
                lane.args.release();
            }
            future.cancel(true);
            link.timedOut();
            finish(lane, OUTCOME_FAILED);
            return 1;
        }
        final boolean answered = link.settle(future);
        if (CHECKING == lane.state)
        {
            if (!answered)
            {
                finish(lane, OUTCOME_FAILED);
            }
            else if (0 != (Long)f.getNow(null))
            {
                finish(lane, OUTCOME_SKIPPED);
            }
            else
            {
                lane.state = READY;
                ready[readyCount++] = lane;
            }
            return 1;
        }
        lane.args.release();
        if (!answered)
        {
            finish(lane, OUTCOME_FAILED);
        }
        else if (null == f.getNow(null))
        {
            finish(lane, OUTCOME_SKIPPED); // another host wrote it first (NX)
        }
        else
        {
            finish(lane, OUTCOME_WRITTEN);
        }
        return 1;
    }

    /**
     * Pins the chunks of every lane whose key the cluster lacks (PREPARE_RETRIEVEs sent back to back), writes each
     * value's header from its slot and sends its SET NX of the header and the slot at once, so the first value is
     * on the wire while the next header is computed.
     */
    private void writeReady(final KvStashClient client)
    {
        for (int j = 0; j < readyCount; j++)
        {
            final Lane lane = ready[j];
            oneHi[0] = lane.hi;
            oneLo[0] = lane.lo;
            lane.correlation = client.requests().sendKeyed(RequestType.PREPARE_RETRIEVE, lane.layout.tierInstance,
                ChunkKeys.ofHashes(oneHi, oneLo).withSalt(lane.salt), 0);
        }
        for (int j = 0; j < readyCount; j++)
        {
            final Lane lane = ready[j];
            final long pin = lane.correlation;
            lane.correlation = -1;
            if (pin < 0)
            {
                continue;
            }
            final ClientResponse r = client.await(pin, lane.pinned);
            if (Status.OK != r.status() || 1 != r.slotCount())
            {
                continue;
            }
            lane.transfer = r.transferId();
            final ByteBuffer payload = client.chunks().slotBuffer(r.slotOffset(0), lane.bytes);
            if (null == lane.header)
            {
                lane.header = ByteBuffer.allocateDirect(L2ValueDescriptor.HEADER_LENGTH);
            }
            L2ValueDescriptor.writeHeader(lane.header, payload, crc, lane.layout.layoutHash, lane.salt, lane.hi,
                lane.lo);
            if (!client.chunks().isStillReadable(r, 0))
            {
                finish(lane, OUTCOME_SKIPPED); // reclaimed while the tier read it: never sent
                continue;
            }
            lane.args = new L2SetNx(lane.key, lane.header, payload);
            lane.state = WRITING;
            lane.deadlineNs = System.nanoTime() + link.timeoutNs();
            lane.future = link.commands().dispatch(CommandType.SET, new StatusOutput<>(L2Codec.INSTANCE), lane.args);
            lane.future.whenComplete(wakeUp);
        }
        for (int j = 0; j < readyCount; j++)
        {
            final Lane lane = ready[j];
            if (READY == lane.state)
            {
                counters.add(CountersDescriptor.L2_WRITE_SKIPS, 1); // evicted before the tier could read it
                free(lane);
            }
        }
        readyCount = 0;
    }

    /**
     * Ends a lane's chunk: a lane that holds a pin goes to {@link #unpin} first, any other is counted and freed.
     */
    private void finish(final Lane lane, final int outcome)
    {
        lane.outcome = outcome;
        if (0 != lane.transfer)
        {
            lane.state = UNPINNING;
            unpinning[unpinCount++] = lane;
            return;
        }
        count(lane, outcome);
        free(lane);
    }

    /**
     * Releases the pins of the lanes whose SET is over (COMMIT_RETRIEVE with QUIET, sent back to back, answers
     * awaited at the end) and counts each chunk. Whether its slot held the chunk under the same generation all
     * along is read before the release: a value sent from a slot the pool took back meanwhile (a forced CLEAR) is
     * deleted from the cluster again and counted as a skip.
     */
    private void unpin(final KvStashClient client)
    {
        for (int j = 0; j < unpinCount; j++)
        {
            final Lane lane = unpinning[j];
            lane.intact = client.chunks().isStillReadable(lane.pinned, 0);
            lane.correlation = client.requests().sendSimple(RequestType.COMMIT_RETRIEVE, lane.layout.tierInstance, lane.transfer,
                RequestFlags.QUIET);
        }
        for (int j = 0; j < unpinCount; j++)
        {
            final Lane lane = unpinning[j];
            if (lane.correlation >= 0)
            {
                client.await(lane.correlation, lane.released);
                lane.correlation = -1;
            }
            int outcome = lane.outcome;
            if (OUTCOME_WRITTEN == outcome && !lane.intact)
            {
                if (link.isUp())
                {
                    link.commands().del(lane.key); // else it stays, and its checksum makes every reader refuse it
                }
                outcome = OUTCOME_SKIPPED;
            }
            count(lane, outcome);
            free(lane);
            unpinning[j] = null;
        }
        unpinCount = 0;
    }

    private void count(final Lane lane, final int outcome)
    {
        if (OUTCOME_WRITTEN == outcome)
        {
            counters.add(CountersDescriptor.L2_WRITES, 1);
            counters.add(CountersDescriptor.L2_BYTES_WRITTEN, lane.bytes);
        }
        else if (OUTCOME_SKIPPED == outcome)
        {
            counters.add(CountersDescriptor.L2_WRITE_SKIPS, 1);
        }
        else
        {
            counters.add(CountersDescriptor.L2_WRITE_ERRORS, 1);
        }
    }

    private void ensureResponses(final KvStashClient client)
    {
        if (responsesFor != client && null != client)
        {
            for (final Lane lane : lanes)
            {
                lane.pinned = client.newResponse();
                lane.released = client.newResponse();
            }
            responsesFor = client;
        }
    }

    private void free(final Lane lane)
    {
        lane.state = FREE;
        lane.future = null;
        lane.args = null;
        lane.key = null;
        lane.layout = null;
        lane.transfer = 0;
        busyLanes--;
        bytesInFlight -= lane.bytes;
    }

    /** One chunk in flight, its header buffer (kept) and the pin it holds while its SET may read the slot. */
    private static final class Lane
    {
        int state = FREE;
        int outcome;
        boolean intact;
        L2Layout layout;
        long salt;
        long hi;
        long lo;
        int bytes;
        byte[] key;
        long deadlineNs;
        long transfer;
        RedisFuture<?> future;
        L2SetNx args;
        ByteBuffer header;
        ClientResponse pinned;
        ClientResponse released;
        long correlation = -1;
    }
}
