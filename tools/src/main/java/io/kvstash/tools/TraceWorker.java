package io.kvstash.tools;

import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.List;
import java.util.function.LongConsumer;

/**
 * Replays Mooncake trace requests through a {@link KvStashClient} as an inference worker would, per
 * request: LOOKUP the whole range with pin (k hit chunks); if k &gt; 0, PREPARE_RETRIEVE from that lookup,
 * read every chunk and check it ({@link ChunkPattern}), COMMIT_RETRIEVE; then PREPARE_STORE of the range
 * {@code [k, n)} (the server skips chunks already present; no transfer id means nothing to store), write
 * every reserved chunk, COMMIT_STORE. One Mooncake hash id is one chunk, keyed {@code (0, id)}. Expected
 * outcomes (MISS, NO_SPACE, UNKNOWN_TRANSFER, ...) are counted, never fatal; a lost server raises the
 * client's exception. Chunk bytes move with the client's {@code writeChunk}/{@code readChunk}, so the
 * replay works over the mapped pool and over the copy transport alike. Latency of every round trip, chunk
 * copy and whole request is recorded client side. Runs on the calling thread.
 */
public final class TraceWorker
{
    /** Model name every replay worker registers, so all workers share chunks. */
    public static final String MODEL = "kvstash-trace-replay";

    private final KvStashClient client;
    private final long instanceId;
    private final int payloadBytes;
    private final ChunkPattern pattern = new ChunkPattern();
    private final UnsafeBuffer scratch;
    private final WorkerResult result = new WorkerResult();
    private int[] slotRangeIndex = new int[64];
    private String model = MODEL;
    private long tierWaitNs;

    /**
     * A worker over a connected client.
     *
     * @param client       connected client.
     * @param instanceId   instance id to register.
     * @param payloadBytes bytes of one chunk.
     */
    public TraceWorker(final KvStashClient client, final long instanceId, final int payloadBytes)
    {
        this.client = client;
        this.instanceId = instanceId;
        this.payloadBytes = payloadBytes;
        this.scratch = new UnsafeBuffer(
            BufferUtil.allocateDirectAligned((Math.max(payloadBytes, 64) + 63) & ~63, 64), 0, payloadBytes);
    }

    /**
     * The layout whose chunk is exactly {@code payloadBytes}: MLA, uint8, one layer, hidden size
     * {@code payloadBytes / chunkTokens}.
     *
     * @param payloadBytes bytes of one chunk.
     * @param chunkTokens  the server's tokens per chunk.
     * @return the layout.
     * @throws IllegalArgumentException when the payload is not a positive multiple of the chunk tokens or
     *                                  too small for the chunk pattern.
     */
    public static Layout layoutFor(final int payloadBytes, final int chunkTokens)
    {
        return layoutFor(MODEL, payloadBytes, chunkTokens);
    }

    /**
     * The layout of {@link #layoutFor(int, int)} under another model name (the second tier keys chunks by it).
     *
     * @param model        model name.
     * @param payloadBytes bytes of one chunk.
     * @param chunkTokens  the server's tokens per chunk.
     * @return the layout.
     * @throws IllegalArgumentException as {@link #layoutFor(int, int)}.
     */
    public static Layout layoutFor(final String model, final int payloadBytes, final int chunkTokens)
    {
        if (payloadBytes < ChunkPattern.MIN_LENGTH || payloadBytes % chunkTokens != 0)
        {
            throw new IllegalArgumentException("payload of " + payloadBytes + " bytes is not a multiple of the " +
                "server's " + chunkTokens + " chunk tokens of at least " + ChunkPattern.MIN_LENGTH + " bytes");
        }
        return Layout.of(model, 1, 0, 1, payloadBytes / chunkTokens, Dtype.UINT8, true);
    }

    /**
     * Sets the model name to register instead of {@link #MODEL}; call before {@link #register()}.
     *
     * @param model model name.
     * @return this.
     */
    public TraceWorker model(final String model)
    {
        this.model = model;
        return this;
    }

