package io.kvstash.cli;

import io.kvstash.tools.Json;
import picocli.CommandLine;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

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
     * The command line in a child JVM, its standard output lines queued.
     */
    static final class Child implements AutoCloseable
    {
        final Process process;
        private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
        private final List<String> all = Collections.synchronizedList(new ArrayList<>());
        private final List<String> errors = Collections.synchronizedList(new ArrayList<>());
        private final Thread reader;

        private Child(final Process process)
        {
            this.process = process;
            final Thread errorReader = new Thread(() ->
            {
                try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8)))
                {
                    String line;
                    while (null != (line = in.readLine()))
                    {
                        errors.add(line);
                    }
                }
                catch (final IOException ignore)
                {
                    // the child is gone
                }
            }, "cli-child-stderr-" + process.pid());
            errorReader.setDaemon(true);
            errorReader.start();
            reader = new Thread(() ->
            {
                try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)))
                {
                    String line;
                    while (null != (line = in.readLine()))
                    {
                        all.add(line);
                        lines.add(line);
                    }
                }
                catch (final IOException ignore)
                {
                    // the child is gone
                }
            }, "cli-child-" + process.pid());
            reader.setDaemon(true);
            reader.start();
        }

        static Child start(final String... args) throws IOException
        {
            final List<String> command = new ArrayList<>();
            command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            command.add("--add-exports");
            command.add("java.base/jdk.internal.misc=ALL-UNNAMED");
            command.add("-XX:+UseSerialGC");
            command.add("-XX:TieredStopAtLevel=1");
            command.add("-cp");
            command.add(System.getProperty("java.class.path"));
            command.add(KvStashCommand.class.getName());
            Collections.addAll(command, args);
            return new Child(new ProcessBuilder(command).start());
        }

        String awaitLine(final String prefix, final long timeoutMs) throws InterruptedException
        {
            final long deadline = System.currentTimeMillis() + timeoutMs;
            while (true)
            {
                final long left = deadline - System.currentTimeMillis();
                if (left <= 0)
                {
                    throw new AssertionError("no line starting with '" + prefix + "'; saw " + all +
                        (process.isAlive() ? "" : " (exited " + process.exitValue() + ")") + "; stderr " + errors);
                }
                final String line = lines.poll(Math.min(left, 100), TimeUnit.MILLISECONDS);
                if (null != line && line.startsWith(prefix))
                {
                    return line;
                }
                if (null == line && !process.isAlive() && !reader.isAlive() && lines.isEmpty())
                {
                    throw new AssertionError("exited " + process.exitValue() + " without a line starting with '" +
                        prefix + "'; saw " + all + "; stderr " + errors);
                }
            }
        }

        String awaitErrorLine(final String prefix, final long timeoutMs) throws InterruptedException
        {
            final long deadline = System.currentTimeMillis() + timeoutMs;
            while (System.currentTimeMillis() < deadline)
            {
                synchronized (errors)
                {
                    for (final String line : errors)
                    {
                        if (line.startsWith(prefix))
                        {
                            return line;
                        }
                    }
                }
                Thread.sleep(20);
            }
            throw new AssertionError("no standard error line starting with '" + prefix + "'; saw " + errors +
                " and " + all);
        }

        List<String> errorLines()
        {
            synchronized (errors)
            {
                return new ArrayList<>(errors);
            }
        }

        List<String> lines()
        {
            synchronized (all)
            {
                return new ArrayList<>(all);
            }
        }

        @Override
        public void close()
        {
            if (process.isAlive())
            {
                process.destroyForcibly();
            }
            try
            {
                process.waitFor(10, TimeUnit.SECONDS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
    }
}
