package io.kvstash.perf.bench;

import io.kvstash.cli.KvStashCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import io.kvstash.tools.Json;
import io.kvstash.tools.PercentilePlot;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.file.SecureDirectory;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;
import org.agrona.concurrent.AgentRunner;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code kvstash bench}: kvstash side by side with the physical limit (a single-thread copy of the chunks
 * into and out of the pool's slots, a mapped {@code /dev/shm} file, with no request), the IPC floor (a bare
 * ring echo between two processes), Redis and an in-process map, in one invocation, on the same chunks
 * (4 KiB, 256 KiB, 2 MiB, 32 MiB), as ratios. The coordinator (this JVM) runs the kvstash servers, the echo
 * agent and redis-server; a separate worker JVM ({@link BenchWorker}) is the client of each. Every figure is
 * the median of several repetitions after warm-up; every latency is an HdrHistogram, written to
 * {@code bench.hlog} and plotted in {@code bench-plot.html} in the output directory. Progress goes to standard
 * error; the results (tables, or one JSON object with {@code --json}) to standard output.
 */
@Command(name = "bench", mixinStandardHelpOptions = true, versionProvider = KvStashCommand.Version.class,
    description = "Benchmarks kvstash against a raw copy, a bare ring echo, Redis and an in-process map, " +
        "side by side, and prints the ratios.")
public final class BenchCommand implements Callable<Integer>
{
    /** Chunk sizes of every run: 4 KiB, 256 KiB, 2 MiB and 32 MiB (a 256-token chunk of an 8B model). */
    static final long[] SIZES = { 4L << 10, 256L << 10, 2L << 20, 32L << 20 };
    /**
     * Wait modes of the data path, server and client alike: busy-spin (the latency configuration; the JSON
     * ratios) and backoff (the server's default; {@code ratios_backoff}).
     */
    static final String[] DATA_WAIT_MODES = { BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF };

    @Option(names = "--quick", description = "Smoke-test settings: finishes in under a minute.")
    boolean quick;

    @Option(names = "--json", description = "Print one JSON object instead of tables.")
    boolean json;

    @Option(names = "--out", paramLabel = "DIR",
        description = "Directory of the .hlog files, the plot and result.json (default: a new one under /tmp).")
    Path out;

    @Option(names = "--no-redis", description = "Leave out the redis contender.")
    boolean noRedis;

    @Option(names = "--only", paramLabel = "PART", split = ",",
        description = "Run only some parts: data (copy, store/retrieve, redis, in-process), control (control, echo).")
    List<String> only;

    @Option(names = "--reps", paramLabel = "N", description = "Measured repetitions per contender (default 15, 3 quick).")
    Integer reps;

    /** Pool of the first-touch measurement: every page of it faulted in by one pass of stores. */
    static final long FIRST_TOUCH_POOL_BYTES = 256L << 20;
    /** Chunk size of the first-touch measurement. */
    static final long FIRST_TOUCH_CHUNK_BYTES = 2L << 20;

    /** The parts {@code --only} accepts. */
    static final List<String> PARTS = List.of("data", "control");

    @Spec
    CommandSpec spec;

    private final PrintStream stdout;
    private final PrintStream stderr;
    private long startNs;

    /**
     * The command (picocli instantiates it); prints to the process's standard streams.
     */
    public BenchCommand()
    {
        this(System.out, System.err);
    }

    BenchCommand(final PrintStream stdout, final PrintStream stderr)
    {
        this.stdout = stdout;
        this.stderr = stderr;
    }

    /**
     * Settings of one run.
     */
    static final class Settings
    {
        int reps;
        int warmups;
        long bytesPerRep;
        int minChunks;
        int maxChunks;
        long poolBytes;
        long controlPoolBytes;
        long warmupMs;
        long latencyMs;
        long throughputMs;
        long pacedMs;
        long pacedRate;
        int window;
        int rounds;
        long roundMs;
        long roundWarmupMs;
        long spinGapsMs;
        String workerHeap;
        String[] dataWaitModes;

        static Settings of(final boolean quick, final Integer reps)
        {
            final Settings s = new Settings();
            s.reps = null != reps ? reps : quick ? 3 : 15;
            s.warmups = quick ? 1 : 2;
            s.bytesPerRep = quick ? 32L << 20 : 256L << 20;
            s.minChunks = quick ? 4 : 8;
            s.maxChunks = quick ? 4096 : 8192;
            s.poolBytes = quick ? 256L << 20 : 1L << 30;
            s.controlPoolBytes = 64L << 20;
            s.warmupMs = quick ? 200 : 1000;
            s.latencyMs = quick ? 500 : 3000;
            s.throughputMs = quick ? 500 : 3000;
            s.pacedMs = quick ? 500 : 3000;
            s.pacedRate = 20_000;
            s.window = 64;
            s.rounds = quick ? 2 : 8;
            s.roundMs = quick ? 150 : 400;
            s.roundWarmupMs = quick ? 100 : 200;
            s.spinGapsMs = quick ? 300 : 1000;
            s.workerHeap = quick ? "2g" : "4g";
            // --quick measures the data path in busy-spin only, to stay under a minute on a loaded 2-core machine.
            s.dataWaitModes = quick ? new String[]{ BenchSupport.BUSY_SPIN } : DATA_WAIT_MODES;
            return s;
        }

