package io.kvstash.server.l2;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Layout;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisAdvancedClusterAsyncCommands;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import org.agrona.CloseHelper;
import org.agrona.DirectBuffer;
import org.agrona.ErrorHandler;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.zip.CRC32C;

/**
 * The second tier: a Redis Cluster (or Valkey) shared by every host, on a thread of its own
 * ({@code kvstash-l2}).
 * <ul>
 *   <li><b>Write-through</b>: for each chunk a worker committed (notices from {@link L2Tap}), the tier checks
 *   the cluster for the chunk's content key ({@link L2Keys}) and, when absent, pins the chunk as an internal
 *   client of its own server (PREPARE_RETRIEVE), copies it into a staging buffer behind a header
 *   ({@link L2ValueDescriptor}), releases it (COMMIT_RETRIEVE) and writes it with SET NX: once per key,
 *   whichever host is first.</li>
 *   <li><b>Read-through</b>: for a LOOKUP that missed past its hit prefix, the tier checks the next chunks
 *   (pipelined EXISTS, at most {@link #FETCH_AHEAD_CHUNKS} of them), GETs the leading run found, checks each
 *   value's header and checksums, and stores the good leading run into the pool as its internal client
 *   (PREPARE_STORE, write, COMMIT_STORE). A later LOOKUP finds them.</li>
 *   <li><b>Faults</b>: every cluster call is bounded by the tier's timeout; timeouts and errors are counted;
 *   after {@link #FAILURES_TO_DOWN} failures in a row the tier goes down, drops its queued work (counted) and
 *   reconnects every {@link #RETRY_INTERVAL_MS} ms until a probe answers.</li>
 * </ul>
 * The tier's client registers, for each layout a worker registered, an instance of its own with the same layout
 * (ids {@code 0x4C32_xxxx_xxxx_xxxx}), so its requests show in the server's request counters like any
 * client's. Owner: the {@code kvstash-l2} thread, except {@link #close()}.
 */
public final class L2Tier implements Agent, AutoCloseable
{
    /** Gauge value of {@link StoreCounters#L2_STATE}: off. */
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

    private static final long TIER_INSTANCE_BASE = 0x4C32_0000_0000_0000L;
    private static final int NOTICES_PER_CYCLE = 256;
    private static final int WRITES_PER_CYCLE = 8;
    private static final long PENDING_STORE_MAX_AGE_NS = TimeUnit.MINUTES.toNanos(5);
    private static final byte[] PROBE_KEY = "kvstash:probe".getBytes(StandardCharsets.US_ASCII);

    private final Path directory;
    private final List<RedisURI> seeds;
    private final long timeoutNs;
    private final StoreCounters counters;
    private final L2Tap tap;
    private final OneToOneRingBuffer notices;
    private final ErrorHandler errorHandler;
    private final CRC32C crc = new CRC32C();
    private final Map<Long, LayoutState> instances = new HashMap<>();
    private final Map<Layout, LayoutState> layouts = new HashMap<>();
    private final Map<Long, PendingStore> pendingStores = new HashMap<>();
    private final ArrayDeque<Job> writes = new ArrayDeque<>();
    private final ArrayDeque<Job> fetches = new ArrayDeque<>();
    private final UnsafeBuffer stagingView = new UnsafeBuffer(0, 0);
    private final UnsafeBuffer valueView = new UnsafeBuffer(0, 0);
    private final org.agrona.concurrent.MessageHandler noticeHandler = this::onNotice;
    private int queuedWriteChunks;
    private ByteBuffer staging;
    private KvStashClient client;
    private long nextClientAttemptNs;
    private ClientResources resources;
    private RedisClusterClient redis;
    private StatefulRedisClusterConnection<byte[], ByteBuffer> connection;
    private RedisAdvancedClusterAsyncCommands<byte[], ByteBuffer> commands;
    private int state = STATE_CONNECTING;
    private int failuresInRow;
    private long nextAttemptNs;
    private long nextSweepNs;
    private long lastFetchHi;
    private long lastFetchLo;
    private long lastFetchNs;
    private AgentRunner runner;

    /**
     * A tier for a server's directory; {@link #start()} runs it.
     *
     * @param directory    the server's directory (the tier connects to it as a client).
     * @param seeds        {@code redis://host:port[,host:port...]}.
     * @param timeoutMs    bound of every cluster call.
     * @param counters     the server's counters.
     * @param tap          the publish stage's notices.
     * @param errorHandler the server's counted error handler.
     */
    public L2Tier(
        final Path directory,
        final String seeds,
        final long timeoutMs,
        final StoreCounters counters,
        final L2Tap tap,
        final ErrorHandler errorHandler)
    {
        this.directory = directory;
        this.seeds = L2Seeds.parse(seeds);
        this.timeoutNs = TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        this.counters = counters;
        this.tap = tap;
        this.notices = tap.ring();
        this.errorHandler = errorHandler;
        counters.set(StoreCounters.L2_STATE, STATE_CONNECTING);
    }

