package io.kvstash.perf.bench;

import io.kvstash.process.ChildJvm;
import io.kvstash.tools.Json;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The coordinator's handle on the {@link BenchWorker} JVM: sends one JSON command per line and waits for its
 * {@code RESULT} line, forwarding {@code PROGRESS} lines as they come.
 */
final class WorkerProcess implements AutoCloseable
{
    private static final String ADD_EXPORTS = "--add-exports";
    private static final String EXPORT = "java.base/jdk.internal.misc=ALL-UNNAMED";

    private final LinkedBlockingQueue<String> results = new LinkedBlockingQueue<>();
    private final List<String> flags;
    private ChildJvm child;

    private WorkerProcess(final List<String> flags)
    {
        this.flags = flags;
    }

    /**
     * Starts the worker JVM on this JVM's class path.
     *
     * @param heap     maximum heap, e.g. {@code 4g}.
     * @param progress where its progress lines go.
     * @return the running worker, ready for commands.
     * @throws IOException when it cannot start.
     * @throws InterruptedException when interrupted.
     */
    static WorkerProcess start(final String heap, final Consumer<String> progress)
        throws IOException, InterruptedException
    {
        final List<String> jvmOptions = List.of(
            "-Xms" + heap, "-Xmx" + heap, "-XX:+UseParallelGC", "-Dslf4j.internal.verbosity=ERROR");
        final List<String> flags = new ArrayList<>(List.of(ADD_EXPORTS, EXPORT));
        flags.addAll(jvmOptions);
        final WorkerProcess worker = new WorkerProcess(List.copyOf(flags));
        worker.child = new ChildJvm.Options()
            .jvmOptions(jvmOptions)
            .name("kvstash-bench-worker")
            .lineListener((line) ->
            {
                if (line.startsWith("PROGRESS "))
                {
                    progress.accept(line.substring("PROGRESS ".length()));
                }
                else if (line.startsWith("RESULT ") || line.startsWith("READY "))
                {
                    worker.results.add(line);
                }
            })
            .start(BenchWorker.class.getName(), List.of());
        final String ready = worker.next(60);
        if (null == ready || !ready.startsWith("READY "))
        {
            worker.close();
            throw new IOException("the bench worker did not start");
        }
        return worker;
    }

    /**
     * The worker JVM's flags.
     *
     * @return flags.
     */
    List<String> flags()
    {
        return flags;
    }

    /**
     * Runs a command.
     *
     * @param command  the command map ({@code cmd} and its parameters).
     * @param timeoutS how long it may take.
     * @return the result map.
     * @throws IOException when the worker fails, answers an error or does not answer in time.
     * @throws InterruptedException when interrupted.
     */
    Map<String, Object> call(final Map<String, Object> command, final long timeoutS)
        throws IOException, InterruptedException
    {
        submit(command);
        return await(command, timeoutS);
    }

    /**
     * Sends a command without waiting for its result, so that several workers run at once; {@link #await} takes
     * the result.
     *
     * @param command the command map ({@code cmd} and its parameters).
     */
    void submit(final Map<String, Object> command)
    {
        child.send(Json.write(command));
    }

    /**
     * Waits for the result of the command last {@link #submit submitted}.
     *
     * @param command  that command.
     * @param timeoutS how long it may take.
     * @return the result map.
     * @throws IOException when the worker fails, answers an error or does not answer in time.
     * @throws InterruptedException when interrupted.
     */
    Map<String, Object> await(final Map<String, Object> command, final long timeoutS)
        throws IOException, InterruptedException
    {
        final String line = next(timeoutS);
        if (null == line || !line.startsWith("RESULT "))
        {
            throw new IOException("the bench worker " + (child.isAlive() ? "did not answer " + command.get("cmd") +
                " in " + timeoutS + " s" : "exited"));
        }
        final Map<String, Object> result = Json.parseObject(line.substring("RESULT ".length()));
        if (result.containsKey("error"))
        {
            throw new IOException("the bench worker failed: " + result.get("error"));
        }
        return result;
    }

    /**
     * The next READY or RESULT line, or null when the worker exits or the timeout passes first.
     */
    private String next(final long timeoutS) throws InterruptedException
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);
        while (true)
        {
            final String line = results.poll(100, TimeUnit.MILLISECONDS);
            if (null != line)
            {
                return line;
            }
            if (!child.isAlive())
            {
                return results.poll();
            }
            if (System.nanoTime() - deadline > 0)
            {
                return null;
            }
        }
    }

    @Override
    public void close()
    {
        if (null == child)
        {
            return;
        }
        if (child.isAlive())
        {
            child.send("{\"cmd\":\"exit\"}");
        }
        try
        {
            child.waitFor(TimeUnit.SECONDS.toMillis(10));
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        child.close();
    }
}
