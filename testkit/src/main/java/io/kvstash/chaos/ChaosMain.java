package io.kvstash.chaos;

import io.kvstash.cli.KvStashCommand;
import picocli.CommandLine;

/**
 * The {@code kvstash} command line with the harness's subcommand: every command of {@link KvStashCommand} plus
 * {@code chaos} ({@link ChaosCommand}). {@code ./kvstash chaos} runs it from the testkit's jar:
 * {@code java --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -jar testkit/target/kvstash-testkit.jar chaos
 * --quick}.
 */
public final class ChaosMain
{
    private ChaosMain()
    {
    }

    /**
     * The command line with {@code chaos} added.
     *
     * @return a new command line.
     */
    public static CommandLine newCommandLine()
    {
        final CommandLine commandLine = KvStashCommand.newCommandLine().addSubcommand("chaos", new ChaosCommand())
            .addSubcommand("tier-replay", new io.kvstash.testkit.SharedTierReplayCommand());
        // chaos is a real command here: the footer line that lists it for the server jar's help would list it twice.
        commandLine.getCommandSpec().usageMessage()
            .footer(KvStashCommand.BENCH_LINE, KvStashCommand.BENCH_LINE_2);
        return commandLine;
    }

    /**
     * Runs the command line and exits with its exit code.
     *
     * @param args command-line arguments.
     */
    public static void main(final String[] args)
    {
        System.exit(newCommandLine().execute(args));
    }
}