    /**
     * Starts the tier's thread ({@code kvstash-l2}, backing off when idle).
     *
     * @return this.
     */
    public L2Tier start()
    {
        runner = new AgentRunner(new BackoffIdleStrategy(10, 10, 1_000, TimeUnit.MILLISECONDS.toNanos(1)),
            errorHandler, null, this);
        AgentRunner.startOnThread(runner);
        return this;
    }

    /**
     * The tier's state ({@link #STATE_UP}, ...).
     *
     * @return state.
     */
    public int state()
    {
        return (int)counters.get(StoreCounters.L2_STATE);
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
        if (STATE_UP != state)
        {
            work += dropQueued();
            if (nowNs - nextAttemptNs >= 0)
            {
                connectCluster(nowNs);
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
            final Job job = fetches.poll();
            if (job.hi.length > 0)
            {
                fetch(job);
            }
            tap.fetchCompleted(job.ticket);
            work++;
        }
        for (int i = 0; i < WRITES_PER_CYCLE && !writes.isEmpty() && STATE_UP == state; i++)
        {
            writeNext();
            work++;
        }
        return work;
    }

    @Override
    public void onClose()
    {
        closeCluster();
        if (null != redis)
        {
            redis.shutdown(0, 1, TimeUnit.SECONDS);
            redis = null;
        }
        if (null != resources)
        {
            resources.shutdown(0, 1, TimeUnit.SECONDS);
            resources = null;
        }
        CloseHelper.quietClose(client);
        client = null;
        counters.set(StoreCounters.L2_STATE, STATE_OFF);
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

    private void connectCluster(final long nowNs)
    {
        nextAttemptNs = nowNs + TimeUnit.MILLISECONDS.toNanos(RETRY_INTERVAL_MS);
        closeCluster();
        try
        {
            if (null == redis)
            {
                resources = DefaultClientResources.builder().ioThreadPoolSize(2).computationThreadPoolSize(1).build();
                final Duration timeout = Duration.ofNanos(timeoutNs);
                final Duration connectTimeout = Duration.ofMillis(Math.max(1_000, timeout.toMillis()));
                for (final RedisURI seed : seeds)
                {
                    seed.setTimeout(connectTimeout);
                }
                redis = RedisClusterClient.create(resources, seeds);
                redis.setOptions(ClusterClientOptions.builder()
                    .socketOptions(SocketOptions.builder().connectTimeout(connectTimeout).build())
                    .timeoutOptions(TimeoutOptions.enabled(timeout))
                    // Not REJECT_COMMANDS: a cluster connection opens its node connections lazily, and rejecting
                    // would fail the first command to every node; the timeout bounds a queued command instead.
                    .disconnectedBehavior(ClientOptions.DisconnectedBehavior.ACCEPT_COMMANDS)
                    .requestQueueSize(4_096)
                    .autoReconnect(true)
                    .topologyRefreshOptions(ClusterTopologyRefreshOptions.builder()
                        .enablePeriodicRefresh(Duration.ofSeconds(5))
                        .build())
                    .build());
            }
            connection = redis.connect(L2Codec.INSTANCE);
            commands = connection.async();
            final Long probe = await(commands.exists(PROBE_KEY), System.nanoTime() + timeoutNs);
            if (null == probe)
            {
                closeCluster();
                return;
            }
            failuresInRow = 0;
            state = STATE_UP;
            counters.set(StoreCounters.L2_STATE, STATE_UP);
        }
        catch (final RuntimeException ex)
        {
            counters.add(StoreCounters.L2_ERRORS, 1);
            closeCluster();
        }
    }

    private void closeCluster()
    {
        final StatefulRedisClusterConnection<byte[], ByteBuffer> c = connection;
        connection = null;
        commands = null;
        if (null != c)
        {
            c.closeAsync();
        }
    }

    private void down()
    {
        state = STATE_DOWN;
        counters.set(StoreCounters.L2_STATE, STATE_DOWN);
        nextAttemptNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RETRY_INTERVAL_MS);
        closeCluster();
    }

    /**
     * Waits for one call until a deadline; counts and returns null on a timeout or an error.
     */
    private <T> T await(final RedisFuture<T> future, final long deadlineNs)
    {
        try
        {
            final T value = future.get(Math.max(0, deadlineNs - System.nanoTime()), TimeUnit.NANOSECONDS);
            failuresInRow = 0;
            return value;
        }
        catch (final TimeoutException ex)
        {
            future.cancel(true);
            counters.add(StoreCounters.L2_TIMEOUTS, 1);
        }
        catch (final ExecutionException ex)
        {
            counters.add(StoreCounters.L2_ERRORS, 1);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            counters.add(StoreCounters.L2_ERRORS, 1);
        }
        if (++failuresInRow >= FAILURES_TO_DOWN && STATE_UP == state)
        {
            down();
        }
        return null;
    }

    private static boolean failed(final RedisFuture<?> future)
    {
        return future.isCancelled() || future.toCompletableFuture().isCompletedExceptionally();
    }

    // ------------------------------------------------------------------------------------------ notices

    private void onNotice(final int type, final DirectBuffer b, final int index, final int length)
    {
        final long instance = b.getLong(index + L2Tap.INSTANCE_OFFSET);
        switch (type)
        {
            case L2Tap.REGISTERED:
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
                instances.put(instance, layouts.computeIfAbsent(layout, l -> new LayoutState(l, layouts.size())));
                break;
            }
            case L2Tap.UNREGISTERED:
                instances.remove(instance);
                break;
            case L2Tap.RESERVED:
            {
                final LayoutState ls = instances.get(instance);
                if (null != ls)
                {
                    pendingStores.put(b.getLong(index + L2Tap.TRANSFER_OFFSET),
                        new PendingStore(readJob(ls, b, index), System.nanoTime()));
                }
                break;
            }
            case L2Tap.COMMITTED:
            {
                final PendingStore pending = pendingStores.remove(b.getLong(index + L2Tap.TRANSFER_OFFSET));
                if (null != pending)
                {
                    queueWrite(pending.job);
                }
                break;
            }
            case L2Tap.ABORTED:
                pendingStores.remove(b.getLong(index + L2Tap.TRANSFER_OFFSET));
                break;
            case L2Tap.MISSED:
            {
                final LayoutState ls = instances.get(instance);
                final boolean fetchable = null != ls && b.getInt(index + L2Tap.COUNT_OFFSET) > 0;
                final long ticket = b.getLong(index + L2Tap.TICKET_OFFSET);
                if (!fetchable && fetches.isEmpty())
                {
                    tap.fetchCompleted(ticket);
                    break;
                }
                if (fetches.size() >= FETCH_QUEUE_MAX)
                {
                    tap.fetchCompleted(fetches.poll().ticket);
                }
                // One with nothing to fetch still queues behind the others, so tickets complete in order.
                final Job job = fetchable ? readJob(ls, b, index) : new Job(null, 0, 0);
                job.ticket = ticket;
                fetches.add(job);
                break;
            }
            default:
                break;
        }
    }

