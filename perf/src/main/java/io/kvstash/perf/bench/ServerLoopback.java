package io.kvstash.perf.bench;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import org.agrona.IoUtil;
import org.agrona.concurrent.AgentInvoker;

import java.nio.MappedByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
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
 *     [pool MiB] [control-only|all] [eviction policy, lru unless given]
 * </pre>
 * The pairs are the bench's own ({@link ControlRun.KvStashPairs}, {@link ControlRun.EchoPairs}) driven by
 * their non-blocking calls. Each round times the control pairs, then the echo pairs, then 100 idle duty
 * cycles per pair, and prints nanoseconds per pair (and per idle cycle); the summary is the median over the
 * rounds after the first (warm-up). As in the bench, every prepare is of a new key on a full pool (64 MiB
 * unless given) of 4 KiB chunks, so it evicts the least recently used chunk (under another eviction policy, its
 * choice; the keys then cycle as in the bench's eviction rounds, {@link EvictionRounds#KEYS}).
 * {@code control-only} leaves out the echo and idle loops, for a profiler ({@code perf record} with
 * {@code -XX:+DumpPerfMapAtExit}).
 */
public final class ServerLoopback
{
    private ServerLoopback()
    {
    }

    /**
     * Times pairs of the bench's pair protocol, one at a time: send the first request, run one cycle of the
     * server side, read the answer (which sends the second request), run another cycle, read that answer (a
     * prepare that found its key held sends the next key, and takes two more cycles).
     *
     * @return nanoseconds for {@code count} pairs.
     */
    private static long timePairs(final ControlRun.PairClient pairs, final Runnable serverCycle, final int count)
    {
        final long completedBefore = pairs.completed;
        final long start = System.nanoTime();
        for (int i = 0; i < count; i++)
        {
            if (!pairs.sendFirst())
            {
                throw new IllegalStateException("request ring full");
            }
            pairs.inFlight++;
            // Two cycles for a pair; more where prepares found their keys still held and the next keys went out
            // (under a policy that keeps some chunks for good, a run of held keys once per cycle of the keys).
            final long done = completedBefore + i + 1;
            for (int cycles = 0; pairs.completed < done; cycles++)
            {
                if (cycles > 1 << 24)
                {
                    throw new IllegalStateException("pair " + i + " not completed after " + cycles + " cycles");
                }
                if (0 == pairs.inFlight)
                {
                    if (!pairs.sendFirst())
                    {
                        throw new IllegalStateException("request ring full");
                    }
                    pairs.inFlight++;
                }
                serverCycle.run();
                pairs.poll();
            }
        }
        final long elapsed = System.nanoTime() - start;
        if (pairs.completed - completedBefore != count)
        {
            throw new IllegalStateException((pairs.completed - completedBefore) + " of " + count + " pairs completed");
        }
        return elapsed;
    }

    private static long idleCycles(final AgentInvoker invoker, final int cycles)
    {
        final long start = System.nanoTime();
        for (int i = 0; i < cycles; i++)
        {
            invoker.invoke();
        }
        return System.nanoTime() - start;
    }

    /**
     * Runs the probe.
     *
     * @param args rounds, pairs per round, Disruptor ring size (0: the server's default), pool MiB,
     *             {@code control-only} to leave out the echo and idle loops ({@code all} keeps them), and the
     *             server's eviction policy.
     * @throws Exception when the server or the files cannot be set up.
     */
    public static void main(final String[] args) throws Exception
    {
        final int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 11;
        final int pairs = args.length > 1 ? Integer.parseInt(args[1]) : 500_000;
        final int ringSize = args.length > 2 ? Integer.parseInt(args[2]) : 0;
        final long poolMiB = args.length > 3 ? Long.parseLong(args[3]) : 64;
        final boolean controlOnly = args.length > 4 && "control-only".equals(args[4]);
        final EvictionPolicy eviction = EvictionPolicy.ofName(args.length > 5 ? args[5] : "lru");
        final Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "kvstash-loopback-");
        final MappedByteBuffer echoMapped = BenchSupport.mapNew(dir.resolve("echo"), EchoRings.FILE_LENGTH);
        final ServerContext context = new ServerContext()
            .directory(dir.resolve("server"))
            .threadingMode(ThreadingMode.SHARED)
            .waitMode(WaitMode.BUSY_SPIN)
            .useAgentInvoker(true)
            .storeContext(new StoreContext().poolSizeBytes(poolMiB << 20).eviction(eviction));
        context.pipelineContext().ringSize(ringSize);
        try (KvStashServer server = KvStashServer.launch(context))
        {
            final AgentInvoker invoker = server.invoker();
            final Registered registered = connect(invoker, dir.resolve("server"));
            final KvStashClient client = registered.client();
            final int capacity = registered.slotCapacity();
            try
            {
                // As in the bench: more keys than slots, so once the pool is full every prepare evicts.
                final ControlRun.PairClient control = new ControlRun.KvStashPairs(client,
                    EvictionPolicy.LRU == eviction ? capacity + 4096 : Math.max(capacity + 4096,
                    EvictionRounds.KEYS), "busy-spin");
                final ControlRun.PairClient echo = new ControlRun.EchoPairs(echoMapped, "busy-spin", true);
                final EchoRings.EchoAgent echoAgent = new EchoRings.EchoAgent(echoMapped, true);
                final Runnable serverCycle = invoker::invoke;
                final Runnable echoCycle = echoAgent::doWork;
                timePairs(control, serverCycle, capacity);
                System.out.printf("ring size %d, pool %d MiB (%d slots), eviction %s, %d pairs a round%n",
                    server.context().pipelineContext().ringSize(), poolMiB, capacity, eviction.label(), pairs);
                final double[] controlNs = new double[rounds];
                final double[] echoNs = new double[rounds];
                final double[] idleNs = new double[rounds];
                for (int r = 0; r < rounds; r++)
                {
                    controlNs[r] = timePairs(control, serverCycle, pairs) / (double)pairs;
                    if (!controlOnly)
                    {
                        echoNs[r] = timePairs(echo, echoCycle, pairs) / (double)pairs;
                        idleNs[r] = idleCycles(invoker, 100 * pairs) / (100.0 * pairs);
                    }
                    System.out.printf("round %2d: control pair %6.1f ns, echo pair %5.1f ns, idle cycle %5.1f ns%n",
                        r, controlNs[r], echoNs[r], idleNs[r]);
                }
                System.out.printf("median of rounds 1-%d: control pair %.1f ns, echo pair %.1f ns, " +
                    "difference %.1f ns, idle duty cycle %.1f ns%n", rounds - 1, median(controlNs), median(echoNs),
                    median(controlNs) - median(echoNs), median(idleNs));
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

    /** A connected client and the slot capacity its registration was given. */
    private record Registered(KvStashClient client, int slotCapacity)
    {
    }

    private static Registered connect(final AgentInvoker invoker, final Path serverDir) throws InterruptedException
    {
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
            final KvStashClient client = KvStashClient.connect(new ClientContext().directory(serverDir));
            final ClientResponse registered = client.register(1, BenchSupport.layout(ControlRun.CHUNK_BYTES));
            if (!registered.isOk())
            {
                throw new IllegalStateException("register failed: " + registered);
            }
            return new Registered(client, registered.slotCapacity());
        }
        finally
        {
            connecting.set(false);
            helper.join();
        }
    }

    private static double median(final double[] values)
    {
        final double[] sorted = Arrays.copyOfRange(values, 1, values.length);
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
