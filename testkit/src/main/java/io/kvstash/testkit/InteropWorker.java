package io.kvstash.testkit;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.PrintStream;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.Locale;
import java.util.Random;

/**
 * The Java side of the Python client's cross-language tests (clients/python/tests): the worker modes of
 * {@link TestWorker} that store and retrieve chunks through {@link KvStashClient} and print a SHA-256 per chunk so
 * that the other language can verify the bytes (the server side is {@link TestServer}). Output is line-oriented:
 * {@code CHUNK <range index> <sha256 hex>}, {@code DONE ...}, {@code BENCH ...}.
 *
 * <pre>
 * store    DIR INSTANCE MODEL LAYERS HIDDEN DTYPE TOKEN_BASE CHUNKS SEED [copy]
 * retrieve DIR INSTANCE MODEL LAYERS HIDDEN DTYPE TOKEN_BASE CHUNKS [copy]
 * bench    DIR CHUNK_BYTES ITERATIONS                                    store/retrieve GB/s, ping p50/p99
 * </pre>
 *
 * The keys of {@code store} and {@code retrieve} are the chunk hashes of the tokens
 * {@code TOKEN_BASE, TOKEN_BASE + 1, ...} ({@code CHUNKS} full chunks); {@code store} fills every chunk
 * with {@code new Random(SEED + range index)} bytes.
 */
final class InteropWorker
{
    private static final PrintStream OUT = System.out;

    private InteropWorker()
    {
    }

    /**
     * Runs one mode (see the class comment).
     *
     * @param args mode and its arguments.
     * @return 0 on success, 1 on a failed check, 2 on a usage error.
     * @throws Exception on an unexpected failure.
     */
    static int run(final String[] args) throws Exception
    {
        final int code;
        switch (args[0])
        {
            case "store" -> code = store(args);
            case "retrieve" -> code = retrieve(args);
            case "bench" -> code = bench(args);
            default ->
            {
                usage();
                code = 2;
            }
        }
        OUT.flush();
        return code;
    }

    private static void usage()
    {
        System.err.println("usage: TestWorker store|retrieve|bench ... (see InteropWorker)");
        System.exit(2);
    }

    private static KvStashClient connect(final String directory, final boolean copy)
    {
        return KvStashClient.connect(new ClientContext().directory(Path.of(directory)).copyTransport(copy));
    }

    private static Layout layout(final String[] args)
    {
        return Layout.of(
            args[3], 1, 0, Integer.parseInt(args[4]), Integer.parseInt(args[5]), Dtype.fromName(args[6]), false);
    }

    private static ChunkKeys keys(final int tokenBase, final int chunks, final int chunkTokens)
    {
        final int[] tokens = new int[chunks * chunkTokens];
        for (int k = 0; k < tokens.length; k++)
        {
            tokens[k] = tokenBase + k;
        }
        return ChunkKeys.ofTokens(tokens, chunkTokens);
    }

