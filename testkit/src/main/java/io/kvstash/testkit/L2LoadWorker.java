package io.kvstash.testkit;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Layout;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * The second tier chaos suite's worker ({@link TestWorker} mode {@code l2load}): one of several hosts' workers
 * on one shared key space of prefixes, each prefix {@code PREFIX_LEN} chunks with consecutive ids. Prefix
 * {@code p} is <em>home</em> to host {@code p % HOSTS}: only that host's workers store it, so a chunk of a foreign
 * prefix in this host's pool came there through the second tier and nothing else.
 * <pre>
 * l2load DIR INSTANCE SEED HOST HOSTS PREFIXES PREFIX_LEN CHUNK_BYTES TIMEOUT_MS
 * </pre>
 * Each operation is a store of the first 1 to {@code PREFIX_LEN} chunks of a home prefix (chunks already held
 * are not reserved again) or a read of the first chunks of any prefix (three in four foreign): a LOOKUP that
 * pins the hit prefix; when a foreign range is not whole, the worker releases it, waits a little (the tier
 * fetches the next chunks meanwhile) and looks up once more; then it retrieves the hit chunks and verifies each
 * against its seal. A chunk's seal ({@link ChunkSeal}) holds its key and generation 0, so it is the same
 * whichever host's pool it sits in; a reader also checks the slot is still readable after its copy.
 * <p>
 * Every request is timed, client side. Progress lines {@code P key=value ...} (and {@code FINAL ...} after
 * {@code stop} on stdin) carry {@code ops stores verified l2verified mismatches stale requests slow maxus probes
 * served}: {@code l2verified} counts verified reads of foreign chunks, {@code slow} requests slower than
 * {@code TIMEOUT_MS}; each of those is printed too ({@code SLOW ...}, with the time this worker's own JVM was
 * stalled meanwhile, {@link HiccupMeter}). {@code MISMATCH key=<id>} is printed at once for a chunk that fails its
 * seal.
 * <p>
 * {@code probe FIRST COUNT BAD} on stdin adds a range to read (one read in eight): its chunk {@code BAD} is
 * known to be corrupt in the tier. A worker of a host other than 0 (host 0 stored the range) that reads that
 * chunk at all prints {@code CORRUPT_SERVED key=<id>}: the only way it could have come is the corrupt value.
 */
public final class L2LoadWorker
{
    private static final long RETRY_WAIT_MS = 25;
    private static final int SLOW_KEPT = 64;
    private static final long THE_FUTURE_NS = TimeUnit.DAYS.toNanos(1);
    private static final long JUDGE_DELAY_NS = TimeUnit.MILLISECONDS.toNanos(50);

    private final Path dir;
    private final long instance;
    private final int host;
    private final int hosts;
    private final int prefixes;
    private final int prefixLength;
    private final int chunkBytes;
    private final long timeoutNs;
    private final Layout layout;
    private final int writerTag = (int)ProcessHandle.current().pid();
    private final List<long[]> probes = new ArrayList<>();
    private final ChunkSeal seal;
    private KvStashClient client;
    private volatile boolean stop;
    private long requestStartNs;
    private final HiccupMeter hiccups = HiccupMeter.start("hiccups");
    private final long[] slowStartNs = new long[SLOW_KEPT];
    private final long[] slowEndNs = new long[SLOW_KEPT];
    private final String[] slowType = new String[SLOW_KEPT];
    private int slowPending;

    private long ops;
    private long stores;
    private long verified;
    private long l2Verified;
    private long mismatches;
    private long stale;
    private long requests;
    private long slowRequests;
    private long maxNs;
    private long probeReads;
    private long corruptServed;

    private L2LoadWorker(final String[] args)
    {
        dir = Path.of(args[1]);
        instance = Long.parseLong(args[2]);
        host = Integer.parseInt(args[4]);
        hosts = Integer.parseInt(args[5]);
        prefixes = Integer.parseInt(args[6]);
        prefixLength = Integer.parseInt(args[7]);
        chunkBytes = Integer.parseInt(args[8]);
        timeoutNs = TimeUnit.MILLISECONDS.toNanos(Long.parseLong(args[9]));
        layout = LoadWorker.layout(chunkBytes);
        seal = new ChunkSeal(chunkBytes);
    }

    /**
     * The id of a chunk of a prefix.
     *
     * @param prefixLength chunks of each prefix.
     * @param prefix       the prefix.
     * @param chunk        the chunk's place in it.
     * @return the id ({@link ChunkKeys#ofIds} key).
     */
    public static long id(final int prefixLength, final int prefix, final int chunk)
    {
        return (long)prefix * prefixLength + chunk;
    }

