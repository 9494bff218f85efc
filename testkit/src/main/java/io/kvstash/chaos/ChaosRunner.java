package io.kvstash.chaos;

import io.kvstash.client.ClientResponse;
import io.kvstash.core.StoreContext;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.ServerContext;
import io.kvstash.wire.RequestType;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The reliability suites against a real server and real worker processes, one class each: kill chaos at
 * failpoints ({@link KillSuite}), zombie fencing ({@link ZombieSuite}), server kill and restart under load
 * ({@link RestartSuite}), wire fuzzing ({@link FuzzSuite}), pool exhaustion ({@link ExhaustionSuite}) and the
 * second tier under cluster faults ({@link L2Suite}, skipped without {@code redis-server}). Each
 * suite adds its figures to one report, printed as JSON by {@code kvstash chaos --json}.
 */
public final class ChaosRunner
{
    /** Bytes of every chaos chunk. */
    public static final int CHUNK_BYTES = 4096;

    /** Every suite, in the order a run takes them. */
    static final List<ChaosSuite> SUITES = List.of(
        new KillSuite(), new ZombieSuite(), new RestartSuite(), new FuzzSuite(), new ExhaustionSuite(), new L2Suite());

    /**
     * What to run and for how long.
     */
    public static final class Options
    {
        /** Kill chaos duration. */
        public long killSeconds = 20;
        /** Concurrent load workers. */
        public int workers = 3;
        /** Verified reads to reach before the kill chaos ends (0: time only). */
        public long minVerifiedReads = 0;
        /** Zombie fencing repetitions. */
        public int zombieReps = 20;
        /** Server kill and restart cycles. */
        public int restarts = 1;
        /** Fuzz records. */
        public long fuzzRecords = 20_000;
        /** Exhaustion: chunks demanded per round, as a multiple of the pool's capacity. */
        public int exhaustionFactor = 3;
        /** Exhaustion: rounds of that demand. */
        public int exhaustionRounds = 4;
        /** Second tier: seconds of load between two faults. */
        public long l2PhaseSeconds = 5;
        /** Second tier: worker processes on each of the two hosts. */
        public int l2WorkersPerHost = 2;
        /** Second tier: masters killed with SIGKILL, one after the other. */
        public int l2NodeKills = 1;
        /** Second tier: stops and starts of the whole cluster. */
        public int l2ClusterRestarts = 1;
        /** Seed of every random choice. */
        public long seed = 42;
        /** Where the suites' server directories go. */
        public Path baseDirectory = ShmDirectories.base();
        /** Suites to run: kill, zombie, restart, fuzz, exhaustion, l2. */
        public java.util.Set<String> suites = new java.util.HashSet<>(suiteNames());
        /** Progress lines, or null. */
        public PrintStream progress = System.err;

        /**
         * The quick profile: under two minutes on two cores.
         *
         * @return options.
         */
        public static Options quick()
        {
            return new Options();
        }

        /**
         * The long profile: at least 10^6 verified reads, 1,000 zombie repetitions, 10^6 fuzz records; for the second
         * tier 30 s phases, 3 master kills and 2 cluster restarts.
         *
         * @return options.
         */
        public static Options full()
        {
            final Options options = new Options();
            options.killSeconds = 120;
            options.minVerifiedReads = 1_000_000;
            options.zombieReps = 1_000;
            options.restarts = 3;
            options.fuzzRecords = 1_000_000;
            options.exhaustionRounds = 1_000;
            options.l2PhaseSeconds = 30;
            options.l2NodeKills = 3;
            options.l2ClusterRestarts = 2;
            return options;
        }
    }

    private final Options options;
    private final Map<String, Object> report = new LinkedHashMap<>();

    /**
     * A runner.
     *
     * @param options what to run.
     */
    public ChaosRunner(final Options options)
    {
        this.options = options;
    }

    /**
     * The names of the suites, in the order a run takes them.
     *
     * @return names.
     */
    public static List<String> suiteNames()
    {
        return SUITES.stream().map(ChaosSuite::name).toList();
    }

    /**
     * Runs the chosen suites and returns the report.
     *
     * @return report fields in a stable order.
     * @throws Exception when a suite cannot run at all (a server that cannot start).
     */
    public Map<String, Object> run() throws Exception
    {
        final long start = System.nanoTime();
        report.put("workers", options.workers);
        for (final ChaosSuite suite : SUITES)
        {
            if (options.suites.contains(suite.name()))
            {
                suite.run(this);
            }
        }
        report.put("duration_s", round((System.nanoTime() - start) / 1e9));
        return report;
    }

    /**
     * The report so far.
     *
     * @return fields.
     */
    public Map<String, Object> report()
    {
        return report;
    }

    Options options()
    {
        return options;
    }

    void progress(final String line)
    {
        if (null != options.progress)
        {
            options.progress.println("[chaos] " + line);
            options.progress.flush();
        }
    }

    Path newDirectory(final String suite)
    {
        return ShmDirectories.newPath(options.baseDirectory, "kvstash-chaos-" + suite + "-");
    }

    static ServerContext serverContext(final Path dir, final long slots, final long leaseMs)
    {
        return new ServerContext()
            .directory(dir)
            .sweepIntervalMs(20)
            .storeContext(new StoreContext()
                .poolSizeBytes(slots * CHUNK_BYTES)
                .leaseNs(TimeUnit.MILLISECONDS.toNanos(leaseMs)));
    }

    static void check(final ClientResponse r)
    {
        if (!r.isOk())
        {
            throw new IllegalStateException(RequestType.name(r.requestType()) + " answered " + r);
        }
    }

    static double round(final double value)
    {
        return Math.round(value * 1000.0) / 1000.0;
    }
}
