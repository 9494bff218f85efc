package io.kvstash.chaos;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.server.ServerConfiguration;
import io.kvstash.server.ServerContext;
import io.kvstash.testkit.LoadWorker;
import io.kvstash.testkit.RawRingClient;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.WireDescriptor;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Writes random and mutated request records into a client ring of a live server and checks that every
 * record with a readable correlation id is answered with that id, that the server keeps answering a
 * well-behaved client, and how long an answer takes. Records come from a seeded generator: half are valid
 * requests of every type with a few bytes flipped, the payload cut or extended, or the type changed; half
 * are random bytes. A failure is shrunk by replaying ever smaller subsets of the records on a fresh server
 * until no record can be dropped, and the minimal records are reported.
 */
final class WireFuzzer
{
    /** A response slower than this counts as a stall. */
    static final long STALL_NS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final long RESPONSE_TIMEOUT_MS = 2_000;

    static final class Result
    {
        long records;
        long answered;
        long unanswerable;
        long unanswered;
        long errorStatuses;
        long stalls;
        long stallsDuringFuzzerGc;
        long maxResponseNs;
        long maxResponseWithoutFuzzerGcNs;
        boolean serverAlive = true;
        String shrunk;
        String slowest;
    }

    private static final class Record
    {
        final int type;
        final byte[] payload;

        Record(final int type, final byte[] payload)
        {
            this.type = type;
            this.payload = payload;
        }
    }

    private static final java.util.List<java.lang.management.GarbageCollectorMXBean> FUZZER_GC =
        java.lang.management.ManagementFactory.getGarbageCollectorMXBeans();

    private final java.nio.file.Path directory;
    private final long incarnation;
    private final long poolBytes;
    private final long seed;
    private final PrintStream progress;

    WireFuzzer(
        final java.nio.file.Path directory,
        final long incarnation,
        final long poolBytes,
        final long seed,
        final PrintStream progress)
    {
        this.directory = directory;
        this.incarnation = incarnation;
        this.poolBytes = poolBytes;
        this.seed = seed;
        this.progress = progress;
    }

    Result run(final long records) throws Exception
    {
        final Result result = new Result();
        final SplittableRandom random = new SplittableRandom(seed);
        final List<Record> sent = new ArrayList<>();
        try (KvStashClient good = KvStashClient.connect(new ClientContext().directory(directory));
            RawRingClient raw = new RawRingClient(directory, incarnation,
                ServerConfiguration.REQUEST_RING_CAPACITY_DEFAULT, ServerConfiguration.RESPONSE_RING_CAPACITY_DEFAULT))
        {
            if (!raw.awaitAttached(10_000))
            {
                throw new IllegalStateException("fuzz client not attached");
            }
            good.register(1, LoadWorker.layout(ChaosRunner.CHUNK_BYTES));
            for (long i = 0; i < records; i++)
            {
                final Record record = askingForAnswer(next(random, i));
                sent.add(record);
                if (sent.size() > 4096)
                {
                    sent.subList(0, 2048).clear();
                }
                final String failure = exchange(raw, record, result);
                if (null != failure)
                {
                    result.shrunk = failure + "; minimal records: " + shrink(new ArrayList<>(sent));
                    return result;
                }
                if (i % 1000 == 999 && !good.ping().isOk())
                {
                    result.serverAlive = false;
                    result.shrunk = "a well-behaved client got no OK to PING after record " + i;
                    return result;
                }
                if (null != progress && i % 200_000 == 199_999)
                {
                    progress.println("[chaos] fuzz: " + (i + 1) + " records, max response " +
                        result.maxResponseNs / 1_000_000.0 + " ms");
                }
            }
            result.serverAlive = good.ping().isOk();
        }
        return result;
    }

