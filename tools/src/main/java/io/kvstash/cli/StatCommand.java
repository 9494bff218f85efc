package io.kvstash.cli;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.server.Sizes;
import io.kvstash.tools.ControlFileReader;
import io.kvstash.tools.Json;
import io.kvstash.wire.file.ControlFileDescriptor;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine;
import io.kvstash.wire.file.CountersDescriptor;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * {@code kvstash stat}: maps a server's control file read-only and prints a summary that answers an operator's
 * questions first (alive or dead, uptime, clients, pool used and free, chunks, hit ratio, evictions, bytes in and
 * out, errors), then every non-zero counter, by the name the file labels it with, and what it counts. Works on a
 * running server and on the files a dead one left, without the server's help. Exit codes: 0 a live server, 1 no
 * server (no control file), 2 a dead server (its control file is left but it stopped beating or its process is gone).
 */
@Command(name = "stat", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Prints a server's summary (uptime, clients, pool, chunks, hit ratio, evictions, bytes, errors) and its " +
            "non-zero counters, read from its mapped control file.",
        "Exit code 0: the server is alive; 1: no server (no control file); 2: a dead server's files are left." })
public final class StatCommand implements Callable<Integer>
{
    /** Exit code of a live server. */
    static final int EXIT_ALIVE = 0;
    /** Exit code when no server ran on the directory or it shut down cleanly. */
    static final int EXIT_NO_SERVER = 1;
    /** Exit code when a dead server's control file is left. */
    static final int EXIT_DEAD = 2;

    @Spec
    CommandSpec spec;

    @Mixin
    DirectoryOption directory;

    @Option(names = "--file", paramLabel = "FILE",
        description = "Read this control file instead (e.g. a dead-control-* file a later server kept).")
    Path file;

    @Option(names = "--watch", paramLabel = "SECONDS",
        description = "Print again every SECONDS seconds until interrupted.")
    int watchSeconds;

