package io.kvstash.cli;

import io.kvstash.client.KvStashException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;
import picocli.CommandLine;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.NoSuchFileException;
import java.util.concurrent.Callable;

/**
 * The {@code kvstash} command line: {@code serve}, {@code stat}, {@code errors}, {@code replay},
 * {@code demo}, {@code latency} (and the hidden {@code worker} that replays start); {@code chaos} and {@code bench}
 * are listed here and added by the testkit's and the perf module's command lines. {@code --help} works on every command.
 * Exit codes: 0 success, 1 failure (a one-line {@code kvstash <command>: error: ...} on standard error), 2
 * usage error (unknown option, bad value, no command): the error in one line naming the value and what would be
 * accepted, and a second line pointing at {@code --help}; the usage itself only with {@code --help}.
 * <p>
 * Reuse: {@link #newCommandLine()} builds the whole command line; another module adds its own subcommands
 * and runs it the same way, e.g. the perf module's launcher:
 * <pre>{@code
 * CommandLine commandLine = KvStashCommand.newCommandLine().addSubcommand("bench", new BenchCommand());
 * System.exit(commandLine.execute(args));
 * }</pre>
 * Added subcommands get the same exception handling and exit codes. Replays spawn their workers with this
 * class as main class, so a jar that carries an extended command line must carry this class too (it does
 * when it depends on the server module).
 */
@Command(name = "kvstash", mixinStandardHelpOptions = true, versionProvider = KvStashCommand.Version.class,
    description = "kvstash: a KV-cache chunk store for LLM inference workers over shared memory.",
    footer = { KvStashCommand.CHAOS_LINE, KvStashCommand.CHAOS_LINE_2, KvStashCommand.BENCH_LINE,
        KvStashCommand.BENCH_LINE_2 },
    subcommands = {
        ServeCommand.class, StatCommand.class, ErrorsCommand.class, ReplayCommand.class, DemoCommand.class,
        LatencyCommand.class, WorkerCommand.class, CommandLine.HelpCommand.class })
public final class KvStashCommand implements Callable<Integer>
{
    /**
     * The {@code chaos} command's line in the command list: {@code ./kvstash chaos} runs from the testkit module's
     * jar (the reliability suites are test harness, not product), whose command line adds the command itself.
     */
    public static final String CHAOS_LINE = "  chaos    Runs the reliability suites against a real server and worker";
    /** The second line of {@link #CHAOS_LINE}, indented as picocli indents a command's wrapped description. */
    public static final String CHAOS_LINE_2 = "             processes: kills, zombies, restarts, fuzzing, pool exhaustion.";
    /**
     * The {@code bench} command's line in the command list: {@code ./kvstash bench} runs from the perf module's jar,
     * whose command line adds the command itself and drops this footer.
     */
    public static final String BENCH_LINE = "  bench    Side-by-side benchmarks: raw copy, store and retrieve, control";
    /** The second line of {@link #BENCH_LINE}, indented as picocli indents a command's wrapped description. */
    public static final String BENCH_LINE_2 = "             round trips, a bare ring echo, Redis, an in-process map.";

    private static final String HELP_HINT_PREFIX = "Try '";

    @Spec
    CommandSpec spec;

    /**
     * The top-level command (picocli instantiates it).
     */
    public KvStashCommand()
    {
    }

    /**
     * Without a subcommand: prints the usage and fails with exit code 2.
     *
     * @return 2.
     */
    @Override
    public Integer call()
    {
        final PrintWriter err = spec.commandLine().getErr();
        err.println("kvstash: error: a command is required (serve, stat, errors, latency, replay, demo, chaos, bench)");
        err.println(HELP_HINT_PREFIX + "kvstash --help' for the commands.");
        err.flush();
        return CommandLine.ExitCode.USAGE;
    }

