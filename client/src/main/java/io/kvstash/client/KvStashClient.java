package io.kvstash.client;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.layout.Layout;

import java.nio.file.Path;

/**
 * A worker's connection to a kvstash server over shared memory: its own client file with a request ring and
 * a response ring, the server's control file (heartbeat, incarnation, counters) and the pool, mapped so
 * chunk bytes are written and read in place. Synchronous calls return the client's one reusable
 * {@link ClientResponse}; the non-blocking form ({@link #requests()}'s {@code send*} returning a correlation id,
 * then {@link #poll(ResponseHandler, int)}) keeps many requests in flight. A transfer's chunk bytes move through
 * {@link #chunks()}. Expected outcomes are status codes;
 * a dead, restarted or unresponsive server raises {@link KvStashException}, never a crash: the files of a
 * server are never truncated while mapped, so no access here can fault.
 * <p>
 * Not thread safe: one client per worker thread.
 * <p>
 * A facade over the parts that do the work, cut as Aeron's client is: {@link ServerConnection} (the files,
 * from connect to close), {@link ServerLiveness} (whether the server still serves this client),
 * {@link RequestProxy} (requests encoded into the request ring, public as the non-blocking form's sending half),
 * {@link ResponseAdapter} (responses read, awaited and dispatched), {@link BlockingCalls} (a synchronous call: send,
 * then await its answer), {@link PoolSlots} (the mapped pool) and {@link Chunks} (a transfer's chunk bytes, over
 * the mapped pool or the copy transport).
 */
public final class KvStashClient implements AutoCloseable
{
    /**
     * Receives responses of the non-blocking form.
     */
    @FunctionalInterface
    public interface ResponseHandler
    {
        /**
         * One response; valid only during the call.
         *
         * @param response the response.
         */
        void onResponse(ClientResponse response);
    }

    private final ServerConnection connection;
    private final ServerLiveness liveness;
    private final PoolSlots slots;
    private final RequestProxy proxy;
    private final ResponseAdapter responses;
    private final BlockingCalls calls;
    private final TierLookups tierLookups;
    private final Chunks chunks;

    private KvStashClient(final ClientContext context)
    {
        final ClientContext concluded = context.conclude();
        connection = new ServerConnection(concluded);
        liveness = connection.liveness();
        slots = connection.slots();
        proxy = new RequestProxy(connection.requests(), connection.doorbell());
        responses = new ResponseAdapter(connection.responses(), connection.maxResponseLength(), concluded, liveness);
        calls = new BlockingCalls(proxy, responses, connection.maxInlineBytes());
        tierLookups = new TierLookups(calls, connection);
        chunks = new Chunks(slots, calls);
    }

    /**
     * Connects to the server of a directory.
     *
     * @param context configuration.
     * @return a connected client.
     * @throws KvStashException when no live server answers or it refuses the client.
     */
    public static KvStashClient connect(final ClientContext context)
    {
        return new KvStashClient(context);
    }

    // ------------------------------------------------------------------------------------------ liveness

    /**
     * Whether the server this client connected to still runs: running state, a heartbeat that has moved
     * within the heartbeat timeout, and its process alive.
     * <p>
     * The heartbeat is the server's wall clock, but it is not compared with this machine's wall clock once
     * connected: the client notes when (on its own monotonic clock) it last saw the value change. A step of
     * either wall clock (NTP, a resumed VM) then neither makes a live server look dead nor a dead one alive.
     *
     * @return true when alive.
     */
    public boolean alive()
    {
        return liveness.alive();
    }

    /**
     * Incarnation of the server currently on a directory.
     *
     * @param directory server directory.
     * @return incarnation, or 0 when no control file is readable.
     */
    public static long currentIncarnation(final Path directory)
    {
        return ServerLiveness.currentIncarnation(directory);
    }

    // ------------------------------------------------------------------------------------------ sending