    private static int store(final String[] args) throws NoSuchAlgorithmException
    {
        if (args.length < 10)
        {
            usage();
        }
        final long instance = Long.parseLong(args[2]);
        final boolean copy = args.length > 10 && "copy".equals(args[10]);
        final long seed = Long.parseLong(args[9]);
        try (KvStashClient client = connect(args[1], copy))
        {
            final ClientResponse registered = client.register(instance, layout(args));
            if (!registered.isOk())
            {
                OUT.println("DONE register=" + Status.name(registered.status()) + " " + registered.message());
                return 1;
            }
            final ChunkKeys keys = keys(Integer.parseInt(args[7]), Integer.parseInt(args[8]), client.chunkTokens());
            final ClientResponse prepared = client.prepareStore(instance, keys);
            if (!prepared.isOk())
            {
                OUT.println("DONE prepare=" + Status.name(prepared.status()) + " " + prepared.message());
                return 1;
            }
            // The response is reused by the next one the client reads (copy transport): copy what we need.
            final long transfer = prepared.transferId();
            final int slots = prepared.slotCount();
            final int chunkBytes = (int)prepared.chunkBytes();
            final int[] rangeIndex = new int[slots];
            final boolean[] reserved = new boolean[slots];
            for (int i = 0; i < slots; i++)
            {
                rangeIndex[i] = prepared.slotRangeIndex(i);
                reserved[i] = copy || client.chunks().isStillReserved(prepared, i);
            }
            final byte[] chunk = new byte[chunkBytes];
            final UnsafeBuffer source = new UnsafeBuffer(chunk);
            for (int i = 0; i < slots; i++)
            {
                new Random(seed + rangeIndex[i]).nextBytes(chunk);
                if (!reserved[i])
                {
                    OUT.println("DONE fenced slot=" + i);
                    return 1;
                }
                final int status = client.chunks().writeChunk(instance, prepared, i, source, 0);
                if (Status.OK != status)
                {
                    OUT.println("DONE write=" + Status.name(status));
                    return 1;
                }
                OUT.println("CHUNK " + rangeIndex[i] + " " + sha256(chunk));
            }
            if (0 != transfer)
            {
                final ClientResponse committed = client.commitStore(instance, transfer);
                if (!committed.isOk())
                {
                    OUT.println("DONE commit=" + Status.name(committed.status()) + " " + committed.message());
                    return 1;
                }
            }
            OUT.println("DONE stored=" + slots + " chunk_bytes=" + chunkBytes);
            return 0;
        }
    }

    private static int retrieve(final String[] args) throws NoSuchAlgorithmException
    {
        if (args.length < 9)
        {
            usage();
        }
        final long instance = Long.parseLong(args[2]);
        final boolean copy = args.length > 9 && "copy".equals(args[9]);
        try (KvStashClient client = connect(args[1], copy))
        {
            final ClientResponse registered = client.register(instance, layout(args));
            if (!registered.isOk())
            {
                OUT.println("DONE register=" + Status.name(registered.status()) + " " + registered.message());
                return 1;
            }
            final ChunkKeys keys = keys(Integer.parseInt(args[7]), Integer.parseInt(args[8]), client.chunkTokens());
            final ClientResponse prepared = client.prepareRetrieve(instance, keys);
            if (!prepared.isOk())
            {
                OUT.println("DONE prepare=" + Status.name(prepared.status()) + " " + prepared.message());
                return 1;
            }
            final long transfer = prepared.transferId();
            final int slots = prepared.slotCount();
            final int chunkBytes = (int)prepared.chunkBytes();
            final int[] rangeIndex = new int[slots];
            for (int i = 0; i < slots; i++)
            {
                rangeIndex[i] = prepared.slotRangeIndex(i);
            }
            final byte[] chunk = new byte[chunkBytes];
            final UnsafeBuffer destination = new UnsafeBuffer(chunk);
            final String[] digests = new String[slots];
            for (int i = 0; i < slots; i++)
            {
                final int status = client.chunks().readChunk(instance, prepared, i, destination, 0);
                if (Status.OK != status || (!copy && !client.chunks().isStillReadable(prepared, i)))
                {
                    OUT.println("DONE read=" + Status.name(status) + " slot=" + i);
                    return 1;
                }
                digests[i] = sha256(chunk);
            }
            for (int i = 0; i < slots; i++)
            {
                OUT.println("CHUNK " + rangeIndex[i] + " " + digests[i]);
            }
            final ClientResponse committed = client.commitRetrieve(instance, transfer);
            OUT.println("DONE retrieved=" + slots + " commit=" + Status.name(committed.status()));
            return committed.isOk() ? 0 : 1;
        }
    }

