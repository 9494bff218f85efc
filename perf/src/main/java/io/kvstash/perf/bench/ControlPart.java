package io.kvstash.perf.bench;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.wire.RequestType;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.AgentRunner;

import java.nio.MappedByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The control part of the bench for one wait mode: control pairs against a fresh kvstash server (plain, with
 * its journal on, DEDICATED, each beside the plain run; under the eviction policy of {@code --eviction} when it is
 * not lru, in alternating rounds with lru servers ({@link EvictionRounds})), then the bare ring echo against an
 * echo agent on a thread of this JVM, each measured by the worker JVM ({@link ControlRun}). Runs on the
 * coordinator's thread. The single control and echo runs are shared with {@link ControlRoundsPart}.
 */
final class ControlPart
{
    private ControlPart()
    {
    }

    /**
     * Runs the part for one wait mode, server and client alike.
     *
     * @param worker   the worker JVM, the client.
     * @param settings settings of the run.
     * @param work     the bench's work directory (servers, journal and echo file go under it).
     * @param waitMode {@link BenchSupport#BUSY_SPIN} or {@link BenchSupport#BACKOFF}.
     * @param progress where progress lines go.
     * @param results  where the summaries go.
     * @throws Exception when a server, the echo agent or the worker fails.
     */
    static void run(
        final WorkerProcess worker,
        final BenchSettings settings,
        final Path work,
        final String waitMode,
        final Consumer<String> progress,
        final BenchResults results) throws Exception
    {
        final WaitMode serverWait = WaitMode.parse(waitMode);
        final Map<String, Object> common = command(waitMode, settings, settings.warmupMs, settings.latencyMs,
            settings.throughputMs, settings.pacedMs);

        progress.accept("control, " + waitMode + ": kvstash server (SHARED, " + serverWait + ") and client " +
            waitMode);
        final Map<String, Object> control = control(worker, work, waitMode, common, settings, results, false,
            ThreadingMode.SHARED, EvictionPolicy.LRU);
        if (EvictionPolicy.LRU != settings.eviction)
        {
            results.controlEviction.put(waitMode, EvictionRounds.run(worker, settings, work, waitMode, progress));
        }
        progress.accept("control, " + waitMode + ": the same with the journal on (serve --capture into " + work +
            ")");
        final Map<String, Object> controlJournal =
            control(worker, work, waitMode, common, settings, null, true, ThreadingMode.SHARED, EvictionPolicy.LRU);
        progress.accept("control, " + waitMode + ": the same with the server DEDICATED (a receiver thread and a " +
            "pipeline thread)");
        final Map<String, Object> controlDedicated =
            control(worker, work, waitMode, common, settings, null, false, ThreadingMode.DEDICATED, EvictionPolicy.LRU);

        progress.accept("echo, " + waitMode + ": bare rings, echo agent " + serverWait + " and client " + waitMode);
        final Map<String, Object> echo = echo(worker, work, waitMode, common, true);
        results.addControl(waitMode, control, echo);
        results.addControlVariant(results.controlJournal, "control journal", waitMode, controlJournal, "no_journal");
        results.addControlVariant(results.controlDedicated, "control dedicated", waitMode, controlDedicated, "shared");
    }

    /**
     * The measuring parameters of a control or echo run, for the worker ({@link ControlRun}).
     *
     * @param waitMode     wait mode of the client.
     * @param settings     settings of the run (its window and paced rate).
     * @param warmupMs     warm-up of each way of measuring.
     * @param latencyMs    one pair in flight.
     * @param throughputMs a window of pairs in flight.
     * @param pacedMs      pairs at the paced rate; 0 leaves that way out.
     * @return a new command map.
     */
    static Map<String, Object> command(
        final String waitMode,
        final BenchSettings settings,
        final long warmupMs,
        final long latencyMs,
        final long throughputMs,
        final long pacedMs)
    {
        final Map<String, Object> command = new LinkedHashMap<>();
        command.put("wait", waitMode);
        command.put("warmup_ms", warmupMs);
        command.put("latency_ms", latencyMs);
        command.put("throughput_ms", throughputMs);
        command.put("window", settings.window);
        command.put("paced_rate", settings.pacedRate);
        command.put("paced_ms", pacedMs);
        return command;
    }

