package io.kvstash.tier;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreCounters;
import io.kvstash.server.KvStashServer;
import io.kvstash.wire.layout.Layout;
import org.agrona.CloseHelper;
import org.agrona.DirectBuffer;
import org.agrona.ErrorHandler;
import org.agrona.collections.Long2ObjectHashMap;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.MessageHandler;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;
import io.kvstash.wire.file.CountersDescriptor;

import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The second tier: a Redis Cluster (or Valkey) shared by every host, on a thread of its own
 * ({@code kvstash-l2}).
 * <ul>
 *   <li><b>Write-through</b> ({@link L2Writer}): for each chunk a worker committed (notices from {@link L2Tap}),
 *   the tier checks the cluster for the chunk's content key ({@link L2Keys}) and, when absent, pins the chunk as an
 *   internal client of its own server (PREPARE_RETRIEVE), writes it with SET NX of a header
 *   ({@link L2ValueDescriptor}) and the slot itself, and releases it (COMMIT_RETRIEVE with QUIET) once the SET is
 *   over: once per key, whichever host is first. Up to {@link L2Writer#LANES} chunks ({@link L2Writer#BYTES_IN_FLIGHT_MAX} bytes) are in
 *   flight at once.</li>
 *   <li><b>Read-through</b> ({@link L2Fetcher}): for a LOOKUP that missed past its hit prefix, the tier checks the
 *   next chunks (pipelined EXISTS, at most {@link #FETCH_AHEAD_CHUNKS} of them), reserves pool slots for the
 *   leading run found, GETs them all at once, each value checked and copied from the network buffer straight
 *   into its slot ({@link L2ValueSink}), and commits the good leading run. A later LOOKUP finds them.</li>
 *   <li><b>Faults</b> ({@link L2Link}): every cluster call is bounded by the tier's timeout; timeouts and errors are
 *   counted; after {@link #FAILURES_TO_DOWN} failures in a row the tier goes down, drops its queued work (counted)
 *   and reconnects every {@link #RETRY_INTERVAL_MS} ms until a probe answers. An error reply of a serving cluster
 *   (out of memory) is a counted write error, not a failure.</li>
 * </ul>
 * The tier's client registers, for each layout a worker registered, an instance of its own with the same layout
 * (ids {@code 0x4C32_xxxx_xxxx_xxxx}), so its requests show in the server's request counters like any
 * client's. Each read-through carries a ticket; the tier marks it over ({@link L2Tap#completedTicket()}) in ticket
 * order once its chunks are committed, or it found nothing, failed or was dropped. Owner: the {@code kvstash-l2}
 * thread, except {@link #close()}.
 */
public final class L2Tier implements Agent, AutoCloseable
{
    /** Gauge value of {@link CountersDescriptor#L2_STATE}: off. */
    public static final int STATE_OFF = 0;
    /** Gauge value: connecting (the first connection not yet made). */
    public static final int STATE_CONNECTING = 1;
    /** Gauge value: up. */
    public static final int STATE_UP = 2;
    /** Gauge value: down, retrying on its own. */
    public static final int STATE_DOWN = 3;

    /** Keys after a LOOKUP's hit prefix that a read-through checks. */
    public static final int FETCH_AHEAD_CHUNKS = 16;
    /** Bound of the bytes one read-through GETs at once. */
    public static final long FETCH_BYTES_MAX = 64L << 20;
    /** Failed cluster calls in a row that take the tier down. */
    public static final int FAILURES_TO_DOWN = 3;
    /** Time between reconnection attempts while down. */
    public static final long RETRY_INTERVAL_MS = 1_000;
    /** Bound of the chunks waiting to be written; beyond it they are counted as write errors. */
    public static final int WRITE_QUEUE_CHUNKS_MAX = 65_536;
    /** Bound of the read-throughs waiting; beyond it the oldest are dropped. */
    public static final int FETCH_QUEUE_MAX = 256;

    private static final int NOTICES_PER_CYCLE = 256;
    private static final int JOB_POOL_MAX = 1_024;
    private static final long PENDING_STORE_MAX_AGE_NS = TimeUnit.MINUTES.toNanos(5);

    private final Path directory;
    private final StoreCounters counters;
    private final L2Tap tap;
    private final OneToOneRingBuffer notices;
    private final ErrorHandler errorHandler;
    private final L2Link link;
    private final L2Writer writer;
    private final L2Fetcher fetcher;
    private final Long2ObjectHashMap<L2Layout> instances = new Long2ObjectHashMap<>();
    private final Map<Layout, L2Layout> layouts = new HashMap<>();
    private final Long2ObjectHashMap<L2Job> pendingStores = new Long2ObjectHashMap<>();
    private final ArrayDeque<L2Job> fetches = new ArrayDeque<>();
    private final ArrayDeque<L2Job> jobPool = new ArrayDeque<>();
    private final MessageHandler noticeHandler = this::onNotice;
    private KvStashClient client;
    private long nextClientAttemptNs;
    private long nextSweepNs;
    private AgentRunner runner;

    private L2Tier(final KvStashServer server, final TierContext context)
    {
        this.directory = server.directory();
        this.counters = server.counters();
        this.tap = context.tap();
        this.notices = tap.ring();
        this.errorHandler = server.errorHandler();
        this.link = new L2Link(context.seedUris(), TimeUnit.MILLISECONDS.toNanos(context.timeoutMs()), counters);
        this.writer = new L2Writer(link, counters, errorHandler, jobPool);
        this.fetcher = new L2Fetcher(link, counters, errorHandler);
    }

    /**
     * Starts the tier of a server that runs, on a thread of its own ({@code kvstash-l2}, backing off when idle; a
     * completed write wakes it). The tier's context was attached to the server's before the launch
     * ({@link TierContext#attach(io.kvstash.server.ServerContext)}); the tier counts into the server's counters and
     * reports to its error handler, and is closed before the server.
     *
     * @param server  the running server (the tier connects to it as a client).
     * @param context the tier's context, attached to the server's.
     * @return the running tier.
     * @throws IllegalStateException when the context's tap is not the server's response observer.
     */
    public static L2Tier launch(final KvStashServer server, final TierContext context)
    {
        if (null == context.tap() || context.tap() != server.context().responseObserver())
        {
            throw new IllegalStateException("the tier's context was not attached to the server's before its launch");
        }
        final L2Tier tier = new L2Tier(server, context);
        tier.runner = new AgentRunner(new BackoffIdleStrategy(10, 10, 1_000, TimeUnit.MILLISECONDS.toNanos(1)),
            tier.errorHandler, null, tier);
        AgentRunner.startOnThread(tier.runner);
        return tier;
    }

    /**
     * The tier's state ({@link #STATE_UP}, ...).
     *
     * @return state.
     */
    public int state()
    {
        return (int)counters.get(CountersDescriptor.L2_STATE);
    }

    @Override
    public String roleName()
    {
        return "kvstash-l2";
    }

    @Override
    public int doWork()
    {
        final long nowNs = System.nanoTime();
        if (null == client && !connectPool(nowNs))
        {
            return 0;
        }
        int work = notices.read(noticeHandler, NOTICES_PER_CYCLE);
        if (!link.isUp())
        {
            work += dropQueued();
            if (link.reconnectIfDue(nowNs))
            {
                work++;
            }
            return work;
        }
        if (nowNs - nextSweepNs >= 0)
        {
            sweepPendingStores(nowNs);
        }
        if (!fetches.isEmpty())
        {
            final L2Job job = fetches.poll();
            try
            {
                if (job.count > 0)
                {
                    fetcher.fetch(client, job);
                }
            }
            finally
            {
                tap.fetchCompleted(job.ticket);
                recycle(job);
            }
            work++;
        }
        return work + writer.poll(client);
    }

    @Override
    public void onClose()
    {
        writer.drop(null);
        link.close();
        CloseHelper.quietClose(client);
        client = null;
        counters.set(CountersDescriptor.L2_STATE, STATE_OFF);
    }

    /**
     * Stops the tier's thread, its cluster connection and its client session.
     */
    @Override
    public void close()
    {
        if (null != runner)
        {
            runner.close();
        }
    }

    // ------------------------------------------------------------------------------------------ connections

    private boolean connectPool(final long nowNs)
    {
        if (nowNs - nextClientAttemptNs < 0)
        {
            return false;
        }
        nextClientAttemptNs = nowNs + TimeUnit.MILLISECONDS.toNanos(100);
        try
        {
            final KvStashClient c = KvStashClient.connect(new ClientContext().directory(directory)
                .timeoutNs(TimeUnit.SECONDS.toNanos(5)).pretouchPool(false));
            if (c.isCopyTransport())
            {
                c.close();
                throw new IllegalStateException("l2: the tier's client did not map the pool");
            }
            tap.tierSession(c.sessionId());
            client = c;
            return true;
        }
        catch (final RuntimeException ex)
        {
            // The server is still starting; the tier tries again shortly.
            return false;
        }
    }

    // ------------------------------------------------------------------------------------------ notices

    private void onNotice(final int type, final DirectBuffer b, final int index, final int length)
    {
        final long instance = b.getLong(index + L2Tap.INSTANCE_OFFSET);
        switch (type)
        {
            case L2Tap.REGISTERED:
                onRegistered(instance, b, index);
                break;
            case L2Tap.UNREGISTERED:
                instances.remove(instance);
                break;
            case L2Tap.RESERVED:
                onReserved(instance, b, index);
                break;
            case L2Tap.COMMITTED:
            {
                final L2Job pending = pendingStores.remove(b.getLong(index + L2Tap.TRANSFER_OFFSET));
                if (null != pending)
                {
                    writer.queue(pending);
                }
                break;
            }
            case L2Tap.ABORTED:
            {
                final L2Job pending = pendingStores.remove(b.getLong(index + L2Tap.TRANSFER_OFFSET));
                if (null != pending)
                {
                    recycle(pending);
                }
                break;
            }
            case L2Tap.MISSED:
                onMissed(instance, b, index);
                break;
            default:
                break;
        }
    }

    private void onRegistered(final long instance, final DirectBuffer b, final int index)
    {
        final byte[] model = new byte[b.getInt(index + L2Tap.MODEL_LENGTH_OFFSET)];
        b.getBytes(index + L2Tap.MODEL_OFFSET, model);
        final int o = index + L2Tap.LAYOUT_OFFSET;
        final Layout layout = new Layout(model, b.getInt(o), b.getInt(o + 4), b.getInt(o + 8),
            b.getInt(o + 12), b.getInt(o + 16), 0 != b.getInt(o + 20));
        if (instances.size() >= 65_536)
        {
            instances.clear();
        }
        instances.put(instance, layouts.computeIfAbsent(layout, l -> new L2Layout(l, layouts.size())));
    }

    private void onReserved(final long instance, final DirectBuffer b, final int index)
    {
        final L2Layout ls = instances.get(instance);
        if (null != ls)
        {
            final L2Job job = readJob(ls, b, index);
            job.createdNs = System.nanoTime();
            final L2Job replaced = pendingStores.put(b.getLong(index + L2Tap.TRANSFER_OFFSET), job);
            if (null != replaced)
            {
                recycle(replaced);
            }
        }
    }

    private void onMissed(final long instance, final DirectBuffer b, final int index)
    {
        final L2Layout ls = instances.get(instance);
        final boolean fetchable = null != ls && b.getInt(index + L2Tap.COUNT_OFFSET) > 0;
        final long ticket = b.getLong(index + L2Tap.TICKET_OFFSET);
        if (!fetchable && fetches.isEmpty())
        {
            tap.fetchCompleted(ticket);
            return;
        }
        if (fetches.size() >= FETCH_QUEUE_MAX)
        {
            final L2Job oldest = fetches.poll();
            tap.fetchCompleted(oldest.ticket);
            recycle(oldest);
        }
        // One with nothing to fetch still queues behind the others, so tickets complete in order.
        final L2Job job = fetchable ? readJob(ls, b, index) : acquireJob().reset(null, 0, 0);
        job.ticket = ticket;
        fetches.add(job);
    }

    private L2Job readJob(final L2Layout ls, final DirectBuffer b, final int index)
    {
        final int count = b.getInt(index + L2Tap.COUNT_OFFSET);
        final L2Job job = acquireJob().reset(ls, b.getLong(index + L2Tap.SALT_OFFSET), count);
        for (int i = 0; i < count; i++)
        {
            job.hi[i] = b.getLong(index + L2Tap.KEYS_OFFSET + 16 * i);
            job.lo[i] = b.getLong(index + L2Tap.KEYS_OFFSET + 16 * i + 8);
        }
        return job;
    }

    private L2Job acquireJob()
    {
        final L2Job job = jobPool.poll();
        return null == job ? new L2Job() : job;
    }

    private void recycle(final L2Job job)
    {
        job.layout = null;
        if (jobPool.size() < JOB_POOL_MAX)
        {
            jobPool.add(job);
        }
    }

    private int dropQueued()
    {
        int dropped = writer.drop(client);
        dropped += fetches.size();
        L2Job job;
        while (null != (job = fetches.poll()))
        {
            tap.fetchCompleted(job.ticket);
            recycle(job);
        }
        return dropped;
    }

    private void sweepPendingStores(final long nowNs)
    {
        nextSweepNs = nowNs + TimeUnit.SECONDS.toNanos(1);
        final Iterator<L2Job> it = pendingStores.values().iterator();
        while (it.hasNext())
        {
            final L2Job job = it.next();
            if (nowNs - job.createdNs > PENDING_STORE_MAX_AGE_NS)
            {
                it.remove();
                recycle(job);
            }
        }
    }
}
