package io.kvstash.perf.bench;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.tools.WorkerResult;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.WireDescriptor;
import io.kvstash.wire.ring.RingConsumer;
import io.kvstash.wire.ring.RingProducer;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.MappedByteBuffer;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Consumer;

import static io.kvstash.perf.bench.BenchWorker.longOf;
import static io.kvstash.perf.bench.BenchWorker.stringOf;

/**
 * The control contender and its IPC floor, measured the same three ways.
 * <p>
 * A <b>control pair</b> is a real PREPARE_STORE of one new 4 KiB chunk and, once it is answered, the
 * COMMIT_STORE of its transfer; no chunk byte is written. Keys never repeat within a pool's worth, so under exact
 * LRU every prepare reserves a slot (evicting the least recently used chunk once the pool is full); another
 * eviction policy may still hold a key when it comes round again, and that prepare, with nothing to reserve, is
 * not a pair (the next key is sent instead). An <b>echo pair</b>
 * is two round trips over the bare rings with the same record sizes: a 64-byte request answered with 80
 * bytes (the prepare and its one-slot response), then a 40-byte request answered with 64 bytes (the commit).
 * Both sides write and read every byte of them, as kvstash's client and server do, unless the command asks
 * for the header-only form ({@code whole_records} false; see {@link EchoRings}).
 * <ul>
 * <li>latency: one pair in flight, back to back; the time of each pair (both round trips);</li>
 * <li>throughput: a window of pairs in flight (non-blocking sends and poll), pairs completed per second;</li>
 * <li>paced: one pair every {@code 1/rate} seconds, each timed from when it was due, so a stall delays
 * the pairs behind it and they are counted late (coordinated omission corrected).</li>
 * </ul>
 * A command with {@code latency_only} set measures the first way alone (the bench's alternating rounds); one
 * with {@code paced_ms} 0 leaves out the third (the eviction rounds).
 */
final class ControlRun
{
    /** Request payload of the prepare: header, hashes header, one 16-byte hash. */
    static final int PREPARE_REQUEST_LENGTH =
        WireDescriptor.REQUEST_HEADER_LENGTH + WireDescriptor.HASHES_HEADER_LENGTH + 16;
    /** Response payload of the prepare: header and one slot entry. */
    static final int PREPARE_RESPONSE_LENGTH = WireDescriptor.RESPONSE_HEADER_LENGTH + WireDescriptor.SLOT_ENTRY_LENGTH;
    /** Request payload of the commit: the header alone. */
    static final int COMMIT_REQUEST_LENGTH = WireDescriptor.REQUEST_HEADER_LENGTH;
    /** Response payload of the commit: the header alone. */
    static final int COMMIT_RESPONSE_LENGTH = WireDescriptor.RESPONSE_HEADER_LENGTH;
    /** Chunk size of the control pairs. */
    static final int CHUNK_BYTES = 4096;

    private ControlRun()
    {
    }

    /**
     * One side of a pair protocol: synchronous pairs and the non-blocking form.
     */
    abstract static class PairClient
    {
        long completed;
        int inFlight;

        /** One pair, waiting for both answers. */
        abstract void pair();

        /**
         * Sends the first request of a new pair if the ring has room.
         *
         * @return true when sent.
         */
        abstract boolean sendFirst();

        /**
         * Handles the answers available now: a first answer sends the second request, a second answer
         * completes the pair ({@link #completed}, {@link #inFlight}).
         *
         * @return answers handled.
         */
        abstract int poll();

        abstract IdleStrategy idle();
    }

    static Map<String, Object> kvstash(final Map<String, Object> c, final Consumer<String> progress)
    {
        final String waitMode = stringOf(c, "wait");
        try (KvStashClient client = KvStashClient.connect(new ClientContext()
            .directory(Path.of(stringOf(c, "dir")))
            .idleStrategy(BenchSupport.clientIdle(waitMode))))
        {
            final ClientResponse registered = client.register(1, BenchSupport.layout(CHUNK_BYTES));
            if (!registered.isOk())
            {
                throw new IllegalStateException("register failed: " + registered);
            }
            final Object wideKeys = c.get("keys");
            final int keyCount = wideKeys instanceof Number ?
                Math.max(((Number)wideKeys).intValue(), registered.slotCapacity() + 4096) :
                registered.slotCapacity() + 4096;
            final KvStashPairs pairs = new KvStashPairs(client, keyCount, waitMode);
            final Map<String, Object> result = measure("control " + waitMode, pairs, c, progress);
            result.put("orphans", client.orphanResponses());
            result.put("keys", keyCount);
            result.put("held_key_prepares", pairs.heldKeyPrepares);
            return result;
        }
    }