    /**
     * The non-blocking form's sending half: requests encoded into the request ring at once, each send returning
     * its correlation id (or -1 when the ring is full) for {@link #poll} or {@link #await} to match.
     *
     * @return this client's request proxy; owned by the client, used on its thread.
     */
    public RequestProxy requests()
    {
        return proxy;
    }

    // ------------------------------------------------------------------------------------------ receiving

    /**
     * Delivers the responses available now to a handler (the non-blocking form).
     *
     * @param handler receives each response.
     * @param limit   responses at most.
     * @return responses delivered.
     */
    public int poll(final ResponseHandler handler, final int limit)
    {
        return responses.poll(handler, limit);
    }

    /**
     * Sets the handler that receives responses of the non-blocking form that arrive while a synchronous
     * call waits for its own.
     *
     * @param handler handler or null (such responses are then counted and dropped).
     * @return this.
     */
    public KvStashClient asyncHandler(final ResponseHandler handler)
    {
        responses.asyncHandler(handler);
        return this;
    }

    /**
     * Waits for the response of a correlation id; other responses go to the async handler.
     *
     * @param correlationId id returned by a send.
     * @return the response, valid until the next receive.
     * @throws KvStashException when the server is gone, restarted, or silent past the timeout.
     */
    public ClientResponse await(final long correlationId)
    {
        return responses.await(correlationId, responses.response());
    }

    /**
     * A response flyweight sized for this client's response ring, for a caller that keeps several responses
     * at once: a worker that sends the next chunk's prepare before it writes the current chunk (so the
     * server decides while the bytes move) holds both prepares' slots. Allocate it once, outside the loop.
     *
     * @return a new flyweight.
     */
    public ClientResponse newResponse()
    {
        return responses.newResponse();
    }

    /**
     * Waits for the response of a correlation id into the caller's flyweight (see {@link #newResponse()});
     * other responses go to the async handler.
     *
     * @param correlationId id returned by a send.
     * @param target        where the response is copied; valid until the caller reuses it.
     * @return {@code target}.
     * @throws KvStashException when the server is gone, restarted, or silent past the timeout.
     */
    public ClientResponse await(final long correlationId, final ClientResponse target)
    {
        return responses.await(correlationId, target);
    }

    // ------------------------------------------------------------------------------------------ calls

    /**
     * REGISTER.
     *
     * @param instanceId instance.
     * @param layout     layout.
     * @return response: chunk bytes, slot bytes, slot capacity on OK.
     */
    public ClientResponse register(final long instanceId, final Layout layout)
    {
        return calls.register(instanceId, layout);
    }

    /**
     * UNREGISTER.
     *
     * @param instanceId instance.
     * @return response.
     */
    public ClientResponse unregister(final long instanceId)
    {
        return calls.simple(RequestType.UNREGISTER, instanceId, 0, 0);
    }

    /**
     * LOOKUP.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @param pin        pin the hit prefix.
     * @return response: hit chunks, and a transfer when pinned.
     */
    public ClientResponse lookup(final long instanceId, final ChunkKeys keys, final boolean pin)
    {
        return lookup(instanceId, keys, pin, false);
    }

    /**
     * LOOKUP, saying whether the caller asked about the same request before. An engine's scheduler asks about a
     * waiting request at every step; asked with {@code quiet}, the answer is the same but the keys are not counted
     * as referenced again by the eviction policies that keep a history, so a waiting prompt does not read as
     * popular.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @param pin        pin the hit prefix.
     * @param quiet      a repeated ask: do not count the keys again.
     * @return response: hit chunks, and a transfer when pinned.
     */
    public ClientResponse lookup(final long instanceId, final ChunkKeys keys, final boolean pin, final boolean quiet)
    {
        final int flags = (pin ? RequestFlags.PIN : 0) | (quiet ? RequestFlags.QUIET : 0);
        return calls.keyed(RequestType.LOOKUP, instanceId, keys, flags);
    }

