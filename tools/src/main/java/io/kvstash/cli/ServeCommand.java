package io.kvstash.cli;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.server.StartupContext;
import io.kvstash.server.Sizes;
import io.kvstash.tier.TierContext;
import io.kvstash.tier.TieredServer;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@code kvstash serve}: the server in the foreground until SIGINT or SIGTERM, which close it cleanly (its
 * files are removed). Prints one {@code kvstash ready: ...} line once clients can connect.
 * {@code --print-config} prints the resolved configuration and exits without starting.
 */
@Command(name = "serve", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Runs the kvstash server in the foreground; SIGINT or SIGTERM shut it down cleanly and remove its files",
        "(all but server.lock, which the next server on the directory locks again).",
        "Prints 'kvstash ready: ...' once workers can connect." })
public final class ServeCommand implements Callable<Integer>
{
    /** How long a signal's shutdown waits for an interrupted launch to remove its files. */
    static final long LAUNCH_ABORT_WAIT_MS = 30_000;

    @Spec
    CommandSpec spec;

    @Mixin
    DirectoryOption directory;

    @Option(names = "--pool-size", paramLabel = "SIZE", converter = Converters.Size.class, defaultValue = "1g",
        description = "Pool size, e.g. 1g, 512m, 4096 (default: ${DEFAULT-VALUE}).")
    long poolSizeBytes;

    @Mixin
    StoreOptions store;

    @Option(names = "--max-clients", paramLabel = "N", defaultValue = "256",
        description = "Most worker clients at once (default: ${DEFAULT-VALUE}).")
    int maxClients;

    @Option(names = "--threading", paramLabel = "MODE", converter = Converters.Threading.class,
        defaultValue = "shared",
        description = "shared, dedicated or thread-per-stage (default: ${DEFAULT-VALUE}).")
    ThreadingMode threadingMode;

    @Option(names = "--wait", paramLabel = "MODE", converter = Converters.Wait.class, defaultValue = "backoff",
        description = "How idle threads wait: busy-spin, yielding, backoff or blocking (default: ${DEFAULT-VALUE}). " +
            "backoff spins, yields and parks while requests come, and sleeps after about 5 ms without one until " +
            "a request rings the doorbell socket in DIR; blocking sleeps as soon as a cycle finds no work (a " +
            "kernel wake-up a request). A client that does not ring (one older than the doorbell) is answered " +
            "within 1 ms by a sleeping server.")
    WaitMode waitMode;

    @Option(names = "--eviction", paramLabel = "NAME", converter = Converters.Eviction.class, defaultValue = "lru",
        description = "Eviction policy: lru (exact), chain, slru, slru-admit, or default (the measured best, " +
            "docs/DESIGN.md) (default: ${DEFAULT-VALUE}).")
    EvictionPolicy eviction;

    @Option(names = "--capture", paramLabel = "FILE",
        description = "Journal every request and its outcome to FILE (replay with 'replay --format kvstash').")
    Path captureFile;

    @Option(names = "--hlog", paramLabel = "FILE",
        description = "Write per-request-type and per-stage latency as an HdrHistogram interval log to FILE.")
    Path latencyLogFile;

    @Option(names = "--prometheus-port", paramLabel = "PORT", defaultValue = "-1",
        description = "Serve the counters as Prometheus text on 127.0.0.1, port PORT, path /metrics (0: any free " +
            "port; default: no endpoint).")
    int prometheusPort;

    @Option(names = "--l2", paramLabel = "SEEDS",
        description = "Second tier: a Redis Cluster (or Valkey) shared by every host, redis://host:port[,host:port...] " +
            "(cluster seeds; default: off).")
    String l2Seeds;

    @Option(names = "--l2-timeout", paramLabel = "DURATION", converter = Converters.DurationNs.class,
        defaultValue = "100ms",
        description = "Bound of every call the second tier makes to the cluster (default: ${DEFAULT-VALUE}).")
    long l2TimeoutNs;

