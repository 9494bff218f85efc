package io.kvstash.ipc.e2e;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM running a main class of the test classpath, with its stdout lines queued for the test.
 */
final class ChildProcess implements AutoCloseable
{
    private final Process process;
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> all = Collections.synchronizedList(new ArrayList<>());

    private ChildProcess(final Process process)
    {
        this.process = process;
        final Thread reader = new Thread(() ->
        {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8)))
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
        }, "child-stdout-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    static ChildProcess start(final Class<?> mainClass, final String... args) throws IOException
    {
        final List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--add-exports");
        command.add("java.base/jdk.internal.misc=ALL-UNNAMED");
        command.add("-Xmx256m");
        command.add("-XX:+UseSerialGC");
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass.getName());
        Collections.addAll(command, args);
        final ProcessBuilder builder = new ProcessBuilder(command);
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        return new ChildProcess(builder.start());
    }

    /**
     * Waits for a stdout line starting with a prefix.
     *
     * @return the line.
     */
    String awaitLine(final String prefix, final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (true)
        {
            final long left = deadline - System.currentTimeMillis();
            if (left <= 0)
            {
                throw new AssertionError("no line starting with '" + prefix + "' in " + timeoutMs + " ms; saw " + all +
                    (process.isAlive() ? "" : " (exited " + process.exitValue() + ")"));
            }
            final String line = lines.poll(left, TimeUnit.MILLISECONDS);
            if (null != line && line.startsWith(prefix))
            {
                return line;
            }
        }
    }

    long pid()
    {
        return process.pid();
    }

    void kill9()
    {
        process.destroyForcibly();
    }

    void stop(final String signal) throws IOException, InterruptedException
    {
        new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid())).inheritIO().start().waitFor();
    }

    int waitFor(final long timeoutMs) throws InterruptedException
    {
        if (!process.waitFor(timeoutMs, TimeUnit.MILLISECONDS))
        {
            throw new AssertionError("child " + process.pid() + " still running; output " + all);
        }
        return process.exitValue();
    }

    boolean isAlive()
    {
        return process.isAlive();
    }

    List<String> output()
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
            try
            {
                process.waitFor(5, TimeUnit.SECONDS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
    }
}