    /**
     * Makes every LOOKUP wait up to a bound for the server's second tier to read through the chunks it misses
     * ({@link KvStashClient#lookupWaitingForTier}), so chunks another host stored come back in the same call.
     *
     * @param tierWaitNs bound in ns, 0 for a plain LOOKUP.
     * @return this.
     */
    public TraceWorker tierWaitNs(final long tierWaitNs)
    {
        this.tierWaitNs = tierWaitNs;
        return this;
    }

    /**
     * Registers the instance.
     *
     * @return the REGISTER response (slot capacity, chunk bytes).
     * @throws IllegalStateException when the server refuses the layout.
     */
    public ClientResponse register()
    {
        final ClientResponse r = client.register(instanceId, layoutFor(model, payloadBytes, client.chunkTokens()));
        if (!r.isOk())
        {
            throw new IllegalStateException("REGISTER refused: " + Status.name(r.status()) + " " + r.message());
        }
        if (r.chunkBytes() != payloadBytes)
        {
            throw new IllegalStateException("server chunk bytes " + r.chunkBytes() + " != payload " + payloadBytes);
        }
        return r;
    }

    /**
     * Replays the requests of a trace assigned to this worker: request {@code i} belongs to worker
     * {@code i % workers}.
     *
     * @param requests    every request of the trace, in file order.
     * @param workerIndex this worker, in {@code [0, workers)}.
     * @param workers     number of workers.
     * @param progress    told the number of requests done so far, after each request.
     * @return the result (also {@link #result()}).
     */
    public WorkerResult replay(
        final List<MooncakeTrace.Request> requests, final int workerIndex, final int workers, final LongConsumer progress)
    {
        final long start = System.nanoTime();
        long done = 0;
        for (int i = workerIndex; i < requests.size(); i += workers)
        {
            replayOne(requests.get(i));
            progress.accept(++done);
        }
        result.elapsedNs(System.nanoTime() - start);
        return result;
    }

    /**
     * What this worker did so far.
     *
     * @return the result.
     */
    public WorkerResult result()
    {
        return result;
    }

    /**
     * Replays one request.
     *
     * @param request trace request.
     */
    public void replayOne(final MooncakeTrace.Request request)
    {
        final long requestStart = System.nanoTime();
        final ChunkKeys keys = ChunkKeys.ofIds(request.hashIds());
        final int n = keys.count();
        result.add(WorkerResult.REQUESTS, 1);
        result.add(WorkerResult.CHUNKS, n);
        if (0 == n)
        {
            result.record(WorkerResult.OP_REQUEST, System.nanoTime() - requestStart);
            return;
        }

        long t = System.nanoTime();
        ClientResponse r = 0 == tierWaitNs ? client.lookup(instanceId, keys, true) :
            client.lookupWaitingForTier(instanceId, keys, true, tierWaitNs);
        result.record(WorkerResult.OP_LOOKUP, System.nanoTime() - t);
        int hits = 0;
        if (r.isOk())
        {
            hits = r.hitChunks();
            result.add(WorkerResult.HIT_CHUNKS, hits);
            if (hits > 0)
            {
                retrieve(keys, r.transferId());
            }
        }
        else
        {
            countError(r.status());
        }

        if (hits < n)
        {
            store(keys, hits);
        }
        result.record(WorkerResult.OP_REQUEST, System.nanoTime() - requestStart);
    }