    private static Job readJob(final LayoutState ls, final DirectBuffer b, final int index)
    {
        final int count = b.getInt(index + L2Tap.COUNT_OFFSET);
        final Job job = new Job(ls, b.getLong(index + L2Tap.SALT_OFFSET), count);
        for (int i = 0; i < count; i++)
        {
            job.hi[i] = b.getLong(index + L2Tap.KEYS_OFFSET + 16 * i);
            job.lo[i] = b.getLong(index + L2Tap.KEYS_OFFSET + 16 * i + 8);
        }
        return job;
    }

    private void queueWrite(final Job job)
    {
        if (queuedWriteChunks + job.hi.length > WRITE_QUEUE_CHUNKS_MAX)
        {
            counters.add(StoreCounters.L2_WRITE_ERRORS, job.hi.length);
            return;
        }
        queuedWriteChunks += job.hi.length;
        writes.add(job);
    }

    private int dropQueued()
    {
        int dropped = 0;
        Job job;
        while (null != (job = writes.poll()))
        {
            final int left = job.hi.length - job.next;
            counters.add(StoreCounters.L2_WRITE_ERRORS, left);
            dropped += left;
        }
        queuedWriteChunks = 0;
        dropped += fetches.size();
        while (null != (job = fetches.poll()))
        {
            tap.fetchCompleted(job.ticket);
        }
        return dropped;
    }

    private void sweepPendingStores(final long nowNs)
    {
        nextSweepNs = nowNs + TimeUnit.SECONDS.toNanos(1);
        final Iterator<PendingStore> it = pendingStores.values().iterator();
        while (it.hasNext())
        {
            if (nowNs - it.next().createdNs > PENDING_STORE_MAX_AGE_NS)
            {
                it.remove();
            }
        }
    }

    // ------------------------------------------------------------------------------------------ write-through

