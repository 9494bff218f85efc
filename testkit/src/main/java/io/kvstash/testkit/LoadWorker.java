package io.kvstash.testkit;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.client.KvStashException;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * The chaos suites' worker modes of {@link TestWorker}. A worker talks to its coordinator through stdout lines and stdin
 * commands:
 * <ul>
 *   <li>{@code load}: a mixed store/retrieve loop on a shared key space; it prints {@code ATTACHED} once its
 *   client is connected and registered, every chunk written is sealed with
 *   its key and slot generation ({@link ChunkSeal}) and every read is verified. Armed with a failpoint it
 *   prints {@code AT <failpoint>} there and waits to be killed. It reconnects when the server restarts.
 *   Prints {@code P ...} progress lines, {@code MISMATCH ...} at once, {@code FINAL ...} after {@code stop}
 *   on stdin. It writes and reads each chunk in two halves through the client's {@code writeChunk} and
 *   {@code readChunk}; with {@code copy} it does not map the pool, so each half is a WRITE_DATA / READ_DATA
 *   message (the fallback copy transport) and the mid-write and mid-read failpoints fall between two;</li>
 *   <li>{@code zombie}: repeatedly prepares a store, prints {@code PREPARED ...}, waits for {@code go} on stdin
 *   (the coordinator stops it with SIGSTOP past its lease meanwhile), then checks its slot is still its own,
 *   writes only if so, commits, and prints {@code COMMIT <status> wrote=<bool>}.</li>
 * </ul>
 */
public final class LoadWorker
{
    /** Failpoints of the load loop. */
    public enum Failpoint
    {
        /** After PREPARE_STORE answered, before any byte is written. */
        AFTER_PREPARE,
        /** Half of a chunk written. */
        MID_WRITE,
        /** Every byte written, COMMIT_STORE not sent. */
        BEFORE_COMMIT,
        /** Half of a chunk read. */
        MID_READ,
        /** Every byte read, COMMIT_RETRIEVE (the release of the pins) not sent. */
        BEFORE_RELEASE
    }

    private final Path dir;
    private final long instance;
    private final int chunkBytes;
    private final Layout layout;
    private final int writerTag = (int)ProcessHandle.current().pid();
    private boolean copyTransport;
    private KvStashClient client;
    private volatile boolean stop;
    private long ops;
    private long stores;
    private long verified;
    private long mismatches;
    private long stale;
    private long reconnects;

    private LoadWorker(final Path dir, final long instance, final int chunkBytes)
    {
        this.dir = dir;
        this.instance = instance;
        this.chunkBytes = chunkBytes;
        this.layout = layout(chunkBytes);
    }

    /**
     * The layout whose chunk is exactly a number of bytes: MLA, uint8, one layer, 256 tokens.
     *
     * @param chunkBytes bytes, a multiple of 256.
     * @return the layout.
     */
    public static Layout layout(final int chunkBytes)
    {
        return Layout.of("chaos-model", 1, 0, 1, chunkBytes / 256, Dtype.UINT8, true);
    }

    /**
     * Runs a mode: {@code load DIR INSTANCE SEED KEYSPACE CHUNK_BYTES [copy] [FAILPOINT AFTER_OPS]} or
     * {@code zombie DIR INSTANCE CHUNK_BYTES}.
     *
     * @param args arguments.
     * @throws Exception on a failure the coordinator counts as a crash.
     */
    static void run(final String[] args) throws Exception
    {
        final LoadWorker worker = new LoadWorker(Path.of(args[1]), Long.parseLong(args[2]),
            Integer.parseInt("load".equals(args[0]) ? args[5] : args[3]));
        if ("load".equals(args[0]))
        {
            int next = 6;
            if (args.length > next && "copy".equals(args[next]))
            {
                worker.copyTransport = true;
                next++;
            }
            final Failpoint failpoint = args.length > next ? Failpoint.valueOf(args[next]) : null;
            final long failAfter = args.length > next + 1 ? Long.parseLong(args[next + 1]) : -1;
            worker.load(Long.parseLong(args[3]), Integer.parseInt(args[4]), failpoint, failAfter);
        }
        else
        {
            worker.zombie();
        }
    }