    /**
     * LOOKUP that waits, up to a bound, for the second tier's read-through it starts: on a server with a tier, when
     * the hit prefix stops short of the range, the LOOKUP is asked again after short pauses until the
     * read-through is over, every chunk hits, or {@code waitNs} is spent; the last answer is returned. Without a
     * tier on the server this is exactly {@link #lookup(long, ChunkKeys, boolean)}.
     * <p>
     * With {@code pin}, exactly one lease is held afterwards, that of the answer returned: an answer that needs no
     * wait is returned pinned; otherwise its lease is released, the repeated LOOKUPs pin nothing, and one last
     * LOOKUP pins what is readable when the wait ends (one LOOKUP past the bound).
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @param pin        pin the hit prefix of the answer returned.
     * @param waitNs     longest wait for the tier; 0 or less asks once.
     * @return response: hit chunks, a transfer when pinned, and the tier's tickets when the server runs a tier.
     */
    public ClientResponse lookupWaitingForTier(
        final long instanceId, final ChunkKeys keys, final boolean pin, final long waitNs)
    {
        return tierLookups.lookup(instanceId, keys, pin, waitNs);
    }

    /**
     * LOOKUP by token ids.
     *
     * @param instanceId instance.
     * @param tokens     token ids from the prompt's start.
     * @param tokenCount tokens used.
     * @param salt       cache salt value, 0 for none.
     * @param pin        pin the hit prefix.
     * @return response.
     */
    public ClientResponse lookupTokens(
        final long instanceId, final int[] tokens, final int tokenCount, final long salt, final boolean pin)
    {
        final int flags = pin ? RequestFlags.PIN : 0;
        return calls.tokens(RequestType.LOOKUP, instanceId, tokens, tokenCount, salt, flags);
    }

    /**
     * LOOKUP_ALL_RANKS.
     *
     * @param model     model name.
     * @param worldSize world size.
     * @param keys      key range.
     * @return response: hit chunks.
     */
    public ClientResponse lookupAllRanks(final String model, final int worldSize, final ChunkKeys keys)
    {
        return lookupAllRanks(model, worldSize, keys, false);
    }

    /**
     * LOOKUP_ALL_RANKS, saying whether the caller asked about the same request before (see
     * {@link #lookup(long, ChunkKeys, boolean, boolean)}).
     *
     * @param model     model name.
     * @param worldSize world size.
     * @param keys      key range.
     * @param quiet     a repeated ask: do not count the keys again.
     * @return response: hit chunks.
     */
    public ClientResponse lookupAllRanks(
        final String model, final int worldSize, final ChunkKeys keys, final boolean quiet)
    {
        return calls.lookupAllRanks(model, worldSize, keys, quiet ? RequestFlags.QUIET : 0);
    }

    /**
     * RELEASE.
     *
     * @param instanceId instance.
     * @param transferId lookup (or retrieve) transfer.
     * @return response.
     */
    public ClientResponse release(final long instanceId, final long transferId)
    {
        return calls.simple(RequestType.RELEASE, instanceId, transferId, 0);
    }

    /**
     * RELEASE, answered or not: without {@code reply} it goes with {@link RequestFlags#NO_REPLY} and returns at once,
     * as {@link #commitRetrieve(long, long, boolean)} does.
     *
     * @param instanceId instance.
     * @param transferId lookup (or retrieve) transfer.
     * @param reply      whether to wait for the answer.
     * @return the response with {@code reply}; null without it.
     */
    public ClientResponse release(final long instanceId, final long transferId, final boolean reply)
    {
        return unansweredOr(RequestType.RELEASE, instanceId, transferId, reply);
    }

    /**
     * Whether the server takes {@link RequestFlags#NO_REPLY} (wire version 3.1 on), so that
     * {@link #commitRetrieve(long, long, boolean)} without a reply waits for nothing.
     *
     * @return true when the server answers no-reply requests with nothing.
     */
    public boolean noReply()
    {
        return connection.noReply();
    }

