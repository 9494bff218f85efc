package io.kvstash.tier;

import io.kvstash.core.StoreCounters;
import io.kvstash.wire.file.CountersDescriptor;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisAdvancedClusterAsyncCommands;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The tier's connection to the cluster and its health: the Lettuce client, the calls' outcomes and the state
 * they lead to. A call's outcome is one of:
 * <ul>
 *   <li>{@link #OK}: the cluster answered;</li>
 *   <li>{@link #REPLY_ERROR}: the cluster answered with an error (out of memory under {@code noeviction}, a
 *   command refused): counted in {@link CountersDescriptor#L2_ERRORS}, and the connection counts as healthy;</li>
 *   <li>{@link #FAILED}: a timeout ({@link CountersDescriptor#L2_TIMEOUTS}), a connection error or a cluster that
 *   does not serve ({@code CLUSTERDOWN}, {@code MASTERDOWN}, {@code LOADING}): counted, and after
 *   {@link L2Tier#FAILURES_TO_DOWN} of them in a row the tier goes down and reconnects once a second.</li>
 * </ul>
 * Owner: the tier's thread.
 */
final class L2Link
{
    /** Outcome: the cluster answered. */
    static final int OK = 0;
    /** Outcome: the cluster answered with an error reply. */
    static final int REPLY_ERROR = 1;
    /** Outcome: a timeout or a connection failure. */
    static final int FAILED = 2;

    private static final byte[] PROBE_KEY = "kvstash:probe".getBytes(StandardCharsets.US_ASCII);

    private final List<RedisURI> seeds;
    private final long timeoutNs;
    private final StoreCounters counters;
    private ClientResources resources;
    private RedisClusterClient redis;
    private StatefulRedisClusterConnection<byte[], ByteBuffer> connection;
    private RedisAdvancedClusterAsyncCommands<byte[], ByteBuffer> commands;
    private int state = L2Tier.STATE_CONNECTING;
    private int failuresInRow;
    private long nextAttemptNs;
    private int lastOutcome;

    L2Link(final List<RedisURI> seeds, final long timeoutNs, final StoreCounters counters)
    {
        this.seeds = seeds;
        this.timeoutNs = timeoutNs;
        this.counters = counters;
        counters.set(CountersDescriptor.L2_STATE, L2Tier.STATE_CONNECTING);
    }

    long timeoutNs()
    {
        return timeoutNs;
    }

    boolean isUp()
    {
        return L2Tier.STATE_UP == state;
    }

    RedisAdvancedClusterAsyncCommands<byte[], ByteBuffer> commands()
    {
        return commands;
    }

    /**
     * The outcome of the last {@link #await} or {@link #settle}.
     *
     * @return {@link #OK}, {@link #REPLY_ERROR} or {@link #FAILED}.
     */
    int lastOutcome()
    {
        return lastOutcome;
    }

    /**
     * While not up: connects when the next attempt is due.
     *
     * @param nowNs clock.
     * @return true when it tried.
     */
    boolean reconnectIfDue(final long nowNs)
    {
        if (nowNs - nextAttemptNs < 0)
        {
            return false;
        }
        connect(nowNs);
        return true;
    }

    private void connect(final long nowNs)
    {
        nextAttemptNs = nowNs + TimeUnit.MILLISECONDS.toNanos(L2Tier.RETRY_INTERVAL_MS);
        closeConnection();
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
                closeConnection();
                return;
            }
            failuresInRow = 0;
            state = L2Tier.STATE_UP;
            counters.set(CountersDescriptor.L2_STATE, L2Tier.STATE_UP);
        }
        catch (final RuntimeException ex)
        {
            counters.add(CountersDescriptor.L2_ERRORS, 1);
            closeConnection();
        }
    }

    /**
     * Closes the connection and the client (the tier stops).
     */
    void close()
    {
        closeConnection();
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
        counters.set(CountersDescriptor.L2_STATE, L2Tier.STATE_OFF);
    }

    private void closeConnection()
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
        state = L2Tier.STATE_DOWN;
        counters.set(CountersDescriptor.L2_STATE, L2Tier.STATE_DOWN);
        nextAttemptNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(L2Tier.RETRY_INTERVAL_MS);
        closeConnection();
    }

    /**
     * Waits for one call until a deadline; counts and returns null on a timeout or an error (see
     * {@link #lastOutcome()}). A call that timed out is cancelled.
     *
     * @param future   the call.
     * @param deadlineNs until when.
     * @param <T>      its value.
     * @return its value, or null.
     */
    <T> T await(final RedisFuture<T> future, final long deadlineNs)
    {
        try
        {
            final T value = future.get(Math.max(0, deadlineNs - System.nanoTime()), TimeUnit.NANOSECONDS);
            answered();
            return value;
        }
        catch (final TimeoutException ex)
        {
            future.cancel(true);
            timedOut();
        }
        catch (final ExecutionException ex)
        {
            failed(ex.getCause());
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            failed(ex);
        }
        return null;
    }

    /**
     * Waits for a call until a deadline without taking its value or counting anything.
     *
     * @param future     the call.
     * @param deadlineNs until when.
     * @return true when it is done.
     */
    static boolean awaitDone(final RedisFuture<?> future, final long deadlineNs)
    {
        final CompletableFuture<?> f = future.toCompletableFuture();
        if (!f.isDone())
        {
            try
            {
                f.get(Math.max(0, deadlineNs - System.nanoTime()), TimeUnit.NANOSECONDS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
            catch (final TimeoutException | ExecutionException | java.util.concurrent.CancellationException ex)
            {
                // Done with an error, or still running: the caller looks.
            }
        }
        return f.isDone();
    }

    /**
     * Counts the outcome of a call that is done (see {@link #lastOutcome()}).
     *
     * @param future a done call.
     * @return true when it completed normally.
     */
    boolean settle(final RedisFuture<?> future)
    {
        final CompletableFuture<?> f = future.toCompletableFuture();
        if (!f.isCompletedExceptionally())
        {
            answered();
            return true;
        }
        try
        {
            f.join();
            failed(null);
        }
        catch (final RuntimeException ex)
        {
            failed(null == ex.getCause() ? ex : ex.getCause());
        }
        return false;
    }

    /**
     * Counts a call that ran past its deadline as a timeout and a failure.
     */
    void timedOut()
    {
        counters.add(CountersDescriptor.L2_TIMEOUTS, 1);
        lastOutcome = FAILED;
        failure();
    }

    private void answered()
    {
        lastOutcome = OK;
        failuresInRow = 0;
    }

    private void failed(final Throwable cause)
    {
        if (cause instanceof io.lettuce.core.RedisCommandTimeoutException)
        {
            timedOut();
            return;
        }
        counters.add(CountersDescriptor.L2_ERRORS, 1);
        if (isReplyError(cause))
        {
            lastOutcome = REPLY_ERROR;
            failuresInRow = 0;
            return;
        }
        lastOutcome = FAILED;
        failure();
    }

    private void failure()
    {
        if (++failuresInRow >= L2Tier.FAILURES_TO_DOWN && L2Tier.STATE_UP == state)
        {
            down();
        }
    }

    /**
     * Whether a call's error is a reply of a serving cluster (out of memory, a refused command), not a sign that
     * the cluster or the connection is gone.
     *
     * @param cause the call's error.
     * @return true for an error reply.
     */
    static boolean isReplyError(final Throwable cause)
    {
        if (!(cause instanceof RedisCommandExecutionException))
        {
            return false;
        }
        final String message = String.valueOf(cause.getMessage());
        return !(message.startsWith("CLUSTERDOWN") || message.startsWith("MASTERDOWN") ||
            message.startsWith("LOADING") || message.startsWith("TRYAGAIN"));
    }
}
