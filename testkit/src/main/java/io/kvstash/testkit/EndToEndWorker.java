package io.kvstash.testkit;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.client.KvStashException;
import io.kvstash.tools.ChunkPattern;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * The end-to-end tests' worker modes of {@link TestWorker}; every chunk carries the {@link ChunkPattern} of its
 * chunk id. Modes:
 * <ul>
 *   <li>{@code store-retrieve DIR INSTANCE ROUNDS KEYSPACE SEED [copy]}: stores and retrieves random
 *   ranges, verifying every chunk read; prints {@code RESULT ...};</li>
 *   <li>{@code prepare-hang DIR INSTANCE FIRST COUNT}: prepares a store, writes half of the first chunk,
 *   prints {@code PREPARED ...} and waits to be killed;</li>
 *   <li>{@code reconnect DIR}: pings until the server goes, prints {@code ERROR <reason>}, reconnects to the
 *   next server, stores and retrieves one chunk, prints {@code WORKS <incarnation>}.</li>
 * </ul>
 */
public final class EndToEndWorker
{
    /** The layout every end-to-end worker registers. */
    public static final Layout LAYOUT = Layout.of("e2e-model", 1, 0, 1, 16, Dtype.FLOAT16, false);
    /** Bytes of a chunk of {@link #LAYOUT}. */
    public static final int CHUNK_BYTES = 2 * 1 * 256 * 16 * 2;

    private EndToEndWorker()
    {
    }

    /**
     * Runs a mode (see the class comment).
     *
     * @param args mode and its arguments.
     * @throws Exception on a failure (the test sees the exit code).
     */
    static void run(final String[] args) throws Exception
    {
        switch (args[0])
        {
            case "store-retrieve":
                storeRetrieve(Path.of(args[1]), Long.parseLong(args[2]), Integer.parseInt(args[3]),
                    Integer.parseInt(args[4]), Long.parseLong(args[5]), args.length > 6 && "copy".equals(args[6]));
                break;
            case "prepare-hang":
                prepareHang(Path.of(args[1]), Long.parseLong(args[2]), Integer.parseInt(args[3]),
                    Integer.parseInt(args[4]));
                break;
            case "reconnect":
                reconnect(Path.of(args[1]));
                break;
            default:
                throw new IllegalArgumentException(args[0]);
        }
    }

    /**
     * Keys of consecutive chunk ids.
     *
     * @param first first id.
     * @param count ids.
     * @return the keys.
     */
    public static ChunkKeys range(final long first, final int count)
    {
        final long[] ids = new long[count];
        for (int i = 0; i < count; i++)
        {
            ids[i] = first + i;
        }
        return ChunkKeys.ofIds(ids);
    }

