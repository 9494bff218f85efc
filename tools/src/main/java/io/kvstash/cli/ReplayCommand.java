package io.kvstash.cli;

import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.replay.Replayer;
import io.kvstash.tools.ChunkPattern;
import io.kvstash.tools.Json;
import io.kvstash.tools.PolicyComparison;
import io.kvstash.tools.ReplayReport;
import io.kvstash.tools.TraceReplay;
import io.kvstash.tools.WorkerWarmup;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code kvstash replay}: replays a Mooncake trace through an embedded server and worker processes
 * ({@link TraceReplay}) and reports hit rate, throughput, latency and checksum mismatches; or, with
 * {@code --format kvstash}, replays a journal captured by {@code serve --capture} with the pipeline's
 * {@link Replayer} and reports whether every response and counter came out the same.
 */
@Command(name = "replay", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Replays a trace through a real server and worker processes and reports hits, throughput and latency.",
        "--format mooncake (default): JSON lines with hash_ids; request i goes to worker i %% W, so --workers 1 " +
            "replays in file order and reproduces the exact-LRU hit counts.",
        "--format kvstash: a journal of 'serve --capture', replayed against a fresh store of the configuration " +
            "the journal records (no pool or store option applies); exit code 1 when a response or counter differs." })
public final class ReplayCommand implements Callable<Integer>
{
    private static final List<String> STORE_OPTION_NAMES =
        List.of("--alignment", "--chunk-tokens", "--lease", "--slot-bytes", "--max-chunks");

    @Spec
    CommandSpec spec;

    @Option(names = "--trace", paramLabel = "FILE", required = true, description = "The trace to replay.")
    Path trace;

    @Option(names = "--format", paramLabel = "FORMAT", defaultValue = "mooncake",
        description = "mooncake or kvstash (default: ${DEFAULT-VALUE}).")
    String format;

    @ArgGroup(exclusive = true)
    PoolOptions pool = new PoolOptions();

    @Option(names = "--payload-bytes", paramLabel = "SIZE", converter = Converters.Size.class, defaultValue = "4096",
        description = "Bytes of one chunk, a multiple of the chunk tokens (default: ${DEFAULT-VALUE}).")
    long payloadBytes;

    @Option(names = "--workers", paramLabel = "W", defaultValue = "1",
        description = "Worker processes (default: ${DEFAULT-VALUE}).")
    int workers;

    @Option(names = "--json", description = "Print exactly one JSON object to standard output.")
    boolean json;

    @Option(names = "--quiet", description = "No progress lines on standard error.")
    boolean quiet;

    @Option(names = "--copy-transport", hidden = true, description = "Workers use the copy transport.")
    boolean copyTransport;

    @Option(names = "--worker-warmup", paramLabel = "N", defaultValue = "" + WorkerWarmup.REQUESTS_DEFAULT,
        description = "Requests each worker replays against a private server of its own before the timed replay, " +
            "so that it runs compiled code; the replay's server sees none of them (default: ${DEFAULT-VALUE}).")
    int workerWarmup;

    @Mixin
    ReplayServerOptions server;

    @Mixin
    StoreOptions store;

    @Option(names = "--compare-policies", description = "Replay offline in file order under every eviction " +
        "policy and the clairvoyant farthest-next-use reference, at --capacity-chunks N; no server is started.")
    boolean comparePolicies;

    /**
     * Pool sizing: a size in bytes or an exact number of chunk slots, not both.
     */
    static final class PoolOptions
    {
        @Option(names = "--pool-size", paramLabel = "SIZE", converter = Converters.Size.class,
            description = "Pool size (default: 1g).")
        long poolSizeBytes = StoreContext.POOL_SIZE_BYTES_DEFAULT;

        @Option(names = "--capacity-chunks", paramLabel = "N",
            description = "Size the pool to exactly N chunk slots of the payload (mooncake format).")
        int capacityChunks;
    }

    /**
     * A command with default options (picocli sets the fields).
     */
    public ReplayCommand()
    {
    }