    /**
     * Sends one record and checks its answer.
     *
     * @return null, or why the server failed on this record.
     */
    private static String exchange(final RawRingClient raw, final Record record, final Result result)
        throws InterruptedException
    {
        result.records++;
        final long gcBefore = fuzzerCollections();
        final long start = System.nanoTime();
        if (!raw.send(record.type, record.payload, RESPONSE_TIMEOUT_MS))
        {
            return "the request ring stayed full";
        }
        if (record.payload.length < 8)
        {
            result.unanswerable++;
            return null;
        }
        final UnsafeBuffer response = raw.receive(RESPONSE_TIMEOUT_MS);
        final long elapsed = System.nanoTime() - start;
        if (null == response)
        {
            result.unanswered++;
            return "no answer to a record of type " + record.type + " and " + record.payload.length + " bytes";
        }
        final boolean fuzzerCollected = fuzzerCollections() != gcBefore;
        if (elapsed > result.maxResponseNs)
        {
            result.maxResponseNs = elapsed;
            final StringBuilder hex = new StringBuilder();
            for (int i = 0; i < Math.min(64, record.payload.length); i++)
            {
                hex.append(String.format("%02x", record.payload[i]));
            }
            result.slowest = "record " + (result.records - 1) + " type " + record.type + " length " +
                record.payload.length + " payload " + hex;
        }
        if (!fuzzerCollected)
        {
            result.maxResponseWithoutFuzzerGcNs = Math.max(result.maxResponseWithoutFuzzerGcNs, elapsed);
        }
        if (elapsed > STALL_NS)
        {
            // A collection of this JVM during the exchange stalls the fuzzer, not the server: counted apart.
            if (fuzzerCollected)
            {
                result.stallsDuringFuzzerGc++;
            }
            else
            {
                result.stalls++;
            }
        }
        final long expected = ByteBuffer.wrap(record.payload).order(LE).getLong(0);
        if (response.getLong(WireDescriptor.RESPONSE_CORRELATION_ID_OFFSET, LE) != expected)
        {
            result.unanswered++;
            return "an answer with another correlation id";
        }
        result.answered++;
        if (Status.OK != response.getInt(WireDescriptor.RESPONSE_STATUS_OFFSET, LE))
        {
            result.errorStatuses++;
        }
        return null;
    }

    /**
     * Clears NO_REPLY on a COMMIT_RETRIEVE or RELEASE whose flags word is present: such a request is answered to no
     * one whatever its outcome (a documented exception), and every record here waits for its answer.
     */
    private static Record askingForAnswer(final Record record)
    {
        if ((RequestType.COMMIT_RETRIEVE == record.type || RequestType.RELEASE == record.type) &&
            record.payload.length >= WireDescriptor.FLAGS_OFFSET + Integer.BYTES)
        {
            final ByteBuffer b = ByteBuffer.wrap(record.payload).order(LE);
            b.putInt(WireDescriptor.FLAGS_OFFSET, b.getInt(WireDescriptor.FLAGS_OFFSET) & ~RequestFlags.NO_REPLY);
        }
        return record;
    }

    private static long fuzzerCollections()
    {
        long count = 0;
        for (int i = 0; i < FUZZER_GC.size(); i++)
        {
            count += FUZZER_GC.get(i).getCollectionCount();
        }
        return count;
    }

    private Record next(final SplittableRandom random, final long index)
    {
        if (random.nextBoolean())
        {
            final byte[] bytes = new byte[random.nextInt(300)];
            random.nextBytes(bytes);
            if (bytes.length >= 8)
            {
                ByteBuffer.wrap(bytes).order(LE).putLong(0, index);
            }
            return new Record(randomType(random), bytes);
        }
        final int type = random.nextInt(RequestType.COUNT);
        byte[] bytes = valid(random, type, index);
        switch (random.nextInt(5))
        {
            case 0:
                for (int flips = 1 + random.nextInt(4); flips > 0 && bytes.length > 8; flips--)
                {
                    bytes[8 + random.nextInt(bytes.length - 8)] = (byte)random.nextInt(256);
                }
                break;
            case 1:
                bytes = java.util.Arrays.copyOf(bytes, random.nextInt(bytes.length + 1));
                break;
            case 2:
            {
                final byte[] longer = java.util.Arrays.copyOf(bytes, bytes.length + random.nextInt(64));
                final byte[] tail = new byte[longer.length - bytes.length];
                random.nextBytes(tail);
                System.arraycopy(tail, 0, longer, bytes.length, tail.length);
                bytes = longer;
                break;
            }
            case 3:
                return new Record(randomType(random), bytes);
            default:
                break;
        }
        return new Record(type, bytes);
    }

    private static int randomType(final SplittableRandom random)
    {
        final int type = random.nextInt(8) == 0 ? random.nextInt() : random.nextInt(RequestType.COUNT + 4);
        return -1 == type ? 0 : type;
    }

    /**
     * Flags of a valid request: mostly none, PIN or FORCE; sometimes FROM_LOOKUP or PREFIX (each refused on most
     * types), rarely both (refused on every type).
     */
    private static int validFlags(final SplittableRandom random)
    {
        final int pick = random.nextInt(16);
        if (pick < 2)
        {
            return RequestFlags.FROM_LOOKUP;
        }
        if (pick < 4)
        {
            return RequestFlags.PREFIX;
        }
        if (4 == pick)
        {
            return RequestFlags.PREFIX | RequestFlags.FROM_LOOKUP;
        }
        return random.nextInt(3);
    }

