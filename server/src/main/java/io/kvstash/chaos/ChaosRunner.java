package io.kvstash.chaos;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The reliability suites of issue 6 against a real server and real worker processes: kill chaos at
 * failpoints, zombie fencing, server kill and restart under load, wire fuzzing and pool exhaustion. Each
 * suite adds its figures to one report, printed as JSON by {@code kvstash chaos --json}.
 */
public final class ChaosRunner
{
    /** Bytes of every chaos chunk. */
    public static final int CHUNK_BYTES = 4096;

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
        /** Seed of every random choice. */
        public long seed = 42;
        /** Where the suites' server directories go. */
        public Path baseDirectory = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") :
            Path.of(System.getProperty("java.io.tmpdir"));
        /** Suites to run: kill, zombie, restart, fuzz, exhaustion. */
        public java.util.Set<String> suites = new java.util.HashSet<>(
            List.of("kill", "zombie", "restart", "fuzz", "exhaustion"));
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
         * The long profile: at least 10^6 verified reads, 1,000 zombie repetitions, 10^6 fuzz records.
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

    private void progress(final String line)
    {
        if (null != options.progress)
        {
            options.progress.println("[chaos] " + line);
            options.progress.flush();
        }
    }

    private Path newDirectory(final String suite)
    {
        return options.baseDirectory.resolve("kvstash-chaos-" + suite + "-" +
            Long.toHexString(ThreadLocalRandom.current().nextLong()));
    }

    private static void deleteDirectory(final Path dir)
    {
        if (!Files.exists(dir))
        {
            return;
        }
        try (Stream<Path> files = Files.walk(dir))
        {
            files.sorted(Comparator.reverseOrder()).forEach(p ->
            {
                try
                {
                    Files.deleteIfExists(p);
                }
                catch (final IOException ignore)
                {
                    // best effort
                }
            });
        }
        catch (final IOException ignore)
        {
            // best effort
        }
    }

