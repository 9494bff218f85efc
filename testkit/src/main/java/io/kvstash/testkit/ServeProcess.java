package io.kvstash.testkit;

import io.kvstash.cli.KvStashCommand;
import io.kvstash.process.ChildJvm;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code kvstash serve} in a child JVM of its own ({@link ChildJvm}), as an operator runs it: its standard output
 * lines queued, its standard error lines kept. {@link #awaitReady(long)} waits for the {@code kvstash ready} line
 * and reads the server's pid and incarnation from it; {@link #terminate(long)} stops it with SIGTERM (a clean
 * shutdown), {@link #kill9()} with SIGKILL (its files stay behind). A serve that is refused runs to its exit:
 * {@link #exitCode(long)} and {@link #errorLines()} tell why.
 */
public final class ServeProcess implements AutoCloseable
{
    /** Start of the line {@code kvstash serve} prints on standard output once it serves. */
    public static final String READY_PREFIX = "kvstash ready:";
    /** Heap of the child: a server's latency histograms alone take about 90 MiB. */
    public static final String HEAP = "256m";
    private static final Pattern READY_FIELDS = Pattern.compile("incarnation=([0-9a-f]+), pid=(\\d+)");

    private final ChildJvm jvm;
    private String incarnation;

    private ServeProcess(final ChildJvm jvm)
    {
        this.jvm = jvm;
    }

    /**
     * Starts {@code kvstash serve --dir DIR --pool-size POOL_SIZE OPTIONS...} in a child JVM.
     *
     * @param dir      the server's directory.
     * @param poolSize pool size as {@code --pool-size} takes it, e.g. {@code 16m}.
     * @param options  more options of {@code serve}.
     * @return the running child; {@link #awaitReady(long)} waits for it to serve.
     * @throws IOException when the process cannot start.
     */
    public static ServeProcess start(final Path dir, final String poolSize, final String... options)
        throws IOException
    {
        final List<String> args = new ArrayList<>(List.of("serve", "--dir", dir.toString(), "--pool-size", poolSize));
        args.addAll(List.of(options));
        final List<String> jvmOptions = new ArrayList<>();
        jvmOptions.add("-Xmx" + HEAP);
        jvmOptions.addAll(ChildJvm.SHORT_LIVED_OPTIONS);
        return new ServeProcess(new ChildJvm.Options()
            .jvmOptions(jvmOptions)
            .captureStandardError(true)
            .name("kvstash-serve")
            .start(KvStashCommand.class.getName(), args));
    }

    /**
     * Waits for the {@code kvstash ready} line.
     *
     * @param timeoutMs longest wait.
     * @return the line.
     * @throws InterruptedException  when interrupted while waiting.
     * @throws IllegalStateException when the server did not get ready in time or exited; the message holds what it
     *                               printed.
     */
    public String awaitReady(final long timeoutMs) throws InterruptedException
    {
        final String line = jvm.await(READY_PREFIX, timeoutMs);
        final Matcher fields = READY_FIELDS.matcher(line);
        if (!fields.find() || Long.parseLong(fields.group(2)) != jvm.pid())
        {
            throw new IllegalStateException("not a ready line of pid " + jvm.pid() + ": " + line);
        }
        incarnation = fields.group(1);
        return line;
    }

    /**
     * The incarnation the ready line announced.
     *
     * @return incarnation in hex, as the server prints it.
     * @throws IllegalStateException before {@link #awaitReady(long)} returned.
     */
    public String incarnation()
    {
        if (null == incarnation)
        {
            throw new IllegalStateException("not ready yet");
        }
        return incarnation;
    }

    /**
     * The server's process id.
     *
     * @return pid.
     */
    public long pid()
    {
        return jvm.pid();
    }

    /**
     * Whether the process still runs.
     *
     * @return true while it runs.
     */
    public boolean isAlive()
    {
        return jvm.isAlive();
    }

    /**
     * Waits for the process to exit.
     *
     * @param timeoutMs longest wait.
     * @return its exit code.
     * @throws InterruptedException  when interrupted while waiting.
     * @throws IllegalStateException when it still runs after the timeout; the message holds what it printed.
     */
    public int exitCode(final long timeoutMs) throws InterruptedException
    {
        try
        {
            return jvm.exitCode(timeoutMs);
        }
        catch (final IllegalStateException ex)
        {
            throw new IllegalStateException(ex.getMessage() + "; stderr " + jvm.errorLines(), ex);
        }
    }

    /**
     * Stops the server with SIGTERM, as an operator does, and waits for it to exit.
     *
     * @param timeoutMs longest wait.
     * @return its exit code (143 for a clean SIGTERM exit).
     * @throws InterruptedException  when interrupted while waiting.
     * @throws IllegalStateException when it still runs after the timeout.
     */
    public int terminate(final long timeoutMs) throws InterruptedException
    {
        // Through the handle: Process.destroy() would also close the pipes its last lines come through.
        jvm.process().toHandle().destroy();
        return exitCode(timeoutMs);
    }

    /**
     * Kills the server with SIGKILL and waits for it to be gone: it leaves its files behind, as a crash does.
     *
     * @throws InterruptedException when interrupted while waiting.
     */
    public void kill9() throws InterruptedException
    {
        jvm.kill9();
    }

    /**
     * Sends a signal with {@code kill}, e.g. STOP to freeze the server and CONT to let it go on.
     *
     * @param name signal name without SIG.
     * @throws IOException          when kill cannot run.
     * @throws InterruptedException when interrupted while waiting for kill.
     */
    public void signal(final String name) throws IOException, InterruptedException
    {
        jvm.signal(name);
    }

    /**
     * The standard error lines so far.
     *
     * @return a copy, oldest first.
     */
    public List<String> errorLines()
    {
        return jvm.errorLines();
    }

    /**
     * The last standard output lines, at most {@link ChildJvm#RECENT_LINES}.
     *
     * @return a copy, oldest first.
     */
    public List<String> outputLines()
    {
        return jvm.recentLines();
    }

    /**
     * Waits until everything the process wrote has been read; use after it exited, before reading its lines.
     *
     * @param timeoutMs longest wait.
     * @return true when its output has ended.
     * @throws InterruptedException when interrupted while waiting.
     */
    public boolean awaitEndOfOutput(final long timeoutMs) throws InterruptedException
    {
        return jvm.awaitEndOfOutput(timeoutMs);
    }

    /**
     * Kills the process if it still runs (SIGKILL) and waits for it.
     */
    @Override
    public void close()
    {
        jvm.close();
    }
}
