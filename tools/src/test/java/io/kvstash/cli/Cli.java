package io.kvstash.cli;

import io.kvstash.process.ChildJvm;
import io.kvstash.tools.Json;
import picocli.CommandLine;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * Runs the kvstash command line in process with captured output, or as a child JVM.
 */
final class Cli
{
    static final Path TRACE = Path.of("..", "traces", "mooncake_synthetic_trace.jsonl").toAbsolutePath().normalize();

    final int exitCode;
    final String out;
    final String err;

    private Cli(final int exitCode, final String out, final String err)
    {
        this.exitCode = exitCode;
        this.out = out;
        this.err = err;
    }

    static Cli run(final String... args)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final CommandLine commandLine = KvStashCommand.newCommandLine();
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(err, true));
        final int exitCode = commandLine.execute(args);
        return new Cli(exitCode, out.toString(), err.toString());
    }

    Map<String, Object> json()
    {
        return Json.parseObject(out.trim());
    }

    @Override
    public String toString()
    {
        return "exit " + exitCode + "\n--- out\n" + out + "--- err\n" + err;
    }

    /**
     * The command line in a child JVM ({@link ChildJvm}), its standard output lines queued and its standard error
     * lines kept.
     */
    static final class Child implements AutoCloseable
    {
        final Process process;
        private final ChildJvm jvm;

        private Child(final ChildJvm jvm)
        {
            this.jvm = jvm;
            this.process = jvm.process();
        }

        static Child start(final String... args) throws IOException
        {
            return new Child(new ChildJvm.Options()
                .jvmOptions(List.of("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"))
                .captureStandardError(true)
                .name("cli-child")
                .start(KvStashCommand.class.getName(), List.of(args)));
        }

        String awaitLine(final String prefix, final long timeoutMs) throws InterruptedException
        {
            return jvm.await(prefix, timeoutMs);
        }

        String awaitErrorLine(final String prefix, final long timeoutMs) throws InterruptedException
        {
            return jvm.awaitErrorLine(prefix, timeoutMs);
        }

        List<String> errorLines()
        {
            return jvm.errorLines();
        }

        List<String> lines()
        {
            return jvm.recentLines();
        }

        @Override
        public void close()
        {
            jvm.close();
        }
    }
}
