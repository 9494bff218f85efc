package io.kvstash.perf.bench;

import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The timed loops of the data command. Each returns GB/s (10^9 bytes per second) over the whole loop and,
 * when given a histogram, records each chunk's time; nothing in them allocates.
 */
final class DataLoops
{
    /** Most chunks per request of the batched worker. */
    static final int MAX_BATCH = 8;

    private final KvStashClient client;
    private final ChunkKeys[] keys;
    private final ChunkKeys[] batchKeys;
    private final int batch;
    private final UnsafeBuffer source;
    private final UnsafeBuffer destination;
    private final long[] slotOfKey;
    private final UnsafeBuffer copyView = new UnsafeBuffer(0, 0);
    private final UnsafeBuffer slotView = new UnsafeBuffer(0, 0);
    private final int chunkBytes;
    private int keyCursor;
    private int copyFirstKey;
    private int repFirstKey;

    DataLoops(
        final KvStashClient client,
        final ChunkKeys[] keys,
        final UnsafeBuffer source,
        final UnsafeBuffer destination,
        final int chunkBytes,
        final int batch)
    {
        this.client = client;
        this.keys = keys;
        this.source = source;
        this.destination = destination;
        this.slotOfKey = new long[keys.length];
        this.chunkBytes = chunkBytes;
        this.ahead = new ClientResponse[]{ client.newResponse(), client.newResponse() };
        this.committed = client.newResponse();
        // Batch b is keys [b * batch, (b + 1) * batch): built once, so the loops allocate nothing.
        this.batch = batch;
        this.batchKeys = new ChunkKeys[keys.length / batch];
        for (int b = 0; b < batchKeys.length; b++)
        {
            final long[] hi = new long[batch];
            final long[] lo = new long[batch];
            for (int i = 0; i < batch; i++)
            {
                hi[i] = keys[b * batch + i].hi(0);
                lo[i] = keys[b * batch + i].lo(0);
            }
            batchKeys[b] = ChunkKeys.ofHashes(hi, lo);
        }
    }

    /**
     * The physical limit of the store: the same chunks copied into pool slots with no request at all, so
     * the copy moves bytes through the very pages a store does. A separate {@code /dev/shm} file of the
     * same size is no fair bound: which pages a file gets, and which process first touched them, move
     * copies through it faster or slower than through the pool's, by tens of percent in either direction.
     * The slots are those of the keys stored half a lap of the key ring ago: as cold as the
     * least recently used slots a store reuses, and neither those nor the ones a retrieve is about to read.
     * Their chunks are never read again (the retrieves read what their own store just wrote), and the
     * store that reuses a slot rewrites all of it.
     */
    double copyIn(final int chunks, final Histogram h)
    {
        copyFirstKey = Math.floorMod(keyCursor - keys.length / 2, keys.length);
        final long start = System.nanoTime();
        long t0 = start;
        for (int i = 0, key = copyFirstKey; i < chunks; i++, key = key + 1 == keys.length ? 0 : key + 1)
        {
            client.chunks().slotView(slotOfKey[key], chunkBytes, copyView);
            source.putLong(0, i);
            copyView.putBytes(0, source, 0, chunkBytes);
            t0 = record(h, t0);
        }
        return gbps(chunks, System.nanoTime() - start);
    }

    double copyOut(final int chunks, final Histogram h)
    {
        // Reads back the chunks copyIn just wrote, oldest first, as retrieve reads what store wrote.
        final long start = System.nanoTime();
        long t0 = start;
        for (int i = 0, key = copyFirstKey; i < chunks; i++, key = key + 1 == keys.length ? 0 : key + 1)
        {
            client.chunks().slotView(slotOfKey[key], chunkBytes, copyView);
            destination.putBytes(0, copyView, 0, chunkBytes);
            if (destination.getLong(0) != i)
            {
                throw new IllegalStateException("copy out read chunk " + destination.getLong(0) + ", not " + i);
            }
            t0 = record(h, t0);
        }
        return gbps(chunks, System.nanoTime() - start);
    }

    /**
     * Stores chunks, {@code perRequest} per request (1, or the batch size the loops were built with): a
     * PREPARE_STORE of the request's keys, each slot checked and written, one COMMIT_STORE. Serial: each
     * answer awaited before the next request goes out (two round trips per request on top of the copy).
     * Pipelined, as a worker streaming a prompt's chunks should run it: the next request's PREPARE_STORE
     * is sent before the current request's bytes are written, so the server decides while the bytes move,
     * and each COMMIT_STORE is sent without waiting (its answer is checked when it arrives). Eight chunks
     * per request is how an inference engine stores a prompt.
     */
    double store(final int chunks, final Histogram h, final boolean pipelined, final int perRequest)
    {
        final KvStashClient client = this.client;
        client.asyncHandler(commits);
        repFirstKey = keyCursor;
        final int requests = chunks / perRequest;
        final long start = System.nanoTime();
        long t0 = start;
        int k = keyCursor;
        long nextPrepare = sendPrepare(RequestType.PREPARE_STORE, k, perRequest);
        for (int j = 0; j < requests; j++)
        {
            final ClientResponse prepared = client.await(nextPrepare, ahead[j & 1]);
            if (!prepared.isOk() || perRequest != prepared.slotCount())
            {
                throw new IllegalStateException("prepare store failed: " + prepared);
            }
            final int next = nextKey(k, perRequest);
            final boolean more = j + 1 < requests;
            if (pipelined && more)
            {
                nextPrepare = sendPrepare(RequestType.PREPARE_STORE, next, perRequest);
            }
            for (int i = 0; i < perRequest; i++)
            {
                if (!client.chunks().isStillReserved(prepared, i))
                {
                    throw new IllegalStateException("reservation lost: " + prepared);
                }
                final int key = k + prepared.slotRangeIndex(i);
                client.chunks().slotView(prepared, i, slotView);
                slotOfKey[key] = prepared.slotOffset(i);
                source.putLong(0, key);
                slotView.putBytes(0, source, 0, chunkBytes);
                t0 = record(h, t0);
            }
            commit(RequestType.COMMIT_STORE, prepared.transferId(), pipelined);
            if (!pipelined && more)
            {
                nextPrepare = sendPrepare(RequestType.PREPARE_STORE, next, perRequest);
            }
            k = next;
        }
        keyCursor = k;
        commits.drain(client);
        return gbps(chunks, System.nanoTime() - start);
    }

