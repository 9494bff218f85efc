package io.kvstash.ipc.cli;

import io.kvstash.core.StoreCounters;
import io.kvstash.ipc.file.ControlFileDescriptor;
import io.kvstash.ipc.file.SecureDirectory;
import io.kvstash.ipc.tools.ControlFileReader;
import io.kvstash.ipc.tools.Json;
import io.kvstash.ipc.tools.Sizes;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * {@code kvstash stat}: maps a server's control file read-only and prints its header facts (pid,
 * incarnation, state, heartbeat age, alive or not), configuration and every non-zero counter by name. Works
 * on a running server and on the files a dead one left, without the server's help.
 */
@Command(name = "stat", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Prints a server's state and non-zero counters from its mapped control file (running or dead server).",
        "Exit code 1 when there is no control file to read." })
public final class StatCommand implements Callable<Integer>
{
    @Spec
    CommandSpec spec;

    @Option(names = "--dir", paramLabel = "DIR",
        description = "Shared-memory directory (default: /dev/shm/kvstash-$USER).")
    Path directory;

    @Option(names = "--file", paramLabel = "FILE",
        description = "Read this control file instead (e.g. a dead-control-* file a later server kept).")
    Path file;

    @Option(names = "--watch", paramLabel = "SECONDS",
        description = "Print again every SECONDS seconds until interrupted.")
    int watchSeconds;

    @Option(names = "--json", description = "Print one JSON object (one per line with --watch).")
    boolean json;

    /**
     * A command with default options (picocli sets the fields).
     */
    public StatCommand()
    {
    }

    /**
     * Prints the statistics once, or every {@code --watch} seconds.
     *
     * @return 0, or 1 when there is no control file.
     * @throws Exception when the file cannot be read.
     */
    @Override
    public Integer call() throws Exception
    {
        final PrintWriter out = spec.commandLine().getOut();
        final PrintWriter err = spec.commandLine().getErr();
        final Path path = null != file ? file :
            (null == directory ? SecureDirectory.defaultDirectory() : directory).resolve(ControlFileDescriptor.FILE_NAME);
        if (watchSeconds < 0)
        {
            throw new IllegalArgumentException("--watch must be positive");
        }
        while (true)
        {
            final boolean found = printOnce(path, out, err);
            out.flush();
            err.flush();
            if (0 == watchSeconds)
            {
                return found ? 0 : 1;
            }
            Thread.sleep(TimeUnit.SECONDS.toMillis(watchSeconds));
            if (!json)
            {
                out.println();
            }
        }
    }

    private boolean printOnce(final Path path, final PrintWriter out, final PrintWriter err) throws IOException
    {
        final ControlFileReader reader;
        try
        {
            reader = ControlFileReader.open(path);
        }
        catch (final NoSuchFileException ex)
        {
            err.println("kvstash stat: no control file " + path + " (no server has run on the directory, or it " +
                "shut down cleanly)");
            return false;
        }
        try (reader)
        {
            final long nowMs = System.currentTimeMillis();
            if (json)
            {
                out.println(Json.write(toMap(reader, nowMs)));
            }
            else
            {
                print(reader, nowMs, out);
            }
        }
        return true;
    }

    /**
     * The facts and non-zero counters of a control file.
     *
     * @param reader mapped control file.
     * @param nowMs  wall clock now.
     * @return JSON-ready map.
     */
    static Map<String, Object> toMap(final ControlFileReader reader, final long nowMs)
    {
        final Map<String, Object> map = new LinkedHashMap<>();
        map.put("file", reader.path().toAbsolutePath().toString());
        map.put("pid", reader.pid());
        map.put("incarnation", Long.toHexString(reader.incarnation()));
        map.put("state", reader.stateName());
        map.put("alive", reader.isAlive(nowMs));
        map.put("start_time_ms", reader.startTimeMs());
        map.put("heartbeat_age_ms", nowMs - reader.heartbeatMs());
        map.put("pool_file", reader.poolFileName());
        map.put("pool_bytes", reader.configLong(ControlFileDescriptor.POOL_SIZE_OFFSET));
        map.put("alignment", reader.configInt(ControlFileDescriptor.ALIGNMENT_OFFSET));
        map.put("chunk_tokens", reader.configInt(ControlFileDescriptor.CHUNK_TOKENS_OFFSET));
        map.put("lease_ms", TimeUnit.NANOSECONDS.toMillis(reader.configLong(ControlFileDescriptor.LEASE_NS_OFFSET)));
        map.put("max_clients", reader.configInt(ControlFileDescriptor.MAX_CLIENTS_OFFSET));
        final Map<String, Object> counters = new LinkedHashMap<>();
        for (int id = 0; id < reader.counterCount(); id++)
        {
            final String name = StoreCounters.name(id);
            final long value = reader.counter(id);
            if (0 != value)
            {
                counters.put(null == name ? "counter_" + id : name, value);
            }
        }
        map.put("counters", counters);
        return map;
    }

    private static void print(final ControlFileReader reader, final long nowMs, final PrintWriter out)
    {
        final boolean alive = reader.isAlive(nowMs);
        final long heartbeatAgeMs = nowMs - reader.heartbeatMs();
        out.println("kvstash server " + reader.path().toAbsolutePath());
        out.printf("  %-16s %d%s%n", "pid", reader.pid(),
            ProcessHandle.of(reader.pid()).map(ProcessHandle::isAlive).orElse(false) ? "" : " (no such process)");
        out.printf("  %-16s %x%n", "incarnation", reader.incarnation());
        out.printf("  %-16s %s, %s%n", "state", reader.stateName(), alive ? "alive" : "NOT alive");
        out.printf("  %-16s %s (%d s ago)%n", "started", Instant.ofEpochMilli(reader.startTimeMs()),
            Math.max(0, (nowMs - reader.startTimeMs()) / 1000));
        out.printf("  %-16s %d ms ago (clients give up after %d ms)%n", "heartbeat", heartbeatAgeMs,
            reader.heartbeatTimeoutMs());
        out.printf("  %-16s %s in %s, alignment %d, chunk tokens %d, lease %s%n", "pool",
            Sizes.formatSize(reader.configLong(ControlFileDescriptor.POOL_SIZE_OFFSET)), reader.poolFileName(),
            reader.configInt(ControlFileDescriptor.ALIGNMENT_OFFSET),
            reader.configInt(ControlFileDescriptor.CHUNK_TOKENS_OFFSET),
            Sizes.formatDuration(reader.configLong(ControlFileDescriptor.LEASE_NS_OFFSET)));
        out.println("counters (non-zero)");
        boolean any = false;
        for (int id = 0; id < reader.counterCount(); id++)
        {
            final long value = reader.counter(id);
            if (0 != value)
            {
                final String name = StoreCounters.name(id);
                out.printf("  %-44s %,d%n", null == name ? "counter_" + id : name, value);
                any = true;
            }
        }
        if (!any)
        {
            out.println("  (all zero)");
        }
    }
}