    /**
     * Runs the mode (see the class comment).
     *
     * @param args arguments, the mode first.
     */
    static void run(final String[] args)
    {
        if (args.length < 10)
        {
            System.err.println("usage: TestWorker l2load DIR INSTANCE SEED HOST HOSTS PREFIXES PREFIX_LEN " +
                "CHUNK_BYTES TIMEOUT_MS");
            System.exit(2);
        }
        new L2LoadWorker(args).load(Long.parseLong(args[3]));
    }

    private void load(final long seed)
    {
        final Thread stdin = new Thread(this::readCommands, "stdin");
        stdin.setDaemon(true);
        stdin.start();
        client = KvStashClient.connect(new ClientContext().directory(dir)
            .timeoutNs(TimeUnit.SECONDS.toNanos(5)).livenessCheckNs(TimeUnit.MILLISECONDS.toNanos(50)));
        final ClientResponse registered = client.register(instance, layout);
        if (!registered.isOk())
        {
            throw new IllegalStateException("REGISTER answered " + registered);
        }
        System.out.println("ATTACHED");
        System.out.flush();
        final SplittableRandom random = new SplittableRandom(seed);
        long lastProgress = System.currentTimeMillis();
        while (!stop)
        {
            final long[] probe = pickProbe(random);
            if (null != probe)
            {
                read(probe[0], (int)probe[1], probe[2], false);
            }
            else if (random.nextInt(3) == 0)
            {
                store(id(prefixLength, prefixOf(random, host), 0), 1 + random.nextInt(prefixLength));
            }
            else
            {
                // three reads in four of a foreign prefix (one of another host, picked at random)
                final int other = hosts < 2 || random.nextInt(4) == 0 ? host :
                    (host + 1 + random.nextInt(hosts - 1)) % hosts;
                read(id(prefixLength, prefixOf(random, other), 0), 1 + random.nextInt(prefixLength), -1,
                    other != host);
            }
            ops++;
            final long now = System.currentTimeMillis();
            if (now - lastProgress >= 200)
            {
                progress("P");
                lastProgress = now;
            }
        }
        client.unregister(instance);
        client.close();
        sleep(TimeUnit.NANOSECONDS.toMillis(JUDGE_DELAY_NS));
        progress("FINAL");
        hiccups.close();
    }

    private int prefixOf(final SplittableRandom random, final int home)
    {
        return random.nextInt(prefixes / hosts) * hosts + home;
    }

    private long[] pickProbe(final SplittableRandom random)
    {
        synchronized (probes)
        {
            return probes.isEmpty() || random.nextInt(8) != 0 ? null : probes.get(random.nextInt(probes.size()));
        }
    }

    private void store(final long first, final int count)
    {
        final ChunkKeys keys = LoadWorker.ids(first, count);
        begin();
        final ClientResponse r = timed(client.prepareStore(instance, keys), "PREPARE_STORE");
        if (Status.OK != r.status() || 0 == r.transferId())
        {
            return;
        }
        final long transfer = r.transferId();
        final int slots = r.slotCount();
        final int[] rangeIndex = new int[slots];
        for (int i = 0; i < slots; i++)
        {
            rangeIndex[i] = r.slotRangeIndex(i);
        }
        boolean written = true;
        for (int i = 0; i < slots && written; i++)
        {
            written = Status.OK == client.chunks().writeChunk(instance, r, i, 0, chunkBytes,
                seal.seal(0, first + rangeIndex[i], 0, writerTag), 0);
        }
        begin();
        if (!written)
        {
            timed(client.abortStore(instance, transfer), "ABORT_STORE");
        }
        else if (timed(client.commitStore(instance, transfer), "COMMIT_STORE").isOk())
        {
            stores += slots;
        }
    }