    /**
     * Runs the replay and prints the report.
     *
     * @return 0, or 1 when a journal replay differs.
     * @throws Exception when the replay fails.
     */
    @Override
    public Integer call() throws Exception
    {
        if ("kvstash".equals(format))
        {
            if (null != server.latencyLog)
            {
                throw new CommandLine.ParameterException(spec.commandLine(), "--hlog applies to --format mooncake");
            }
            return replayJournal();
        }
        if (!"mooncake".equals(format))
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "unknown --format '" + format + "' (mooncake or kvstash)");
        }
        if (comparePolicies)
        {
            return comparePolicies();
        }
        for (final String name : STORE_OPTION_NAMES)
        {
            if (spec.commandLine().getParseResult().hasMatchedOption(name))
            {
                throw new CommandLine.ParameterException(spec.commandLine(), name + " applies to --format kvstash " +
                    "only (a mooncake replay uses 4096-byte alignment and the default chunk tokens)");
            }
        }
        final ReplayReport report = run(spec, trace, pool.capacityChunks, pool.poolSizeBytes, payloadBytes,
            workers, server, copyTransport, quiet, workerWarmup);
        final PrintWriter out = spec.commandLine().getOut();
        if (json)
        {
            out.println(Json.write(report.toMap()));
        }
        else
        {
            ReportPrinter.print(report, out, false);
        }
        out.flush();
        return 0;
    }

    /**
     * Runs a Mooncake replay with progress on standard error; shared with {@code demo}.
     *
     * @param spec           the calling command (for its output streams and usage errors).
     * @param trace          trace file.
     * @param capacityChunks exact slots, or 0 to size the pool by bytes.
     * @param poolSizeBytes  pool size when no capacity in chunks is given.
     * @param payloadBytes   bytes of one chunk.
     * @param workers        worker processes.
     * @param server         the embedded server's and its workers' options (directory, threading, wait modes,
     *                       eviction policy, latency log).
     * @param copyTransport  workers use the copy transport.
     * @param quiet          no progress lines.
     * @param warmupRequests requests each worker replays against a private server first ({@link WorkerWarmup};
     *                       {@link WorkerWarmup#REQUESTS_DEFAULT} unless the command line gave another).
     * @return the report.
     * @throws Exception when the replay fails.
     */
    static ReplayReport run(
        final CommandSpec spec,
        final Path trace,
        final int capacityChunks,
        final long poolSizeBytes,
        final long payloadBytes,
        final int workers,
        final ReplayServerOptions server,
        final boolean copyTransport,
        final boolean quiet,
        final int warmupRequests) throws Exception
    {
        validate(spec, capacityChunks, payloadBytes, workers);
        ServeCommand.warnIfSpinningOversubscribes(spec, server.threadingMode, server.waitMode);
        final boolean console = null != System.console();
        final TraceReplay replay = server.applyTo(new TraceReplay())
            .trace(trace)
            .payloadBytes((int)payloadBytes)
            .capacityChunks(capacityChunks)
            .poolSizeBytes(poolSizeBytes)
            .workers(workers)
            .copyTransport(copyTransport)
            .workerWarmupRequests(warmupRequests)
            .progress(quiet ? null : spec.commandLine().getErr(), console);
        try
        {
            return replay.run();
        }
        catch (final IllegalArgumentException ex)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), ex.getMessage(), ex);
        }
    }

    /**
     * The checks {@code replay} and {@code demo} share, each a usage error naming the value and what is accepted.
     *
     * @param spec           the calling command.
     * @param capacityChunks exact slots, or 0 to size the pool by bytes.
     * @param payloadBytes   bytes of one chunk.
     * @param workers        worker processes.
     */
    static void validate(final CommandSpec spec, final int capacityChunks, final long payloadBytes, final int workers)
    {
        if (payloadBytes < ChunkPattern.MIN_LENGTH || payloadBytes > Integer.MAX_VALUE)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--payload-bytes " + payloadBytes +
                " is out of range: give " + ChunkPattern.MIN_LENGTH + " to " + Integer.MAX_VALUE + " bytes");
        }
        if (capacityChunks < 0 ||
            (0 == capacityChunks && spec.commandLine().getParseResult().hasMatchedOption("--capacity-chunks")))
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--capacity-chunks " + capacityChunks + " is not a pool: give at least 1 chunk");
        }
        if (workers < 1 || workers > TraceReplay.MAX_WORKERS)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--workers " + workers + " is out of range: give 1 to " + TraceReplay.MAX_WORKERS);
        }
    }

    private int comparePolicies() throws Exception
    {
        if (pool.capacityChunks < 1)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--compare-policies needs --capacity-chunks N (at least 1)");
        }
        final PolicyComparison comparison = PolicyComparison.run(trace, pool.capacityChunks);
        final PrintWriter out = spec.commandLine().getOut();
        if (json)
        {
            out.println(Json.write(comparison.toMap()));
        }
        else
        {
            comparison.print(out);
        }
        out.flush();
        return 0;
    }

    private int replayJournal() throws Exception
    {
        for (final String option : new String[]{ "--capacity-chunks", "--pool-size", "--alignment", "--chunk-tokens",
            "--lease", "--slot-bytes", "--max-chunks", "--eviction", "--compare-policies" })
        {
            if (spec.commandLine().getParseResult().hasMatchedOption(option))
            {
                throw new CommandLine.ParameterException(spec.commandLine(), option + " does not apply to " +
                    "--format kvstash: a journal records the configuration it was captured with and replays with it");
            }
        }
        // The journal's header records the capturing store's configuration: replay with exactly that.
        final Replayer.Result result = Replayer.replay(trace);
        final Map<String, Object> map = new LinkedHashMap<>();
        map.put("trace", trace.toAbsolutePath().toString());
        map.put("format", "kvstash");
        map.put("records", result.records());
        map.put("mismatches", result.mismatches());
        map.put("first_mismatch", result.firstMismatch());
        map.put("truncated_tail", result.truncatedTail());
        map.put("had_counters", result.hadCounters());
        map.put("counter_mismatches", result.counterMismatches());
        map.put("first_counter_mismatch", result.firstCounterMismatch());
        map.put("identical", result.identical());
        final PrintWriter out = spec.commandLine().getOut();
        if (json)
        {
            out.println(Json.write(map));
        }
        else
        {
            out.printf("kvstash journal replay: %s%n", trace);
            out.printf("  records replayed     %,d%s%n", result.records(),
                result.truncatedTail() ? " (the journal ends in a cut record, ignored)" : "");
            out.printf("  response mismatches  %,d%s%n", result.mismatches(),
                null == result.firstMismatch() ? "" : " (first: " + result.firstMismatch() + ")");
            out.printf("  counter mismatches   %s%n", result.hadCounters() ? result.counterMismatches() +
                (null == result.firstCounterMismatch() ? "" : " (first: " + result.firstCounterMismatch() + ")") :
                "not compared (the journal has no shutdown snapshot)");
            out.println(result.identical() ? "  identical: every response and counter is the same" :
                "  DIFFERENT: the replay did not reproduce the capture");
        }
        out.flush();
        return result.identical() ? 0 : 1;
    }
}
