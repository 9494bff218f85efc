package io.kvstash.chaos;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM: the same java binary and class path as this process, stdout lines queued for the parent,
 * stdin writable, signals sent with {@code kill}. The chaos suites run their servers and workers in these,
 * and the end-to-end tests their test servers and workers.
 * <p>
 * The last {@link #RECENT_LINES} lines read are kept apart so a failed wait can say what the child printed.
 */
public final class ChildJvm implements AutoCloseable
{
    /** Heap of a child unless the caller asks for another. */
    public static final String DEFAULT_HEAP = "128m";

    static final int RECENT_LINES = 40;

    private final Process process;
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final ArrayDeque<String> recent = new ArrayDeque<>(RECENT_LINES);
    private final OutputStream stdin;
    private final Thread reader;
    private boolean killedByUs;

    private ChildJvm(final Process process)
    {
        this.process = process;
        this.stdin = process.getOutputStream();
        this.reader = new Thread(() ->
        {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8)))
            {
                String line;
                while (null != (line = in.readLine()))
                {
                    synchronized (recent)
                    {
                        if (recent.size() == RECENT_LINES)
                        {
                            recent.removeFirst();
                        }
                        recent.addLast(line);
                    }
                    lines.add(line);
                }
            }
            catch (final IOException ignore)
            {
                // the child is gone
            }
        }, "child-jvm-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    /**
     * Starts a main class in a child JVM with the {@link #DEFAULT_HEAP} heap.
     *
     * @param mainClass class whose main method runs.
     * @param args      its arguments.
     * @return the running child.
     * @throws IOException when the process cannot start.
     */
    public static ChildJvm start(final Class<?> mainClass, final String... args) throws IOException
    {
        return startWithHeap(DEFAULT_HEAP, mainClass, args);
    }

    /**
     * Starts a main class in a child JVM: the Agrona export, the serial collector, C1 only (children are
     * short-lived and must start fast) and no perf-data file.
     *
     * @param heap      maximum heap, as {@code -Xmx} takes it.
     * @param mainClass class whose main method runs.
     * @param args      its arguments.
     * @return the running child.
     * @throws IOException when the process cannot start.
     */
    public static ChildJvm startWithHeap(final String heap, final Class<?> mainClass, final String... args)
        throws IOException
    {
        final List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--add-exports");
        command.add("java.base/jdk.internal.misc=ALL-UNNAMED");
        command.add("-Xmx" + heap);
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
     * @param timeoutMs longest wait.
     * @return the line or null.
     * @throws InterruptedException when interrupted while waiting.
     */
    public String poll(final long timeoutMs) throws InterruptedException
    {
        return lines.poll(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /**
     * The next stdout line if one is queued.
     *
     * @return the line or null.
     */
    public String pollNow()
    {
        return lines.poll();
    }

    /**
     * Waits for a stdout line starting with a prefix, dropping the lines before it.
     *
     * @param prefix    start of the line.
     * @param timeoutMs longest wait.
     * @return the line.
     * @throws InterruptedException  when interrupted while waiting.
     * @throws IllegalStateException when no such line came in time; the message holds the child's last lines.
     */
    public String await(final String prefix, final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (true)
        {
            final long left = deadline - System.currentTimeMillis();
            if (left <= 0)
            {
                throw new IllegalStateException("child " + process.pid() + " printed no '" + prefix + "' in " +
                    timeoutMs + " ms" + (process.isAlive() ? "" : " (exited " + process.exitValue() + ")") +
                    "; its last lines: " + recentLines());
            }
            final String line = lines.poll(left, TimeUnit.MILLISECONDS);
            if (null != line && line.startsWith(prefix))
            {
                return line;
            }
        }
    }

    /**
     * The last lines the child printed, at most {@link #RECENT_LINES}.
     *
     * @return a copy, oldest first.
     */
    public List<String> recentLines()
    {
        synchronized (recent)
        {
            return new ArrayList<>(recent);
        }
    }

    /**
     * Writes a line to the child's stdin; a child that is gone is not an error here (its exit code tells).
     *
     * @param line the line, without its newline.
     */
    public void send(final String line)
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

    /**
     * Sends a signal with {@code kill}.
     *
     * @param name signal name without SIG, e.g. TERM or STOP.
     * @throws IOException          when kill cannot run.
     * @throws InterruptedException when interrupted while waiting for kill.
     */
    public void signal(final String name) throws IOException, InterruptedException
    {
        new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).inheritIO().start().waitFor();
    }

    /**
     * Kills the child with SIGKILL and waits up to 10 s for it to be gone.
     *
     * @throws InterruptedException when interrupted while waiting.
     */
    public void kill9() throws InterruptedException
    {
        killedByUs = true;
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    /**
     * Waits until everything the child wrote to stdout has been read into the line queue: after the child is
     * gone, the lines it printed before it died can then be polled without missing any.
     *
     * @param timeoutMs longest wait.
     * @return true when the output has ended.
     * @throws InterruptedException when interrupted while waiting.
     */
    public boolean awaitEndOfOutput(final long timeoutMs) throws InterruptedException
    {
        reader.join(timeoutMs);
        return !reader.isAlive();
    }

    /**
     * Whether this parent killed the child (with {@link #kill9()} or {@link #close()}).
     *
     * @return true when killed by us.
     */
    public boolean killedByUs()
    {
        return killedByUs;
    }

    /**
     * Whether the child still runs.
     *
     * @return true while it runs.
     */
    public boolean isAlive()
    {
        return process.isAlive();
    }

    /**
     * Exit code of a child that has exited.
     *
     * @return the code.
     * @throws IllegalThreadStateException when it still runs.
     */
    public int exitValue()
    {
        return process.exitValue();
    }

    /**
     * Waits for the child to exit.
     *
     * @param timeoutMs longest wait.
     * @return true when it exited.
     * @throws InterruptedException when interrupted while waiting.
     */
    public boolean waitFor(final long timeoutMs) throws InterruptedException
    {
        return process.waitFor(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /**
     * Waits for the child to exit and returns its exit code.
     *
     * @param timeoutMs longest wait.
     * @return the exit code.
     * @throws InterruptedException  when interrupted while waiting.
     * @throws IllegalStateException when it still runs after the timeout; the message holds its last lines.
     */
    public int exitCode(final long timeoutMs) throws InterruptedException
    {
        if (!waitFor(timeoutMs))
        {
            throw new IllegalStateException("child " + process.pid() + " still runs after " + timeoutMs +
                " ms; its last lines: " + recentLines());
        }
        return process.exitValue();
    }

    /**
     * Process id.
     *
     * @return pid.
     */
    public long pid()
    {
        return process.pid();
    }

    /**
     * Kills the child if it still runs and waits up to 10 s for it.
     */
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
