package io.kvstash.cli;

import io.kvstash.server.Sizes;
import io.kvstash.tools.BundledTrace;
import io.kvstash.tools.Json;
import io.kvstash.tools.ReplayReport;
import io.kvstash.tools.WorkerWarmup;
import io.kvstash.tools.WorkerResult;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;

/**
 * {@code kvstash demo}: {@code replay} of the bundled Mooncake trace with demo defaults (2 workers, 64 KiB
 * chunks, a pool of 16,384 chunks), progress on standard error and a human report: throughput, ops/s,
 * client latency per operation, hit rate beside the exact-LRU reference, checksum mismatches, evictions.
 */
@Command(name = "demo", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Starts an embedded server, replays the bundled Mooncake trace with worker processes that write and " +
            "read every chunk through shared memory, and prints throughput, latency and the hit rate beside " +
            "the exact-LRU figure." })
public final class DemoCommand implements Callable<Integer>
{
    @Spec
    CommandSpec spec;

    @Option(names = "--trace", paramLabel = "FILE",
        description = "Trace to replay (default: the bundled " + BundledTrace.RELATIVE_PATH + ").")
    Path trace;

    @Option(names = "--workers", paramLabel = "W", defaultValue = "2",
        description = "Worker processes (default: ${DEFAULT-VALUE}).")
    int workers;

    @Option(names = "--payload-bytes", paramLabel = "SIZE", converter = Converters.Size.class, defaultValue = "64k",
        description = "Bytes of one chunk (default: ${DEFAULT-VALUE}).")
    long payloadBytes;

    @Option(names = "--capacity-chunks", paramLabel = "N", defaultValue = "16384",
        description = "Pool capacity in chunks (default: ${DEFAULT-VALUE}).")
    int capacityChunks;

    @Mixin
    ReplayServerOptions server;

    @Option(names = "--json", description = "Print the replay's JSON object instead of the report.")
    boolean json;

    @Option(names = "--quiet", description = "No progress lines on standard error.")
    boolean quiet;

    /**
     * A command with default options (picocli sets the fields).
     */
    public DemoCommand()
    {
    }

    /**
     * Runs the demo.
     *
     * @return 0 when every chunk read back intact, 1 otherwise.
     * @throws Exception when the bundled trace is missing or the replay fails.
     */
    @Override
    public Integer call() throws Exception
    {
        ReplayCommand.validate(spec, capacityChunks, payloadBytes, workers);
        final Path tracePath = null != trace ? trace : BundledTrace.locate();
        final PrintWriter err = spec.commandLine().getErr();
        if (!quiet)
        {
            err.printf("kvstash demo: replaying %s with %d worker processes, %s chunks, a pool of %,d chunks%n",
                tracePath, workers, Sizes.formatSize(payloadBytes), capacityChunks);
            err.flush();
        }
        final ReplayReport report = ReplayCommand.run(spec, tracePath, capacityChunks, 0, payloadBytes, workers,
            server, false, quiet, WorkerWarmup.REQUESTS_DEFAULT);
        final PrintWriter out = spec.commandLine().getOut();
        if (json)
        {
            out.println(Json.write(report.toMap()));
        }
        else
        {
            out.println();
            ReportPrinter.print(report, out, true);
        }
        out.flush();
        return 0 == report.result().count(WorkerResult.CHECKSUM_MISMATCHES) ? 0 : 1;
    }
}
