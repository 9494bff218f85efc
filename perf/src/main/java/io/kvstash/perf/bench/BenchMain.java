package io.kvstash.perf.bench;

import picocli.CommandLine;

/**
 * Runs {@code kvstash bench} on its own:
 * {@code java --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -cp perf/target/kvstash-perf-benchmarks.jar
 * io.kvstash.perf.bench.BenchMain [--quick] [--json]}.
 */
public final class BenchMain
{
    private BenchMain()
    {
    }

    /**
     * Runs the bench and exits with its exit code (0 success, 1 failure, 2 usage).
     *
     * @param args command-line arguments of {@link BenchCommand}.
     */
    public static void main(final String[] args)
    {
        final CommandLine commandLine = new CommandLine(new BenchCommand());
        commandLine.setExecutionExceptionHandler((ex, cl, parseResult) ->
        {
            cl.getErr().println("kvstash bench: error: " + ex);
            ex.printStackTrace(cl.getErr());
            return CommandLine.ExitCode.SOFTWARE;
        });
        System.exit(commandLine.execute(args));
    }
}
