package io.kvstash.tier;

import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.CommandType;
import org.agrona.ErrorHandler;

import java.util.ArrayDeque;

/**
 * Read-through, one copy: for a LOOKUP that missed, the fetcher checks the next chunks in the cluster (EXISTS,
 * pipelined), reserves pool slots for the leading run found (one PREPARE_STORE per chunk, pipelined, as the
 * tier's client), sends every GET at once with an {@link L2ValueSink} per value that checks the value and copies
 * its payload from Lettuce's network buffer straight into the reserved slot, then commits the leading run of good
 * values (COMMIT_STORE, in order) and aborts the rest (ABORT_STORE). One store per chunk, so a run that ends early
 * commits exactly its good prefix. A fetch is over, every slot committed or given back and every sink settled,
 * when {@link #fetch} returns.
 * <p>
 * Owner: the tier's thread.
 */
final class L2Fetcher
{
    private static final int NONE = 0;
    private static final int RESERVED = 1;
    private static final int PRESENT = 2;

    private final L2Link link;
    private final StoreCounters counters;
    private final ErrorHandler errorHandler;
    private final ArrayDeque<L2ValueSink> sinkPool = new ArrayDeque<>();
    private final int capacity = L2Tier.FETCH_AHEAD_CHUNKS;
    private final byte[][] keys = new byte[capacity][];
    private final RedisFuture<?>[] exists = new RedisFuture<?>[capacity];
    private final RedisFuture<?>[] gets = new RedisFuture<?>[capacity];
    private final L2ValueSink[] sinks = new L2ValueSink[capacity];
    private final ClientResponse[] prepared = new ClientResponse[capacity];
    private final long[] correlations = new long[capacity];
    private final long[] transfers = new long[capacity];
    private final int[] kinds = new int[capacity];
    private final long[] oneHi = new long[1];
    private final long[] oneLo = new long[1];
    private KvStashClient preparedFor;
    private long lastFetchHi;
    private long lastFetchLo;
    private long lastFetchNs;

    L2Fetcher(final L2Link link, final StoreCounters counters, final ErrorHandler errorHandler)
    {
        this.link = link;
        this.counters = counters;
        this.errorHandler = errorHandler;
    }

    /**
     * Fetches the leading run of a missed range's chunks the cluster holds into the pool.
     *
     * @param client the tier's client of its own server.
     * @param job    the keys after the LOOKUP's hit prefix.
     */
    void fetch(final KvStashClient client, final L2Job job)
    {
        final L2Layout layout = job.layout;
        final long nowNs = System.nanoTime();
        if (job.hi[0] == lastFetchHi && job.lo[0] == lastFetchLo && nowNs - lastFetchNs < link.timeoutNs())
        {
            return; // the same miss again (a worker polling its LOOKUP): one fetch is under way or just done
        }
        lastFetchHi = job.hi[0];
        lastFetchLo = job.lo[0];
        lastFetchNs = nowNs;
        if (!layout.ensureRegistered(client, errorHandler))
        {
            return;
        }
        final int chunkBytes = layout.chunkBytes();
        final int limit = (int)Math.min(Math.min(job.count, capacity),
            Math.max(1, L2Tier.FETCH_BYTES_MAX / Math.max(1, chunkBytes)));
        final int found = checkExists(layout, job, limit);
        if (0 == found || !link.isUp())
        {
            return;
        }
        if (preparedFor != client)
        {
            for (int i = 0; i < capacity; i++)
            {
                prepared[i] = client.newResponse();
            }
            preparedFor = client;
        }
        int run = 0;
        try
        {
            run = reserve(client, layout, job, found);
            final int valid = receive(client, layout, job, run);
            finish(client, layout, found, valid, chunkBytes);
        }
        finally
        {
            for (int i = 0; i < found; i++)
            {
                release(i);
            }
        }
    }

    private int checkExists(final L2Layout layout, final L2Job job, final int limit)
    {
        for (int i = 0; i < limit; i++)
        {
            keys[i] = layout.key(job.salt, job.hi[i], job.lo[i]);
            exists[i] = link.commands().exists(keys[i]);
        }
        final long deadlineNs = System.nanoTime() + link.timeoutNs();
        int found = 0;
        for (int i = 0; i < limit; i++)
        {
            @SuppressWarnings("unchecked")
            final Long e = link.await((RedisFuture<Long>)exists[i], deadlineNs);
            exists[i] = null;
            if (null == e || 0 == e)
            {
                if (null != e)
                {
                    counters.add(CountersDescriptor.L2_FETCH_MISSES, 1);
                }
                for (int j = i + 1; j < limit; j++)
                {
                    exists[j] = null;
                }
                break;
            }
            found++;
        }
        return found;
    }

