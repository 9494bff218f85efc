package io.kvstash.cli;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.tools.Json;
import io.kvstash.tools.TraceReplay;
import io.kvstash.tools.TraceWorker;
import io.kvstash.tools.WorkerResult;
import io.kvstash.tools.WorkerWarmup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * {@code kvstash worker} (hidden): one replay worker process of {@code replay} and {@code demo}. Warms up
 * against a private server when asked ({@link WorkerWarmup}), connects,
 * registers, prints {@code ready}; with {@code --await-go} waits for a {@code go} line on standard input (and
 * exits when standard input closes: the coordinator is gone); replays its share of the trace with
 * {@link TraceWorker}, printing {@code progress N} lines at most every {@code --progress-ms}; unregisters and
 * prints {@code result {json}} ({@link WorkerResult}) as its last line.
 */
@Command(name = "worker", hidden = true, mixinStandardHelpOptions = true, sortOptions = false,
    description = "A trace replay worker process (started by replay and demo).")
public final class WorkerCommand implements Callable<Integer>
{
    /** Exit code when the coordinator closes standard input before the worker is done. */
    public static final int EXIT_COORDINATOR_GONE = 3;

    @Spec
    CommandSpec spec;

    @Mixin
    DirectoryOption directory;

    @Option(names = "--trace", paramLabel = "FILE", required = true, description = "Mooncake trace.")
    Path trace;

    @Option(names = "--index", paramLabel = "I", defaultValue = "0", description = "This worker's index.")
    int index;

    @Option(names = "--workers", paramLabel = "W", defaultValue = "1", description = "Number of workers.")
    int workers;

    @Mixin
    WorkerLoadOptions load;

    @Option(names = "--instance-id", paramLabel = "ID", defaultValue = "0",
        description = "Instance id to register (default: the pid).")
    long instanceId;

    @Option(names = "--await-go", description = "After 'ready', wait for a 'go' line on standard input.")
    boolean awaitGo;

    @Option(names = "--copy-transport", description = "Move chunk bytes in messages instead of the mapped pool.")
    boolean copyTransport;

    @Option(names = "--client-wait", paramLabel = "MODE", converter = Converters.Wait.class,
        description = "How the client waits for responses: busy-spin, yielding, backoff or blocking " +
            "(default: the client library's backoff).")
    WaitMode clientWait;

    @Option(names = "--warmup-requests", paramLabel = "N", defaultValue = "0",
        description = "Before connecting, replay the trace's first N requests against a private server of this " +
            "process, so the timed replay runs compiled code (default: ${DEFAULT-VALUE}).")
    int warmupRequests;

    @Option(names = "--model", paramLabel = "NAME", description = "Model name to register (default: the replay's).")
    String model;

    @Option(names = "--progress-ms", paramLabel = "MS", defaultValue = "200",
        description = "Least interval between progress lines (default: ${DEFAULT-VALUE}).")
    long progressMs;

    /**
     * A command with default options (picocli sets the fields).
     */
    public WorkerCommand()
    {
    }

    /**
     * Runs the worker.
     *
     * @return 0 when the replay completed.
     * @throws Exception when the trace cannot be read or the server is lost.
     */
    @Override
    public Integer call() throws Exception
    {
        if (workers < 1 || index < 0 || index >= workers)
        {
            throw new IllegalArgumentException("need 0 <= index < workers: index " + index + ", workers " + workers);
        }
        final int payloadBytes = load.payloadBytes();
        final PrintWriter out = spec.commandLine().getOut();
        final MooncakeTrace mooncake = MooncakeTrace.read(trace);
        final long id = 0 == instanceId ? ProcessHandle.current().pid() : instanceId;
        WorkerWarmup.run(mooncake.requests(), warmupRequests, payloadBytes, () -> new ClientContext()
            .copyTransport(copyTransport)
            .idleStrategy(null == clientWait ? null : clientWait.newIdleStrategy()));
        final ClientContext context = new ClientContext()
            .directory(directory.orDefault())
            .copyTransport(copyTransport)
            .idleStrategy(null == clientWait ? null : clientWait.newIdleStrategy());
        try (KvStashClient client = KvStashClient.connect(context))
        {
            final TraceWorker worker = new TraceWorker(client, id, payloadBytes)
                .model(null == model ? TraceWorker.MODEL : model)
                .tierWaitNs(TimeUnit.MILLISECONDS.toNanos(Math.max(0, load.tierWaitMs())));
            worker.register();
            out.println(TraceReplay.READY_LINE);
            out.flush();
            if (awaitGo && !awaitGo())
            {
                return EXIT_COORDINATOR_GONE;
            }
            final long intervalNs = TimeUnit.MILLISECONDS.toNanos(Math.max(1, progressMs));
            final long[] nextProgressNs = { System.nanoTime() + intervalNs };
            final WorkerResult result = worker.replay(mooncake.requests(), index, workers, (done) ->
            {
                final long now = System.nanoTime();
                if (now - nextProgressNs[0] >= 0)
                {
                    out.println(TraceReplay.PROGRESS_PREFIX + done);
                    out.flush();
                    nextProgressNs[0] = now + intervalNs;
                }
            });
            client.unregister(id);
            out.println(TraceReplay.PROGRESS_PREFIX + result.count(WorkerResult.REQUESTS));
            final Map<String, Object> map = result.toMap();
            map.put("worker", index);
            out.println(TraceReplay.RESULT_PREFIX + Json.write(map));
            out.flush();
        }
        return 0;
    }

    /**
     * Waits for the coordinator's go, then watches standard input on a daemon thread: when it closes, the
     * coordinator is gone and so is the point of going on.
     */
    private static boolean awaitGo() throws IOException
    {
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        final String line = in.readLine();
        if (null == line || !TraceReplay.GO_LINE.equals(line.trim()))
        {
            return false;
        }
        final Thread watcher = new Thread(() ->
        {
            try
            {
                while (null != in.readLine())
                {
                    Thread.onSpinWait();
                }
            }
            catch (final IOException ignore)
            {
                // Treated as closed.
            }
            System.err.println("kvstash worker: the coordinator is gone, exiting");
            Runtime.getRuntime().halt(EXIT_COORDINATOR_GONE);
        }, "kvstash-worker-stdin");
        watcher.setDaemon(true);
        watcher.start();
        return true;
    }
}