    private void connect(final long timeoutMs)
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (true)
        {
            try
            {
                client = KvStashClient.connect(new ClientContext().directory(dir).copyTransport(copyTransport)
                    .timeoutNs(TimeUnit.SECONDS.toNanos(5)).livenessCheckNs(TimeUnit.MILLISECONDS.toNanos(50)));
                check(client.register(instance, layout));
                return;
            }
            catch (final KvStashException ex)
            {
                if (System.currentTimeMillis() > deadline)
                {
                    throw ex;
                }
                sleep(50);
            }
        }
    }

    private void load(final long seed, final int keyspace, final Failpoint failpoint, final long failAfter)
    {
        stopOnStdin();
        connect(30_000);
        System.out.println("ATTACHED");
        System.out.flush();
        final SplittableRandom random = new SplittableRandom(seed);
        final ChunkSeal seal = new ChunkSeal(chunkBytes);
        long lastProgress = System.currentTimeMillis();
        while (!stop)
        {
            final Failpoint armed = null != failpoint && ops >= failAfter ? failpoint : null;
            try
            {
                final int count = 1 + random.nextInt(4);
                final long first = random.nextInt(keyspace);
                final ChunkKeys keys = ids(first, count);
                if (random.nextBoolean())
                {
                    store(keys, first, seal, armed);
                }
                else
                {
                    retrieve(keys, first, seal, armed);
                }
                ops++;
            }
            catch (final KvStashException ex)
            {
                System.out.println("SERVER " + ex.reason());
                System.out.flush();
                client.close();
                connect(60_000);
                reconnects++;
                System.out.println("RECONNECTED " + Long.toHexString(client.incarnation()));
                System.out.flush();
            }
            final long now = System.currentTimeMillis();
            if (now - lastProgress >= 200)
            {
                progress("P");
                lastProgress = now;
            }
        }
        client.unregister(instance);
        client.close();
        progress("FINAL");
    }

    /** Sets {@link #stop} when the coordinator sends {@code stop} on stdin or closes it. */
    private void stopOnStdin()
    {
        final Thread stdin = new Thread(() ->
        {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)))
            {
                String line;
                while (null != (line = in.readLine()))
                {
                    if ("stop".equals(line.trim()))
                    {
                        break;
                    }
                }
            }
            catch (final java.io.IOException ignore)
            {
                // the coordinator is gone: stop
            }
            stop = true;
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();
    }

    /**
     * Stores the keys' chunks, each sealed with its key and slot generation and written in two halves through the
     * client (the pool, or a WRITE_DATA each with copy); a refused write aborts the store.
     *
     * @param armed the failpoint to stop at, or null.
     */
    private void store(final ChunkKeys keys, final long first, final ChunkSeal seal, final Failpoint armed)
    {
        final ClientResponse r = client.prepareStore(instance, keys);
        if (Status.OK != r.status() || 0 == r.transferId())
        {
            return;
        }
        final long transfer = r.transferId();
        final int slots = r.slotCount();
        final int[] rangeIndex = new int[slots];
        final int[] generation = new int[slots];
        for (int i = 0; i < slots; i++)
        {
            rangeIndex[i] = r.slotRangeIndex(i);
            generation[i] = r.slotGeneration(i);
        }
        failpoint(armed, Failpoint.AFTER_PREPARE);
        final int half = chunkBytes / 2;
        boolean written = true;
        for (int i = 0; i < slots && written; i++)
        {
            final UnsafeBuffer sealed = seal.seal(0, first + rangeIndex[i], generation[i], writerTag);
            written = Status.OK == client.chunks().writeChunk(instance, r, i, 0, half, sealed, 0);
            failpoint(armed, Failpoint.MID_WRITE);
            written = written && Status.OK ==
                client.chunks().writeChunk(instance, r, i, half, chunkBytes - half, sealed, half);
        }
        failpoint(armed, Failpoint.BEFORE_COMMIT);
        if (!written)
        {
            client.abortStore(instance, transfer);
        }
        else if (client.commitStore(instance, transfer).isOk())
        {
            stores += slots;
        }
    }

    /**
     * Looks the keys up and retrieves the hits, each read in two halves and verified against its seal; a
     * mismatch is printed at once.
     *
     * @param armed the failpoint to stop at, or null.
     */
    private void retrieve(final ChunkKeys keys, final long first, final ChunkSeal seal, final Failpoint armed)
    {
        ClientResponse r = client.lookup(instance, keys, true);
        if (!r.isOk() || r.hitChunks() <= 0)
        {
            return;
        }
        r = client.prepareRetrieveFromLookup(instance, r.transferId());
        if (!r.isOk())
        {
            return;
        }
        final long transfer = r.transferId();
        final int half = chunkBytes / 2;
        for (int i = 0, slots = r.slotCount(); i < slots; i++)
        {
            final int generation = r.slotGeneration(i);
            final long id = first + r.slotRangeIndex(i);
            boolean read = Status.OK == client.chunks().readChunk(instance, r, i, 0, half, seal.scratch(), 0);
            failpoint(armed, Failpoint.MID_READ);
            read = read && Status.OK == client.chunks().readChunk(
                instance, r, i, half, chunkBytes - half, seal.scratch(), half);
            // A refused READ_DATA (copy transport) or a reclaimed pin: the bytes prove nothing.
            if (!read || !client.chunks().isStillReadable(r, i))
            {
                stale++;
            }
            else if (seal.verify(0, id, generation))
            {
                verified++;
            }
            else
            {
                mismatches++;
                System.out.println("MISMATCH key=" + id + " generation=" + generation);
                System.out.flush();
            }
        }
        failpoint(armed, Failpoint.BEFORE_RELEASE);
        client.commitRetrieve(instance, transfer);
    }

    private void progress(final String tag)
    {
        System.out.println(tag + " ops=" + ops + " stores=" + stores + " verified=" + verified + " mismatches=" +
            mismatches + " stale=" + stale + " reconnects=" + reconnects);
        System.out.flush();
    }

    private void zombie() throws Exception
    {
        connect(30_000);
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        final ChunkSeal seal = new ChunkSeal(chunkBytes);
        final UnsafeBuffer view = new UnsafeBuffer(0, 0);
        long key = 1_000_000;
        System.out.println("READY");
        System.out.flush();
        String line;
        while (null != (line = in.readLine()) && line.startsWith("prepare"))
        {
            key++;
            final ClientResponse r = client.prepareStore(instance, ids(key, 1));
            check(r);
            final long transfer = r.transferId();
            final int generation = r.slotGeneration(0);
            final long offset = r.slotOffset(0);
            System.out.println("PREPARED key=" + key + " offset=" + offset + " generation=" + generation);
            System.out.flush();
            if (!"go".equals(in.readLine()))
            {
                break;
            }
            final boolean mine = client.chunks().isStillReserved(r, 0);
            if (mine)
            {
                client.chunks().slotView(offset, chunkBytes, view).putBytes(0, seal.seal(0, key, generation, 0), 0, chunkBytes);
            }
            final ClientResponse commit = client.commitStore(instance, transfer);
            System.out.println("COMMIT status=" + Status.name(commit.status()) + " wrote=" + mine);
            System.out.flush();
        }
        client.close();
    }

    /** Stops here, printing {@code AT <failpoint>}, when {@code armed} is this failpoint: the coordinator kills. */
    private static void failpoint(final Failpoint armed, final Failpoint here)
    {
        if (armed == here)
        {
            System.out.println("AT " + here);
            System.out.flush();
            sleep(TimeUnit.MINUTES.toMillis(10));
        }
    }

    /**
     * Keys of consecutive chunk ids.
     *
     * @param first first id.
     * @param count ids.
     * @return the keys.
     */
    public static ChunkKeys ids(final long first, final int count)
    {
        final long[] ids = new long[count];
        for (int i = 0; i < count; i++)
        {
            ids[i] = first + i;
        }
        return ChunkKeys.ofIds(ids);
    }

    private static void check(final ClientResponse r)
    {
        if (!r.isOk())
        {
            throw new IllegalStateException(r.toString());
        }
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
