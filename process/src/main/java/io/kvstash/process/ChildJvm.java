package io.kvstash.process;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A child JVM: the same java binary and class path as this process (made absolute), the Agrona export, stdout
 * lines queued for the parent (or handed to a listener), stdin writable, signals sent with {@code kill}. The one
 * launcher of child processes: replays start their workers with it, the chaos suites and the end-to-end tests
 * their servers and workers.
 * <p>
 * The last {@link #RECENT_LINES} lines read are kept apart so a failed wait can say what the child printed.
 * Standard error goes to this process's standard error unless {@link Options#captureStandardError(boolean)}
 * asks to keep its lines.
 */
public final class ChildJvm implements AutoCloseable
{
    /** Heap of a child unless the caller asks for another. */
    public static final String DEFAULT_HEAP = "128m";

    /**
     * Options of a short-lived child (besides its heap): the serial collector, C1 only (children must start
     * fast) and no perf-data file.
     */
    public static final List<String> SHORT_LIVED_OPTIONS =
        List.of("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData");

    /** Stdout lines kept for the message of a failed wait. */
    public static final int RECENT_LINES = 40;

    private final Process process;
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final ArrayDeque<String> recent = new ArrayDeque<>(RECENT_LINES);
    private final List<String> errorLines;
    private final Consumer<String> listener;
    private final OutputStream stdin;
    private final Thread reader;
    private volatile boolean killedByUs;

    private ChildJvm(final Process process, final Options options)
    {
        this.process = process;
        this.stdin = process.getOutputStream();
        this.listener = options.lineListener;
        this.errorLines = options.captureStandardError ? new ArrayList<>() : null;
        if (null != errorLines)
        {
            final Thread errorReader = new Thread(
                () -> readLines(process.getErrorStream(), this::addErrorLine), "child-jvm-stderr-" + process.pid());
            errorReader.setDaemon(true);
            errorReader.start();
        }
        this.reader = new Thread(
            () -> readLines(process.getInputStream(), this::addLine), options.name + "-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    /**
     * Starts a main class in a short-lived child JVM ({@link #SHORT_LIVED_OPTIONS}) with the {@link #DEFAULT_HEAP}
     * heap.
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
     * Starts a main class in a short-lived child JVM ({@link #SHORT_LIVED_OPTIONS}) with a given heap.
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
        final List<String> jvmOptions = new ArrayList<>();
        jvmOptions.add("-Xmx" + heap);
        jvmOptions.addAll(SHORT_LIVED_OPTIONS);
        return new Options().jvmOptions(jvmOptions).start(mainClass.getName(), Arrays.asList(args));
    }

    /**
     * How to start a child: its JVM options, where its output goes. Fluent setters, then {@link #start}.
     */
    public static final class Options
    {
        private List<String> jvmOptions = SHORT_LIVED_OPTIONS;
        private boolean captureStandardError;
        private Consumer<String> lineListener;
        private String name = "child-jvm";

        /**
         * Options with the {@link #SHORT_LIVED_OPTIONS} and no heap limit of our own.
         */
        public Options()
        {
        }

        /**
         * Sets the JVM options (the Agrona export and the class path are always added).
         *
         * @param jvmOptions options, e.g. {@code -Xmx256m}.
         * @return this.
         */
        public Options jvmOptions(final List<String> jvmOptions)
        {
            this.jvmOptions = List.copyOf(jvmOptions);
            return this;
        }

        /**
         * Keeps the child's standard error lines ({@link ChildJvm#errorLines()}) instead of passing them through.
         *
         * @param captureStandardError true to keep them.
         * @return this.
         */
        public Options captureStandardError(final boolean captureStandardError)
        {
            this.captureStandardError = captureStandardError;
            return this;
        }

        /**
         * Hands every stdout line to a listener, on the thread that reads them, instead of queueing it for
         * {@link ChildJvm#poll(long)} and {@link ChildJvm#await(String, long)}.
         *
         * @param lineListener listener, or null to queue the lines.
         * @return this.
         */
        public Options lineListener(final Consumer<String> lineListener)
        {
            this.lineListener = lineListener;
            return this;
        }

        /**
         * Names the thread that reads the child's stdout (the pid is appended).
         *
         * @param name thread name.
         * @return this.
         */
        public Options name(final String name)
        {
            this.name = name;
            return this;
        }

        /**
         * Starts a main class in a child JVM with these options.
         *
         * @param mainClass name of the class whose main method runs.
         * @param args      its arguments.
         * @return the running child.
         * @throws IOException when the process cannot start.
         */
        public ChildJvm start(final String mainClass, final List<String> args) throws IOException
        {
            final List<String> command = new ArrayList<>();
            command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            command.add("--add-exports");
            command.add("java.base/jdk.internal.misc=ALL-UNNAMED");
            command.addAll(jvmOptions);
            command.add("-cp");
            command.add(absoluteClassPath());
            command.add(mainClass);
            command.addAll(args);
            final ProcessBuilder builder = new ProcessBuilder(command);
            if (!captureStandardError)
            {
                builder.redirectError(ProcessBuilder.Redirect.INHERIT);
            }
            return new ChildJvm(builder.start(), this);
        }
    }

    /**
     * This process's class path with every entry absolute, so a child finds it whatever its working directory.
     *
     * @return class path.
     */
    public static String absoluteClassPath()
    {
        final StringBuilder out = new StringBuilder();
        for (final String entry : System.getProperty("java.class.path").split(File.pathSeparator))
        {
            if (entry.isEmpty())
            {
                continue;
            }
            if (out.length() > 0)
            {
                out.append(File.pathSeparatorChar);
            }
            out.append(Path.of(entry).toAbsolutePath());
        }
        return out.toString();
    }

    private static void readLines(final InputStream stream, final Consumer<String> sink)
    {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(stream, StandardCharsets.UTF_8)))
        {
            String line;
            while (null != (line = in.readLine()))
            {
                sink.accept(line);
            }
        }
        catch (final IOException ignore)
        {
            // the child is gone
        }
    }

    private void addLine(final String line)
    {
        synchronized (recent)
        {
            if (recent.size() == RECENT_LINES)
            {
                recent.removeFirst();
            }
            recent.addLast(line);
        }
        if (null != listener)
        {
            listener.accept(line);
        }
        else
        {
            lines.add(line);
        }
    }

    private void addErrorLine(final String line)
    {
        synchronized (errorLines)
        {
            errorLines.add(line);
        }
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
     * Waits for a stdout line starting with a prefix, dropping the lines before it. A child whose output has
     * ended fails the wait at once.
     *
     * @param prefix    start of the line.
     * @param timeoutMs longest wait.
     * @return the line.
     * @throws InterruptedException  when interrupted while waiting.
     * @throws IllegalStateException when no such line came in time or the child's output ended without one;
     *                               the message holds the child's last lines.
     */
    public String await(final String prefix, final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (true)
        {
            final long left = deadline - System.currentTimeMillis();
            final boolean ended = !reader.isAlive() && lines.isEmpty();
            if (left <= 0 || ended)
            {
                throw new IllegalStateException("child " + process.pid() + " printed no '" + prefix + "'" +
                    (ended ? "" : " in " + timeoutMs + " ms") +
                    (process.isAlive() ? "" : " (exited " + process.exitValue() + ")") +
                    "; its last lines: " + recentLines() + (null == errorLines ? "" : "; stderr " + errorLines()));
            }
            final String line = lines.poll(Math.min(left, 100), TimeUnit.MILLISECONDS);
            if (null != line && line.startsWith(prefix))
            {
                return line;
            }
        }
    }

    /**
     * Waits for a standard error line starting with a prefix; needs {@link Options#captureStandardError(boolean)}.
     *
     * @param prefix    start of the line.
     * @param timeoutMs longest wait.
     * @return the line.
     * @throws InterruptedException  when interrupted while waiting.
     * @throws IllegalStateException when no such line came in time.
     */
    public String awaitErrorLine(final String prefix, final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline)
        {
            for (final String line : errorLines())
            {
                if (line.startsWith(prefix))
                {
                    return line;
                }
            }
            Thread.sleep(20);
        }
        throw new IllegalStateException("child " + process.pid() + " printed no '" + prefix + "' on standard error; " +
            "saw " + errorLines() + " and " + recentLines());
    }

    /**
     * The standard error lines so far; needs {@link Options#captureStandardError(boolean)}.
     *
     * @return a copy, oldest first.
     */
    public List<String> errorLines()
    {
        if (null == errorLines)
        {
            throw new IllegalStateException("standard error is not captured");
        }
        synchronized (errorLines)
        {
            return new ArrayList<>(errorLines);
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
     * Waits until everything the child wrote to stdout has been read: after the child is gone, the lines it
     * printed before it died can then be polled (or have reached the listener) without missing any.
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
     * The process itself, for what this class does not wrap (a handle to signal it, its exit code with a unit).
     *
     * @return the process.
     */
    public Process process()
    {
        return process;
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
     * Closes the child's stdin, which a child reading it takes as the end of its work.
     */
    public void closeStdin()
    {
        try
        {
            stdin.close();
        }
        catch (final IOException ignore)
        {
            // Already closed.
        }
    }

    /**
     * Kills the child if it still runs, waits up to 10 s for it, and closes its stdin.
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
        closeStdin();
    }
}
