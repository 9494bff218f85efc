package io.kvstash.perf;

import io.kvstash.cli.KvStashCommand;
import io.kvstash.perf.bench.BenchCommand;
import picocli.CommandLine;

/**
 * The {@code kvstash} command line with the perf module's subcommands: every command of
 * {@link KvStashCommand} plus {@code bench} ({@link BenchCommand}). Run it from the perf jar:
 * {@code java --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -cp perf/target/kvstash-perf-benchmarks.jar
 * io.kvstash.perf.PerfMain bench --quick}.
 */
public final class PerfMain
{
    private PerfMain()
    {
    }

    /**
     * Runs the command line and exits with its exit code.
     *
     * @param args command-line arguments.
     */
    public static void main(final String[] args)
    {
        final CommandLine commandLine = KvStashCommand.newCommandLine().addSubcommand("bench", new BenchCommand());
        // bench is a real command here: the footer that lists it for the ipc jar's help would list it twice.
        commandLine.getCommandSpec().usageMessage().footer(new String[0]);
        System.exit(commandLine.execute(args));
    }
}
