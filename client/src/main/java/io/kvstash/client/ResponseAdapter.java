package io.kvstash.client;

import io.kvstash.wire.ring.RingConsumer;
import org.agrona.concurrent.IdleStrategy;

import java.nio.ByteOrder;
import java.util.function.LongSupplier;

import static io.kvstash.wire.codec.WireDescriptor.RESPONSE_CORRELATION_ID_OFFSET;
import static io.kvstash.wire.codec.WireDescriptor.RESPONSE_TYPE;

/**
 * Reads this client's response ring and dispatches what it finds: to the caller of {@link #poll}, to the
 * caller of {@link #await} waiting for its correlation id, or else to the async handler (or the orphan count
 * when there is none). Owns the waiting: the idle strategy, the clock cadence at which a wait checks the
 * server's liveness and its timeout, and {@link #sendOrWait}, which keeps reading responses while the request
 * ring is full. Each response is copied out of the ring into a {@link ClientResponse} before it is handed on,
 * so the ring space is released at once.
 * <p>
 * Single-threaded: owned by one client, used on the client's thread.
 */
final class ResponseAdapter
{
    /** Idle passes of {@link #await} between two clock reads, a power of two. */
    static final int CLOCK_IDLES = 64;

    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private final RingConsumer responses;
    private final ClientContext context;
    private final IdleStrategy idleStrategy;
    private final ServerLiveness liveness;
    private final ClientResponse response;
    private KvStashClient.ResponseHandler asyncHandler;
    private long orphanResponses;

    /**
     * An adapter over a response ring.
     *
     * @param responses         consumer side of this client's response ring.
     * @param maxResponseLength longest response record the ring carries.
     * @param context           concluded configuration: idle strategy, timeout, liveness check interval.
     * @param liveness          the server's liveness, checked while waiting.
     */
    ResponseAdapter(
        final RingConsumer responses,
        final int maxResponseLength,
        final ClientContext context,
        final ServerLiveness liveness)
    {
        this.responses = responses;
        this.context = context;
        this.idleStrategy = context.idleStrategy();
        this.liveness = liveness;
        this.response = new ClientResponse(maxResponseLength);
    }

    /**
     * A response flyweight sized for this ring.
     *
     * @return a new flyweight.
     */
    ClientResponse newResponse()
    {
        return new ClientResponse(response.capacity());
    }

    /**
     * The flyweight that {@link #poll} and the async handler are given and {@link #await(long)} returns.
     *
     * @return the adapter's own response.
     */
    ClientResponse response()
    {
        return response;
    }

    /**
     * See {@link KvStashClient#asyncHandler(KvStashClient.ResponseHandler)}.
     *
     * @param handler handler or null.
     */
    void asyncHandler(final KvStashClient.ResponseHandler handler)
    {
        this.asyncHandler = handler;
    }

    /**
     * See {@link KvStashClient#orphanResponses()}.
     *
     * @return count.
     */
    long orphanResponses()
    {
        return orphanResponses;
    }

    /**
     * See {@link KvStashClient#poll(KvStashClient.ResponseHandler, int)}.
     *
     * @param handler receives each response.
     * @param limit   responses at most.
     * @return responses delivered.
     */
    int poll(final KvStashClient.ResponseHandler handler, final int limit)
    {
        int n = 0;
        while (n < limit && responses.next())
        {
            if (RESPONSE_TYPE == responses.type())
            {
                response.copyFrom(responses.buffer(), responses.payloadOffset(), responses.payloadLength());
                responses.consume();
                handler.onResponse(response);
                n++;
            }
            else
            {
                responses.consume();
            }
        }
        if (responses.isCorrupt())
        {
            throw new KvStashException(KvStashException.Reason.BAD_FILES, "corrupt response ring");
        }
        return n;
    }

    /**
     * See {@link KvStashClient#await(long, ClientResponse)}.
     *
     * @param correlationId id returned by a send.
     * @param target        where the response is copied.
     * @return {@code target}.
     * @throws KvStashException when the server is gone, restarted, or silent past the timeout.
     */
    ClientResponse await(final long correlationId, final ClientResponse target)
    {
        // No clock read while the answer may be on its way: a read costs about as much as a hand-off between
        // two cores, so the clock is read once every CLOCK_IDLES idle passes and the liveness check and the
        // timeout count from the first such read.
        long start = 0;
        long nextCheck = 0;
        boolean clockStarted = false;
        int idles = 0;
        idleStrategy.reset();
        while (true)
        {
            while (responses.next())
            {
                if (RESPONSE_TYPE != responses.type())
                {
                    responses.consume();
                    continue;
                }
                final boolean ours = responses.payloadLength() >= 8 && correlationId ==
                    responses.buffer().getLong(responses.payloadOffset() + RESPONSE_CORRELATION_ID_OFFSET, LE);
                final ClientResponse into = ours ? target : response;
                into.copyFrom(responses.buffer(), responses.payloadOffset(), responses.payloadLength());
                responses.consume();
                if (ours)
                {
                    return target;
                }
                dispatchOther();
            }
            if (responses.isCorrupt())
            {
                throw new KvStashException(KvStashException.Reason.BAD_FILES, "corrupt response ring");
            }
            if (0 == (++idles & (CLOCK_IDLES - 1)))
            {
                final long now = System.nanoTime();
                if (!clockStarted)
                {
                    clockStarted = true;
                    start = now;
                    nextCheck = now + context.livenessCheckNs();
                }
                else if (now - nextCheck > 0)
                {
                    liveness.checkServer();
                    if (now - start > context.timeoutNs())
                    {
                        throw new KvStashException(KvStashException.Reason.TIMEOUT, "no response to correlation " +
                            correlationId + " in " + context.timeoutNs() / 1_000_000 + " ms");
                    }
                    nextCheck = now + context.livenessCheckNs();
                }
            }
            idleStrategy.idle();
        }
    }

    /**
     * Retries a send until the request ring has room, reading responses meanwhile: the server reads a request
     * only when the response ring has room for its answer. Responses read here go to the async handler.
     * The send runs once more at once, so a caller that already tried passes a supplier only on that slow path.
     *
     * @param send a send returning a correlation id, or -1 when the ring is full.
     * @return the correlation id.
     * @throws KvStashException when the server is lost, or the ring stays full past the timeout.
     */
    long sendOrWait(final LongSupplier send)
    {
        long correlationId = send.getAsLong();
        if (correlationId > 0)
        {
            return correlationId;
        }
        final long start = System.nanoTime();
        idleStrategy.reset();
        while ((correlationId = send.getAsLong()) < 0)
        {
            drainResponses();
            if (System.nanoTime() - start > context.livenessCheckNs())
            {
                liveness.checkServer();
            }
            if (System.nanoTime() - start > context.timeoutNs())
            {
                throw new KvStashException(KvStashException.Reason.TIMEOUT, "request ring stayed full");
            }
            idleStrategy.idle();
        }
        return correlationId;
    }

    private void drainResponses()
    {
        while (responses.next())
        {
            if (RESPONSE_TYPE == responses.type())
            {
                response.copyFrom(responses.buffer(), responses.payloadOffset(), responses.payloadLength());
                responses.consume();
                dispatchOther();
            }
            else
            {
                responses.consume();
            }
        }
    }

    private void dispatchOther()
    {
        if (null != asyncHandler)
        {
            asyncHandler.onResponse(response);
        }
        else
        {
            orphanResponses++;
        }
    }
}