    private void retrieve(final ChunkKeys keys, final long lookupTransferId)
    {
        long t = System.nanoTime();
        final ClientResponse r = client.prepareRetrieveFromLookup(instanceId, lookupTransferId);
        result.record(WorkerResult.OP_PREPARE_RETRIEVE, System.nanoTime() - t);
        if (!r.isOk())
        {
            countError(r.status());
            return;
        }
        final long transferId = r.transferId();
        final int slots = copySlots(r);
        for (int i = 0; i < slots; i++)
        {
            final int keyIndex = slotRangeIndex[i];
            t = System.nanoTime();
            final int status = client.chunks().readChunk(instanceId, r, i, 0, payloadBytes, scratch, 0);
            result.record(WorkerResult.OP_READ_CHUNK, System.nanoTime() - t);
            if (Status.OK != status)
            {
                countError(status);
                continue;
            }
            // Mapped transport: the response is still the prepare's, so the fence can be read for slot i.
            if (!client.isCopyTransport() && !client.chunks().isStillReadable(r, i))
            {
                result.add(WorkerResult.FENCE_FAILURES, 1);
                continue;
            }
            result.add(WorkerResult.RETRIEVED_CHUNKS, 1);
            result.add(WorkerResult.BYTES_READ, payloadBytes);
            if (keyIndex < 0 || keyIndex >= keys.count() ||
                !pattern.verify(scratch, payloadBytes, keys.hi(keyIndex), keys.lo(keyIndex)))
            {
                result.add(WorkerResult.CHECKSUM_MISMATCHES, 1);
            }
        }
        t = System.nanoTime();
        final ClientResponse commit = client.commitRetrieve(instanceId, transferId);
        result.record(WorkerResult.OP_COMMIT_RETRIEVE, System.nanoTime() - t);
        if (!commit.isOk())
        {
            countError(commit.status());
        }
    }

    private void store(final ChunkKeys keys, final int from)
    {
        final ChunkKeys range = 0 == from ? keys : keys.range(from, keys.count());
        long t = System.nanoTime();
        final ClientResponse r = client.prepareStore(instanceId, range);
        result.record(WorkerResult.OP_PREPARE_STORE, System.nanoTime() - t);
        if (!r.isOk())
        {
            countError(r.status());
            return;
        }
        final long transferId = r.transferId();
        final int slots = 0 == transferId ? 0 : copySlots(r);
        result.add(WorkerResult.SKIPPED_CHUNKS, range.count() - slots);
        if (0 == transferId)
        {
            return;
        }
        for (int i = 0; i < slots; i++)
        {
            final int keyIndex = slotRangeIndex[i];
            if (!client.isCopyTransport() && !client.chunks().isStillReserved(r, i))
            {
                result.add(WorkerResult.FENCE_FAILURES, 1);
                continue;
            }
            pattern.fill(scratch, payloadBytes, range.hi(keyIndex), range.lo(keyIndex));
            t = System.nanoTime();
            final int status = client.chunks().writeChunk(instanceId, r, i, 0, payloadBytes, scratch, 0);
            result.record(WorkerResult.OP_WRITE_CHUNK, System.nanoTime() - t);
            if (Status.OK != status)
            {
                countError(status);
                continue;
            }
            result.add(WorkerResult.STORED_CHUNKS, 1);
            result.add(WorkerResult.BYTES_WRITTEN, payloadBytes);
        }
        t = System.nanoTime();
        final ClientResponse commit = client.commitStore(instanceId, transferId);
        result.record(WorkerResult.OP_COMMIT_STORE, System.nanoTime() - t);
        if (!commit.isOk())
        {
            countError(commit.status());
        }
    }

    /**
     * Copies the slot entries' range indices out of the response, sized to the largest answer seen.
     */
    private int copySlots(final ClientResponse r)
    {
        final int slots = r.slotCount();
        if (slots > slotRangeIndex.length)
        {
            slotRangeIndex = new int[slots];
        }
        for (int i = 0; i < slots; i++)
        {
            slotRangeIndex[i] = r.slotRangeIndex(i);
        }
        return slots;
    }

    private void countError(final int status)
    {
        switch (status)
        {
            case Status.MISS:
                result.add(WorkerResult.RETRIEVE_MISSES, 1);
                break;
            case Status.NO_SPACE:
                result.add(WorkerResult.NO_SPACE, 1);
                break;
            case Status.UNKNOWN_TRANSFER:
                result.add(WorkerResult.UNKNOWN_TRANSFER, 1);
                break;
            default:
                result.add(WorkerResult.OTHER_ERRORS, 1);
        }
    }
}
