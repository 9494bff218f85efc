package io.kvstash.cli;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.tools.TraceReplay;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/**
 * The options of the embedded server and its worker processes that {@code replay} and {@code demo} share: the
 * server's directory, threading, wait mode and eviction policy, how the workers wait, and the latency log.
 */
public final class ReplayServerOptions
{
    @Option(names = "--dir", paramLabel = "DIR",
        description = "Server directory (default: a fresh directory under /dev/shm, removed afterwards).")
    Path directory;

    @Option(names = "--threading", paramLabel = "MODE", converter = Converters.Threading.class,
        defaultValue = "shared", description = "Server threading mode (default: ${DEFAULT-VALUE}).")
    ThreadingMode threadingMode;

    @Option(names = "--wait", paramLabel = "MODE", converter = Converters.Wait.class, defaultValue = "backoff",
        description = "Server wait mode (default: ${DEFAULT-VALUE}).")
    WaitMode waitMode;

    @Option(names = "--client-wait", paramLabel = "MODE", converter = Converters.Wait.class,
        description = "How the workers wait for responses: busy-spin, yielding, backoff or blocking " +
            "(default: the client library's: spin, yield, and park only after a millisecond on 4 cores or more).")
    WaitMode clientWait;

    @Option(names = "--eviction", paramLabel = "NAME", converter = Converters.Eviction.class, defaultValue = "lru",
        description = "The server's eviction policy: lru (exact), chain, slru, slru-admit, or default " +
            "(default: ${DEFAULT-VALUE}).")
    EvictionPolicy eviction;

    @Option(names = "--hlog", paramLabel = "FILE", description = "Write the latency as an HdrHistogram interval " +
        "log: the server's by request type and stage, the workers' end to end (read it with 'kvstash latency').")
    Path latencyLog;

    /**
     * Options with their defaults.
     */
    public ReplayServerOptions()
    {
    }

    /**
     * Sets these options on a replay.
     *
     * @param replay the replay.
     * @return the replay.
     */
    TraceReplay applyTo(final TraceReplay replay)
    {
        return replay
            .directory(null == directory ? null : directory.toAbsolutePath())
            .threadingMode(threadingMode)
            .waitMode(waitMode)
            .clientWaitMode(clientWait)
            .latencyLog(latencyLog)
            .eviction(eviction);
    }
}