    /**
     * Reserves a slot per chunk of the run; the run ends at the first chunk the pool refuses.
     */
    private int reserve(final KvStashClient client, final L2Layout layout, final L2Job job, final int found)
    {
        for (int i = 0; i < found; i++)
        {
            kinds[i] = NONE;
            transfers[i] = 0;
        }
        int sent = 0;
        for (; sent < found; sent++)
        {
            oneHi[0] = job.hi[sent];
            oneLo[0] = job.lo[sent];
            correlations[sent] = client.requests().sendKeyed(RequestType.PREPARE_STORE, layout.tierInstance,
                ChunkKeys.ofHashes(oneHi, oneLo).withSalt(job.salt), 0);
            if (correlations[sent] < 0)
            {
                break;
            }
        }
        int run = sent;
        for (int i = 0; i < sent; i++)
        {
            final ClientResponse r = client.await(correlations[i], prepared[i]);
            if (Status.OK == r.status() && 0 != r.transferId() && 1 == r.slotCount())
            {
                kinds[i] = RESERVED;
                transfers[i] = r.transferId();
            }
            else if (Status.OK == r.status() && 0 == r.transferId())
            {
                kinds[i] = PRESENT; // a worker stored or is storing it meanwhile
            }
            else
            {
                run = Math.min(run, i);
            }
        }
        for (int i = 0; i < run; i++)
        {
            if (RESERVED == kinds[i])
            {
                final ClientResponse r = prepared[i];
                final L2ValueSink sink = acquireSink();
                client.chunks().slotView(r.slotOffset(0), layout.chunkBytes(), sink.slot());
                sink.arm(layout.layoutHash, job.salt, job.hi[i], job.lo[i], layout.chunkBytes());
                sinks[i] = sink;
                gets[i] = link.commands().dispatch(CommandType.GET, sink,
                    new CommandArgs<>(L2Codec.INSTANCE).addKey(keys[i]));
            }
        }
        return run;
    }

    /**
     * Waits for the values of the run until one deadline; returns the length of the leading run now in the pool.
     */
    private int receive(final KvStashClient client, final L2Layout layout, final L2Job job, final int run)
    {
        final long deadlineNs = System.nanoTime() + link.timeoutNs();
        for (int i = 0; i < run; i++)
        {
            if (PRESENT == kinds[i])
            {
                continue;
            }
            final RedisFuture<?> get = gets[i];
            final boolean done = L2Link.awaitDone(get, deadlineNs);
            final L2ValueSink sink = sinks[i];
            final int state = sink.settle();
            if (L2ValueSink.STORED == state)
            {
                if (done)
                {
                    link.settle(get);
                }
                continue;
            }
            if (!done)
            {
                get.cancel(true);
                link.timedOut();
            }
            else if (link.settle(get))
            {
                if (L2ValueSink.ABSENT == state)
                {
                    counters.add(CountersDescriptor.L2_FETCH_MISSES, 1); // removed since EXISTS
                }
                else if (L2ValueSink.REJECTED == state)
                {
                    counters.add(CountersDescriptor.L2_CORRUPT_VALUES, 1);
                }
            }
            return i;
        }
        return run;
    }

    /**
     * Commits the good leading run in order and aborts every other reservation, pipelined.
     */
    private void finish(
        final KvStashClient client, final L2Layout layout, final int found, final int valid, final int chunkBytes)
    {
        for (int i = 0; i < found; i++)
        {
            if (RESERVED == kinds[i])
            {
                // Every sink settles before its slot is given back: no late value writes into a slot not ours.
                release(i);
                correlations[i] = client.requests().sendSimple(i < valid ? RequestType.COMMIT_STORE : RequestType.ABORT_STORE,
                    layout.tierInstance, transfers[i], 0);
            }
        }
        int hits = 0;
        for (int i = 0; i < found; i++)
        {
            if (RESERVED == kinds[i] && correlations[i] >= 0)
            {
                final ClientResponse r = client.await(correlations[i], prepared[i]);
                if (i < valid && Status.OK == r.status())
                {
                    hits++;
                }
            }
        }
        counters.add(CountersDescriptor.L2_FETCH_HITS, hits);
        counters.add(CountersDescriptor.L2_BYTES_FETCHED, (long)hits * chunkBytes);
    }

    private L2ValueSink acquireSink()
    {
        final L2ValueSink sink = sinkPool.poll();
        return null == sink ? new L2ValueSink() : sink;
    }

    /**
     * Settles the sink of chunk {@code i}, if any, and pools it when its command is over; an abandoned sink is
     * dropped (its command may still be decoded).
     */
    private void release(final int i)
    {
        final L2ValueSink sink = sinks[i];
        if (null != sink)
        {
            final int state = sink.settle();
            final RedisFuture<?> get = gets[i];
            if (L2ValueSink.ABANDONED != state && null != get && get.isDone())
            {
                sinkPool.add(sink);
            }
            sinks[i] = null;
            gets[i] = null;
        }
        keys[i] = null;
    }

    /**
     * Sinks kept for reuse (tests).
     *
     * @return count.
     */
    int pooledSinks()
    {
        return sinkPool.size();
    }
}