    @Option(names = "--json", description = "Print one JSON object on standard output, also when there is no " +
        "server (one per line with --watch).")
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
     * @return 0 alive, 1 no server, 2 dead server (of the last print).
     * @throws Exception when the file cannot be read.
     */
    @Override
    public Integer call() throws Exception
    {
        final PrintWriter out = spec.commandLine().getOut();
        final PrintWriter err = spec.commandLine().getErr();
        final Path path = null != file ? file :
            directory.orDefault().resolve(ControlFileDescriptor.FILE_NAME);
        if (watchSeconds < 0)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--watch " + watchSeconds + " is negative: give seconds > 0, or leave it out to print once");
        }
        while (true)
        {
            final int exitCode = printOnce(path, out, err);
            out.flush();
            err.flush();
            if (0 == watchSeconds)
            {
                return exitCode;
            }
            Thread.sleep(TimeUnit.SECONDS.toMillis(watchSeconds));
            if (!json)
            {
                out.println();
            }
        }
    }

    private int printOnce(final Path path, final PrintWriter out, final PrintWriter err) throws IOException
    {
        final ControlFileReader reader;
        try
        {
            reader = ControlFileReader.open(path);
        }
        catch (final NoSuchFileException ex)
        {
            if (json)
            {
                final Map<String, Object> none = new LinkedHashMap<>();
                none.put("file", path.toAbsolutePath().toString());
                none.put("server", "none");
                none.put("alive", false);
                out.println(Json.write(none));
            }
            err.println("kvstash stat: no server: " + path + " does not exist (no server has run on the " +
                "directory, or it shut down cleanly)");
            return EXIT_NO_SERVER;
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
            return reader.isAlive(nowMs) ? EXIT_ALIVE : EXIT_DEAD;
        }
    }

    /**
     * The facts, summary and non-zero counters of a control file.
     *
     * @param reader mapped control file.
     * @param nowMs  wall clock now.
     * @return JSON-ready map.
     */
    static Map<String, Object> toMap(final ControlFileReader reader, final long nowMs)
    {
        final Map<String, Object> map = new LinkedHashMap<>();
        final boolean alive = reader.isAlive(nowMs);
        map.put("file", reader.path().toAbsolutePath().toString());
        map.put("server", alive ? "alive" : "dead");
        map.put("pid", reader.pid());
        map.put("incarnation", Long.toHexString(reader.incarnation()));
        map.put("state", reader.stateName());
        map.put("alive", alive);
        map.put("start_time_ms", reader.startTimeMs());
        map.put("heartbeat_age_ms", nowMs - reader.heartbeatMs());
        map.put("pool_file", reader.poolFileName());
        map.put("pool_bytes", reader.configLong(ControlFileDescriptor.POOL_SIZE_OFFSET));
        map.put("alignment", reader.configInt(ControlFileDescriptor.ALIGNMENT_OFFSET));
        map.put("chunk_tokens", reader.configInt(ControlFileDescriptor.CHUNK_TOKENS_OFFSET));
        map.put("lease_ms", TimeUnit.NANOSECONDS.toMillis(reader.configLong(ControlFileDescriptor.LEASE_NS_OFFSET)));
        map.put("max_clients", reader.configInt(ControlFileDescriptor.MAX_CLIENTS_OFFSET));
        map.put("eviction", evictionPolicy(reader));
        map.put("summary", Summary.of(reader, nowMs).toMap());
        final Map<String, Object> counters = new LinkedHashMap<>();
        for (int id = 0; id < reader.counterCount(); id++)
        {
            final String name = reader.counterName(id);
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
        final Summary summary = Summary.of(reader, nowMs);
        final boolean processAlive = ProcessHandle.of(reader.pid()).map(ProcessHandle::isAlive).orElse(false);
        final long heartbeatAgeMs = nowMs - reader.heartbeatMs();
        if (alive)
        {
            out.printf("kvstash server: alive, pid %d, %s%n", reader.pid(), reader.path().toAbsolutePath());
        }
        else
        {
            out.printf("kvstash server: DEAD (%s), pid %d, %s%n", processAlive ?
                "no heartbeat for " + Sizes.formatDuration(TimeUnit.MILLISECONDS.toNanos(heartbeatAgeMs)) :
                "process gone", reader.pid(), reader.path().toAbsolutePath());
        }
        row(out, "uptime", formatAge(summary.uptimeMs) + " (started " + Instant.ofEpochMilli(reader.startTimeMs()) +
            ", incarnation " + Long.toHexString(reader.incarnation()) + ")");
        row(out, "clients", String.format(Locale.ROOT, "%,d connected (%,d since start, %,d reaped after dying; " +
            "at most %,d)", summary.clients, summary.clientsSinceStart, summary.deadClients,
            reader.configInt(ControlFileDescriptor.MAX_CLIENTS_OFFSET)));
        row(out, "pool", poolLine(summary, reader.poolFileName()));
        row(out, "memory", memoryLine(reader, summary));
        row(out, "chunks", String.format(Locale.ROOT, "%,d readable, %,d being written, %,d pinned; " +
            "%,d instances registered", summary.readableChunks, summary.reservedChunks, summary.pinnedChunks,
            summary.instances));
        final long looked = summary.lookupHitChunks + summary.lookupMissChunks;
        row(out, "hit ratio", 0 == looked ? "no lookups yet" : String.format(Locale.ROOT,
            "%.2f %% of looked-up chunks (%,d of %,d)", 100.0 * summary.lookupHitChunks / looked,
            summary.lookupHitChunks, looked));
        final String eviction = evictionPolicy(reader);
        final boolean admits = summary.coldChunks > 0 || EvictionPolicy.SLRU_ADMIT.label().equals(eviction);
        final String cold = summary.storedChunks > 0 && admits ? String.format(Locale.ROOT,
            "; %,d of the %,d chunks stored went in cold (admission)", summary.coldChunks, summary.storedChunks) : "";
        row(out, "evictions", String.format(Locale.ROOT, "%,d chunks", summary.evictions) + cold);
        row(out, "bytes in/out", Sizes.formatSize(summary.bytesIn) + " stored, " + Sizes.formatSize(summary.bytesOut) +
            " retrieved" + (0 == summary.copyBytesIn + summary.copyBytesOut ? "" : " (through the copy transport: " +
            Sizes.formatSize(summary.copyBytesIn) + " in, " + Sizes.formatSize(summary.copyBytesOut) + " out)"));
        row(out, "errors", 0 == summary.errors ? "none" : String.format(Locale.ROOT,
            "%,d unexpected (kvstash errors prints them)", summary.errors));
        row(out, "heartbeat", heartbeatAgeMs + " ms ago (clients give up after " + reader.heartbeatTimeoutMs() +
            " ms)");
        row(out, "config", "alignment " + reader.configInt(ControlFileDescriptor.ALIGNMENT_OFFSET) +
            ", chunk tokens " + reader.configInt(ControlFileDescriptor.CHUNK_TOKENS_OFFSET) + ", lease " +
            Sizes.formatDuration(reader.configLong(ControlFileDescriptor.LEASE_NS_OFFSET)) +
            (null == eviction ? "" : ", eviction " + eviction));
        if (0 != reader.counter(CountersDescriptor.L2_STATE))
        {
            row(out, "second tier", secondTierLine(reader));
        }
        out.println("counters (non-zero)");
        boolean any = false;
        final StringBuilder housekeeping = new StringBuilder();
        for (int id = 0; id < reader.counterCount(); id++)
        {
            final long value = reader.counter(id);
            if (0 == value)
            {
                continue;
            }
            final String name = reader.counterName(id);
            if (null != name && (name.startsWith("requests.sweep.") || name.startsWith("requests.reap.")))
            {
                housekeeping.append(housekeeping.length() == 0 ? "" : ", ")
                    .append(name.startsWith("requests.sweep.") ? "lease sweeps " : "reaps of dead clients ")
                    .append(String.format(Locale.ROOT, "%,d", value));
                continue;
            }
            final String description = describe(id, name);
            out.printf(Locale.ROOT, "  %-40s %,15d  %s%n", null == name ? "counter_" + id : name, value, description);
            any = true;
        }
        if (!any)
        {
            out.println("  (all zero)");
        }
        if (housekeeping.length() > 0)
        {
            out.println("the server's own housekeeping: " + housekeeping);
        }
    }

    private static String describe(final int id, final String name)
    {
        // The table's sentence only where the file names the counter as the table does (a server of another version).
        final String description = null != name && name.equals(CountersDescriptor.name(id)) ?
            CountersDescriptor.description(id) : null;
        if (null != description)
        {
            return description;
        }
        if (null != name && name.startsWith("requests."))
        {
            final int dot = name.lastIndexOf('.');
            return "Answers to " + name.substring("requests.".length(), dot).toUpperCase(Locale.ROOT) + " with " +
                name.substring(dot + 1).toUpperCase(Locale.ROOT) + ".";
        }
        return "";
    }

    private static String secondTierLine(final ControlFileReader reader)
    {
        final long state = reader.counter(CountersDescriptor.L2_STATE);
        final String[] states = {"off", "connecting", "up", "down (reconnecting once a second)"};
        return String.format(Locale.ROOT, "%s; written %,d (%s), skipped %,d, write errors %,d; fetched %,d (%s), " +
            "misses %,d, corrupt %,d; timeouts %,d, errors %,d",
            state >= 0 && state < states.length ? states[(int)state] : "state " + state,
            reader.counter(CountersDescriptor.L2_WRITES), Sizes.formatSize(reader.counter(CountersDescriptor.L2_BYTES_WRITTEN)),
            reader.counter(CountersDescriptor.L2_WRITE_SKIPS), reader.counter(CountersDescriptor.L2_WRITE_ERRORS),
            reader.counter(CountersDescriptor.L2_FETCH_HITS), Sizes.formatSize(reader.counter(CountersDescriptor.L2_BYTES_FETCHED)),
            reader.counter(CountersDescriptor.L2_FETCH_MISSES), reader.counter(CountersDescriptor.L2_CORRUPT_VALUES),
            reader.counter(CountersDescriptor.L2_TIMEOUTS), reader.counter(CountersDescriptor.L2_ERRORS));
    }

    private static String poolLine(final Summary summary, final String poolFile)
    {
        final String size = Sizes.formatSize(summary.poolBytes) + " in " + poolFile;
        if (0 == summary.slotCapacity)
        {
            return size + ": all free (its slots are cut when the first layout registers)";
        }
        return String.format(Locale.ROOT, "%s: %.1f %% used (%,d of %,d chunk slots), about %s free", size,
            100.0 * summary.usedSlots() / summary.slotCapacity, summary.usedSlots(), summary.slotCapacity,
            Sizes.formatSize(summary.poolFreeBytes()));
    }

    /**
     * Committed against configured: what the pool holds of the machine's memory now.
     */
    private static String memoryLine(final ControlFileReader reader, final Summary summary)
    {
        final boolean onDemand =
            (reader.configInt(ControlFileDescriptor.FEATURES_OFFSET) & ControlFileDescriptor.FEATURE_POOL_ON_DEMAND) != 0;
        if (0 == summary.poolBytesConfigured)
        {
            return "not reported by this server";
        }
        final String how = onDemand ? "committed on demand, as the store grows" :
            summary.poolBytesCommitted >= summary.poolBytesConfigured ? "every page prepared" :
            "pages being prepared";
        return String.format(Locale.ROOT, "%s committed of %s configured (%.1f %%; %s)",
            Sizes.formatSize(summary.poolBytesCommitted), Sizes.formatSize(summary.poolBytesConfigured),
            100.0 * summary.poolBytesCommitted / summary.poolBytesConfigured, how);
    }

    private static void row(final PrintWriter out, final String name, final String value)
    {
        out.printf("  %-14s %s%n", name, value);
    }

    private static String formatAge(final long ms)
    {
        final long s = Math.max(0, ms / 1000);
        if (s < 60)
        {
            return s + " s";
        }
        if (s < 3600)
        {
            return (s / 60) + " min " + (s % 60) + " s";
        }
        return (s / 3600) + " h " + (s % 3600 / 60) + " min";
    }

    /**
     * The server's eviction policy as {@code --eviction} names it.
     *
     * @param reader mapped control file.
     * @return the policy's name; null from a server that does not write it.
     */
    static String evictionPolicy(final ControlFileReader reader)
    {
        final int code = reader.configInt(ControlFileDescriptor.EVICTION_POLICY_OFFSET);
        if (0 == code)
        {
            return null;
        }
        try
        {
            return EvictionPolicy.ofCode(code - 1).label();
        }
        catch (final IllegalArgumentException ex)
        {
            return "code " + (code - 1);
        }
    }

    /**
     * The summary's figures, read once from the counters.
     */
    static final class Summary
    {
        long uptimeMs;
        long clients;
        long clientsSinceStart;
        long deadClients;
        long poolBytes;
        long poolBytesConfigured;
        long poolBytesCommitted;
        long slotCapacity;
        long freeSlots;
        long readableChunks;
        long reservedChunks;
        long pinnedChunks;
        long instances;
        long lookupHitChunks;
        long lookupMissChunks;
        long evictions;
        long storedChunks;
        long coldChunks;
        long bytesIn;
        long bytesOut;
        long copyBytesIn;
        long copyBytesOut;
        long errors;

        static Summary of(final ControlFileReader reader, final long nowMs)
        {
            final Summary s = new Summary();
            s.uptimeMs = Math.max(0, (reader.isAlive(nowMs) ? nowMs : reader.heartbeatMs()) - reader.startTimeMs());
            s.clients = reader.counter(CountersDescriptor.WIRE_CLIENTS);
            s.clientsSinceStart = reader.counter(CountersDescriptor.WIRE_CLIENTS_ATTACHED);
            s.deadClients = reader.counter(CountersDescriptor.DEAD_CLIENTS);
            s.poolBytes = reader.configLong(ControlFileDescriptor.POOL_SIZE_OFFSET);
            s.poolBytesConfigured = reader.counter(CountersDescriptor.POOL_BYTES_CONFIGURED);
            s.poolBytesCommitted = reader.counter(CountersDescriptor.POOL_BYTES_COMMITTED);
            s.slotCapacity = reader.counter(CountersDescriptor.SLOT_CAPACITY);
            s.freeSlots = reader.counter(CountersDescriptor.FREE_SLOTS);
            s.readableChunks = reader.counter(CountersDescriptor.READABLE_CHUNKS);
            s.reservedChunks = reader.counter(CountersDescriptor.RESERVED_CHUNKS);
            s.pinnedChunks = reader.counter(CountersDescriptor.PINNED_CHUNKS);
            s.instances = reader.counter(CountersDescriptor.INSTANCES);
            s.lookupHitChunks = reader.counter(CountersDescriptor.LOOKUP_HIT_CHUNKS);
            s.lookupMissChunks = reader.counter(CountersDescriptor.LOOKUP_MISS_CHUNKS);
            s.evictions = reader.counter(CountersDescriptor.EVICTIONS);
            s.storedChunks = reader.counter(CountersDescriptor.STORED_CHUNKS);
            s.coldChunks = reader.counter(CountersDescriptor.COLD_CHUNKS);
            s.bytesIn = reader.counter(CountersDescriptor.BYTES_IN);
            s.bytesOut = reader.counter(CountersDescriptor.BYTES_OUT);
            s.copyBytesIn = reader.counter(CountersDescriptor.COPY_BYTES_IN);
            s.copyBytesOut = reader.counter(CountersDescriptor.COPY_BYTES_OUT);
            s.errors = reader.counter(CountersDescriptor.ERRORS);
            return s;
        }

        long usedSlots()
        {
            return Math.max(0, slotCapacity - freeSlots);
        }

        /**
         * Free bytes: the pool's share of free slots, or the whole pool before its slots are cut.
         */
        long poolFreeBytes()
        {
            return 0 == slotCapacity ? poolBytes : (long)((double)poolBytes * freeSlots / slotCapacity);
        }

        Map<String, Object> toMap()
        {
            final Map<String, Object> map = new LinkedHashMap<>();
            map.put("uptime_ms", uptimeMs);
            map.put("clients", clients);
            map.put("clients_since_start", clientsSinceStart);
            map.put("dead_clients", deadClients);
            map.put("pool_bytes", poolBytes);
            map.put("pool_free_bytes", poolFreeBytes());
            map.put("pool_used_bytes", poolBytes - poolFreeBytes());
            map.put("pool_committed_bytes", poolBytesCommitted);
            map.put("slot_capacity", slotCapacity);
            map.put("used_slots", usedSlots());
            map.put("free_slots", freeSlots);
            map.put("readable_chunks", readableChunks);
            map.put("reserved_chunks", reservedChunks);
            map.put("pinned_chunks", pinnedChunks);
            map.put("instances", instances);
            final long looked = lookupHitChunks + lookupMissChunks;
            map.put("hit_ratio", 0 == looked ? null : (double)lookupHitChunks / looked);
            map.put("evictions", evictions);
            map.put("stored_chunks", storedChunks);
            map.put("cold_chunks", coldChunks);
            map.put("bytes_in", bytesIn);
            map.put("bytes_out", bytesOut);
            map.put("copy_bytes_in", copyBytesIn);
            map.put("copy_bytes_out", copyBytesOut);
            map.put("errors", errors);
            return map;
        }
    }
}
