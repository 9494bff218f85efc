package io.kvstash.tools;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerConfiguration;
import io.kvstash.server.ServerContext;
import io.kvstash.server.StartupContext;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Supplier;

/**
 * Warms a replay worker's code before it is timed: replays the first requests of the trace through a
 * {@link TraceWorker} against a private, short-lived server of the worker's own, so the worker's client, chunk
 * copies and checks are compiled before the replay starts, without one request reaching the replay's server
 * (whose pool, LRU order, counters and hit counts stay exactly what the timed replay makes them).
 * <p>
 * A real inference worker is a long-lived process whose client code runs compiled; a replay worker is a fresh JVM
 * that would otherwise run its share of the trace partly interpreted, and with many workers each one's share is
 * small enough for that to dominate its time.
 */
public final class WorkerWarmup
{
    /** Default requests of the trace a worker replays against its private server before it says it is ready. */
    public static final int REQUESTS_DEFAULT = 1000;
    /** Slots of the private server's pool when they fit in {@link #MAX_POOL_BYTES}. */
    private static final int SLOTS = 1024;
    /** The private pool's bytes at most, unless the largest request needs more: every worker has one. */
    private static final long MAX_POOL_BYTES = 256L << 20;

    private WorkerWarmup()
    {
    }

    /**
     * Runs the warm-up; the private server and its directory are gone when it returns.
     *
     * @param requests     the trace's requests; the first {@code count} are replayed.
     * @param count        how many, 0 for none.
     * @param payloadBytes bytes of one chunk, as in the replay.
     * @param client       the replay's client settings (transport, wait) as a fresh context each call.
     * @throws IOException when the private server cannot start.
     */
    public static void run(
        final List<MooncakeTrace.Request> requests,
        final int count,
        final int payloadBytes,
        final Supplier<ClientContext> client) throws IOException
    {
        final int n = Math.min(count, requests.size());
        if (n <= 0)
        {
            return;
        }
        int largest = 0;
        for (int i = 0; i < n; i++)
        {
            largest = Math.max(largest, requests.get(i).blockCount());
        }
        final long slotBytes = ((long)payloadBytes + TraceReplay.ALIGNMENT - 1) & -(long)TraceReplay.ALIGNMENT;
        final int slots = (int)Math.max(2L * largest, Math.min(SLOTS, MAX_POOL_BYTES / slotBytes));
        final StoreContext store = new StoreContext()
            .alignment(TraceReplay.ALIGNMENT)
            .maxChunksPerRequest(Math.max(StoreContext.MAX_CHUNKS_PER_REQUEST_DEFAULT, largest))
            .slotBytes(slotBytes)
            .poolSizeBytes(TraceReplay.poolBytesFor(slots, slotBytes));
        final Path dir = ShmDirectories.newPath("kvstash-warmup-" + ProcessHandle.current().pid() + "-");
        final int responseRing = Math.max(ServerConfiguration.RESPONSE_RING_CAPACITY_DEFAULT, Integer.highestOneBit(
            2 * (64 + 16 * store.maxChunksPerRequest() + store.maxInlineBytes() + 512) - 1));
        try (KvStashServer server = KvStashServer.launch(new ServerContext()
                .directory(dir)
                .storeContext(store)
                .responseRingCapacity(responseRing)
                .startupContext(new StartupContext().pretouch(false))
                .latencyEnabled(false));
            KvStashClient warmClient = KvStashClient.connect(
                client.get().directory(server.directory()).pretouchPool(false)))
        {
            final TraceWorker worker = new TraceWorker(warmClient, 1, payloadBytes);
            worker.register();
            for (int i = 0; i < n; i++)
            {
                worker.replayOne(requests.get(i));
            }
            warmClient.unregister(1);
        }
        finally
        {
            ShmDirectories.delete(dir);
        }
    }
}
