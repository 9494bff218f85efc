package io.kvstash.ipc.chaos;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM of the chaos suites: same java binary and class path as this process, stdout lines queued,
 * stdin writable, signals sent with {@code kill}.
 */
final class ChildJvm implements AutoCloseable
{
    private final Process process;
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final OutputStream stdin;
    private boolean killedByUs;

    private ChildJvm(final Process process)
    {
        this.process = process;
        this.stdin = process.getOutputStream();
        final Thread reader = new Thread(() ->
        {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8)))
            {
                String line;
                while (null != (line = in.readLine()))
                {
                    lines.add(line);
                }
            }
            catch (final IOException ignore)
            {
                // the child is gone
            }
        }, "chaos-child-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    static ChildJvm start(final Class<?> mainClass, final String... args) throws IOException
    {
        final List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--add-exports");
        command.add("java.base/jdk.internal.misc=ALL-UNNAMED");
        command.add("-Xmx128m");
        command.add("-XX:+UseSerialGC");
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-XX:-UsePerfData");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass.getName());
        Collections.addAll(command, args);
        final ProcessBuilder builder = new ProcessBuilder(command);
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        return new ChildJvm(builder.start());
    }

    /**
     * The next stdout line, waiting at most a timeout.
     *
     * @return the line or null.
     */
    String poll(final long timeoutMs) throws InterruptedException
    {
        return lines.poll(timeoutMs, TimeUnit.MILLISECONDS);
    }

    String pollNow()
    {
        return lines.poll();
    }

    String await(final String prefix, final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (true)
        {
            final long left = deadline - System.currentTimeMillis();
            if (left <= 0)
            {
                throw new IllegalStateException("child " + process.pid() + " printed no '" + prefix + "' in " +
                    timeoutMs + " ms" + (process.isAlive() ? "" : " (exited " + process.exitValue() + ")"));
            }
            final String line = lines.poll(left, TimeUnit.MILLISECONDS);
            if (null != line && line.startsWith(prefix))
            {
                return line;
            }
        }
    }

    void send(final String line)
    {
        try
        {
            stdin.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            stdin.flush();
        }
        catch (final IOException ignore)
        {
            // the child is gone; its exit code tells
        }
    }

    void signal(final String name) throws IOException, InterruptedException
    {
        new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).inheritIO().start().waitFor();
    }

    void kill9() throws InterruptedException
    {
        killedByUs = true;
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    boolean killedByUs()
    {
        return killedByUs;
    }

    boolean isAlive()
    {
        return process.isAlive();
    }

    int exitValue()
    {
        return process.exitValue();
    }

    boolean waitFor(final long timeoutMs) throws InterruptedException
    {
        return process.waitFor(timeoutMs, TimeUnit.MILLISECONDS);
    }

    long pid()
    {
        return process.pid();
    }

    @Override
    public void close()
    {
        if (process.isAlive())
        {
            killedByUs = true;
            process.destroyForcibly();
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
