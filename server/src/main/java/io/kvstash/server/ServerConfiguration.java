package io.kvstash.server;

import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.wire.ring.RingDescriptor;

/**
 * The server's defaults and the checks of its settings, in the manner of Aeron's driver {@code Configuration}: one
 * place for the values a {@link ServerContext} starts from and for what {@link ServerContext#conclude()} refuses.
 */
public final class ServerConfiguration
{
    /**
     * Default request ring capacity per client: 2 MiB. A record carries at most half a ring, so the largest
     * token request is 262,128 tokens (1,023 chunks of 256); longer prompts are hashed by the client and sent
     * as chunk hashes. Pages of a client file that are never written cost no memory.
     */
    public static final int REQUEST_RING_CAPACITY_DEFAULT = 2 << 20;
    /** Default response ring capacity per client: 256 KiB. */
    public static final int RESPONSE_RING_CAPACITY_DEFAULT = 256 << 10;
    /** Default client limit. */
    public static final int MAX_CLIENTS_DEFAULT = 256;
    /** Default heartbeat interval. */
    public static final long HEARTBEAT_INTERVAL_MS_DEFAULT = 100;
    /** Default time after which clients consider a silent server dead. */
    public static final long HEARTBEAT_TIMEOUT_MS_DEFAULT = 3000;
    /** Default client liveness check interval. */
    public static final long LIVENESS_INTERVAL_MS_DEFAULT = 100;
    /** Default new-client scan interval. */
    public static final long SCAN_INTERVAL_MS_DEFAULT = 10;
    /** Default lease sweep interval. */
    public static final long SWEEP_INTERVAL_MS_DEFAULT = 100;
    /** Default latency interval log period. */
    public static final long LATENCY_INTERVAL_MS_DEFAULT = 1000;
    /**
     * Default Disruptor ring size in SHARED mode. There the ring is no queue between threads: the receiver
     * publishes at most a duty cycle's requests and the stages run them in the same cycle, so a full ring
     * only ends the cycle's reading early. A small ring keeps the events a request touches in the cache:
     * with one request in flight a 1,024-event ring hands each request a cold event.
     */
    public static final int RING_SIZE_SHARED_DEFAULT = 64;
    /** Most clients a server takes at once. */
    public static final int MAX_CLIENTS_MAX = 65536;

    private ServerConfiguration()
    {
    }

    /**
     * A fresh incarnation: the wall clock, the process id and the monotonic clock mixed, never the same twice on
     * one host in practice.
     *
     * @return the incarnation.
     */
    public static long newIncarnation()
    {
        return (System.currentTimeMillis() << 16) ^ (ProcessHandle.current().pid() & 0xFFFF) ^
            System.nanoTime() & 0xFFF;
    }

    /**
     * @param maxClients the client limit.
     * @throws IllegalArgumentException when it is not 1 to {@link #MAX_CLIENTS_MAX}.
     */
    public static void checkMaxClients(final int maxClients)
    {
        if (maxClients <= 0 || maxClients > MAX_CLIENTS_MAX)
        {
            throw new IllegalArgumentException("max clients " + maxClients + " is out of range: give 1 to " +
                MAX_CLIENTS_MAX);
        }
    }

    /**
     * @param prometheusPort the Prometheus endpoint's port: -1 none, 0 any free port.
     * @throws IllegalArgumentException when it is out of range.
     */
    public static void checkPrometheusPort(final int prometheusPort)
    {
        if (prometheusPort < -1 || prometheusPort > 65535)
        {
            throw new IllegalArgumentException("prometheus port " + prometheusPort +
                " is out of range: give 1 to 65535, or 0 for any free port");
        }
    }

    /**
     * @param latencyIntervalMs the latency interval log period.
     * @throws IllegalArgumentException when it is not positive.
     */
    public static void checkLatencyIntervalMs(final long latencyIntervalMs)
    {
        if (latencyIntervalMs <= 0)
        {
            throw new IllegalArgumentException("latency interval must be positive: " + latencyIntervalMs);
        }
    }

    /**
     * @param useAgentInvoker whether the caller runs the server's duty cycle.
     * @param threadingMode   the threading mode.
     * @throws IllegalArgumentException when an invoker is asked for with other than SHARED threading.
     */
    public static void checkThreading(final boolean useAgentInvoker, final ThreadingMode threadingMode)
    {
        if (useAgentInvoker && ThreadingMode.SHARED != threadingMode)
        {
            throw new IllegalArgumentException("an agent invoker needs SHARED threading, not " + threadingMode);
        }
    }

    /**
     * Checks that a client's rings hold the largest records of a store's configuration: a copy-transport store
     * message in the request ring, a response with every chunk of the largest key range in the response ring.
     *
     * @param requestRingCapacity  request ring capacity per client.
     * @param responseRingCapacity response ring capacity per client.
     * @param store                the store's configuration, concluded.
     * @throws IllegalArgumentException when a ring is too small.
     */
    public static void checkRingsHoldLargestRecords(
        final int requestRingCapacity, final int responseRingCapacity, final StoreContext store)
    {
        final int requestMax = RingDescriptor.maxPayloadLength(requestRingCapacity);
        if (requestMax < 256 + store.maxInlineBytes())
        {
            throw new IllegalArgumentException("request ring too small for the largest copy-transport message");
        }
        final int responseMax = RingDescriptor.maxPayloadLength(responseRingCapacity);
        if (responseMax < 64 + 16 * store.maxChunksPerRequest() + store.maxInlineBytes() + 512)
        {
            throw new IllegalArgumentException("response ring too small for the largest response");
        }
    }
}
