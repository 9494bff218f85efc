package io.kvstash.perf.bench;

import io.kvstash.core.ChunkKeys;
import io.kvstash.core.RequestType;
import io.kvstash.core.Status;
import io.kvstash.core.StoreContext;
import io.kvstash.ipc.client.ClientContext;
import io.kvstash.ipc.client.ClientResponse;
import io.kvstash.ipc.client.KvStashClient;
import io.kvstash.ipc.ring.RingConsumer;
import io.kvstash.ipc.ring.RingProducer;
import io.kvstash.ipc.server.KvStashServer;
import io.kvstash.ipc.server.ServerContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import org.agrona.IoUtil;
import org.agrona.concurrent.AgentInvoker;

import java.nio.MappedByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The bench's control pair and echo pair with client and server on <b>one thread</b>: the client sends, the
 * thread runs one duty cycle of the server ({@link ServerContext#useAgentInvoker(boolean)}), then the client
 * reads the answer. No cache line crosses between cores and no thread waits, so the difference between the
 * two is the CPU work of the server and the client library on a pair, which the cross-process bench cannot
 * separate from the hand-offs between the vCPUs.
 * <pre>
 * java --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -cp perf/target/kvstash-perf-benchmarks.jar \
 *     io.kvstash.perf.bench.ServerLoopback [rounds] [pairs per round] [ring size, 0 for the default] \
 *     [pool MiB] [control-only]
 * </pre>
 * Each round times the control pairs, then the echo pairs, then 100 idle duty cycles per pair, and prints
 * nanoseconds per pair (and per idle cycle); the summary is the median over the rounds after the first
 * (warm-up). As in the bench, every prepare is of a new key on a full pool (64 MiB unless given) of 4 KiB
 * chunks, so it evicts the least recently used chunk. {@code control-only} leaves out the echo and idle
 * loops, for a profiler ({@code perf record} with {@code -XX:+DumpPerfMapAtExit}).
 */
public final class ServerLoopback implements KvStashClient.ResponseHandler
{
    private final KvStashClient client;
    private final AgentInvoker invoker;
    private final ChunkKeys[] keys;
    private int cursor;
    private long transferId;
    private int answered;

    private ServerLoopback(final KvStashClient client, final AgentInvoker invoker, final int keyCount)
    {
        this.client = client;
        this.invoker = invoker;
        keys = new ChunkKeys[keyCount];
        final SplittableRandom random = new SplittableRandom(77);
        for (int i = 0; i < keyCount; i++)
        {
            keys[i] = ChunkKeys.ofHashes(new long[]{ random.nextLong() }, new long[]{ random.nextLong() });
        }
    }

    @Override
    public void onResponse(final ClientResponse response)
    {
        if (Status.OK != response.status())
        {
            throw new IllegalStateException("control request failed: " + response);
        }
        if (RequestType.PREPARE_STORE == response.requestType())
        {
            transferId = response.transferId();
        }
        answered++;
    }

    private void exchange()
    {
        invoker.invoke();
        if (1 != client.poll(this, 1))
        {
            throw new IllegalStateException("no answer after a duty cycle");
        }
    }

    private long controlPairs(final int pairs)
    {
        final long start = System.nanoTime();
        for (int i = 0; i < pairs; i++)
        {
            final ChunkKeys key = keys[cursor];
            cursor = cursor + 1 == keys.length ? 0 : cursor + 1;
            if (client.sendKeyed(RequestType.PREPARE_STORE, 1, key, 0) < 0)
            {
                throw new IllegalStateException("request ring full");
            }
            exchange();
            if (client.sendSimple(RequestType.COMMIT_STORE, 1, transferId, 0) < 0)
            {
                throw new IllegalStateException("request ring full");
            }
            exchange();
        }
        return System.nanoTime() - start;
    }

    private long idleCycles(final int cycles)
    {
        final long start = System.nanoTime();
        for (int i = 0; i < cycles; i++)
        {
            invoker.invoke();
        }
        return System.nanoTime() - start;
    }

    private static long echoPairs(
        final RingProducer requests, final EchoRings.EchoAgent echo, final RingConsumer responses, final int pairs)
    {
        final long start = System.nanoTime();
        long id = 2;
        for (int i = 0; i < pairs; i++)
        {
            echoOnce(requests, echo, responses, id, ControlRun.PREPARE_REQUEST_LENGTH, ControlRun.PREPARE_RESPONSE_LENGTH);
            echoOnce(requests, echo, responses, id + 1, ControlRun.COMMIT_REQUEST_LENGTH,
                ControlRun.COMMIT_RESPONSE_LENGTH);
            id += 2;
        }
        return System.nanoTime() - start;
    }

    private static void echoOnce(
        final RingProducer requests,
        final EchoRings.EchoAgent echo,
        final RingConsumer responses,
        final long correlationId,
        final int requestLength,
        final int replyLength)
    {
        final int at = requests.tryClaim(EchoRings.ECHO_TYPE, requestLength);
        if (at < 0)
        {
            throw new IllegalStateException("echo request ring full");
        }
        requests.buffer().putInt(at + EchoRings.REPLY_LENGTH_OFFSET, replyLength);
        requests.buffer().putLong(at + EchoRings.CORRELATION_OFFSET, correlationId);
        requests.commit(requestLength);
        echo.doWork();
        if (!responses.next() ||
            correlationId != responses.buffer().getLong(responses.payloadOffset() + EchoRings.REPLY_CORRELATION_OFFSET))
        {
            throw new IllegalStateException("echo did not answer " + correlationId);
        }
        responses.consume();
    }

    /**
     * Runs the probe.
     *
     * @param args rounds, pairs per round, Disruptor ring size (0: the server's default), pool MiB, and
     *             {@code control-only} to leave out the echo and idle loops.
     * @throws Exception when the server or the files cannot be set up.
     */
    public static void main(final String[] args) throws Exception
    {
        final int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 11;
        final int pairs = args.length > 1 ? Integer.parseInt(args[1]) : 500_000;
        final int ringSize = args.length > 2 ? Integer.parseInt(args[2]) : 0;
        final long poolMiB = args.length > 3 ? Long.parseLong(args[3]) : 64;
        final boolean controlOnly = args.length > 4 && "control-only".equals(args[4]);
        final Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "kvstash-loopback-");
        final Path echoFile = dir.resolve("echo");
        final MappedByteBuffer echoMapped = BenchSupport.mapNew(echoFile, EchoRings.FILE_LENGTH);
        try (KvStashServer server = KvStashServer.launch(new ServerContext()
            .directory(dir.resolve("server"))
            .threadingMode(ThreadingMode.SHARED)
            .waitMode(WaitMode.BUSY_SPIN)
            .ringSize(ringSize)
            .useAgentInvoker(true)
            .storeContext(new StoreContext().poolSizeBytes(poolMiB << 20))))
        {
            final AgentInvoker invoker = server.invoker();
            final KvStashClient client;
            final int capacity;
            // Connecting and registering wait for the server's duty cycle: a helper thread runs it meanwhile.
            final AtomicBoolean connecting = new AtomicBoolean(true);
            final Thread helper = new Thread(() ->
            {
                while (connecting.get())
                {
                    invoker.invoke();
                    Thread.onSpinWait();
                }
            });
            helper.start();
            try
            {
                client = KvStashClient.connect(new ClientContext().directory(dir.resolve("server")));
                final ClientResponse registered = client.register(1, BenchSupport.layout(ControlRun.CHUNK_BYTES));
                if (!registered.isOk())
                {
                    throw new IllegalStateException("register failed: " + registered);
                }
                capacity = registered.slotCapacity();
            }
            finally
            {
                connecting.set(false);
                helper.join();
            }
            try
            {
                final ServerLoopback loopback = new ServerLoopback(client, invoker, capacity + 4096);
                final RingProducer echoRequests = new RingProducer(EchoRings.requestRing(echoMapped));
                final RingConsumer echoResponses = new RingConsumer(EchoRings.responseRing(echoMapped));
                final EchoRings.EchoAgent echo = new EchoRings.EchoAgent(echoMapped);
                loopback.controlPairs(capacity);
                System.out.printf("ring size %d, pool %d MiB (%d slots), %d pairs a round%n",
                    server.context().ringSize(), poolMiB, capacity, pairs);
                final double[] control = new double[rounds];
                final double[] echoed = new double[rounds];
                final double[] idle = new double[rounds];
                for (int r = 0; r < rounds; r++)
                {
                    control[r] = loopback.controlPairs(pairs) / (double)pairs;
                    if (!controlOnly)
                    {
                        echoed[r] = echoPairs(echoRequests, echo, echoResponses, pairs) / (double)pairs;
                        idle[r] = loopback.idleCycles(100 * pairs) / (100.0 * pairs);
                    }
                    System.out.printf("round %2d: control pair %6.1f ns, echo pair %5.1f ns, idle cycle %5.1f ns%n",
                        r, control[r], echoed[r], idle[r]);
                }
                System.out.printf("median of rounds 1-%d: control pair %.1f ns, echo pair %.1f ns, difference %.1f ns, " +
                    "idle duty cycle %.1f ns; %d answers%n", rounds - 1, median(control), median(echoed),
                    median(control) - median(echoed), median(idle), loopback.answered);
            }
            finally
            {
                client.close();
            }
        }
        finally
        {
            IoUtil.unmap(echoMapped);
            IoUtil.delete(dir.toFile(), true);
        }
    }

    private static double median(final double[] values)
    {
        final double[] sorted = Arrays.copyOfRange(values, 1, values.length);
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