    static Map<String, Object> echo(final Map<String, Object> c, final Consumer<String> progress) throws Exception
    {
        final Path file = Path.of(stringOf(c, "file"));
        final MappedByteBuffer mapped = BenchSupport.mapExisting(file);
        try
        {
            final boolean wholeRecords = !Boolean.FALSE.equals(c.get("whole_records"));
            return measure((wholeRecords ? "echo " : "echo, header only, ") + stringOf(c, "wait"),
                new EchoPairs(mapped, stringOf(c, "wait"), wholeRecords), c, progress);
        }
        finally
        {
            BenchSupport.unmap(mapped);
        }
    }

    private static Map<String, Object> measure(
        final String label, final PairClient pairs, final Map<String, Object> c, final Consumer<String> progress)
    {
        final long warmupNs = longOf(c, "warmup_ms") * 1_000_000L;
        final long latencyNs = longOf(c, "latency_ms") * 1_000_000L;
        final boolean latencyOnly = Boolean.TRUE.equals(c.get("latency_only"));
        final long throughputNs = latencyOnly ? 0 : longOf(c, "throughput_ms") * 1_000_000L;
        final int window = latencyOnly ? 1 : (int)longOf(c, "window");
        final long pacedRate = latencyOnly ? 0 : longOf(c, "paced_rate");
        final long pacedNs = latencyOnly ? 0 : longOf(c, "paced_ms") * 1_000_000L;

        latency(pairs, warmupNs, null);
        if (!latencyOnly)
        {
            throughput(pairs, warmupNs, window);
        }
        final Histogram latency = BenchSupport.newHistogram();
        final long pairsTimed = latency(pairs, latencyNs, latency);
        progress.accept(BenchSupport.fmt("%s: one in flight, %d pairs, p50 %.2f us, p99.9 %.2f us", label, pairsTimed,
            latency.getValueAtPercentile(50) / 1e3, latency.getValueAtPercentile(99.9) / 1e3));
        final Map<String, Object> result = new LinkedHashMap<>();
        result.put("latency", WorkerResult.encode(latency));
        if (latencyOnly)
        {
            return result;
        }
        final double pairsPerSecond = throughput(pairs, throughputNs, window);
        progress.accept(BenchSupport.fmt("%s: %d in flight, %.0f pairs/s", label, window, pairsPerSecond));
        result.put("pairs_per_s", pairsPerSecond);
        result.put("window", window);
        if (pacedNs > 0)
        {
            final Histogram paced = BenchSupport.newHistogram();
            paced(pairs, pacedNs, pacedRate, paced);
            progress.accept(BenchSupport.fmt("%s: paced at %d pairs/s, p50 %.2f us, p99.9 %.2f us", label,
                pacedRate, paced.getValueAtPercentile(50) / 1e3, paced.getValueAtPercentile(99.9) / 1e3));
            result.put("paced", WorkerResult.encode(paced));
            result.put("paced_rate", pacedRate);
        }
        return result;
    }

    private static long latency(final PairClient pairs, final long durationNs, final Histogram h)
    {
        final long deadline = System.nanoTime() + durationNs;
        long n = 0;
        long t0 = System.nanoTime();
        while (t0 < deadline)
        {
            pairs.pair();
            final long t1 = System.nanoTime();
            if (null != h)
            {
                BenchSupport.record(h, t1 - t0);
            }
            t0 = t1;
            n++;
        }
        return n;
    }

    private static double throughput(final PairClient pairs, final long durationNs, final int window)
    {
        final IdleStrategy idle = pairs.idle();
        final long start = System.nanoTime();
        final long deadline = start + durationNs;
        final long completedBefore = pairs.completed;
        long now = start;
        while (now < deadline)
        {
            int work = 0;
            while (pairs.inFlight < window && pairs.sendFirst())
            {
                pairs.inFlight++;
                work++;
            }
            work += pairs.poll();
            idle.idle(work);
            now = System.nanoTime();
        }
        final double rate = (pairs.completed - completedBefore) * 1e9 / (now - start);
        final long drainDeadline = System.nanoTime() + 5_000_000_000L;
        while (pairs.inFlight > 0)
        {
            idle.idle(pairs.poll());
            if (System.nanoTime() - drainDeadline > 0)
            {
                throw new IllegalStateException(pairs.inFlight + " pairs never completed");
            }
        }
        return rate;
    }

