package io.kvstash.perf.bench;

import io.kvstash.tools.Json;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
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
    private final Process process;
    private final Writer in;
    private final LinkedBlockingQueue<String> results = new LinkedBlockingQueue<>();
    private final List<String> flags;

    private WorkerProcess(final Process process, final List<String> flags, final Consumer<String> progress)
    {
        this.process = process;
        this.flags = flags;
        this.in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        final Thread reader = new Thread(() ->
        {
            try (BufferedReader out = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)))
            {
                String line;
                while (null != (line = out.readLine()))
                {
                    if (line.startsWith("PROGRESS "))
                    {
                        progress.accept(line.substring("PROGRESS ".length()));
                    }
                    else if (line.startsWith("RESULT ") || line.startsWith("READY "))
                    {
                        results.add(line);
                    }
                }
            }
            catch (final IOException ignore)
            {
                // The worker is gone; a waiting call times out or sees the exit.
            }
            results.add("EXIT");
        }, "kvstash-bench-worker-reader");
        reader.setDaemon(true);
        reader.start();
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
        final List<String> flags = List.of(
            "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
            "-Xms" + heap, "-Xmx" + heap, "-XX:+UseParallelGC", "-Dslf4j.internal.verbosity=ERROR");
        final List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(flags);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(BenchWorker.class.getName());
        final Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        final WorkerProcess worker = new WorkerProcess(process, flags, progress);
        final String ready = worker.results.poll(60, TimeUnit.SECONDS);
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
        in.write(Json.write(command));
        in.write('\n');
        in.flush();
        final String line = results.poll(timeoutS, TimeUnit.SECONDS);
        if (null == line || !line.startsWith("RESULT "))
        {
            throw new IOException("the bench worker " + (null == line ? "did not answer " + command.get("cmd") +
                " in " + timeoutS + " s" : "exited"));
        }
        final Map<String, Object> result = Json.parseObject(line.substring("RESULT ".length()));
        if (result.containsKey("error"))
        {
            throw new IOException("the bench worker failed: " + result.get("error"));
        }
        return result;
    }

    @Override
    public void close()
    {
        try
        {
            if (process.isAlive())
            {
                in.write("{\"cmd\":\"exit\"}\n");
                in.flush();
            }
        }
        catch (final IOException ignore)
        {
            // Already gone.
        }
        try
        {
            if (!process.waitFor(10, TimeUnit.SECONDS))
            {
                process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