    private void read(final long first, final int count, final long bad, final boolean foreign)
    {
        final boolean probe = bad >= 0;
        final ChunkKeys keys = LoadWorker.ids(first, count);
        begin();
        ClientResponse r = timed(client.lookup(instance, keys, true), "LOOKUP");
        if ((foreign || probe) && r.isOk() && r.hitChunks() < count)
        {
            if (0 != r.transferId() && r.hitChunks() > 0)
            {
                begin();
                timed(client.release(instance, r.transferId()), "RELEASE");
            }
            sleep(RETRY_WAIT_MS);
            begin();
            r = timed(client.lookup(instance, keys, true), "LOOKUP");
        }
        if (!r.isOk() || 0 == r.hitChunks())
        {
            return;
        }
        begin();
        r = timed(client.prepareRetrieveFromLookup(instance, r.transferId()), "PREPARE_RETRIEVE");
        if (!r.isOk())
        {
            return;
        }
        probeReads += probe ? 1 : 0;
        final long transfer = r.transferId();
        for (int i = 0; i < r.slotCount(); i++)
        {
            final long id = first + r.slotRangeIndex(i);
            final boolean read =
                Status.OK == client.chunks().readChunk(instance, r, i, 0, chunkBytes, seal.scratch(), 0);
            if (probe && id == bad && 0 != host)
            {
                corruptServed++;
                System.out.println("CORRUPT_SERVED key=" + id);
                System.out.flush();
            }
            if (!read || !client.chunks().isStillReadable(r, i))
            {
                stale++;
            }
            else if (seal.verify(0, id, 0))
            {
                verified++;
                l2Verified += foreign || (probe && 0 != host) ? 1 : 0;
            }
            else
            {
                mismatches++;
                System.out.println("MISMATCH key=" + id);
                System.out.flush();
            }
        }
        begin();
        timed(client.commitRetrieve(instance, transfer), "COMMIT_RETRIEVE");
    }

    private void begin()
    {
        requestStartNs = System.nanoTime();
    }

    /**
     * Counts a request answered since {@link #begin()}: the client waits for each answer, so the time between
     * is the request's latency as the worker sees it. A slow one is judged a little later, once this JVM's own
     * stalls during it are known ({@link #judgeSlow}).
     */
    private ClientResponse timed(final ClientResponse r, final String type)
    {
        final long end = System.nanoTime();
        final long took = end - requestStartNs;
        requests++;
        maxNs = Math.max(maxNs, took);
        if (took > timeoutNs)
        {
            if (slowPending == SLOW_KEPT)
            {
                judgeSlow(end + THE_FUTURE_NS);
            }
            slowStartNs[slowPending] = requestStartNs;
            slowEndNs[slowPending] = end;
            slowType[slowPending] = type;
            slowPending++;
        }
        return r;
    }

    /**
     * Prints the slow requests that ended before a time, once this worker's own stalls during them are known:
     * {@code SLOW type=<request> us=<latency> own_us=<this JVM stalled meanwhile> start=<ns> end=<ns>}
     * ({@link System#nanoTime()}, comparable between the processes of one machine).
     */
    private void judgeSlow(final long endedBeforeNs)
    {
        int kept = 0;
        for (int i = 0; i < slowPending; i++)
        {
            if (slowEndNs[i] - endedBeforeNs >= 0)
            {
                slowStartNs[kept] = slowStartNs[i];
                slowEndNs[kept] = slowEndNs[i];
                slowType[kept] = slowType[i];
                kept++;
                continue;
            }
            final long took = slowEndNs[i] - slowStartNs[i];
            final long own = hiccups.stalledNs(slowStartNs[i], slowEndNs[i]);
            slowRequests++;
            System.out.println("SLOW type=" + slowType[i] + " us=" + TimeUnit.NANOSECONDS.toMicros(took) +
                " own_us=" + TimeUnit.NANOSECONDS.toMicros(own) + " start=" + slowStartNs[i] + " end=" +
                slowEndNs[i]);
        }
        slowPending = kept;
    }

    private void readCommands()
    {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)))
        {
            String line;
            while (null != (line = in.readLine()))
            {
                final String[] parts = line.trim().split(" ");
                if ("stop".equals(parts[0]))
                {
                    break;
                }
                if ("probe".equals(parts[0]) && 4 == parts.length)
                {
                    synchronized (probes)
                    {
                        probes.add(new long[]{ Long.parseLong(parts[1]), Long.parseLong(parts[2]),
                            Long.parseLong(parts[3]) });
                    }
                }
            }
        }
        catch (final java.io.IOException ignore)
        {
            // the coordinator is gone: stop
        }
        stop = true;
    }

    private void progress(final String tag)
    {
        judgeSlow("FINAL".equals(tag) ? System.nanoTime() + THE_FUTURE_NS : System.nanoTime() - JUDGE_DELAY_NS);
        System.out.println(tag + " ops=" + ops + " stores=" + stores + " verified=" + verified + " l2verified=" +
            l2Verified + " mismatches=" + mismatches + " stale=" + stale + " requests=" + requests + " slow=" +
            slowRequests + " maxus=" + TimeUnit.NANOSECONDS.toMicros(maxNs) +
            " probes=" + probeReads + " served=" + corruptServed);
        System.out.flush();
    }

    private static void sleep(final long ms)
    {
        try
        {
            Thread.sleep(ms);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