    private static int bench(final String[] args)
    {
        if (args.length < 4)
        {
            usage();
        }
        final int chunkBytes = Integer.parseInt(args[2]);
        final int iterations = Integer.parseInt(args[3]);
        try (KvStashClient client = connect(args[1], false))
        {
            // float16, world 1, L x H such that 2 x L x C x H x 2 = chunkBytes (H below 1024 for small chunks).
            final int hidden = Math.max(1, Math.min(1024, chunkBytes / (4 * client.chunkTokens())));
            final int layers = chunkBytes / (4 * client.chunkTokens() * hidden);
            final long instance = 7_000 + ProcessHandle.current().pid();
            final ClientResponse registered = client.register(
                instance, Layout.of("interop-bench-" + chunkBytes, 1, 0, layers, hidden, Dtype.FLOAT16, false));
            if (!registered.isOk() || registered.chunkBytes() != chunkBytes)
            {
                OUT.println("DONE register=" + Status.name(registered.status()) + " " + registered.message());
                return 1;
            }
            final double[] storeGbps = new double[3];
            final double[] retrieveGbps = new double[3];
            benchRounds(client, instance, chunkBytes, iterations, storeGbps, retrieveGbps);
            final long[] rtt = pingRoundTripsNs(client);
            client.unregister(instance);
            OUT.printf(Locale.ROOT, "BENCH java chunk_bytes=%d store_gbps=%.2f retrieve_gbps=%.2f " +
                "ping_p50_us=%.1f ping_p99_us=%.1f%n",
                chunkBytes, storeGbps[1], retrieveGbps[1],
                rtt[rtt.length / 2] / 1e3, rtt[(int)(rtt.length * 0.99)] / 1e3);
            return 0;
        }
    }

    /**
     * Like the Python bench: each round stores {@code iterations} distinct chunks (distinct slots), then retrieves
     * each, timing only the bytes' copies; one warm-up round, then three measured rounds, their GB/s sorted.
     */
    private static void benchRounds(
        final KvStashClient client,
        final long instance,
        final int chunkBytes,
        final int iterations,
        final double[] storeGbps,
        final double[] retrieveGbps)
    {
        final byte[] chunk = new byte[chunkBytes];
        new Random(1).nextBytes(chunk);
        final UnsafeBuffer buffer = new UnsafeBuffer(chunk);
        for (int round = -1; round < storeGbps.length; round++)
        {
            long storeNs = 0;
            long retrieveNs = 0;
            for (int it = 0; it < iterations; it++)
            {
                final ClientResponse r = client.prepareStore(instance, benchKeys(round, it));
                final long transfer = r.transferId();
                final long t0 = System.nanoTime();
                client.chunks().writeChunk(instance, r, 0, buffer, 0);
                storeNs += System.nanoTime() - t0;
                client.commitStore(instance, transfer);
            }
            for (int it = 0; it < iterations; it++)
            {
                final ClientResponse r = client.prepareRetrieve(instance, benchKeys(round, it));
                final long transfer = r.transferId();
                final long t0 = System.nanoTime();
                client.chunks().readChunk(instance, r, 0, buffer, 0);
                retrieveNs += System.nanoTime() - t0;
                client.commitRetrieve(instance, transfer);
            }
            client.clear(false);
            if (round >= 0)
            {
                storeGbps[round] = (double)chunkBytes * iterations / storeNs;
                retrieveGbps[round] = (double)chunkBytes * iterations / retrieveNs;
            }
        }
        Arrays.sort(storeGbps);
        Arrays.sort(retrieveGbps);
    }

    /** 20,000 ping round trips after 2,000 to warm up, sorted, in nanoseconds. */
    private static long[] pingRoundTripsNs(final KvStashClient client)
    {
        final long[] rtt = new long[20_000];
        for (int i = 0; i < 2_000; i++)
        {
            client.ping();
        }
        for (int i = 0; i < rtt.length; i++)
        {
            final long t0 = System.nanoTime();
            client.ping();
            rtt[i] = System.nanoTime() - t0;
        }
        Arrays.sort(rtt);
        return rtt;
    }

    private static ChunkKeys benchKeys(final int round, final int iteration)
    {
        return ChunkKeys.ofHashes(new long[]{0x6a617661L + round}, new long[]{iteration});
    }

    private static String sha256(final byte[] bytes) throws NoSuchAlgorithmException
    {
        final byte[] digest = MessageDigest.getInstance("SHA-256").digest(bytes);
        final StringBuilder hex = new StringBuilder(64);
        for (final byte b : digest)
        {
            hex.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
        }
        return hex.toString();
    }
}