    /**
     * The bare ring echo against an echo agent on a thread of this JVM, idling as the wait mode says.
     *
     * @param worker       the worker JVM, the client.
     * @param work         the bench's work directory (the echo file goes under it).
     * @param waitMode     wait mode of the agent and the client.
     * @param common       the command's measuring parameters.
     * @param wholeRecords whether both sides write and read every byte of the records (see {@link EchoRings}).
     * @return the worker's result.
     * @throws Exception when the echo file or the worker fails.
     */
    static Map<String, Object> echo(
        final WorkerProcess worker,
        final Path work,
        final String waitMode,
        final Map<String, Object> common,
        final boolean wholeRecords) throws Exception
    {
        final Path file = work.resolve("echo-" + waitMode);
        final MappedByteBuffer mapped = BenchSupport.mapNew(file, EchoRings.FILE_LENGTH);
        final EchoRings.EchoAgent agent = new EchoRings.EchoAgent(mapped, wholeRecords);
        final AgentRunner runner = new AgentRunner(WaitMode.parse(waitMode).newIdleStrategy(), Throwable::printStackTrace,
            null, agent);
        AgentRunner.startOnThread(runner);
        try
        {
            final Map<String, Object> command = new LinkedHashMap<>(common);
            command.put("cmd", "echo");
            command.put("file", file.toString());
            command.put("whole_records", wholeRecords);
            return worker.call(command, 300);
        }
        finally
        {
            runner.close();
            BenchSupport.unmap(mapped);
            Files.deleteIfExists(file);
        }
    }

    /**
     * One control run against a fresh server, with or without its journal ({@code serve --capture}) in the
     * bench's work directory, which is on {@code /dev/shm} unless {@code --out} says otherwise, in a threading
     * mode: SHARED (the server's default, and the bench's everywhere else) or DEDICATED. The server's own
     * request times go to {@code results} when given.
     *
     * @param worker        the worker JVM, the client.
     * @param work          the bench's work directory.
     * @param waitMode      wait mode of the server and the client.
     * @param common        the command's measuring parameters.
     * @param settings      settings of the run (the control pool's size).
     * @param results       where the server's own request times go, or null.
     * @param journal       whether the server writes its journal.
     * @param threadingMode the server's threading mode.
     * @param eviction      the server's eviction policy.
     * @return the worker's result, with the server's prepare and commit p50s added.
     * @throws Exception when the server or the worker fails.
     */
    static Map<String, Object> control(
        final WorkerProcess worker,
        final Path work,
        final String waitMode,
        final Map<String, Object> common,
        final BenchSettings settings,
        final BenchResults results,
        final boolean journal,
        final ThreadingMode threadingMode,
        final EvictionPolicy eviction) throws Exception
    {
        final Path dir = work.resolve((journal ? "control-journal-" : "control-") +
            threadingMode.name().toLowerCase(Locale.ROOT) + "-" + eviction.label() + "-" + waitMode);
        final Path capture = work.resolve("control-" + waitMode + ".journal");
        final Map<String, Object> control;
        final ServerContext serverContext = new ServerContext()
            .directory(dir)
            .threadingMode(threadingMode)
            .waitMode(WaitMode.parse(waitMode))
            .storeContext(new StoreContext().poolSizeBytes(settings.controlPoolBytes).eviction(eviction));
        serverContext.pipelineContext().journalFile(journal ? capture : null);
        final KvStashServer server = KvStashServer.launch(serverContext);
        try
        {
            final Map<String, Object> command = new LinkedHashMap<>(common);
            command.put("cmd", "control");
            command.put("dir", server.directory().toString());
            control = worker.call(command, 300);
        }
        finally
        {
            server.close();
            ShmDirectories.delete(dir);
            Files.deleteIfExists(capture);
        }
        // The server's own view (receiver stamp to response written), read once its threads have stopped.
        if (null != server.latency())
        {
            final Histogram prepare = server.latency().requestTotal(RequestType.PREPARE_STORE);
            final Histogram commit = server.latency().requestTotal(RequestType.COMMIT_STORE);
            control.put("server_prepare_p50_us", prepare.getValueAtPercentile(50) / 1e3);
            control.put("server_commit_p50_us", commit.getValueAtPercentile(50) / 1e3);
            if (null != results)
            {
                results.serverTime(waitMode, prepare, commit);
            }
        }
        return control;
    }
}