    private static void paced(final PairClient pairs, final long durationNs, final long rate, final Histogram h)
    {
        final long interval = 1_000_000_000L / rate;
        final long start = System.nanoTime();
        final long deadline = start + durationNs;
        // A run that falls behind (every pair late) stops at twice its duration rather than catching up for
        // minutes; the pairs it ran are still timed from when they were due.
        final long hardStop = deadline + durationNs;
        long due = start;
        while (due < deadline && System.nanoTime() < hardStop)
        {
            while (System.nanoTime() < due)
            {
                Thread.onSpinWait();
            }
            pairs.pair();
            BenchSupport.record(h, System.nanoTime() - due);
            due += interval;
        }
    }

    /**
     * Control pairs through a kvstash client.
     */
    static final class KvStashPairs extends PairClient implements KvStashClient.ResponseHandler
    {
        private final KvStashClient client;
        private final ChunkKeys[] keys;
        private final IdleStrategy idle;
        private final long[] pendingCommits = new long[1 << 16];
        private int pendingHead;
        private int pendingTail;
        private int cursor;
        long heldKeyPrepares;

        KvStashPairs(final KvStashClient client, final int keyCount, final String waitMode)
        {
            this.client = client;
            this.idle = BenchSupport.clientIdle(waitMode);
            keys = new ChunkKeys[keyCount];
            final SplittableRandom random = new SplittableRandom(77);
            for (int i = 0; i < keyCount; i++)
            {
                keys[i] = ChunkKeys.ofHashes(new long[]{ random.nextLong() }, new long[]{ random.nextLong() });
            }
        }

        private ChunkKeys nextKey()
        {
            final int k = cursor;
            cursor = k + 1 == keys.length ? 0 : k + 1;
            return keys[k];
        }

        @Override
        void pair()
        {
            ClientResponse prepared = client.prepareStore(1, nextKey());
            while (prepared.isOk() && 0 == prepared.transferId())
            {
                // A policy other than exact LRU may still hold a key of the cycle: nothing to reserve, next key.
                heldKeyPrepares++;
                prepared = client.prepareStore(1, nextKey());
            }
            if (!prepared.isOk() || 1 != prepared.slotCount())
            {
                throw new IllegalStateException("prepare failed: " + prepared);
            }
            final ClientResponse committed = client.commitStore(1, prepared.transferId());
            if (!committed.isOk())
            {
                throw new IllegalStateException("commit failed: " + committed);
            }
            completed++;
        }

        @Override
        boolean sendFirst()
        {
            final int k = cursor;
            if (client.requests().sendKeyed(RequestType.PREPARE_STORE, 1, keys[k], 0) < 0)
            {
                return false;
            }
            cursor = k + 1 == keys.length ? 0 : k + 1;
            return true;
        }

        @Override
        int poll()
        {
            int work = 0;
            while (pendingHead != pendingTail)
            {
                final long transferId = pendingCommits[pendingHead & (pendingCommits.length - 1)];
                if (client.requests().sendSimple(RequestType.COMMIT_STORE, 1, transferId, 0) < 0)
                {
                    break;
                }
                pendingHead++;
                work++;
            }
            return work + client.poll(this, 256);
        }

        @Override
        public void onResponse(final ClientResponse response)
        {
            if (Status.OK != response.status())
            {
                throw new IllegalStateException("control request failed: " + response);
            }
            if (RequestType.PREPARE_STORE == response.requestType() && 0 == response.transferId())
            {
                // The key is still held (a policy other than exact LRU): no pair; the window sends another.
                heldKeyPrepares++;
                inFlight--;
            }
            else if (RequestType.PREPARE_STORE == response.requestType())
            {
                final long transferId = response.transferId();
                if (pendingHead != pendingTail ||
                    client.requests().sendSimple(RequestType.COMMIT_STORE, 1, transferId, 0) < 0)
                {
                    pendingCommits[pendingTail++ & (pendingCommits.length - 1)] = transferId;
                }
            }
            else
            {
                completed++;
                inFlight--;
            }
        }

        @Override
        IdleStrategy idle()
        {
            return idle;
        }
    }