    /**
     * Builds the command line with every kvstash subcommand, case-insensitive enum values, and the exception
     * handler that turns failures into exit code 1 with a one-line message.
     *
     * @return a new command line; add subcommands before executing it.
     */
    public static CommandLine newCommandLine()
    {
        final CommandLine commandLine = new CommandLine(new KvStashCommand());
        commandLine.setCaseInsensitiveEnumValuesAllowed(true);
        commandLine.setExecutionExceptionHandler(KvStashCommand::handleExecutionException);
        commandLine.setParameterExceptionHandler(KvStashCommand::handleParameterException);
        return commandLine;
    }

    /**
     * Runs the command line and exits the JVM with its exit code.
     *
     * @param args command-line arguments.
     */
    public static void main(final String[] args)
    {
        System.exit(newCommandLine().execute(args));
    }

    private static int handleExecutionException(
        final Exception ex, final CommandLine commandLine, final CommandLine.ParseResult parseResult)
    {
        final PrintWriter err = commandLine.getErr();
        final String name = commandLine.getCommandSpec().qualifiedName();
        if (isExpected(ex))
        {
            err.println(name + ": error: " + oneLine(message(ex)));
        }
        else
        {
            err.println(name + ": unexpected error: " + ex);
            ex.printStackTrace(err);
        }
        err.flush();
        return CommandLine.ExitCode.SOFTWARE;
    }

    /**
     * A usage error in at most two lines: {@code kvstash <command>: error: <what and the value>} and where the
     * options are documented. picocli's default prints the whole usage after the message, which buries it.
     */
    private static int handleParameterException(final CommandLine.ParameterException ex, final String[] args)
    {
        final CommandLine commandLine = ex.getCommandLine();
        final PrintWriter err = commandLine.getErr();
        final String name = commandLine.getCommandSpec().qualifiedName();
        String message = null == ex.getMessage() ? ex.toString() : ex.getMessage().trim();
        if (ex instanceof CommandLine.UnmatchedArgumentException)
        {
            final java.util.List<String> suggestions = ((CommandLine.UnmatchedArgumentException)ex).getSuggestions();
            if (!suggestions.isEmpty())
            {
                message += " (did you mean " + String.join(" or ", suggestions.subList(0,
                    Math.min(3, suggestions.size()))) + "?)";
            }
        }
        err.println(name + ": error: " + oneLine(message));
        err.println(HELP_HINT_PREFIX + name + " --help' for the options.");
        err.flush();
        return CommandLine.ExitCode.USAGE;
    }

    private static String oneLine(final String message)
    {
        return message.replaceAll("\\s*[\\r\\n]+\\s*", "; ");
    }

    private static boolean isExpected(final Exception ex)
    {
        return ex instanceof IOException || ex instanceof UncheckedIOException || ex instanceof KvStashException ||
            ex instanceof IllegalArgumentException || ex instanceof IllegalStateException;
    }

    private static String message(final Exception ex)
    {
        if (ex instanceof NoSuchFileException)
        {
            final NoSuchFileException noSuchFile = (NoSuchFileException)ex;
            return null != noSuchFile.getReason() ? noSuchFile.getReason() :
                "no such file or directory: " + noSuchFile.getFile();
        }
        if (ex instanceof AccessDeniedException)
        {
            return "permission denied: " + ((AccessDeniedException)ex).getFile() +
                " (check the owner and mode of it and of its directory)";
        }
        if (ex instanceof FileSystemException)
        {
            // The JDK's message is often the bare path or the reason alone: give both.
            final FileSystemException fs = (FileSystemException)ex;
            return (null == fs.getReason() ? fs.getClass().getSimpleName() : fs.getReason()) + ": " + fs.getFile() +
                (null == fs.getOtherFile() ? "" : " -> " + fs.getOtherFile());
        }
        final String message = ex.getMessage();
        return null == message ? ex.toString() : message;
    }

    /**
     * The version from the jar manifest, or "development" when run from classes.
     */
    public static final class Version implements CommandLine.IVersionProvider
    {
        /**
         * A version provider.
         */
        public Version()
        {
        }

        /**
         * The version lines.
         *
         * @return one line.
         */
        @Override
        public String[] getVersion()
        {
            final String version = KvStashCommand.class.getPackage().getImplementationVersion();
            return new String[]{ "kvstash " + (null == version ? "(development build)" : version) };
        }
    }
}