    private ClientResponse unansweredOr(
        final int type, final long instanceId, final long transferId, final boolean reply)
    {
        if (reply)
        {
            return calls.simple(type, instanceId, transferId, 0);
        }
        if (connection.noReply())
        {
            calls.unanswered(type, instanceId, transferId, RequestFlags.NO_REPLY);
        }
        else
        {
            calls.simple(type, instanceId, transferId, 0);
        }
        return null;
    }

    /**
     * PREPARE_STORE.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @return response: transfer and slots, or no transfer when everything is present.
     */
    public ClientResponse prepareStore(final long instanceId, final ChunkKeys keys)
    {
        return calls.keyed(RequestType.PREPARE_STORE, instanceId, keys, 0);
    }

    /**
     * PREPARE_STORE by token ids.
     *
     * @param instanceId instance.
     * @param tokens     token ids from the prompt's start.
     * @param tokenCount tokens used (a trailing partial chunk is not stored).
     * @param salt       cache salt value, 0 for none.
     * @return response.
     */
    public ClientResponse prepareStoreTokens(
        final long instanceId, final int[] tokens, final int tokenCount, final long salt)
    {
        return calls.tokens(RequestType.PREPARE_STORE, instanceId, tokens, tokenCount, salt, 0);
    }

    /**
     * COMMIT_STORE.
     *
     * @param instanceId instance.
     * @param transferId store.
     * @return response.
     */
    public ClientResponse commitStore(final long instanceId, final long transferId)
    {
        return calls.simple(RequestType.COMMIT_STORE, instanceId, transferId, 0);
    }

    /**
     * ABORT_STORE.
     *
     * @param instanceId instance.
     * @param transferId store.
     * @return response.
     */
    public ClientResponse abortStore(final long instanceId, final long transferId)
    {
        return calls.simple(RequestType.ABORT_STORE, instanceId, transferId, 0);
    }

    /**
     * PREPARE_RETRIEVE by key range.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @return response: transfer and slots, or MISS.
     */
    public ClientResponse prepareRetrieve(final long instanceId, final ChunkKeys keys)
    {
        return prepareRetrieve(instanceId, keys, false);
    }

    /**
     * PREPARE_RETRIEVE by key range, saying whether to load what is there. With {@code prefix} the answer pins the
     * readable leading chunks of the range, chunk 0 up to the first chunk that is absent or not readable, and
     * has one slot per pinned chunk (range indices 0..k-1, k possibly less than the range); it is a MISS only when
     * chunk 0 is not readable. Without it the range is all or nothing.
     *
     * @param instanceId instance.
     * @param keys       key range.
     * @param prefix     pin the readable leading chunks rather than all or nothing.
     * @return response: transfer and slots (with {@code prefix} as many as the readable prefix), or MISS.
     */
    public ClientResponse prepareRetrieve(final long instanceId, final ChunkKeys keys, final boolean prefix)
    {
        return calls.keyed(RequestType.PREPARE_RETRIEVE, instanceId, keys, prefix ? RequestFlags.PREFIX : 0);
    }

    /**
     * PREPARE_RETRIEVE taking over a pinned lookup.
     *
     * @param instanceId       instance.
     * @param lookupTransferId lookup transfer.
     * @return response: transfer and slots.
     */
    public ClientResponse prepareRetrieveFromLookup(final long instanceId, final long lookupTransferId)
    {
        return calls.simple(RequestType.PREPARE_RETRIEVE, instanceId, lookupTransferId, RequestFlags.FROM_LOOKUP);
    }

    /**
     * COMMIT_RETRIEVE.
     *
     * @param instanceId instance.
     * @param transferId retrieve.
     * @return response.
     */
    public ClientResponse commitRetrieve(final long instanceId, final long transferId)
    {
        return calls.simple(RequestType.COMMIT_RETRIEVE, instanceId, transferId, 0);
    }