    @Option(names = "--l2-write", paramLabel = "POLICY", defaultValue = "write-through",
        description = "Second tier write policy: write-through (committed chunks are copied to the cluster off the " +
            "request path) or off (read-through only) (default: ${DEFAULT-VALUE}).")
    String l2Write;

    @Option(names = "--prepare-pool", paramLabel = "WHEN", defaultValue = "background",
        description = "When the pool's pages are allocated and mapped: background (default: ready at once for any " +
            "pool size, the pages prepared while the server answers), foreground (every page before ready, about " +
            "a second per GiB on a small VM) or on-demand (memory committed as the store grows: 64 MiB at start, " +
            "then a region at a time ahead of the regions in use; the first store into each page costs clients a " +
            "page fault).")
    String preparePool;

    @Option(names = "--print-config", description = "Print the resolved configuration and exit without starting.")
    boolean printConfig;

    /**
     * A command with default options (picocli sets the fields).
     */
    public ServeCommand()
    {
    }

    /**
     * Starts the server, or prints its configuration.
     *
     * @return exit code: 0 after printing the configuration; when serving, this returns only on an error.
     * @throws Exception when the server cannot start.
     */
    @Override
    public Integer call() throws Exception
    {
        final ServerContext context = serverContext();
        final TierContext tierContext = tierContext();
        final PrintWriter out = spec.commandLine().getOut();
        warnIfSpinningOversubscribes(spec, context.threadingMode(), context.waitMode());
        if (printConfig)
        {
            printConfig(context, tierContext, out);
            out.flush();
            return 0;
        }
        final PrintWriter err = spec.commandLine().getErr();
        context.startupContext().startupLog((line) ->
        {
            err.println(line);
            err.flush();
        });
        final long startNs = System.nanoTime();
        final AtomicReference<TieredServer> launched = new AtomicReference<>();
        final CountDownLatch launchEnded = new CountDownLatch(1);
        final CountDownLatch stopped = new CountDownLatch(1);
        // Registered before the launch: a signal while the pool is prepared stops the preparation, and the
        // launch removes what it made before the JVM exits.
        final Thread shutdown = new Thread(() ->
        {
            context.startupContext().abortStart();
            awaitQuietly(launchEnded, LAUNCH_ABORT_WAIT_MS);
            final TieredServer running = launched.get();
            if (null != running)
            {
                running.close();
                out.println("kvstash stopped: dir=" + running.server().directory());
                out.flush();
            }
            else
            {
                err.println("kvstash: start interrupted; its files are removed");
                err.flush();
            }
            stopped.countDown();
        }, "kvstash-shutdown");
        Runtime.getRuntime().addShutdownHook(shutdown);
        final KvStashServer server;
        try
        {
            final TieredServer tiered = TieredServer.launch(context, null == tierContext.seeds() ? null : tierContext);
            launched.set(tiered);
            server = tiered.server();
        }
        catch (final Exception ex)
        {
            if (context.startupContext().isStartAborted())
            {
                // The JVM is exiting on a signal; the hook ends it once this thread's cleanup is done.
                launchEnded.countDown();
                stopped.await();
                return 0;
            }
            removeHookQuietly(shutdown);
            throw ex;
        }
        finally
        {
            launchEnded.countDown();
        }
        final double startedS = (System.nanoTime() - startNs) / 1e9;
        out.println("kvstash ready: dir=" + server.directory() + ", pool=" +
            Sizes.formatSize(context.storeContext().poolSizeBytes()) + " (" + server.poolPath().getFileName() +
            "), incarnation=" + Long.toHexString(context.incarnation()) + ", pid=" + ProcessHandle.current().pid() +
            (server.prometheusPort() < 0 ? "" : ", metrics=http://127.0.0.1:" + server.prometheusPort() + "/metrics") +
            String.format(java.util.Locale.ROOT, ", started in %.1f s", startedS));
        out.flush();
        stopped.await();
        return 0;
    }

