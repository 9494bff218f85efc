package io.kvstash.perf.bench;

import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The data part of the bench for one chunk size: the copy and kvstash's store and retrieve against a fresh
 * server per data wait mode, then Redis (when running) and the in-process map, all from the worker JVM. Runs
 * on the coordinator's thread; one row of {@link BenchResults#sizes} per call.
 */
final class SizePart
{
    private SizePart()
    {
    }

    /**
     * Runs the part for one chunk size.
     *
     * @param worker     the worker JVM, the client of every contender.
     * @param redis      the running redis-server, or null to leave Redis out.
     * @param settings   settings of the run.
     * @param work       the bench's work directory (the servers' directories go under it).
     * @param outDir     where the servers' latency logs go.
     * @param chunkBytes bytes of one chunk.
     * @param progress   where progress lines go.
     * @param results    where the row goes.
     * @throws Exception when a server or the worker fails.
     */
    static void run(
        final WorkerProcess worker,
        final RedisContender redis,
        final BenchSettings settings,
        final Path work,
        final Path outDir,
        final long chunkBytes,
        final Consumer<String> progress,
        final BenchResults results) throws Exception
    {
        final String label = BenchSupport.size(chunkBytes);
        final int chunks = settings.chunksPerRep(chunkBytes);
        progress.accept(BenchSupport.fmt("%s: %d chunks per repetition, %d warm-up + %d measured repetitions", label,
            chunks, settings.warmups, settings.reps));
        final Map<String, Map<String, Object>> data = new LinkedHashMap<>();
        long benchGc = 0;
        for (final String waitMode : settings.dataWaitModes)
        {
            final Path dir = work.resolve("server-" + chunkBytes + "-" + waitMode);
            final ServerContext context = new ServerContext()
                .directory(dir)
                .threadingMode(ThreadingMode.SHARED)
                .waitMode(WaitMode.parse(waitMode))
                .latencyLogFile(outDir.resolve("server-" + chunkBytes + "-" + waitMode + ".hlog"))
                .storeContext(new StoreContext().poolSizeBytes(settings.poolBytes));
            progress.accept(label + ", " + waitMode + ": server SHARED " + WaitMode.parse(waitMode) + ", client " +
                waitMode);
            try (KvStashServer server = KvStashServer.launch(context))
            {
                final Map<String, Object> command = new LinkedHashMap<>();
                command.put("cmd", "data");
                command.put("dir", server.directory().toString());
                command.put("chunk_bytes", chunkBytes);
                command.put("reps", settings.reps);
                command.put("warmups", settings.warmups);
                command.put("chunks_per_rep", chunks);
                command.put("wait", waitMode);
                // Start the measured phase with an empty young generation, so the harness's own small
                // allocations (progress lines) cannot trigger a collection counted against the server.
                System.gc();
                final long gc0 = BenchSupport.gcCount();
                data.put(waitMode, worker.call(command, 600));
                benchGc += BenchSupport.gcCount() - gc0;
            }
            finally
            {
                ShmDirectories.delete(dir);
            }
        }
        final Map<String, Object> common = new LinkedHashMap<>();
        common.put("chunk_bytes", chunkBytes);
        common.put("reps", settings.reps);
        common.put("warmups", settings.warmups);
        common.put("chunks_per_rep", chunks);
        Map<String, Object> redisResult = null;
        if (null != redis)
        {
            final Map<String, Object> command = new LinkedHashMap<>(common);
            command.put("cmd", "redis");
            command.put("port", redis.port());
            redisResult = worker.call(command, 900);
        }
        final Map<String, Object> command = new LinkedHashMap<>(common);
        command.put("cmd", "chm");
        final Map<String, Object> chm = worker.call(command, 600);
        results.addSize(chunkBytes, chunks, data, benchGc, redisResult, chm);
    }
}