    /**
     * Echo pairs over the bare rings.
     */
    static final class EchoPairs extends PairClient
    {
        private final RingProducer requests;
        private final RingConsumer responses;
        private final IdleStrategy idle;
        private final UnsafeBuffer reply = new UnsafeBuffer(new byte[PREPARE_RESPONSE_LENGTH]);
        private final boolean wholeRecords;
        private long nextId = 2;
        private final long[] pendingIds = new long[1 << 16];
        private int pendingHead;
        private int pendingTail;

        EchoPairs(final MappedByteBuffer mapped, final String waitMode, final boolean wholeRecords)
        {
            this.wholeRecords = wholeRecords;
            requests = new RingProducer(EchoRings.requestRing(mapped));
            responses = new RingConsumer(EchoRings.responseRing(mapped));
            idle = BenchSupport.clientIdle(waitMode);
        }

        private boolean send(final long correlationId, final int requestLength, final int replyLength)
        {
            final int at = requests.tryClaim(EchoRings.ECHO_TYPE, requestLength);
            if (at < 0)
            {
                return false;
            }
            final AtomicBuffer b = requests.buffer();
            b.putInt(at + EchoRings.REPLY_LENGTH_OFFSET, replyLength);
            b.putInt(at + EchoRings.REPLY_LENGTH_OFFSET + 4, 0);
            b.putLong(at + EchoRings.CORRELATION_OFFSET, correlationId);
            // The rest of the request is written too, as the kvstash client writes every field of its own.
            for (int i = EchoRings.CORRELATION_OFFSET + 8; wholeRecords && i < requestLength; i += 8)
            {
                b.putLong(at + i, correlationId + i);
            }
            requests.commit(requestLength);
            return true;
        }

        /**
         * Copies the current reply out, as the kvstash client copies a response into its flyweight (only its
         * correlation id in the header-only form), releases it and returns the correlation id.
         */
        private long takeReply()
        {
            final int at = responses.payloadOffset();
            if (!wholeRecords)
            {
                final long id = responses.buffer().getLong(at + EchoRings.REPLY_CORRELATION_OFFSET);
                responses.consume();
                return id;
            }
            reply.putBytes(0, responses.buffer(), at, responses.payloadLength());
            responses.consume();
            return reply.getLong(EchoRings.REPLY_CORRELATION_OFFSET);
        }

        private void await(final long correlationId)
        {
            idle.reset();
            while (true)
            {
                if (responses.next())
                {
                    final long id = takeReply();
                    if (id != correlationId)
                    {
                        throw new IllegalStateException("echo answered " + id + ", not " + correlationId);
                    }
                    return;
                }
                if (responses.isCorrupt())
                {
                    throw new IllegalStateException("corrupt echo ring");
                }
                idle.idle();
            }
        }

        private void sendOrWait(final long correlationId, final int requestLength, final int replyLength)
        {
            while (!send(correlationId, requestLength, replyLength))
            {
                Thread.onSpinWait();
            }
        }

        @Override
        void pair()
        {
            final long id = nextId;
            nextId += 2;
            sendOrWait(id, PREPARE_REQUEST_LENGTH, PREPARE_RESPONSE_LENGTH);
            await(id);
            sendOrWait(id + 1, COMMIT_REQUEST_LENGTH, COMMIT_RESPONSE_LENGTH);
            await(id + 1);
            completed++;
        }

        @Override
        boolean sendFirst()
        {
            if (!send(nextId, PREPARE_REQUEST_LENGTH, PREPARE_RESPONSE_LENGTH))
            {
                return false;
            }
            nextId += 2;
            return true;
        }

        @Override
        int poll()
        {
            int work = 0;
            while (pendingHead != pendingTail)
            {
                if (!send(pendingIds[pendingHead & (pendingIds.length - 1)], COMMIT_REQUEST_LENGTH,
                    COMMIT_RESPONSE_LENGTH))
                {
                    break;
                }
                pendingHead++;
                work++;
            }
            while (work < 256 && responses.next())
            {
                final long id = takeReply();
                work++;
                if (0 == (id & 1))
                {
                    if (pendingHead != pendingTail || !send(id + 1, COMMIT_REQUEST_LENGTH, COMMIT_RESPONSE_LENGTH))
                    {
                        pendingIds[pendingTail++ & (pendingIds.length - 1)] = id + 1;
                    }
                }
                else
                {
                    completed++;
                    inFlight--;
                }
            }
            if (responses.isCorrupt())
            {
                throw new IllegalStateException("corrupt echo ring");
            }
            return work;
        }

        @Override
        IdleStrategy idle()
        {
            return idle;
        }
    }
}