    /**
     * Retrieves the chunks the last {@link #store} wrote, {@code perRequest} per request, serial or
     * pipelined as there: each slot read, then checked still readable and stamped with its key's index.
     */
    double retrieve(final int chunks, final Histogram h, final boolean pipelined, final int perRequest)
    {
        final KvStashClient client = this.client;
        client.asyncHandler(commits);
        final int requests = chunks / perRequest;
        final long start = System.nanoTime();
        long t0 = start;
        int k = repFirstKey;
        long nextPrepare = sendPrepare(RequestType.PREPARE_RETRIEVE, k, perRequest);
        for (int j = 0; j < requests; j++)
        {
            final ClientResponse prepared = client.await(nextPrepare, ahead[j & 1]);
            if (!prepared.isOk() || perRequest != prepared.slotCount())
            {
                throw new IllegalStateException("prepare retrieve failed: " + prepared);
            }
            final int next = nextKey(k, perRequest);
            final boolean more = j + 1 < requests;
            if (pipelined && more)
            {
                nextPrepare = sendPrepare(RequestType.PREPARE_RETRIEVE, next, perRequest);
            }
            for (int i = 0; i < perRequest; i++)
            {
                client.chunks().slotView(prepared, i, slotView);
                destination.putBytes(0, slotView, 0, chunkBytes);
                if (!client.chunks().isStillReadable(prepared, i) || destination.getLong(0) != k + prepared.slotRangeIndex(i))
                {
                    throw new IllegalStateException("retrieve read the wrong chunk");
                }
                t0 = record(h, t0);
            }
            commit(RequestType.COMMIT_RETRIEVE, prepared.transferId(), pipelined);
            if (!pipelined && more)
            {
                nextPrepare = sendPrepare(RequestType.PREPARE_RETRIEVE, next, perRequest);
            }
            k = next;
        }
        commits.drain(client);
        return gbps(chunks, System.nanoTime() - start);
    }

    private int nextKey(final int key, final int perRequest)
    {
        final int next = key + perRequest;
        return next == keys.length ? 0 : next;
    }

    private static long record(final Histogram h, final long t0)
    {
        if (null == h)
        {
            return t0;
        }
        final long t1 = System.nanoTime();
        BenchSupport.record(h, t1 - t0);
        return t1;
    }

    /**
     * Sends the PREPARE of the {@code perRequest} keys from {@code key} on (1, or the batch size).
     */
    private long sendPrepare(final int type, final int key, final int perRequest)
    {
        final ChunkKeys range = 1 == perRequest ? keys[key] : batchKeys[key / batch];
        long correlationId;
        while ((correlationId = client.requests().sendKeyed(type, 1, range, 0)) < 0)
        {
            client.poll(commits, 64);
        }
        return correlationId;
    }

    /**
     * Sends a commit. Serial: waits for its answer and checks it. Pipelined: the async handler checks the
     * answer when it arrives.
     */
    private void commit(final int type, final long transferId, final boolean pipelined)
    {
        // Two or three small requests in flight never fill the ring; answers are not polled here because
        // the next prepare's answer may be among them.
        long correlationId = client.requests().sendSimple(type, 1, transferId, 0);
        if (correlationId < 0)
        {
            final long deadline = System.nanoTime() + 10_000_000_000L;
            while ((correlationId = client.requests().sendSimple(type, 1, transferId, 0)) < 0)
            {
                if (System.nanoTime() - deadline > 0)
                {
                    throw new IllegalStateException("request ring stayed full");
                }
                Thread.onSpinWait();
            }
        }
        if (pipelined)
        {
            commits.sent++;
        }
        else
        {
            Commits.check(client.await(correlationId, committed));
        }
    }

    private final Commits commits = new Commits();
    private final ClientResponse[] ahead;
    private final ClientResponse committed;

    private double gbps(final int chunks, final long ns)
    {
        return (double)chunks * chunkBytes / Math.max(1, ns);
    }

    /**
     * Checks the answers of commits sent without waiting: each must be OK.
     */
    static final class Commits implements KvStashClient.ResponseHandler
    {
        long sent;
        long answered;

        @Override
        public void onResponse(final ClientResponse response)
        {
            check(response);
            answered++;
        }

        /**
         * Throws unless the response is a commit answered OK.
         */
        static void check(final ClientResponse response)
        {
            if (Status.OK != response.status() || (RequestType.COMMIT_STORE != response.requestType() &&
                RequestType.COMMIT_RETRIEVE != response.requestType()))
            {
                throw new IllegalStateException("commit failed: " + response);
            }
        }

        void drain(final KvStashClient client)
        {
            final long deadline = System.nanoTime() + 10_000_000_000L;
            while (answered < sent)
            {
                client.poll(this, 64);
                if (System.nanoTime() - deadline > 0)
                {
                    throw new IllegalStateException((sent - answered) + " commits never answered");
                }
            }
        }
    }
}