    private void writeNext()
    {
        final Job job = writes.peek();
        final int i = job.next++;
        queuedWriteChunks--;
        if (job.next >= job.hi.length)
        {
            writes.poll();
        }
        final LayoutState ls = job.layout;
        if (!ls.ensureRegistered())
        {
            counters.add(StoreCounters.L2_WRITE_ERRORS, 1);
            return;
        }
        final long hi = job.hi[i];
        final long lo = job.lo[i];
        final byte[] key = L2Keys.key(ls.namespace(job.salt), hi, lo);
        final long deadlineNs = System.nanoTime() + timeoutNs;
        final Long exists = await(commands.exists(key), deadlineNs);
        if (null == exists)
        {
            counters.add(StoreCounters.L2_WRITE_ERRORS, 1);
            return;
        }
        if (exists > 0)
        {
            counters.add(StoreCounters.L2_WRITE_SKIPS, 1);
            return;
        }
        final int chunkBytes = (int)ls.chunkBytes;
        if (!readFromPool(ls, job.salt, hi, lo, chunkBytes))
        {
            counters.add(StoreCounters.L2_WRITE_SKIPS, 1);
            return;
        }
        L2ValueDescriptor.writeHeader(staging, crc, ls.layoutHash, job.salt, hi, lo, chunkBytes);
        final ByteBuffer value = staging.duplicate().limit(L2ValueDescriptor.HEADER_LENGTH + chunkBytes).position(0);
        final RedisFuture<String> set = commands.set(key, value, SetArgs.Builder.nx());
        final String reply = await(set, System.nanoTime() + timeoutNs);
        if (null == reply)
        {
            if (set.isDone() && !failed(set))
            {
                counters.add(StoreCounters.L2_WRITE_SKIPS, 1); // another host wrote it first (NX)
                return;
            }
            // The command may still be queued and read the staging buffer later: the next write takes a fresh one.
            staging = null;
            counters.add(StoreCounters.L2_WRITE_ERRORS, 1);
            return;
        }
        counters.add(StoreCounters.L2_WRITES, 1);
        counters.add(StoreCounters.L2_BYTES_WRITTEN, chunkBytes);
    }

    /**
     * Copies one readable chunk into the staging buffer after the header, pinned while it is read.
     */
    private boolean readFromPool(final LayoutState ls, final long salt, final long hi, final long lo, final int bytes)
    {
        final int needed = L2ValueDescriptor.HEADER_LENGTH + bytes;
        if (null == staging || staging.capacity() < needed)
        {
            staging = ByteBuffer.allocateDirect(needed);
        }
        stagingView.wrap(staging);
        final ClientResponse r = client.prepareRetrieve(ls.tierInstance,
            ChunkKeys.ofHashes(new long[]{hi}, new long[]{lo}).withSalt(salt));
        if (Status.OK != r.status() || 1 != r.slotCount())
        {
            return false;
        }
        final long transfer = r.transferId();
        client.readChunk(ls.tierInstance, transfer, 0, bytes, r.slotOffset(0), stagingView,
            L2ValueDescriptor.HEADER_LENGTH);
        final boolean intact = client.isStillReadable(r, 0);
        client.commitRetrieve(ls.tierInstance, transfer);
        return intact;
    }

    // ------------------------------------------------------------------------------------------ read-through