    /**
     * COMMIT_RETRIEVE, answered or not. Without {@code reply} it goes with {@link RequestFlags#NO_REPLY}: the call
     * returns as soon as the request is in the ring and the server releases the pins when it gets to it, answering
     * nothing (a failure is counted in the server's {@code no_reply_failures}). So a retrieve waits for one answer,
     * its PREPARE_RETRIEVE's. Send it only once every chunk has been copied out and checked with
     * {@link Chunks#isStillReadable}: the pins are gone once the server has it. A server older than 3.1 does not take
     * the flag: then the commit is answered and awaited as before, and the answer dropped.
     *
     * @param instanceId instance.
     * @param transferId retrieve.
     * @param reply      whether to wait for the answer.
     * @return the response with {@code reply}; null without it.
     */
    public ClientResponse commitRetrieve(final long instanceId, final long transferId, final boolean reply)
    {
        return unansweredOr(RequestType.COMMIT_RETRIEVE, instanceId, transferId, reply);
    }

    /**
     * CLEAR.
     *
     * @param force also abort reservations and drop pins.
     * @return response: chunks removed.
     */
    public ClientResponse clear(final boolean force)
    {
        return calls.simple(RequestType.CLEAR, 0, 0, force ? RequestFlags.FORCE : 0);
    }

    /**
     * STATS.
     *
     * @return response carrying every counter.
     */
    public ClientResponse stats()
    {
        return calls.simple(RequestType.STATS, 0, 0, 0);
    }

    /**
     * PING.
     *
     * @return response.
     */
    public ClientResponse ping()
    {
        return calls.simple(RequestType.PING, 0, 0, 0);
    }

    // ------------------------------------------------------------------------------------------ chunk bytes

    /**
     * The chunk bytes of this client's transfers: views of slots, the fences, and chunks written and read in
     * place in the mapped pool or, with the copy transport, in WRITE_DATA / READ_DATA messages.
     *
     * @return the chunks of this client; owned by the client, used on its thread.
     */
    public Chunks chunks()
    {
        return chunks;
    }

    // ------------------------------------------------------------------------------------------ facts

    /**
     * Incarnation of the server this client is connected to.
     *
     * @return incarnation.
     */
    public long incarnation()
    {
        return connection.incarnation();
    }

    /**
     * Session id the server gave this client.
     *
     * @return session id.
     */
    public long sessionId()
    {
        return connection.sessionId();
    }

    /**
     * Tokens per chunk of the server.
     *
     * @return tokens.
     */
    public int chunkTokens()
    {
        return connection.chunkTokens();
    }

    /**
     * Largest key range of the server.
     *
     * @return chunks.
     */
    public int maxChunksPerRequest()
    {
        return connection.maxChunksPerRequest();
    }

    /**
     * Largest copy-transport payload.
     *
     * @return bytes.
     */
    public int maxInlineBytes()
    {
        return connection.maxInlineBytes();
    }

    /**
     * Whether the server runs a second tier that answers LOOKUPs waiting for it (its control file's Features).
     *
     * @return true when {@link #lookupWaitingForTier} waits.
     */
    public boolean secondTier()
    {
        return tierLookups.secondTier();
    }

    /**
     * Whether this client uses the copy transport.
     *
     * @return true without a pool mapping.
     */
    public boolean isCopyTransport()
    {
        return !slots.isMapped();
    }

    /**
     * Responses that arrived for nobody (no async handler set).
     *
     * @return count.
     */
    public long orphanResponses()
    {
        return responses.orphanResponses();
    }

    /**
     * Path of this client's file.
     *
     * @return path.
     */
    public Path clientFile()
    {
        return connection.clientFile();
    }

    /**
     * Reads a counter from the server's control file (no request needed).
     *
     * @param id counter id.
     * @return value.
     */
    public long counter(final int id)
    {
        return connection.counter(id);
    }

    /**
     * Tells the server this client leaves (it reaps what the client held), releases the lock and unmaps.
     * The server deletes the client file; if the server is gone, the client deletes it.
     */
    @Override
    public void close()
    {
        proxy.close();
        connection.close();
    }
}