    private static void storeRetrieve(
        final Path dir, final long instance, final int rounds, final int keyspace, final long seed, final boolean copy)
    {
        final SplittableRandom random = new SplittableRandom(seed);
        final Counts counts = new Counts();
        try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir).copyTransport(copy)))
        {
            check(client.register(instance, LAYOUT));
            for (int round = 0; round < rounds; round++)
            {
                final int count = 1 + random.nextInt(4);
                final long first = random.nextInt(keyspace);
                final ChunkKeys keys = range(first, count);
                store(client, instance, keys, first, counts);
                retrieve(client, instance, keys, first, counts);
            }
            check(client.unregister(instance));
        }
        System.out.println("RESULT stored=" + counts.stored + " verified=" + counts.verified + " mismatches=" +
            counts.mismatches + " misses=" + counts.misses + " nospace=" + counts.noSpace);
    }

    /** Stores the keys' chunks, each filled with its id's pattern; NO_SPACE is counted, any other failure thrown. */
    private static void store(
        final KvStashClient client, final long instance, final ChunkKeys keys, final long first, final Counts counts)
    {
        final ClientResponse r = client.prepareStore(instance, keys);
        if (Status.NO_SPACE == r.status())
        {
            counts.noSpace++;
        }
        else
        {
            check(r);
        }
        if (0 == r.transferId())
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
        for (int i = 0; i < slots; i++)
        {
            counts.pattern.fill(counts.chunk, CHUNK_BYTES, first + rangeIndex[i], 0);
            check(client.chunks().writeChunk(instance, r, i, counts.chunk, 0));
        }
        check(client.commitStore(instance, transfer));
        counts.stored += slots;
    }

    /** Looks the keys up and retrieves the hits, each verified against its id's pattern. */
    private static void retrieve(
        final KvStashClient client, final long instance, final ChunkKeys keys, final long first, final Counts counts)
    {
        ClientResponse r = client.lookup(instance, keys, true);
        check(r);
        if (0 == r.hitChunks())
        {
            counts.misses++;
            return;
        }
        r = client.prepareRetrieveFromLookup(instance, r.transferId());
        check(r);
        final long transfer = r.transferId();
        final int slots = r.slotCount();
        final int[] rangeIndex = new int[slots];
        for (int i = 0; i < slots; i++)
        {
            rangeIndex[i] = r.slotRangeIndex(i);
        }
        for (int i = 0; i < slots; i++)
        {
            check(client.chunks().readChunk(instance, r, i, counts.read, 0));
            if (counts.pattern.verify(counts.read, CHUNK_BYTES, first + rangeIndex[i], 0))
            {
                counts.verified++;
            }
            else
            {
                counts.mismatches++;
            }
        }
        check(client.commitRetrieve(instance, transfer));
    }

    /** The store/retrieve mode's counts, and the buffers its chunks are filled and read into. */
    private static final class Counts
    {
        final ChunkPattern pattern = new ChunkPattern();
        final UnsafeBuffer chunk = new UnsafeBuffer(new byte[CHUNK_BYTES]);
        final UnsafeBuffer read = new UnsafeBuffer(new byte[CHUNK_BYTES]);
        long stored;
        long verified;
        long mismatches;
        long misses;
        long noSpace;
    }

    private static void prepareHang(final Path dir, final long instance, final int first, final int count)
        throws InterruptedException
    {
        final KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir));
        check(client.register(instance, LAYOUT));
        final ClientResponse r = client.prepareStore(instance, range(first, count));
        check(r);
        final UnsafeBuffer view = client.chunks().slotView(r, 0, new UnsafeBuffer(0, 0));
        for (int i = 0; i < CHUNK_BYTES / 2; i += 8)
        {
            view.putLong(i, 0xDEADBEEFL);
        }
        System.out.println("PREPARED transfer=" + r.transferId() + " slots=" + r.slotCount());
        System.out.flush();
        Thread.sleep(TimeUnit.MINUTES.toMillis(10));
    }

    private static void reconnect(final Path dir) throws InterruptedException
    {
        KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)
            .timeoutNs(TimeUnit.SECONDS.toNanos(5)).livenessCheckNs(TimeUnit.MILLISECONDS.toNanos(50)));
        System.out.println("CONNECTED " + Long.toHexString(client.incarnation()));
        System.out.flush();
        final long first = client.incarnation();
        try
        {
            while (true)
            {
                check(client.ping());
                Thread.sleep(20);
            }
        }
        catch (final KvStashException ex)
        {
            System.out.println("ERROR " + ex.reason() + " " + ex.getMessage());
            System.out.flush();
        }
        client.close();
        final long deadline = System.currentTimeMillis() + 30_000;
        while (true)
        {
            try
            {
                client = KvStashClient.connect(new ClientContext().directory(dir));
                if (client.incarnation() != first)
                {
                    break;
                }
                client.close();
            }
            catch (final KvStashException ex)
            {
                if (System.currentTimeMillis() > deadline)
                {
                    throw ex;
                }
            }
            Thread.sleep(100);
        }
        check(client.register(77, LAYOUT));
        final ChunkPattern pattern = new ChunkPattern();
        final ClientResponse r = client.prepareStore(77, range(5, 1));
        check(r);
        final UnsafeBuffer chunk = new UnsafeBuffer(new byte[CHUNK_BYTES]);
        pattern.fill(chunk, CHUNK_BYTES, 5, 0);
        check(client.chunks().writeChunk(77, r, 0, chunk, 0));
        check(client.commitStore(77, r.transferId()));
        final ClientResponse retrieve = client.prepareRetrieve(77, range(5, 1));
        check(retrieve);
        final UnsafeBuffer read = new UnsafeBuffer(new byte[CHUNK_BYTES]);
        check(client.chunks().readChunk(77, retrieve, 0, read, 0));
        if (!pattern.verify(read, CHUNK_BYTES, 5, 0))
        {
            throw new IllegalStateException("chunk bytes differ after reconnect");
        }
        check(client.commitRetrieve(77, retrieve.transferId()));
        System.out.println("WORKS " + Long.toHexString(client.incarnation()));
        client.close();
    }

    static void check(final ClientResponse r)
    {
        if (!r.isOk())
        {
            throw new IllegalStateException(r.toString());
        }
    }

    static void check(final int status)
    {
        if (Status.OK != status)
        {
            throw new IllegalStateException(Status.name(status));
        }
    }
}