    private static void awaitQuietly(final CountDownLatch latch, final long timeoutMs)
    {
        try
        {
            latch.await(timeoutMs, TimeUnit.MILLISECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    private static void removeHookQuietly(final Thread hook)
    {
        try
        {
            Runtime.getRuntime().removeShutdownHook(hook);
        }
        catch (final IllegalStateException ignore)
        {
            // The JVM is shutting down: the hook runs and finds no server.
        }
    }

    private StartupContext startupContext()
    {
        if (!"background".equals(preparePool) && !"foreground".equals(preparePool) &&
            !"on-demand".equals(preparePool))
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--prepare-pool '" + preparePool + "' is not a choice: give background, foreground or on-demand");
        }
        return new StartupContext()
            .prepareInBackground("background".equals(preparePool))
            .poolOnDemand("on-demand".equals(preparePool));
    }

    private boolean l2WriteThrough()
    {
        if (!"write-through".equals(l2Write) && !"off".equals(l2Write))
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--l2-write '" + l2Write + "' is not a choice: give write-through or off");
        }
        return "write-through".equals(l2Write);
    }

    private ServerContext serverContext()
    {
        try
        {
            final StoreContext storeContext = store.storeContext(poolSizeBytes).eviction(eviction);
            final ServerContext context = new ServerContext()
                .directory(directory.orNull())
                .storeContext(storeContext)
                .maxClients(maxClients)
                .threadingMode(threadingMode)
                .waitMode(waitMode)
                .latencyLogFile(latencyLogFile)
                .prometheusPort(prometheusPort)
                .startupContext(startupContext());
            context.pipelineContext().journalFile(captureFile);
            return context.conclude();
        }
        catch (final IllegalArgumentException ex)
        {
            throw invalidConfiguration(ex);
        }
    }

    private TierContext tierContext()
    {
        final TierContext tierContext = new TierContext()
            .seeds(l2Seeds)
            .timeoutMs(Math.max(1, java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(l2TimeoutNs)))
            .writeThrough(l2WriteThrough());
        try
        {
            return null == l2Seeds ? tierContext : tierContext.conclude();
        }
        catch (final IllegalArgumentException ex)
        {
            throw invalidConfiguration(ex);
        }
    }

    private CommandLine.ParameterException invalidConfiguration(final IllegalArgumentException ex)
    {
        return new CommandLine.ParameterException(spec.commandLine(), "invalid configuration: " + ex.getMessage(), ex);
    }

    /**
     * Prints {@link #spinWarning} for this machine on the command's standard error, when there is one.
     *
     * @param spec          the command.
     * @param threadingMode the server's threading mode.
     * @param waitMode      the server's wait mode.
     */
    static void warnIfSpinningOversubscribes(
        final CommandSpec spec, final ThreadingMode threadingMode, final WaitMode waitMode)
    {
        final String warning = spinWarning(threadingMode, waitMode, Runtime.getRuntime().availableProcessors());
        if (null != warning)
        {
            spec.commandLine().getErr().println(warning);
            spec.commandLine().getErr().flush();
        }
    }

    /**
     * A warning when the server's busy-spinning threads and one busy-spinning client need more cores than the
     * machine has: the scheduler's time slices then decide every round trip, and a control pair takes
     * milliseconds instead of microseconds.
     *
     * @param threadingMode the server's threading mode.
     * @param waitMode      the server's wait mode.
     * @param cores         available processors.
     * @return the warning, or null when the threads fit.
     */
    static String spinWarning(final ThreadingMode threadingMode, final WaitMode waitMode, final int cores)
    {
        if (WaitMode.BUSY_SPIN != waitMode)
        {
            return null;
        }
        // SHARED: one thread receives and runs the stages; DEDICATED: a receiver and a pipeline thread;
        // THREAD_PER_STAGE: a receiver and four stage threads.
        final int spinning = ThreadingMode.SHARED == threadingMode ? 1 :
            ThreadingMode.DEDICATED == threadingMode ? 2 : 5;
        if (spinning + 1 <= cores)
        {
            return null;
        }
        return "kvstash: warning: --threading " + Converters.spell(threadingMode) + " --wait busy-spin spins " +
            spinning + " server thread" + (1 == spinning ? "" : "s") + "; with a busy-spinning client that is more " +
            "than this machine's " + cores + " core" + (1 == cores ? "" : "s") + ", and round trips will take " +
            "scheduler time slices (milliseconds). Use --threading shared or --wait backoff.";
    }

    /**
     * Prints a server configuration, one {@code name: value} line per setting, named as the options.
     *
     * @param context     concluded configuration.
     * @param tierContext configuration of the second tier (without seeds: no tier).
     * @param out         where to print.
     */
    static void printConfig(final ServerContext context, final TierContext tierContext, final PrintWriter out)
    {
        final StoreContext s = context.storeContext();
        out.println("kvstash configuration");
        line(out, "dir", context.directory().toString());
        line(out, "pool-size", s.poolSizeBytes() + " (" + Sizes.formatSize(s.poolSizeBytes()) + ")");
        line(out, "alignment", String.valueOf(s.alignment()));
        line(out, "chunk-tokens", String.valueOf(s.chunkTokens()));
        line(out, "lease", Sizes.formatDuration(s.leaseNs()));
        line(out, "slot-bytes", 0 == s.slotBytes() ? "0 (sized from the first registered layout)" :
            String.valueOf(s.slotBytes()));
        line(out, "max-chunks", String.valueOf(s.maxChunksPerRequest()));
        line(out, "eviction", s.eviction().label());
        line(out, "max-clients", String.valueOf(context.maxClients()));
        line(out, "threading", Converters.spell(context.threadingMode()));
        line(out, "wait", Converters.spell(context.waitMode()));
        line(out, "capture", null == context.pipelineContext().journalFile() ? "off" :
            context.pipelineContext().journalFile().toString());
        line(out, "hlog", null == context.latencyLogFile() ? "off" : context.latencyLogFile().toString());
        final int port = context.prometheusPort();
        line(out, "prometheus-port", port < 0 ? "off" : (0 == port ? "0 (any free port)" : port) + " on 127.0.0.1");
        line(out, "l2", null == tierContext.seeds() ? "off" : tierContext.seeds());
        line(out, "l2-timeout", tierContext.timeoutMs() + "ms");
        line(out, "l2-write", null == tierContext.seeds() ? "off (no tier)" :
            tierContext.writeThrough() ? "write-through" : "off");
        line(out, "max-transfers", String.valueOf(s.maxTransfers()));
        line(out, "max-instances", String.valueOf(s.maxInstances()));
        line(out, "max-inline-bytes", String.valueOf(s.maxInlineBytes()));
        line(out, "request-ring", context.requestRingCapacity() + " (" +
            Sizes.formatSize(context.requestRingCapacity()) + " per client)");
        line(out, "response-ring", context.responseRingCapacity() + " (" +
            Sizes.formatSize(context.responseRingCapacity()) + " per client)");
        line(out, "heartbeat", context.heartbeatIntervalMs() + "ms (clients give up after " +
            context.heartbeatTimeoutMs() + "ms)");
        line(out, "prepare-pool", context.startupContext().poolOnDemand() ? "on-demand (" +
            Sizes.formatSize(context.startupContext().onDemandHeadroomBytes()) + " headroom)" :
            !context.startupContext().pretouch() ? "off" :
            context.startupContext().prepareInBackground() ? "background" : "foreground");
    }

    private static void line(final PrintWriter out, final String name, final String value)
    {
        out.printf("  %-18s %s%n", name + ":", value);
    }
}
