package io.kvstash.testkit;

import io.kvstash.cli.WorkerLoadOptions;
import io.kvstash.tools.BundledTrace;
import io.kvstash.tools.Json;
import io.kvstash.tools.TraceReplay;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code kvstash tier-replay}: a {@link SharedTierReplay} at one or more total capacities. Prints a table (one
 * row per capacity, then each host's figures) or, with {@code --json}, one JSON object ({@code runs}: a report
 * per capacity). Exits 1 when a chunk read back failed its checksum.
 */
@Command(name = "tier-replay", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Replays a Mooncake trace over several hosts (servers in their own directories) sharing the second tier " +
            "on one Redis Cluster, each host a share of the pool and of the requests, beside the one-host replay " +
            "at the same total capacity and the hosts without the tier." })
public final class SharedTierReplayCommand implements Callable<Integer>
{
    /** Default bound of each LOOKUP's wait for the tier's read-through, ms. */
    static final long TIER_WAIT_MS_DEFAULT = 50;

    @Spec
    CommandSpec spec;

    @Option(names = "--trace", paramLabel = "FILE",
        description = "Mooncake trace (default: the bundled traces/mooncake_synthetic_trace.jsonl).")
    Path trace;

    @Option(names = "--capacity-chunks", paramLabel = "N", split = ",", defaultValue = "16384",
        description = "Total pool capacity in chunks, split evenly over the hosts; a list runs each " +
            "(default: ${DEFAULT-VALUE}).")
    List<Integer> capacities;

    @Option(names = "--hosts", paramLabel = "H", defaultValue = "2",
        description = "Hosts; request i goes to host i %% H (default: ${DEFAULT-VALUE}).")
    int hosts;

    @Option(names = "--l2", paramLabel = "SEEDS", defaultValue = SharedTierReplay.AUTO,
        description = "The cluster, redis://host:port[,host:port...], or auto to start one with redis-server " +
            "(default: ${DEFAULT-VALUE}).")
    String l2;

    @Mixin
    WorkerLoadOptions load = new WorkerLoadOptions(TraceReplay.PAYLOAD_BYTES_DEFAULT, TIER_WAIT_MS_DEFAULT);

    @Option(names = "--json", description = "Print one JSON object on standard output.")
    boolean json;

    /**
     * A command with default options (picocli sets the fields).
     */
    public SharedTierReplayCommand()
    {
    }

    /**
     * Runs the replays.
     *
     * @return 0, or 1 when a checksum mismatched.
     * @throws Exception when a replay cannot run.
     */
    @Override
    public Integer call() throws Exception
    {
        final Path tracePath = null == trace ? BundledTrace.locate() : trace;
        final List<Map<String, Object>> runs = new ArrayList<>();
        long mismatches = 0;
        for (final int capacity : capacities)
        {
            final Map<String, Object> run = new SharedTierReplay().trace(tracePath).capacityChunks(capacity)
                .hosts(hosts).l2Seeds(l2).tierWaitMs(load.tierWaitMs()).payloadBytes(load.payloadBytes())
                .log(System.err).run();
            mismatches += (long)run.get("checksum_mismatches");
            runs.add(run);
        }
        final PrintWriter out = spec.commandLine().getOut();
        if (json)
        {
            out.println(Json.write(Map.of("runs", runs)));
        }
        else
        {
            printTable(out, runs);
        }
        out.flush();
        return 0 == mismatches ? 0 : 1;
    }

    @SuppressWarnings("unchecked")
    private void printTable(final PrintWriter out, final List<Map<String, Object>> runs)
    {
        out.printf(Locale.ROOT, "hit chunks of %s, %d hosts, LOOKUPs waiting up to %d ms for the tier%n",
            runs.get(0).get("trace"), hosts, load.tierWaitMs());
        out.printf(Locale.ROOT, "%10s | %10s | %22s | %22s | %14s | %10s | %10s%n", "capacity", "one host",
            hosts + " hosts without tier", hosts + " hosts with tier", "l2 fetch hits", "l2 writes", "mismatches");
        for (final Map<String, Object> run : runs)
        {
            final Map<String, Object> with = (Map<String, Object>)run.get("hosts_with_tier");
            out.printf(Locale.ROOT, "%,10d | %,10d | %,22d | %,22d | %,14d | %,10d | %10d%n",
                run.get("capacity_chunks"), ((Map<String, Object>)run.get("one_host")).get("hit_chunks"),
                ((Map<String, Object>)run.get("hosts_without_tier")).get("hit_chunks"), with.get("hit_chunks"),
                with.get("l2_fetch_hits"), with.get("l2_writes"), run.get("checksum_mismatches"));
        }
        for (final Map<String, Object> run : runs)
        {
            for (final String kind : new String[]{ "hosts_without_tier", "hosts_with_tier" })
            {
                for (final Object h : (List<Object>)((Map<String, Object>)run.get(kind)).get("per_host"))
                {
                    final Map<String, Object> host = (Map<String, Object>)h;
                    out.printf(Locale.ROOT, "%,10d %-18s host %s: %,d requests, %,d / %,d hit chunks%s%n",
                        run.get("capacity_chunks"), kind, host.get("host"), host.get("requests"),
                        host.get("hit_chunks"), host.get("chunks"), host.containsKey("l2_writes") ?
                        String.format(Locale.ROOT, ", l2_writes %,d, l2_write_skips %,d, l2_notices_dropped %,d, " +
                            "l2_fetch_hits %,d, l2_fetch_misses %,d, l2_timeouts %,d, l2_errors %,d",
                            host.get("l2_writes"), host.get("l2_write_skips"), host.get("l2_notices_dropped"),
                            host.get("l2_fetch_hits"), host.get("l2_fetch_misses"), host.get("l2_timeouts"),
                            host.get("l2_errors")) : "");
                }
            }
        }
    }
}