        int chunksPerRep(final long chunkBytes)
        {
            final long byBytes = bytesPerRep / chunkBytes;
            return (int)Math.min(maxChunks, Math.max(minChunks, byBytes));
        }
    }

    /**
     * Runs the bench.
     *
     * @return 0 when the verdict is PASS, 1 when a full run missed a measured target.
     * @throws Exception when a contender fails.
     */
    @Override
    public Integer call() throws Exception
    {
        validate();
        startNs = System.nanoTime();
        final Settings settings = Settings.of(quick, reps);
        final Path outDir = null != out ? out : Path.of(System.getProperty("java.io.tmpdir"),
            "kvstash-bench-" + LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));
        Files.createDirectories(outDir);
        final Map<String, Object> machine = MachineFacts.collect();
        progress(BenchSupport.fmt("kvstash bench%s: %s cores, %s, %s GiB, %s; load %.2f; output in %s",
            quick ? " --quick" : "", machine.get("cores"), machine.get("cpu_model"), machine.get("memory_gib"),
            machine.get("jvm"), MachineFacts.loadAverage(), outDir));

        final Path shmBase = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") :
            Path.of(System.getProperty("java.io.tmpdir"));
        final Path work = SecureDirectory.ensure(shmBase.resolve("kvstash-bench-" + ProcessHandle.current().pid()));
        final Results results = new Results(settings);
        RedisContender redis = null;
        try
        {
            try (WorkerProcess worker = WorkerProcess.start(settings.workerHeap, this::progress))
            {
                machine.put("worker_jvm_flags", String.join(" ", worker.flags()));
                // The control pairs first: they are the most sensitive to what else runs, and redis-server is
                // not started yet.
                if (part("control"))
                {
                    progress("spin gaps: one thread per core reading the clock, gaps over 10 us");
                    results.spinGaps.put("before_control", SpinGaps.measure(settings.spinGapsMs));
                    for (final String waitMode : new String[]{ BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF })
                    {
                        runControl(worker, settings, work, waitMode, results);
                    }
                    runRounds(worker, settings, work, results);
                    results.spinGaps.put("after_control", SpinGaps.measure(settings.spinGapsMs));
                    progress("spin gaps: " + results.spinGaps);
                }
                if (!noRedis && part("data"))
                {
                    Path executable = RedisContender.find();
                    if (null == executable)
                    {
                        results.redisInstalled = true;
                        executable = RedisContender.install(this::progress);
                    }
                    if (null != executable)
                    {
                        redis = RedisContender.start(executable, work, outDir.resolve("redis.log"));
                        results.redisVersion = redis.version();
                        progress("redis-server " + redis.version() + " on 127.0.0.1:" + redis.port() +
                            " (--save \"\" --appendonly no)");
                    }
                }
                for (final long size : part("data") ? SIZES : new long[0])
                {
                    runSize(worker, redis, settings, work, outDir, size, results);
                }
                if (part("data"))
                {
                    runFirstTouch(worker, work, results);
                }
            }
        }
        finally
        {
            if (null != redis)
            {
                redis.close();
            }
            BenchSupport.deleteTree(work);
        }
        machine.put("load_average_end", MachineFacts.loadAverage());
        final Map<String, Object> report = results.report(machine, outDir, quick, elapsedSeconds());
        @SuppressWarnings("unchecked")
        final BenchVerdict verdict = BenchVerdict.of((Map<String, Object>)report.get("targets"), machine, quick);
        report.put("verdict", verdict.toMap());
        writeFiles(results, report, outDir);
        if (json)
        {
            stdout.println(Json.write(report));
        }
        else
        {
            new BenchTables(stdout).print(report, results);
            stdout.println(verdict.line);
        }
        stdout.flush();
        progress("done in " + Math.round(elapsedSeconds()) + " s");
        if (json)
        {
            stderr.println(verdict.line);
            stderr.flush();
        }
        return "PASS".equals(verdict.verdict) ? 0 : 1;
    }

    private void validate()
    {
        if (null != reps && reps < 1)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--reps " + reps + " is out of range: give at least 1 repetition");
        }
        if (null != only)
        {
            for (final String part : only)
            {
                if (!PARTS.contains(part))
                {
                    throw new CommandLine.ParameterException(spec.commandLine(),
                        "--only: '" + part + "' is not a part: give data, control or both");
                }
            }
        }
    }

    private boolean part(final String name)
    {
        return null == only || only.contains(name);
    }

    /**
     * The first-touch cost on the request path, against which the server's pool preparation is weighed: a pool
     * that neither the server nor the client prepared, stored into once and again (BenchWorker's first_touch).
     */
    private void runFirstTouch(final WorkerProcess worker, final Path work, final Results results) throws Exception
    {
        final Path dir = work.resolve("server-first-touch");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .threadingMode(ThreadingMode.SHARED)
            .waitMode(WaitMode.parse(BenchSupport.BUSY_SPIN))
            .pretouch(false)
            .storeContext(new StoreContext().poolSizeBytes(FIRST_TOUCH_POOL_BYTES));
        progress("first touch: a " + BenchSupport.size(FIRST_TOUCH_POOL_BYTES) + " pool nobody prepared, " +
            BenchSupport.size(FIRST_TOUCH_CHUNK_BYTES) + " chunks");
        try (KvStashServer server = KvStashServer.launch(context))
        {
            final Map<String, Object> command = new LinkedHashMap<>();
            command.put("cmd", "first_touch");
            command.put("dir", server.directory().toString());
            command.put("chunk_bytes", FIRST_TOUCH_CHUNK_BYTES);
            command.put("wait", BenchSupport.BUSY_SPIN);
            results.firstTouch = worker.call(command, 300);
        }
    }

    private void runSize(
        final WorkerProcess worker,
        final RedisContender redis,
        final Settings settings,
        final Path work,
        final Path outDir,
        final long chunkBytes,
        final Results results) throws Exception
    {
        final String label = BenchSupport.size(chunkBytes);
        final int chunks = settings.chunksPerRep(chunkBytes);
        progress(BenchSupport.fmt("%s: %d chunks per repetition, %d warm-up + %d measured repetitions", label, chunks,
            settings.warmups, settings.reps));
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
            progress(label + ", " + waitMode + ": server SHARED " + WaitMode.parse(waitMode) + ", client " + waitMode);
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
                BenchSupport.deleteTree(dir);
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

    private void runControl(
        final WorkerProcess worker, final Settings settings, final Path work, final String waitMode,
        final Results results) throws Exception
    {
        final WaitMode serverWait = WaitMode.parse(waitMode);
        final Map<String, Object> common = new LinkedHashMap<>();
        common.put("wait", waitMode);
        common.put("warmup_ms", settings.warmupMs);
        common.put("latency_ms", settings.latencyMs);
        common.put("throughput_ms", settings.throughputMs);
        common.put("window", settings.window);
        common.put("paced_rate", settings.pacedRate);
        common.put("paced_ms", settings.pacedMs);

        progress("control, " + waitMode + ": kvstash server (SHARED, " + serverWait + ") and client " + waitMode);
        final Map<String, Object> control =
            control(worker, work, waitMode, common, settings, results, false, ThreadingMode.SHARED);
        progress("control, " + waitMode + ": the same with the journal on (serve --capture into " + work + ")");
        final Map<String, Object> controlJournal =
            control(worker, work, waitMode, common, settings, null, true, ThreadingMode.SHARED);
        progress("control, " + waitMode + ": the same with the server DEDICATED (a receiver thread and a pipeline " +
            "thread)");
        final Map<String, Object> controlDedicated =
            control(worker, work, waitMode, common, settings, null, false, ThreadingMode.DEDICATED);

        progress("echo, " + waitMode + ": bare rings, echo agent " + serverWait + " and client " + waitMode);
        final Map<String, Object> echo = echo(worker, work, waitMode, common, true);
        results.addControl(waitMode, control, echo);
        results.addControlVariant(results.controlJournal, "control journal", waitMode, controlJournal, "no_journal");
        results.addControlVariant(results.controlDedicated, "control dedicated", waitMode, controlDedicated, "shared");
    }

    /**
     * The bare ring echo against an echo agent on a thread of this JVM, idling as the wait mode says.
     */
    private static Map<String, Object> echo(
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
     * Control and echo pairs with one in flight, busy-spin, in short alternating rounds: the host moves
     * between states in which a hand-off between the two vCPUs costs 0.06 us or 0.5 us (it places them on
     * one physical core or on two), sometimes within a minute, so a control run and an echo run made a
     * minute apart can each catch a different state. Each round's control p50 is divided by the echo p50
     * measured right after it; {@code control_p50_vs_echo} is the median of those ratios.
     */
    private void runRounds(final WorkerProcess worker, final Settings settings, final Path work, final Results results)
        throws Exception
    {
        final Map<String, Object> common = new LinkedHashMap<>();
        common.put("wait", BenchSupport.BUSY_SPIN);
        common.put("warmup_ms", settings.roundWarmupMs);
        common.put("latency_ms", settings.roundMs);
        common.put("latency_only", true);
        for (int round = 0; round < settings.rounds; round++)
        {
            progress(BenchSupport.fmt("control and echo, busy-spin, alternating: round %d of %d", round + 1,
                settings.rounds));
            final Map<String, Object> control = control(worker, work, BenchSupport.BUSY_SPIN, common, settings, null,
                false, ThreadingMode.SHARED);
            final Map<String, Object> echo = echo(worker, work, BenchSupport.BUSY_SPIN, common, true);
            // The echo in its lighter, header-only form (the bench's until Dec 3), for comparison only.
            final Map<String, Object> headerOnly = echo(worker, work, BenchSupport.BUSY_SPIN, common, false);
            results.addRound(control, echo, headerOnly);
        }
    }

    /**
     * One control run against a fresh server, with or without its journal ({@code serve --capture}) in the
     * bench's work directory, which is on {@code /dev/shm} unless {@code --out} says otherwise, in a threading
     * mode: SHARED (the server's default, and the bench's everywhere else) or DEDICATED. The server's own
     * request times go to {@code results} when given.
     */
    private static Map<String, Object> control(
        final WorkerProcess worker,
        final Path work,
        final String waitMode,
        final Map<String, Object> common,
        final Settings settings,
        final Results results,
        final boolean journal,
        final ThreadingMode threadingMode) throws Exception
    {
        final Path dir = work.resolve((journal ? "control-journal-" : "control-") +
            threadingMode.name().toLowerCase(Locale.ROOT) + "-" + waitMode);
        final Path capture = work.resolve("control-" + waitMode + ".journal");
        final Map<String, Object> control;
        final KvStashServer server = KvStashServer.launch(new ServerContext()
            .directory(dir)
            .threadingMode(threadingMode)
            .waitMode(WaitMode.parse(waitMode))
            .captureFile(journal ? capture : null)
            .storeContext(new StoreContext().poolSizeBytes(settings.controlPoolBytes)));
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
            BenchSupport.deleteTree(dir);
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

    private void writeFiles(final Results results, final Map<String, Object> report, final Path outDir)
        throws IOException
    {
        final long nowMs = System.currentTimeMillis();
        try (PrintStream hlog = new PrintStream(Files.newOutputStream(outDir.resolve("bench.hlog")), false,
            StandardCharsets.UTF_8))
        {
            final HistogramLogWriter writer = new HistogramLogWriter(hlog);
            writer.outputComment("kvstash bench: one histogram per contender, tagged; values in ns");
            writer.outputLogFormatVersion();
            writer.outputStartTime(nowMs);
            writer.setBaseTime(nowMs);
            writer.outputLegend();
            for (final Map.Entry<String, Histogram> e : results.histograms.entrySet())
            {
                final Histogram h = e.getValue();
                h.setTag(e.getKey().replace(' ', '_'));
                h.setStartTimeStamp(nowMs);
                h.setEndTimeStamp(nowMs);
                writer.outputIntervalHistogram(h);
            }
        }
        final PercentilePlot plot = new PercentilePlot("kvstash bench" + (quick ? " --quick" : ""),
            PercentilePlot.escape(BenchTables.machineLine(results.machine)));
        plot.chart("Control pairs (PREPARE_STORE + COMMIT_STORE of one chunk) and bare ring echo pairs, " +
            "one in flight", results.controlSeries(false));
        plot.chart("Paced at " + results.settings.pacedRate + " pairs/s (coordinated omission corrected)",
            results.controlSeries(true));
        for (final long size : SIZES)
        {
            plot.chart("Time per " + BenchSupport.size(size) + " chunk", results.sizeSeries(size));
        }
        plot.write(outDir.resolve("bench-plot.html"));
        Files.writeString(outDir.resolve("result.json"), Json.write(report) + "\n", StandardCharsets.UTF_8);
    }

    private double elapsedSeconds()
    {
        return (System.nanoTime() - startNs) / 1e9;
    }

    private void progress(final String text)
    {
        stderr.println(BenchSupport.fmt("[bench %5.1fs] %s", elapsedSeconds(), text));
        stderr.flush();
    }

    /**
     * Results as they come in, and the report built from them.
     */
    static final class Results
    {
        final Settings settings;
        final Map<String, Histogram> histograms = new LinkedHashMap<>();
        final List<Map<String, Object>> sizes = new ArrayList<>();
        final Map<String, Map<String, Object>> control = new LinkedHashMap<>();
        final Map<String, Map<String, Object>> controlJournal = new LinkedHashMap<>();
        final Map<String, Map<String, Object>> controlDedicated = new LinkedHashMap<>();
        final Map<String, Map<String, Object>> echo = new LinkedHashMap<>();
        final List<Map<String, Object>> rounds = new ArrayList<>();
        final Map<String, Object> spinGaps = new LinkedHashMap<>();
        Map<String, Object> machine;
        Map<String, Object> firstTouch;
        long gcSteady;
        String redisVersion;
        boolean redisInstalled;

        Results(final Settings settings)
        {
            this.settings = settings;
        }

        private double median(final Map<String, Object> series, final String name, final long size)
        {
            return median(series, name, "", size);
        }

        private double median(final Map<String, Object> series, final String name, final String suffix, final long size)
        {
            @SuppressWarnings("unchecked")
            final Map<String, Object> s = (Map<String, Object>)series.get(name);
            histograms.put(name + suffix + " " + BenchSupport.size(size),
                BenchSupport.decode((String)s.get("histogram")));
            return ((Number)s.get("median_gbps")).doubleValue();
        }

        @SuppressWarnings("unchecked")
        void addSize(
            final long size,
            final int chunks,
            final Map<String, Map<String, Object>> data,
            final long benchGc,
            final Map<String, Object> redis,
            final Map<String, Object> chm)
        {
            final Map<String, Object> row = new LinkedHashMap<>();
            row.put("chunk_bytes", size);
            row.put("chunks_per_rep", chunks);
            long workerGc = 0;
            for (final String mode : data.keySet())
            {
                final Map<String, Object> d = data.get(mode);
                final String suffix = BenchSupport.BUSY_SPIN.equals(mode) ? "" : "_" + mode;
                for (final String name : new String[]{ "copy_in", "store", "copy_out", "retrieve", "store_pipelined",
                    "retrieve_pipelined", "store_batched", "retrieve_batched" })
                {
                    if (!d.containsKey(name))
                    {
                        continue;
                    }
                    row.put(name + suffix + "_gbps", median(d, name, suffix, size));
                    final Histogram h = histograms.get(name + suffix + " " + BenchSupport.size(size));
                    row.put(name + suffix + "_p50_us", h.getValueAtPercentile(50) / 1e3);
                    row.put(name + suffix + "_p99_us", h.getValueAtPercentile(99) / 1e3);
                }
                workerGc += ((Number)d.get("gc_worker")).longValue();
            }
            if (null != redis)
            {
                final Map<String, Object> set = (Map<String, Object>)redis.get("set");
                final Map<String, Object> get = (Map<String, Object>)redis.get("get");
                final Map<String, Object> r = new LinkedHashMap<>();
                r.put("redis_set", set);
                r.put("redis_get", get);
                row.put("redis_set_gbps", median(r, "redis_set", size));
                row.put("redis_get_gbps", median(r, "redis_get", size));
            }
            else
            {
                row.put("redis_set_gbps", null);
                row.put("redis_get_gbps", null);
            }
            final Map<String, Object> m = new LinkedHashMap<>();
            m.put("map_put", chm.get("put"));
            m.put("map_get", chm.get("get"));
            row.put("map_put_gbps", median(m, "map_put", size));
            row.put("map_get_gbps", median(m, "map_get", size));
            row.put("gc_worker", workerGc);
            row.put("gc_bench", benchGc);
            gcSteady += workerGc + benchGc;
            sizes.add(row);
        }

        private final Map<String, Histogram[]> serverTimes = new LinkedHashMap<>();

        void serverTime(final String waitMode, final Histogram prepare, final Histogram commit)
        {
            serverTimes.put(waitMode, new Histogram[]{ prepare.copy(), commit.copy() });
        }

        void addControl(final String waitMode, final Map<String, Object> c, final Map<String, Object> e)
        {
            final Map<String, Object> s = summary("control " + waitMode, c);
            final Histogram[] server = serverTimes.get(waitMode);
            if (null != server)
            {
                // Includes the warm-up, throughput and paced phases: the server records every request.
                s.put("server_prepare_p50_us", server[0].getValueAtPercentile(50) / 1e3);
                s.put("server_prepare_p99_us", server[0].getValueAtPercentile(99) / 1e3);
                s.put("server_commit_p50_us", server[1].getValueAtPercentile(50) / 1e3);
                s.put("server_commit_p99_us", server[1].getValueAtPercentile(99) / 1e3);
            }
            control.put(waitMode, s);
            echo.put(waitMode, summary("echo " + waitMode, e));
        }

        void addRound(final Map<String, Object> control, final Map<String, Object> echo,
            final Map<String, Object> headerOnly)
        {
            final Histogram c = BenchSupport.decode((String)control.get("latency"));
            final Histogram e = BenchSupport.decode((String)echo.get("latency"));
            final Histogram h = BenchSupport.decode((String)headerOnly.get("latency"));
            histograms.computeIfAbsent("control busy-spin rounds", k -> BenchSupport.newHistogram()).add(c);
            histograms.computeIfAbsent("echo busy-spin rounds", k -> BenchSupport.newHistogram()).add(e);
            final Map<String, Object> r = new LinkedHashMap<>();
            r.put("control_p50_us", c.getValueAtPercentile(50) / 1e3);
            r.put("echo_p50_us", e.getValueAtPercentile(50) / 1e3);
            r.put("control_p50_vs_echo", (double)c.getValueAtPercentile(50) / e.getValueAtPercentile(50));
            r.put("control_p999_us", c.getValueAtPercentile(99.9) / 1e3);
            r.put("echo_p999_us", e.getValueAtPercentile(99.9) / 1e3);
            r.put("echo_header_only_p50_us", h.getValueAtPercentile(50) / 1e3);
            r.put("control_p50_vs_echo_header_only", (double)c.getValueAtPercentile(50) / h.getValueAtPercentile(50));
            // The server's residence (receiver stamp to response written) of the round's requests, with one in
            // flight: what the server adds to the two round trips the echo pair also makes.
            r.put("server_prepare_p50_us", control.get("server_prepare_p50_us"));
            r.put("server_commit_p50_us", control.get("server_commit_p50_us"));
            r.put("control_pairs", c.getTotalCount());
            r.put("echo_pairs", e.getTotalCount());
            rounds.add(r);
        }

        private Double medianRoundRatio(final String field)
        {
            if (rounds.isEmpty())
            {
                return null;
            }
            final double[] r = new double[rounds.size()];
            for (int i = 0; i < r.length; i++)
            {
                r[i] = ((Number)rounds.get(i).get(field)).doubleValue();
            }
            Arrays.sort(r);
            return 0 == (r.length & 1) ? (r[r.length / 2 - 1] + r[r.length / 2]) / 2 : r[r.length / 2];
        }

        /**
         * A control run that differs from the plain one in one setting (the journal on, another threading
         * mode), summarised with its pairs/s and p50 as ratios to the plain run's of the same wait mode.
         */
        void addControlVariant(
            final Map<String, Map<String, Object>> into,
            final String name,
            final String waitMode,
            final Map<String, Object> c,
            final String baseline)
        {
            final Map<String, Object> s = summary(name + " " + waitMode, c);
            final Object pairs = value(control, waitMode, "pairs_per_s");
            final Object p50 = value(control, waitMode, "p50_us");
            s.put("pairs_per_s_vs_" + baseline, pairs instanceof Number ?
                ((Number)s.get("pairs_per_s")).doubleValue() / ((Number)pairs).doubleValue() : null);
            s.put("p50_vs_" + baseline, p50 instanceof Number ?
                ((Number)s.get("p50_us")).doubleValue() / ((Number)p50).doubleValue() : null);
            into.put(waitMode, s);
        }

        private Map<String, Object> summary(final String name, final Map<String, Object> r)
        {
            final Histogram latency = BenchSupport.decode((String)r.get("latency"));
            final Histogram paced = BenchSupport.decode((String)r.get("paced"));
            histograms.put(name, latency);
            histograms.put(name + " paced", paced);
            final Map<String, Object> s = new LinkedHashMap<>();
            s.put("pairs_timed", latency.getTotalCount());
            s.put("p50_us", latency.getValueAtPercentile(50) / 1e3);
            s.put("p99_us", latency.getValueAtPercentile(99) / 1e3);
            s.put("p999_us", latency.getValueAtPercentile(99.9) / 1e3);
            s.put("max_us", latency.getMaxValue() / 1e3);
            s.put("pairs_per_s", ((Number)r.get("pairs_per_s")).doubleValue());
            s.put("window", r.get("window"));
            s.put("paced_rate", r.get("paced_rate"));
            s.put("paced_p50_us", paced.getValueAtPercentile(50) / 1e3);
            s.put("paced_p99_us", paced.getValueAtPercentile(99) / 1e3);
            s.put("paced_p999_us", paced.getValueAtPercentile(99.9) / 1e3);
            s.put("paced_max_us", paced.getMaxValue() / 1e3);
            return s;
        }

        List<PercentilePlot.Series> controlSeries(final boolean paced)
        {
            final List<PercentilePlot.Series> series = new ArrayList<>();
            for (final String mode : new String[]{ BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF })
            {
                for (final String who : new String[]{ "control", "echo" })
                {
                    final String name = who + " " + mode + (paced ? " paced" : "");
                    series.add(new PercentilePlot.Series(name, histograms.get(name)));
                }
            }
            return series;
        }

        List<PercentilePlot.Series> sizeSeries(final long size)
        {
            final List<PercentilePlot.Series> series = new ArrayList<>();
            for (final String name : new String[]{ "copy_in", "store", "store_pipelined", "store_batched",
                "store_backoff", "store_pipelined_backoff", "copy_out", "retrieve", "retrieve_pipelined",
                "retrieve_batched", "retrieve_backoff", "retrieve_pipelined_backoff", "redis_set", "redis_get",
                "map_put", "map_get" })
            {
                final String key = name + " " + BenchSupport.size(size);
                series.add(new PercentilePlot.Series(key, histograms.get(key)));
            }
            return series;
        }

        private Double ratio(final String numerator, final String denominator, final long... sizesOf)
        {
            Double min = null;
            for (final long size : sizesOf)
            {
                for (final Map<String, Object> row : sizes)
                {
                    if (((Number)row.get("chunk_bytes")).longValue() != size)
                    {
                        continue;
                    }
                    final Object n = row.get(numerator);
                    final Object d = row.get(denominator);
                    if (!(n instanceof Number) || !(d instanceof Number))
                    {
                        return null;
                    }
                    final double r = ((Number)n).doubleValue() / ((Number)d).doubleValue();
                    min = null == min ? r : Math.min(min, r);
                }
            }
            return min;
        }

        /**
         * One worker's store and retrieve against the copy of the same repetitions, busy-spin and backoff,
         * each the minimum over the chunks of 256 KiB and more.
         *
         * @param worker       "" for the serial worker, "_pipelined" or "_batched" for the others.
         * @param perChunkP50  per-chunk medians (copy time / kvstash time) instead of GB/s.
         */
        private Map<String, Object> againstCopy(final String worker, final boolean perChunkP50)
        {
            final Map<String, Object> m = new LinkedHashMap<>();
            for (final String mode : new String[]{ "", "_backoff" })
            {
                for (final String[] op : new String[][]{ { "store", "copy_in" }, { "retrieve", "copy_out" } })
                {
                    final String name = op[0] + ("".equals(mode) ? "" : "_backoff") + "_vs_copy";
                    m.put(name, perChunkP50 ?
                        ratio(op[1] + mode + "_p50_us", op[0] + worker + mode + "_p50_us", LARGE_CHUNKS) :
                        ratio(op[0] + worker + mode + "_gbps", op[1] + mode + "_gbps", LARGE_CHUNKS));
                }
            }
            return m;
        }

        private static final long[] LARGE_CHUNKS = { 256L << 10, 2L << 20, 32L << 20 };

        private static Object value(final Map<String, Map<String, Object>> m, final String mode, final String key)
        {
            final Map<String, Object> s = m.get(mode);
            return null == s ? null : s.get(key);
        }

        Map<String, Object> report(
            final Map<String, Object> machineFacts, final Path outDir, final boolean quick, final double elapsedS)
        {
            machine = machineFacts;
            // Against the copy bound the worker is the pipelined one, as a worker streaming a prompt's chunks runs:
            // each chunk still goes prepare, write, commit, with the next chunk's prepare sent before the bytes
            // move, so the server's decision overlaps the copy instead of adding two round trips to it. The
            // one-request-at-a-time worker's figures are in ratios_serial; against Redis (one SET or GET at a
            // time) and the in-process map the serial worker is compared, access pattern for access pattern.
            final Map<String, Object> ratios = new LinkedHashMap<>();
            ratios.put("store_vs_copy", ratio("store_pipelined_gbps", "copy_in_gbps", 256L << 10, 2L << 20, 32L << 20));
            ratios.put("retrieve_vs_copy", ratio("retrieve_pipelined_gbps", "copy_out_gbps", 256L << 10, 2L << 20,
                32L << 20));
            ratios.put("store_vs_redis_small", ratio("store_gbps", "redis_set_gbps", 256L << 10, 2L << 20));
            ratios.put("retrieve_vs_redis_small", ratio("retrieve_gbps", "redis_get_gbps", 256L << 10, 2L << 20));
            ratios.put("store_vs_redis_large", ratio("store_gbps", "redis_set_gbps", 32L << 20));
            ratios.put("retrieve_vs_redis_large", ratio("retrieve_gbps", "redis_get_gbps", 32L << 20));
            // Control against echo from the alternating rounds (each round's two p50s measured seconds apart,
            // in the same host state); the long runs' ratio, a minute apart, is kept in control_rounds.
            final Object controlP50 = value(control, BenchSupport.BUSY_SPIN, "p50_us");
            final Object echoP50 = value(echo, BenchSupport.BUSY_SPIN, "p50_us");
            final Double longRunsRatio = controlP50 instanceof Number && echoP50 instanceof Number ?
                ((Number)controlP50).doubleValue() / ((Number)echoP50).doubleValue() : null;
            final Double roundsRatio = medianRoundRatio("control_p50_vs_echo");
            ratios.put("control_p50_vs_echo", null != roundsRatio ? roundsRatio : longRunsRatio);
            ratios.put("store_vs_map", ratio("store_gbps", "map_put_gbps", 256L << 10, 2L << 20, 32L << 20));
            ratios.put("retrieve_vs_map", ratio("retrieve_gbps", "map_get_gbps", 256L << 10, 2L << 20, 32L << 20));

            final Map<String, Object> ratiosBackoff = new LinkedHashMap<>();
            ratiosBackoff.put("store_vs_copy", ratio("store_pipelined_backoff_gbps", "copy_in_backoff_gbps", 256L << 10,
                2L << 20, 32L << 20));
            ratiosBackoff.put("retrieve_vs_copy", ratio("retrieve_pipelined_backoff_gbps", "copy_out_backoff_gbps",
                256L << 10, 2L << 20, 32L << 20));
            ratiosBackoff.put("store_vs_redis_small", ratio("store_backoff_gbps", "redis_set_gbps", 256L << 10, 2L << 20));
            ratiosBackoff.put("retrieve_vs_redis_small", ratio("retrieve_backoff_gbps", "redis_get_gbps", 256L << 10,
                2L << 20));
            ratiosBackoff.put("store_vs_redis_large", ratio("store_backoff_gbps", "redis_set_gbps", 32L << 20));
            ratiosBackoff.put("retrieve_vs_redis_large", ratio("retrieve_backoff_gbps", "redis_get_gbps", 32L << 20));
            // The worker with one request in flight: prepare, write, commit, each answer awaited before the next
            // request goes out (two round trips per chunk on top of the copy); and its per-chunk medians (time of
            // the copy / time of the store): the typical chunk, not the loop's throughput, which a shared
            // machine's scheduling stalls dominate.
            final Map<String, Object> ratiosSerial = againstCopy("", false);
            final Map<String, Object> ratiosP50 = againstCopy("", true);
            // The worker streaming chunks: the next chunk's prepare sent before the current chunk's bytes move,
            // commits not awaited (two requests in flight).
            final Map<String, Object> ratiosPipelined = againstCopy("_pipelined", false);
            final Map<String, Object> pipelinedP50 = againstCopy("_pipelined", true);
            ratiosPipelined.put("store_p50_vs_copy", pipelinedP50.get("store_vs_copy"));
            ratiosPipelined.put("retrieve_p50_vs_copy", pipelinedP50.get("retrieve_vs_copy"));
            // The worker that prepares and commits eight chunks per request (a prompt's chunks at a time, as an
            // inference engine stores them), pipelined like the one above: beside the headline, not in it.
            final Map<String, Object> ratiosBatched = againstCopy("_batched", false);

            final Map<String, Object> report = new LinkedHashMap<>();
            report.put("bench", "kvstash");
            report.put("mode", quick ? "quick" : "full");
            report.put("ratios", ratios);
            report.put("control_p999_us", value(control, BenchSupport.BUSY_SPIN, "p999_us"));
            report.put("control_pairs_per_s", value(control, BenchSupport.BUSY_SPIN, "pairs_per_s"));
            report.put("gc_count_steady", gcSteady);
            report.put("ratios_backoff", ratiosBackoff);
            report.put("ratios_serial", ratiosSerial);
            report.put("ratios_p50", ratiosP50);
            report.put("ratios_pipelined", ratiosPipelined);
            report.put("ratios_batched", ratiosBatched);
            report.put("first_touch", firstTouch);
            report.put("targets", targets(ratios, report, spinGaps));
            report.put("sizes", sizes);
            report.put("control", control);
            report.put("control_journal", controlJournal);
            report.put("control_dedicated", controlDedicated);
            report.put("echo", echo);
            final Map<String, Object> controlRounds = new LinkedHashMap<>();
            controlRounds.put("median_control_p50_vs_echo", roundsRatio);
            controlRounds.put("long_runs_control_p50_vs_echo", longRunsRatio);
            controlRounds.put("median_control_p50_vs_echo_header_only",
                medianRoundRatio("control_p50_vs_echo_header_only"));
            controlRounds.put("rounds", rounds);
            report.put("control_rounds", controlRounds);
            final Map<String, Object> redis = new LinkedHashMap<>();
            redis.put("version", redisVersion);
            redis.put("installed_by_bench", redisInstalled);
            report.put("redis", redis);
            final Map<String, Object> run = new LinkedHashMap<>();
            run.put("reps", settings.reps);
            run.put("warmups", settings.warmups);
            run.put("pool_bytes", settings.poolBytes);
            run.put("server", "in the bench JVM: SHARED threading (receiver and pipeline on one thread); data path " +
                "in busy-spin (ratios) and backoff (ratios_backoff), server and client alike");
            run.put("elapsed_s", Math.round(elapsedS * 10) / 10.0);
            report.put("run", run);
            if (!spinGaps.isEmpty())
            {
                machine.put("spin_gaps", spinGaps);
            }
            report.put("machine", machine);
            final Map<String, Object> files = new LinkedHashMap<>();
            files.put("dir", outDir.toAbsolutePath().toString());
            files.put("hlog", outDir.resolve("bench.hlog").toAbsolutePath().toString());
            files.put("plot", outDir.resolve("bench-plot.html").toAbsolutePath().toString());
            files.put("json", outDir.resolve("result.json").toAbsolutePath().toString());
            report.put("files", files);
            return report;
        }

        private Map<String, Object> targets(
            final Map<String, Object> ratios, final Map<String, Object> report, final Map<String, Object> spinGaps)
        {
            final Map<String, Object> t = new LinkedHashMap<>();
            target(t, "store_vs_copy", ratios.get("store_vs_copy"), ">=", 0.90);
            target(t, "retrieve_vs_copy", ratios.get("retrieve_vs_copy"), ">=", 0.90);
            target(t, "store_vs_redis_small", ratios.get("store_vs_redis_small"), ">=", 3);
            target(t, "retrieve_vs_redis_small", ratios.get("retrieve_vs_redis_small"), ">=", 3);
            target(t, "store_vs_redis_large", ratios.get("store_vs_redis_large"), ">=", 10);
            target(t, "retrieve_vs_redis_large", ratios.get("retrieve_vs_redis_large"), ">=", 10);
            target(t, "control_p50_vs_echo", ratios.get("control_p50_vs_echo"), "<=", 1.5);
            target(t, "control_p999_us", report.get("control_p999_us"), "<=", 20);
            if (spinGaps.get("before_control") instanceof Map)
            {
                // The longest pair whose p99.9 the machine's gaps leave alone (see SpinGaps).
                @SuppressWarnings("unchecked")
                final Map<String, Object> target = (Map<String, Object>)t.get("control_p999_us");
                target.put("machine_p999_clear_pair_us",
                    ((Map<?, ?>)spinGaps.get("before_control")).get("p999_clear_pair_us"));
                target.put("control_p50_us", value(control, BenchSupport.BUSY_SPIN, "p50_us"));
            }
            target(t, "control_pairs_per_s", report.get("control_pairs_per_s"), ">=", 1_000_000);
            target(t, "gc_count_steady", report.get("gc_count_steady"), "<=", 0);
            return t;
        }

        private static void target(
            final Map<String, Object> t, final String name, final Object value, final String op, final double bound)
        {
            final Map<String, Object> m = new LinkedHashMap<>();
            m.put("value", value);
            m.put("target", op + " " + (bound == Math.rint(bound) ? Long.toString((long)bound) : Double.toString(bound)));
            if (value instanceof Number)
            {
                final double v = ((Number)value).doubleValue();
                m.put("met", ">=".equals(op) ? v >= bound : v <= bound);
            }
            else
            {
                m.put("met", null);
            }
            t.put(name, m);
        }
    }
}
