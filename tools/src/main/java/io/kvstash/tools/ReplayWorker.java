package io.kvstash.tools;


import io.kvstash.process.ChildJvm;
import java.io.IOException;
import java.util.List;

/**
 * One worker process of a replay ({@code kvstash worker}, started with {@link ChildJvm}) and what its standard
 * output said: ready, progress, its result. Other lines pass through to standard error, marked with the worker.
 */
final class ReplayWorker
{
    private final int index;
    private ChildJvm jvm;
    private volatile boolean ready;
    private volatile long progress;
    private volatile String resultLine;
    private volatile long resultNs;

    private ReplayWorker(final int index)
    {
        this.index = index;
    }

    /**
     * Starts a worker.
     *
     * @param jvmOptions its JVM options.
     * @param args       its arguments: the worker command and its options.
     * @param index      its index among the replay's workers.
     * @return the running worker.
     * @throws IOException when the process cannot start.
     */
    static ReplayWorker start(final List<String> jvmOptions, final List<String> args, final int index)
        throws IOException
    {
        final ReplayWorker worker = new ReplayWorker(index);
        worker.jvm = new ChildJvm.Options()
            .jvmOptions(jvmOptions)
            .name("kvstash-worker-" + index + "-stdout")
            .lineListener(worker::onLine)
            .start(TraceReplay.WORKER_MAIN_CLASS, args);
        return worker;
    }

    private void onLine(final String line)
    {
        try
        {
            if (line.startsWith(TraceReplay.PROGRESS_PREFIX))
            {
                progress = Long.parseLong(line.substring(TraceReplay.PROGRESS_PREFIX.length()).trim());
            }
            else if (line.startsWith(TraceReplay.RESULT_PREFIX))
            {
                resultNs = System.nanoTime();
                resultLine = line.substring(TraceReplay.RESULT_PREFIX.length());
            }
            else if (line.equals(TraceReplay.READY_LINE))
            {
                ready = true;
            }
            else
            {
                System.err.println("[worker " + index + "] " + line);
            }
        }
        catch (final NumberFormatException ignore)
        {
            // Garbage on stdout: the worker's exit code and missing result say what went wrong.
        }
    }

    int index()
    {
        return index;
    }

    boolean ready()
    {
        return ready;
    }

    long progress()
    {
        return progress;
    }

    /**
     * When its result line arrived ({@link System#nanoTime()}), 0 before.
     *
     * @return ns.
     */
    long resultNs()
    {
        return resultNs;
    }

    void checkAlive()
    {
        if (!jvm.isAlive())
        {
            throw new IllegalStateException("worker " + index + " exited with code " + jvm.exitValue() +
                " before it was ready (see its message above)");
        }
    }

    void go()
    {
        if (!jvm.isAlive())
        {
            throw new IllegalStateException("worker " + index + " is gone");
        }
        jvm.send(TraceReplay.GO_LINE);
    }

    boolean hasExited() throws InterruptedException
    {
        return jvm.waitFor(0);
    }

    void joinReader() throws InterruptedException
    {
        jvm.awaitEndOfOutput(10_000);
    }

    void checkExit()
    {
        final int code = jvm.exitValue();
        if (0 != code || null == resultLine)
        {
            throw new IllegalStateException("worker " + index + " failed (exit code " + code +
                (null == resultLine ? ", no result" : "") + "; see its message above)");
        }
    }

    WorkerResult result()
    {
        return WorkerResult.fromMap(Json.parseObject(resultLine));
    }

    void destroy()
    {
        jvm.close();
    }
}