    /**
     * A valid request of a type, with plausible values.
     */
    private static byte[] valid(final SplittableRandom random, final int type, final long correlationId)
    {
        final int chunks = random.nextInt(6);
        final ByteBuffer b = ByteBuffer.allocate(WireDescriptor.REQUEST_HEADER_LENGTH + 64 + chunks * 16 + 64)
            .order(LE);
        b.putLong(correlationId).putLong(1 + random.nextInt(2)).putLong(random.nextInt(4) == 0 ? random.nextLong() :
            ((long)(1 + random.nextInt(3)) << 32) | random.nextInt(8));
        b.putLong(random.nextInt(4) == 0 ? random.nextLong() : 0);
        b.putInt(validFlags(random));
        switch (type)
        {
            case RequestType.REGISTER:
            {
                final byte[] model = "chaos-model".getBytes(java.nio.charset.StandardCharsets.UTF_8);
                b.putInt(WireDescriptor.KEY_MODE_NONE).putInt(1).putInt(0).putInt(1).putInt(16 + random.nextInt(2))
                    .putInt(1 + random.nextInt(8)).putInt(random.nextInt(2)).putInt(model.length).putInt(0).put(model);
                break;
            }
            case RequestType.LOOKUP:
            case RequestType.PREPARE_STORE:
            case RequestType.PREPARE_RETRIEVE:
            case RequestType.LOOKUP_ALL_RANKS:
            {
                b.putInt(WireDescriptor.KEY_MODE_HASHES);
                if (RequestType.LOOKUP_ALL_RANKS == type)
                {
                    b.putInt(1 + random.nextInt(4)).putInt(8).put("chaos-mo".getBytes(java.nio.charset.StandardCharsets.UTF_8));
                }
                b.putInt(chunks).putInt(0);
                for (int i = 0; i < chunks; i++)
                {
                    b.putLong(0).putLong(random.nextInt(64));
                }
                break;
            }
            case RequestType.WRITE_DATA:
            case RequestType.READ_DATA:
                b.putInt(WireDescriptor.KEY_MODE_NONE).putInt(random.nextInt(3)).putInt(random.nextInt(48))
                    .putLong(random.nextInt(4096));
                if (RequestType.WRITE_DATA == type)
                {
                    b.put(new byte[Math.min(32, b.remaining())]);
                }
                break;
            default:
                b.putInt(WireDescriptor.KEY_MODE_NONE);
                break;
        }
        return java.util.Arrays.copyOf(b.array(), b.position());
    }

    /**
     * Replays subsets of the records on fresh servers to find a minimal failing list.
     */
    private String shrink(final List<Record> records)
    {
        List<Record> failing = records;
        int chunk = Math.max(1, failing.size() / 2);
        while (chunk >= 1)
        {
            boolean reduced = false;
            for (int from = 0; from < failing.size(); from += chunk)
            {
                final List<Record> candidate = new ArrayList<>(failing.subList(0, from));
                candidate.addAll(failing.subList(Math.min(failing.size(), from + chunk), failing.size()));
                if (!candidate.isEmpty() && fails(candidate))
                {
                    failing = candidate;
                    reduced = true;
                    break;
                }
            }
            if (!reduced)
            {
                chunk /= 2;
            }
        }
        final StringBuilder text = new StringBuilder();
        for (final Record record : failing)
        {
            text.append("[type ").append(record.type).append(' ');
            for (final byte b : record.payload)
            {
                text.append(String.format("%02x", b));
            }
            text.append("] ");
        }
        return text.toString().trim();
    }

    private boolean fails(final List<Record> records)
    {
        final java.nio.file.Path dir = directory.resolveSibling(directory.getFileName() + "-shrink-" +
            Long.toHexString(System.nanoTime()));
        final ServerContext fresh = new ServerContext().directory(dir).sweepIntervalMs(20)
            .storeContext(new io.kvstash.core.StoreContext().poolSizeBytes(poolBytes));
        try (io.kvstash.server.KvStashServer server = io.kvstash.server.KvStashServer.launch(fresh);
            KvStashClient good = KvStashClient.connect(new ClientContext().directory(dir));
            RawRingClient raw = new RawRingClient(dir, fresh.incarnation(), fresh.requestRingCapacity(),
                fresh.responseRingCapacity()))
        {
            raw.awaitAttached(10_000);
            good.register(1, LoadWorker.layout(ChaosRunner.CHUNK_BYTES));
            final Result result = new Result();
            for (final Record record : records)
            {
                if (null != exchange(raw, record, result))
                {
                    return true;
                }
            }
            return !good.ping().isOk() || server.counters().get(io.kvstash.wire.file.CountersDescriptor.ERRORS) > 0;
        }
        catch (final Exception ex)
        {
            return true;
        }
        finally
        {
            try (java.util.stream.Stream<java.nio.file.Path> files = java.nio.file.Files.walk(dir))
            {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
            catch (final java.io.IOException ignore)
            {
                // best effort
            }
        }
    }
}