    /**
     * Runs every suite and returns the report.
     *
     * @return report fields in a stable order.
     * @throws Exception when a suite cannot run at all (a server that cannot start).
     */
    public Map<String, Object> run() throws Exception
    {
        final long start = System.nanoTime();
        report.put("workers", options.workers);
        if (options.suites.contains("kill"))
        {
            killChaos();
        }
        if (options.suites.contains("zombie"))
        {
            zombies();
        }
        if (options.suites.contains("restart"))
        {
            restarts();
        }
        if (options.suites.contains("fuzz"))
        {
            fuzz();
        }
        if (options.suites.contains("exhaustion"))
        {
            exhaustion();
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

    // ------------------------------------------------------------------------------------------ kill chaos

    private static ServerContext serverContext(final Path dir, final long slots, final long leaseMs)
    {
        return new ServerContext()
            .directory(dir)
            .sweepIntervalMs(20)
            .storeContext(new StoreContext()
                .poolSizeBytes(slots * CHUNK_BYTES)
                .leaseNs(TimeUnit.MILLISECONDS.toNanos(leaseMs)));
    }

    private static final class Worker
    {
        final ChildJvm jvm;
        final ChaosWorker.Failpoint failpoint;
        final boolean copyTransport;
        boolean attached;
        long verified;
        long stale;
        long ops;

        Worker(final ChildJvm jvm, final ChaosWorker.Failpoint failpoint, final boolean copyTransport)
        {
            this.jvm = jvm;
            this.failpoint = failpoint;
            this.copyTransport = copyTransport;
        }
    }

    private Worker spawnLoad(
        final Path dir, final int slot, final SplittableRandom random, final boolean arm, final boolean copyTransport)
        throws IOException
    {
        final ChaosWorker.Failpoint[] failpoints = ChaosWorker.Failpoint.values();
        final List<String> args = new ArrayList<>(List.of("load", dir.toString(), Long.toString(100 + slot),
            Long.toString(random.nextLong()), "600", Integer.toString(CHUNK_BYTES)));
        if (copyTransport)
        {
            args.add("copy");
        }
        ChaosWorker.Failpoint failpoint = null;
        if (arm)
        {
            failpoint = failpoints[random.nextInt(failpoints.length)];
            args.add(failpoint.name());
            args.add(Integer.toString(20 + random.nextInt(400)));
        }
        return new Worker(ChildJvm.start(ChaosWorker.class, args.toArray(new String[0])), failpoint, copyTransport);
    }

    /**
     * Takes one stdout line of a load worker.
     *
     * @return 1 for a mismatch line, else 0.
     */
    private long onLine(final Worker worker, final String line)
    {
        if (line.startsWith("P ") || line.startsWith("FINAL "))
        {
            parseProgress(worker, line);
        }
        else if ("ATTACHED".equals(line))
        {
            worker.attached = true;
        }
        else if (line.startsWith("MISMATCH"))
        {
            progress("worker " + worker.jvm.pid() + ": " + line);
            return 1;
        }
        return 0;
    }

    /**
     * Kills a load worker and reads what it printed before it died, so a mismatch or its attach printed just
     * before the kill is not lost.
     *
     * @return mismatch lines among them.
     */
    private long kill(final Worker worker, final KillTally killed) throws InterruptedException
    {
        worker.jvm.kill9();
        worker.jvm.awaitEndOfOutput(5_000);
        long mismatches = 0;
        String line;
        while (null != (line = worker.jvm.pollNow()))
        {
            mismatches += onLine(worker, line);
        }
        killed.total++;
        killed.afterAttach += worker.attached ? 1 : 0;
        killed.copyTransport += worker.copyTransport ? 1 : 0;
        return mismatches;
    }

    /** Kills of load workers, counted by what the worker was doing. */
    private static final class KillTally
    {
        long total;
        long afterAttach;
        long copyTransport;
    }

    private static void parseProgress(final Worker worker, final String line)
    {
        for (final String part : line.split(" "))
        {
            final int eq = part.indexOf('=');
            if (eq < 0)
            {
                continue;
            }
            final long value = Long.parseLong(part.substring(eq + 1));
            switch (part.substring(0, eq))
            {
                case "verified":
                    worker.verified = value;
                    break;
                case "stale":
                    worker.stale = value;
                    break;
                case "ops":
                    worker.ops = value;
                    break;
                default:
                    break;
            }
        }
    }

    private void killChaos() throws Exception
    {
        final Path dir = newDirectory("kill");
        final SplittableRandom random = new SplittableRandom(options.seed);
        final Map<ChaosWorker.Failpoint, Long> killsAt = new EnumMap<>(ChaosWorker.Failpoint.class);
        final KillTally killed = new KillTally();
        long spawns = 0;
        long verifiedCopy = 0;
        long randomKills = 0;
        long mismatches = 0;
        long crashes = 0;
        long verifiedDone = 0;
        long staleDone = 0;
        long opsDone = 0;
        final long leaseMs = 1_000;
        try (KvStashServer server = KvStashServer.launch(serverContext(dir, 256, leaseMs)))
        {
            final Worker[] workers = new Worker[options.workers];
            for (int i = 0; i < workers.length; i++)
            {
                workers[i] = spawnLoad(dir, i, random, random.nextInt(4) != 0, spawns++ % 3 == 2);
            }
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(options.killSeconds);
            long nextRandomKill = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            long nextProgress = System.nanoTime();
            while (true)
            {
                long verified = verifiedDone;
                for (final Worker worker : workers)
                {
                    verified += worker.verified;
                }
                final boolean timeUp = System.nanoTime() - deadline > 0;
                if (timeUp && verified >= options.minVerifiedReads)
                {
                    break;
                }
                if (System.nanoTime() - nextProgress > 0)
                {
                    progress("kill chaos: " + killed.total + " kills, " + verified + " verified reads, " + mismatches +
                        " mismatches");
                    nextProgress = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                }
                for (int i = 0; i < workers.length; i++)
                {
                    final Worker worker = workers[i];
                    String line;
                    boolean respawn = false;
                    while (null != (line = worker.jvm.pollNow()))
                    {
                        if (line.startsWith("AT "))
                        {
                            mismatches += kill(worker, killed);
                            killsAt.merge(worker.failpoint, 1L, Long::sum);
                            respawn = true;
                            break;
                        }
                        mismatches += onLine(worker, line);
                    }
                    if (!respawn && !worker.jvm.isAlive())
                    {
                        crashes++;
                        progress("worker " + worker.jvm.pid() + " exited by itself with " + worker.jvm.exitValue());
                        respawn = true;
                    }
                    if (!respawn && null == worker.failpoint && System.nanoTime() - nextRandomKill > 0)
                    {
                        mismatches += kill(worker, killed);
                        randomKills++;
                        respawn = true;
                        nextRandomKill = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
                    }
                    if (respawn)
                    {
                        verifiedDone += worker.verified;
                        verifiedCopy += worker.copyTransport ? worker.verified : 0;
                        staleDone += worker.stale;
                        opsDone += worker.ops;
                        workers[i] = spawnLoad(dir, i, random, random.nextInt(4) != 0, spawns++ % 3 == 2);
                    }
                }
                Thread.sleep(5);
            }
            for (final Worker worker : workers)
            {
                worker.jvm.send("stop");
            }
            for (final Worker worker : workers)
            {
                final long stopBy = System.currentTimeMillis() + 15_000;
                boolean finished = false;
                String line;
                while (!finished && System.currentTimeMillis() < stopBy &&
                    null != (line = worker.jvm.poll(100)))
                {
                    if (line.startsWith("AT "))
                    {
                        mismatches += kill(worker, killed);
                        killsAt.merge(worker.failpoint, 1L, Long::sum);
                        finished = true;
                    }
                    else
                    {
                        mismatches += onLine(worker, line);
                        finished = line.startsWith("FINAL ");
                    }
                }
                if (!finished)
                {
                    // A worker waiting at a failpoint never answers "stop": that is one more kill.
                    mismatches += kill(worker, killed);
                }
                else if (worker.jvm.waitFor(10_000) && !worker.jvm.killedByUs() && 0 != worker.jvm.exitValue())
                {
                    crashes++;
                }
                verifiedDone += worker.verified;
                verifiedCopy += worker.copyTransport ? worker.verified : 0;
                staleDone += worker.stale;
                opsDone += worker.ops;
            }

            // One lease and a few sweeps later every reservation and pin of a killed worker must be gone.
            Thread.sleep(leaseMs + 500);
            awaitZero(server, StoreCounters.WIRE_CLIENTS, 5_000);
            final StoreCounters counters = server.counters();
            report.put("kills", killed.total);
            report.put("kills_after_attach", killed.afterAttach);
            report.put("kills_copy_transport", killed.copyTransport);
            final Map<String, Long> byFailpoint = new LinkedHashMap<>();
            for (final ChaosWorker.Failpoint failpoint : ChaosWorker.Failpoint.values())
            {
                byFailpoint.put(failpoint.name().toLowerCase(), killsAt.getOrDefault(failpoint, 0L));
            }
            byFailpoint.put("random", randomKills);
            report.put("kills_by_failpoint", byFailpoint);
            report.put("operations", opsDone);
            report.put("verified_reads", verifiedDone);
            report.put("verified_reads_copy_transport", verifiedCopy);
            report.put("stale_reads", staleDone);
            report.put("checksum_mismatches", mismatches);
            report.put("leaked_reservations", counters.get(StoreCounters.RESERVED_CHUNKS));
            report.put("leaked_pins", counters.get(StoreCounters.PINNED_CHUNKS));
            report.put("pending_transfers", counters.get(StoreCounters.PENDING_TRANSFERS));
            report.put("free_plus_readable_equals_total",
                counters.get(StoreCounters.FREE_SLOTS) + counters.get(StoreCounters.READABLE_CHUNKS) ==
                counters.get(StoreCounters.SLOT_CAPACITY));
            report.put("dead_clients_reaped", counters.get(StoreCounters.DEAD_CLIENTS));
            report.put("clients_left", counters.get(StoreCounters.WIRE_CLIENTS));
            report.put("reclaimed_leases", counters.get(StoreCounters.RECLAIMED_LEASES));
            report.put("evictions", counters.get(StoreCounters.EVICTIONS));
            report.put("worker_crashes", crashes);
            progress("kill chaos done: " + killed.total + " kills, " + verifiedDone + " verified reads, " + mismatches +
                " mismatches, " + crashes + " crashes");
        }
        finally
        {
            deleteDirectory(dir);
        }
    }

    private static void awaitZero(final KvStashServer server, final int counter, final long timeoutMs)
        throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (0 != server.counters().get(counter) && System.currentTimeMillis() < deadline)
        {
            Thread.sleep(10);
        }
    }

    // ------------------------------------------------------------------------------------------ zombies

    private void zombies() throws Exception
    {
        final Path dir = newDirectory("zombie");
        final long leaseMs = 100;
        long total = 0;
        long rejected = 0;
        long wrote = 0;
        long ownerIntact = 0;
        long sameSlot = 0;
        try (KvStashServer server = KvStashServer.launch(serverContext(dir, 64, leaseMs));
            KvStashClient owner = KvStashClient.connect(new ClientContext().directory(dir));
            ChildJvm zombie = ChildJvm.start(ChaosWorker.class, "zombie", dir.toString(), "7",
                Integer.toString(CHUNK_BYTES)))
        {
            final long ownerInstance = 8;
            check(owner.register(ownerInstance, ChaosWorker.layout(CHUNK_BYTES)));
            final ChunkSeal seal = new ChunkSeal(CHUNK_BYTES);
            final UnsafeBuffer view = new UnsafeBuffer(0, 0);
            zombie.await("READY", 30_000);
            for (int rep = 0; rep < options.zombieReps; rep++)
            {
                zombie.send("prepare");
                final String prepared = zombie.await("PREPARED", 10_000);
                final long key = Long.parseLong(field(prepared, "key"));
                final long zombieOffset = Long.parseLong(field(prepared, "offset"));
                zombie.signal("STOP");
                final long reclaimed = server.counters().get(StoreCounters.RECLAIMED_LEASES);
                Thread.sleep(leaseMs);
                final long waitUntil = System.currentTimeMillis() + 5_000;
                while (server.counters().get(StoreCounters.RECLAIMED_LEASES) == reclaimed &&
                    System.currentTimeMillis() < waitUntil)
                {
                    Thread.sleep(5);
                }

                // The slot's new owner stores the same key: most often into the very slot the zombie held.
                final ClientResponse r = owner.prepareStore(ownerInstance, ChaosWorker.ids(key, 1));
                check(r);
                final long transfer = r.transferId();
                final int generation = r.slotGeneration(0);
                final long offset = r.slotOffset(0);
                sameSlot += offset == zombieOffset ? 1 : 0;
                owner.slotView(offset, CHUNK_BYTES, view).putBytes(0, seal.seal(0, key, generation, 1), 0, CHUNK_BYTES);
                check(owner.commitStore(ownerInstance, transfer));

                zombie.signal("CONT");
                zombie.send("go");
                final String commit = zombie.await("COMMIT", 10_000);
                total++;
                rejected += commit.contains("status=" + Status.name(Status.UNKNOWN_TRANSFER)) ? 1 : 0;
                wrote += commit.contains("wrote=true") ? 1 : 0;

                final ClientResponse read = owner.prepareRetrieve(ownerInstance, ChaosWorker.ids(key, 1));
                check(read);
                seal.scratch().putBytes(0, owner.slotView(read.slotOffset(0), CHUNK_BYTES, view), 0, CHUNK_BYTES);
                ownerIntact += seal.verify(0, key, read.slotGeneration(0)) ? 1 : 0;
                check(owner.commitRetrieve(ownerInstance, read.transferId()));
                if (rep % 100 == 99)
                {
                    progress("zombie fencing: " + (rep + 1) + " repetitions, " + rejected + " late commits rejected");
                }
            }
            zombie.send("end");
        }
        finally
        {
            deleteDirectory(dir);
        }
        report.put("late_commits_total", total);
        report.put("late_commits_rejected", rejected);
        report.put("late_writes", wrote);
        report.put("late_slot_reused", sameSlot);
        report.put("new_owner_bytes_intact", ownerIntact);
        progress("zombie fencing done: " + rejected + " of " + total + " late commits rejected, " + ownerIntact +
            " owners intact");
    }

    private static String field(final String line, final String name)
    {
        for (final String part : line.split(" "))
        {
            if (part.startsWith(name + "="))
            {
                return part.substring(name.length() + 1);
            }
        }
        throw new IllegalStateException("no " + name + " in " + line);
    }

    // ------------------------------------------------------------------------------------------ restarts

    private void restarts() throws Exception
    {
        final Path dir = newDirectory("restart");
        final SplittableRandom random = new SplittableRandom(options.seed + 1);
        final String pool = Long.toString(256L * CHUNK_BYTES);
        long reconnects = 0;
        long crashes = 0;
        long mismatches = 0;
        boolean errorLogKept = true;
        ChildJvm server = ChildJvm.start(ChaosServer.class, dir.toString(), pool, "1000");
        final List<Worker> workers = new ArrayList<>();
        try
        {
            String incarnation = server.await("READY", 30_000).substring(6);
            for (int i = 0; i < options.workers; i++)
            {
                workers.add(spawnLoad(dir, i, random, false, i % 3 == 2)); // every third on the copy transport
            }
            for (int restart = 0; restart < options.restarts; restart++)
            {
                Thread.sleep(3_000);
                server.kill9();
                server = ChildJvm.start(ChaosServer.class, dir.toString(), pool, "1000");
                final String previous = incarnation;
                incarnation = server.await("READY", 30_000).substring(6);
                errorLogKept &= Files.exists(dir.resolve("dead-control-" + previous));
                for (final Worker worker : workers)
                {
                    final long deadline = System.currentTimeMillis() + 60_000;
                    boolean back = false;
                    while (!back && System.currentTimeMillis() < deadline)
                    {
                        final String line = worker.jvm.poll(100);
                        if (null == line)
                        {
                            if (!worker.jvm.isAlive())
                            {
                                break;
                            }
                            continue;
                        }
                        if (line.startsWith("MISMATCH"))
                        {
                            mismatches++;
                        }
                        back = line.equals("RECONNECTED " + incarnation);
                    }
                    reconnects += back ? 1 : 0;
                }
                progress("restart " + (restart + 1) + ": " + reconnects + " reconnections so far");
            }
            for (final Worker worker : workers)
            {
                worker.jvm.send("stop");
            }
            for (final Worker worker : workers)
            {
                String line;
                boolean finished = false;
                final long stopBy = System.currentTimeMillis() + 15_000;
                while (!finished && System.currentTimeMillis() < stopBy && null != (line = worker.jvm.poll(100)))
                {
                    mismatches += line.startsWith("MISMATCH") ? 1 : 0;
                    finished = line.startsWith("FINAL ");
                }
                if (!worker.jvm.waitFor(10_000) || 0 != worker.jvm.exitValue())
                {
                    crashes++;
                }
            }
            server.signal("TERM");
            server.waitFor(20_000);
        }
        finally
        {
            for (final Worker worker : workers)
            {
                worker.jvm.close();
            }
            server.close();
            deleteDirectory(dir);
        }
        report.put("server_restarts", options.restarts);
        report.put("reconnections", reconnects);
        report.put("reconnections_expected", (long)options.restarts * options.workers);
        report.put("restart_worker_crashes", crashes);
        report.put("restart_checksum_mismatches", mismatches);
        report.put("error_log_kept", errorLogKept);
        final Object before = report.getOrDefault("worker_crashes", 0L);
        report.put("worker_crashes", (Long)before + crashes);
        final Object mismatchesBefore = report.getOrDefault("checksum_mismatches", 0L);
        report.put("checksum_mismatches", (Long)mismatchesBefore + mismatches);
        progress("restarts done: " + reconnects + " of " + (long)options.restarts * options.workers +
            " reconnections, " + crashes + " crashes");
    }

    // ------------------------------------------------------------------------------------------ fuzz

    private void fuzz() throws Exception
    {
        // The server runs in its own process, as in production: the fuzzer's own garbage and pauses stay in
        // this JVM, and the server is measured through its answers and its mapped counters alone.
        final Path dir = newDirectory("fuzz");
        final long poolBytes = 256L * CHUNK_BYTES;
        final WireFuzzer.Result result;
        try (ChildJvm server = ChildJvm.start(ChaosServer.class, dir.toString(), Long.toString(poolBytes), "1000"))
        {
            final long incarnation = Long.parseUnsignedLong(server.await("READY", 30_000).substring(6), 16);
            // The earlier suites leave this JVM's heap full of their garbage; collect it before the clock runs.
            System.gc();
            final long[] gcBefore = gc();
            result = new WireFuzzer(dir, incarnation, poolBytes, options.seed + 2, options.progress)
                .run(options.fuzzRecords);
            final long[] gcAfter = gc();
            try (KvStashClient observer = KvStashClient.connect(new ClientContext().directory(dir)))
            {
                report.put("fuzz_server_errors", observer.counter(StoreCounters.ERRORS));
                report.put("fuzz_malformed_counted", observer.counter(StoreCounters.WIRE_MALFORMED));
            }
            report.put("fuzz_client_gc_count", gcAfter[0] - gcBefore[0]);
            report.put("fuzz_client_gc_ms", gcAfter[1] - gcBefore[1]);
            server.signal("TERM");
            final String[] serverGc = server.await("GC ", 20_000).split(" ");
            report.put("fuzz_server_gc_count", Long.parseLong(serverGc[1]));
            report.put("fuzz_server_gc_ms", Long.parseLong(serverGc[2]));
            report.put("fuzz_server_allocated_bytes", Long.parseLong(serverGc[3]));
            server.waitFor(20_000);
        }
        finally
        {
            deleteDirectory(dir);
        }
        report.put("fuzz_records", result.records);
        report.put("fuzz_answered", result.answered);
        report.put("fuzz_unanswerable", result.unanswerable);
        report.put("fuzz_unanswered", result.unanswered);
        report.put("fuzz_error_statuses", result.errorStatuses);
        report.put("fuzz_max_response_ms", round(result.maxResponseNs / 1e6));
        report.put("fuzz_max_response_without_fuzzer_gc_ms", round(result.maxResponseWithoutFuzzerGcNs / 1e6));
        report.put("fuzz_stalls_over_100ms", result.stalls);
        report.put("fuzz_stalls_over_100ms_during_fuzzer_gc", result.stallsDuringFuzzerGc);
        report.put("fuzz_slowest", result.slowest);
        report.put("fuzz_server_alive", result.serverAlive);
        if (null != result.shrunk)
        {
            report.put("fuzz_failure", result.shrunk);
        }
        progress("fuzz done: " + result.records + " records, " + result.unanswered + " unanswered, max response " +
            round(result.maxResponseNs / 1e6) + " ms");
    }

    // ------------------------------------------------------------------------------------------ exhaustion

    private void exhaustion() throws Exception
    {
        final Path dir = newDirectory("exhaustion");
        final int slots = 128;
        final Histogram prepareNs = new Histogram(1, TimeUnit.SECONDS.toNanos(10), 3);
        long prepares = 0;
        long warmUpMaxNs = 0;
        long noSpace = 0;
        boolean pinnedIntact = true;
        boolean reservedIntact;
        // One server thread (receiver and stages together) beside the two client threads: on this 2-core
        // machine a receiver thread of its own competes with the flood for a core and its wake-ups set the tail.
        try (KvStashServer server = KvStashServer.launch(serverContext(dir, slots, 30_000)
                .threadingMode(ThreadingMode.SHARED));
            KvStashClient holder = KvStashClient.connect(new ClientContext().directory(dir));
            KvStashClient flood = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            final long holderInstance = 1;
            final long floodInstance = 2;
            check(holder.register(holderInstance, ChaosWorker.layout(CHUNK_BYTES)));
            check(flood.register(floodInstance, ChaosWorker.layout(CHUNK_BYTES)));
            final ChunkSeal seal = new ChunkSeal(CHUNK_BYTES);
            final UnsafeBuffer view = new UnsafeBuffer(0, 0);

            // 32 readable chunks pinned by a lookup, and 16 chunks reserved and never committed (yet).
            ClientResponse r = holder.prepareStore(holderInstance, ChaosWorker.ids(0, 32));
            check(r);
            final long pinnedStore = r.transferId();
            final int[] pinnedGeneration = new int[32];
            for (int i = 0; i < r.slotCount(); i++)
            {
                pinnedGeneration[r.slotRangeIndex(i)] = r.slotGeneration(i);
                holder.slotView(r.slotOffset(i), CHUNK_BYTES, view)
                    .putBytes(0, seal.seal(0, r.slotRangeIndex(i), r.slotGeneration(i), 0), 0, CHUNK_BYTES);
            }
            check(holder.commitStore(holderInstance, pinnedStore));
            r = holder.lookup(holderInstance, ChaosWorker.ids(0, 32), true);
            check(r);
            final long pins = r.transferId();
            r = holder.prepareStore(holderInstance, ChaosWorker.ids(1_000, 16));
            check(r);
            final long reservation = r.transferId();

            // Demand at a multiple of the pool, in rounds, with reservations held across prepares (24 chunks of
            // 4 at a time, 96 with the 48 pinned and reserved) so the pool fills up and NO_SPACE happens.
            final int demand = options.exhaustionFactor * slots;
            final long firstKey = 10_000;
            final long[] held = new long[24];
            int heldCount = 0;
            // The first tenth of the rounds (at least one) warms the JIT on both sides and is not in the
            // percentiles; its worst prepare is reported on its own.
            final long warmUpChunks = (long)demand * Math.max(1, options.exhaustionRounds / 10);
            // Every key range is made before the clock starts so the flood allocates nothing while it is timed:
            // a young collection in this JVM (server and clients share it) would otherwise be the tail.
            final ChunkKeys[] ranges = new ChunkKeys[demand * options.exhaustionRounds / 4];
            for (int i = 0; i < ranges.length; i++)
            {
                ranges[i] = ChaosWorker.ids(firstKey + 4L * i, 4);
            }
            for (int stored = 0; stored < demand * options.exhaustionRounds; stored += 4)
            {
                final long start = System.nanoTime();
                final ClientResponse p = flood.prepareStore(floodInstance, ranges[stored / 4]);
                final long elapsedNs = Math.max(1, System.nanoTime() - start);
                if (stored < warmUpChunks)
                {
                    warmUpMaxNs = Math.max(warmUpMaxNs, elapsedNs);
                }
                else
                {
                    prepareNs.recordValue(elapsedNs);
                }
                prepares++;
                if (Status.NO_SPACE == p.status())
                {
                    noSpace++;
                }
                else
                {
                    check(p);
                    held[heldCount++] = p.transferId();
                }
                if (heldCount == held.length || Status.NO_SPACE == p.status())
                {
                    for (int h = 0; h < heldCount; h++)
                    {
                        check(flood.commitStore(floodInstance, held[h]));
                    }
                    heldCount = 0;
                }
            }
            for (int h = 0; h < heldCount; h++)
            {
                check(flood.commitStore(floodInstance, held[h]));
            }

            r = holder.prepareRetrieveFromLookup(holderInstance, pins);
            check(r);
            for (int i = 0; i < r.slotCount(); i++)
            {
                seal.scratch().putBytes(0, holder.slotView(r.slotOffset(i), CHUNK_BYTES, view), 0, CHUNK_BYTES);
                pinnedIntact &= seal.verify(0, r.slotRangeIndex(i), pinnedGeneration[r.slotRangeIndex(i)]);
            }
            check(holder.commitRetrieve(holderInstance, r.transferId()));
            reservedIntact = holder.commitStore(holderInstance, reservation).isOk() &&
                16 == holder.lookup(holderInstance, ChaosWorker.ids(1_000, 16), false).hitChunks();
            report.put("exhaustion_evictions", server.counters().get(StoreCounters.EVICTIONS));
            if (null != server.latency())
            {
                server.latency().poll(System.currentTimeMillis());
                final Histogram serverSide = server.latency().copyRequestTotal(RequestType.PREPARE_STORE);
                report.put("exhaustion_server_prepare_p999_us", round(serverSide.getValueAtPercentile(99.9) / 1e3));
                report.put("exhaustion_server_prepare_max_us", round(serverSide.getMaxValue() / 1e3));
            }
        }
        finally
        {
            deleteDirectory(dir);
        }
        report.put("exhaustion_demand_chunks", (long)options.exhaustionFactor * slots * options.exhaustionRounds);
        report.put("exhaustion_prepares", prepares);
        report.put("exhaustion_no_space", noSpace);
        report.put("exhaustion_prepares_measured", prepareNs.getTotalCount());
        report.put("exhaustion_warmup_prepare_max_us", round(warmUpMaxNs / 1e3));
        report.put("exhaustion_prepare_p50_us", round(prepareNs.getValueAtPercentile(50) / 1e3));
        report.put("exhaustion_prepare_p999_us", round(prepareNs.getValueAtPercentile(99.9) / 1e3));
        report.put("exhaustion_prepare_max_us", round(prepareNs.getMaxValue() / 1e3));
        report.put("exhaustion_pinned_intact", pinnedIntact);
        report.put("exhaustion_reserved_intact", reservedIntact);
        progress("exhaustion done: " + prepares + " prepares, " + noSpace + " NO_SPACE, p99.9 " +
            round(prepareNs.getValueAtPercentile(99.9) / 1e3) + " us");
    }

    // ------------------------------------------------------------------------------------------ helpers

    /**
     * Collections and milliseconds spent collecting in this JVM so far.
     */
    static long[] gc()
    {
        long count = 0;
        long ms = 0;
        for (final java.lang.management.GarbageCollectorMXBean bean :
            java.lang.management.ManagementFactory.getGarbageCollectorMXBeans())
        {
            count += Math.max(0, bean.getCollectionCount());
            ms += Math.max(0, bean.getCollectionTime());
        }
        return new long[]{ count, ms };
    }

    private static void check(final ClientResponse r)
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

    /**
     * The report as one JSON object.
     *
     * @param report fields.
     * @return JSON text.
     */
    public static String toJson(final Map<String, Object> report)
    {
        final StringBuilder json = new StringBuilder("{");
        boolean first = true;
        for (final Map.Entry<String, Object> entry : report.entrySet())
        {
            if (!first)
            {
                json.append(", ");
            }
            first = false;
            json.append('"').append(entry.getKey()).append("\": ").append(jsonValue(entry.getValue()));
        }
        return json.append('}').toString();
    }

    @SuppressWarnings("unchecked")
    private static String jsonValue(final Object value)
    {
        if (value instanceof Map)
        {
            return toJson((Map<String, Object>)value);
        }
        if (value instanceof String)
        {
            return '"' + ((String)value).replace("\\", "\\\\").replace("\"", "\\\"") + '"';
        }
        if (value instanceof java.util.List)
        {
            final StringBuilder list = new StringBuilder("[");
            for (final Object item : (java.util.List<?>)value)
            {
                list.append(list.length() == 1 ? "" : ", ").append(jsonValue(item));
            }
            return list.append(']').toString();
        }
        return String.valueOf(value);
    }
}