    private void fetch(final Job job)
    {
        final LayoutState ls = job.layout;
        final long nowNs = System.nanoTime();
        if (job.hi[0] == lastFetchHi && job.lo[0] == lastFetchLo && nowNs - lastFetchNs < timeoutNs)
        {
            return; // the same miss again (a worker polling its LOOKUP): one fetch is under way or just done
        }
        lastFetchHi = job.hi[0];
        lastFetchLo = job.lo[0];
        lastFetchNs = nowNs;
        if (!ls.ensureRegistered())
        {
            return;
        }
        final String namespace = ls.namespace(job.salt);
        final int limit = (int)Math.min(job.hi.length, Math.max(1, FETCH_BYTES_MAX / Math.max(1, ls.chunkBytes)));
        final byte[][] keys = new byte[limit][];
        final List<RedisFuture<Long>> exists = new ArrayList<>(limit);
        for (int i = 0; i < limit; i++)
        {
            keys[i] = L2Keys.key(namespace, job.hi[i], job.lo[i]);
            exists.add(commands.exists(keys[i]));
        }
        final long deadlineNs = System.nanoTime() + timeoutNs;
        int found = 0;
        for (int i = 0; i < limit; i++)
        {
            final Long e = await(exists.get(i), deadlineNs);
            if (null == e || 0 == e)
            {
                if (null != e)
                {
                    counters.add(StoreCounters.L2_FETCH_MISSES, 1);
                }
                break;
            }
            found++;
        }
        if (0 == found || STATE_UP != state)
        {
            return;
        }
        final List<RedisFuture<ByteBuffer>> gets = new ArrayList<>(found);
        for (int i = 0; i < found; i++)
        {
            gets.add(commands.get(keys[i]));
        }
        final long getDeadlineNs = System.nanoTime() + timeoutNs;
        final ByteBuffer[] values = new ByteBuffer[found];
        int valid = 0;
        for (int i = 0; i < found; i++)
        {
            final RedisFuture<ByteBuffer> get = gets.get(i);
            final ByteBuffer v = await(get, getDeadlineNs);
            if (null == v)
            {
                if (get.isDone() && !failed(get))
                {
                    counters.add(StoreCounters.L2_FETCH_MISSES, 1); // removed since EXISTS
                }
                break;
            }
            if (L2ValueDescriptor.VALID != L2ValueDescriptor.check(
                v, crc, ls.layoutHash, job.salt, job.hi[i], job.lo[i], ls.chunkBytes))
            {
                counters.add(StoreCounters.L2_CORRUPT_VALUES, 1);
                break;
            }
            values[i] = v;
            valid++;
        }
        if (valid > 0)
        {
            storeIntoPool(ls, job, values, valid);
        }
    }

    private void storeIntoPool(final LayoutState ls, final Job job, final ByteBuffer[] values, final int count)
    {
        final long[] hi = java.util.Arrays.copyOf(job.hi, count);
        final long[] lo = java.util.Arrays.copyOf(job.lo, count);
        final ClientResponse r = client.prepareStore(ls.tierInstance, ChunkKeys.ofHashes(hi, lo).withSalt(job.salt));
        if (Status.OK != r.status() || 0 == r.slotCount())
        {
            return;
        }
        final long transfer = r.transferId();
        final int slots = r.slotCount();
        final int bytes = (int)ls.chunkBytes;
        for (int s = 0; s < slots; s++)
        {
            final ByteBuffer value = values[r.slotRangeIndex(s)];
            valueView.wrap(value, value.position(), value.remaining());
            client.writeChunk(ls.tierInstance, transfer, s, bytes, r.slotOffset(s), valueView,
                L2ValueDescriptor.HEADER_LENGTH);
        }
        if (Status.OK == client.commitStore(ls.tierInstance, transfer).status())
        {
            counters.add(StoreCounters.L2_FETCH_HITS, slots);
            counters.add(StoreCounters.L2_BYTES_FETCHED, (long)slots * bytes);
        }
    }

    // ------------------------------------------------------------------------------------------ state

    /** One layout the workers registered, and the tier's own instance with it. */
    private final class LayoutState
    {
        final Layout layout;
        final long tierInstance;
        final long layoutHash;
        final Map<Long, String> namespaces = new HashMap<>();
        long chunkBytes;
        int registered; // 0 not yet, 1 yes, -1 refused

        LayoutState(final Layout layout, final int index)
        {
            this.layout = layout;
            this.tierInstance = TIER_INSTANCE_BASE | ((ProcessHandle.current().pid() & 0xFFFF) << 32) | index;
            this.layoutHash = L2Keys.layoutHash(layout);
        }

        boolean ensureRegistered()
        {
            if (0 == registered)
            {
                final ClientResponse r = client.register(tierInstance, layout);
                if (Status.OK == r.status())
                {
                    chunkBytes = r.chunkBytes();
                    registered = 1;
                }
                else
                {
                    registered = -1;
                    errorHandler.onError(new IllegalStateException("l2: the tier could not register layout " +
                        layout + ": " + Status.name(r.status())));
                }
            }
            return 1 == registered;
        }

        String namespace(final long salt)
        {
            return namespaces.computeIfAbsent(salt, s -> L2Keys.namespace(layout, s));
        }
    }

    /** Chunk keys of one layout and salt, written or fetched in order. */
    private static final class Job
    {
        final LayoutState layout;
        final long salt;
        final long[] hi;
        final long[] lo;
        long ticket;
        int next;

        Job(final LayoutState layout, final long salt, final int count)
        {
            this.layout = layout;
            this.salt = salt;
            this.hi = new long[count];
            this.lo = new long[count];
        }
    }

    /** A reservation whose commit is awaited. */
    private static final class PendingStore
    {
        final Job job;
        final long createdNs;

        PendingStore(final Job job, final long createdNs)
        {
            this.job = job;
            this.createdNs = createdNs;
        }
    }
}
