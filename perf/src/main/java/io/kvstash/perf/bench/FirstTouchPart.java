package io.kvstash.perf.bench;

import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.server.StartupContext;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The first-touch part of the bench, against which the server's pool preparation is weighed: a pool that
 * neither the server nor the client prepared, stored into once and again (the worker's {@code first_touch}
 * command). Runs on the coordinator's thread; the result goes to {@link BenchResults#firstTouch}.
 */
final class FirstTouchPart
{
    /** Pool of the first-touch measurement: every page of it faulted in by one pass of stores. */
    static final long POOL_BYTES = 256L << 20;
    /** Chunk size of the first-touch measurement. */
    static final long CHUNK_BYTES = 2L << 20;

    private FirstTouchPart()
    {
    }

    /**
     * Runs the part against a fresh server that does not pre-touch its pool.
     *
     * @param worker   the worker JVM, the client.
     * @param work     the bench's work directory (the server's directory goes under it).
     * @param progress where progress lines go.
     * @param results  where the result goes.
     * @throws Exception when the server or the worker fails.
     */
    static void run(
        final WorkerProcess worker, final Path work, final Consumer<String> progress, final BenchResults results)
        throws Exception
    {
        final Path dir = work.resolve("server-first-touch");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.SHARED)
            .waitMode(WaitMode.parse(BenchSupport.BUSY_SPIN))
            .startupContext(new StartupContext().pretouch(false))
            .storeContext(new StoreContext().poolSizeBytes(POOL_BYTES));
        progress.accept("first touch: a " + BenchSupport.size(POOL_BYTES) + " pool nobody prepared, " +
            BenchSupport.size(CHUNK_BYTES) + " chunks");
        try (KvStashServer server = KvStashServer.launch(context))
        {
            final Map<String, Object> command = new LinkedHashMap<>();
            command.put("cmd", "first_touch");
            command.put("dir", server.directory().toString());
            command.put("chunk_bytes", CHUNK_BYTES);
            command.put("wait", BenchSupport.BUSY_SPIN);
            results.firstTouch = worker.call(command, 300);
        }
    }
}
