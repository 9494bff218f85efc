package io.kvstash.perf.bench;

import io.kvstash.cli.KvStashCommand;
import io.kvstash.core.EvictionPolicy;
import io.kvstash.process.ShmDirectories;
import io.kvstash.tools.Json;
import io.kvstash.wire.file.SecureDirectory;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine;

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.function.Consumer;

/**
 * {@code kvstash bench}: kvstash side by side with the physical limit (a single-thread copy of the chunks
 * into and out of the pool's slots, a mapped {@code /dev/shm} file, with no request), the IPC floor (a bare
 * ring echo between two processes), Redis and an in-process map, in one invocation, on the same chunks
 * (4 KiB, 256 KiB, 2 MiB, 32 MiB), as ratios. The coordinator (this JVM) runs the kvstash servers, the echo
 * agent and redis-server; a separate worker JVM ({@link BenchWorker}) is the client of each. Every figure is
 * the median of several repetitions after warm-up; every latency is an HdrHistogram, written to
 * {@code bench.hlog} and plotted in {@code bench-plot.html} in the output directory. Progress goes to standard
 * error; the results (tables, or one JSON object with {@code --json}) to standard output.
 * <p>
 * This class holds the options and the order of the parts: the control part ({@link ControlPart} per wait
 * mode, then {@link ControlRoundsPart}) before redis-server starts, then the data part ({@link SizePart} per
 * chunk size, then {@link FirstTouchPart}), then, only when named with {@code --only l2}, the second tier's part
 * ({@link L2Part}). The parts hand their results to {@link BenchResults};
 * {@link BenchReport} builds the report, {@link BenchVerdict} judges it, {@link BenchFiles} writes the files
 * and {@link BenchTables} prints the tables.
 */
@Command(name = "bench", mixinStandardHelpOptions = true, versionProvider = KvStashCommand.Version.class,
    description = "Benchmarks kvstash against a raw copy, a bare ring echo, Redis and an in-process map, " +
        "side by side, and prints the ratios.")
public final class BenchCommand implements Callable<Integer>
{
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
        description = "Run only some parts: data (copy, store/retrieve, redis, in-process), control (control, echo), " +
            "l2 (the second tier against a Redis Cluster the bench starts; only when named), " +
            "scale (1, 2, 4, 8 worker processes against one server; in full runs, or when named here).")
    List<String> only;

    @Option(names = "--l2-sizes", paramLabel = "BYTES", split = ",", hidden = true,
        description = "Chunk sizes of the l2 part, bytes, multiples of 1 KiB (default 2 MiB and 32 MiB); for tests.")
    long[] l2Sizes;

    @Option(names = "--reps", paramLabel = "N", description = "Measured repetitions per contender (default 15, 3 quick).")
    Integer reps;

    @Option(names = "--eviction", paramLabel = "NAME", defaultValue = "default",
        description = "The control part also runs its pairs against a server of this eviction policy (lru, chain, " +
            "slru, slru-admit or default), in short rounds alternating with lru servers in the same run, and " +
            "reports the median of the rounds' pairs/s ratios against lru (a target: >= 0.90); lru runs no " +
            "second server (default: ${DEFAULT-VALUE}).")
    String eviction;

    /** The parts {@code --only} accepts. */
    static final List<String> PARTS = List.of("data", "control", "l2", "scale");

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
        final BenchSettings settings = BenchSettings.of(quick, reps);
        settings.eviction = EvictionPolicy.ofName(eviction);
        final Path outDir = null != out ? out : Path.of(System.getProperty("java.io.tmpdir"),
            "kvstash-bench-" + LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));
        Files.createDirectories(outDir);
        final Map<String, Object> machine = MachineFacts.collect();
        machine.put("eviction", settings.eviction.label());
        progress(BenchSupport.fmt("kvstash bench%s: %s cores, %s, %s GiB, %s; load %.2f; output in %s",
            quick ? " --quick" : "", machine.get("cores"), machine.get("cpu_model"), machine.get("memory_gib"),
            machine.get("jvm"), MachineFacts.loadAverage(), outDir));

        final BenchResults results = new BenchResults(settings);
        runParts(settings, machine, outDir, results);
        machine.put("load_average_end", MachineFacts.loadAverage());
        final Map<String, Object> report = BenchReport.of(results, machine, outDir, quick, elapsedSeconds());
        @SuppressWarnings("unchecked")
        final BenchVerdict verdict = BenchVerdict.of((Map<String, Object>)report.get("targets"), machine, quick);
        report.put("verdict", verdict.toMap());
        BenchFiles.write(results, report, outDir, quick);
        print(report, results, verdict);
        return "PASS".equals(verdict.verdict) ? 0 : 1;
    }

    /**
     * Runs the chosen parts against one worker process, in a work directory (under /dev/shm where there is
     * one) that is deleted afterwards, with redis-server stopped afterwards when the data part started it.
     */
    private void runParts(
        final BenchSettings settings,
        final Map<String, Object> machine,
        final Path outDir,
        final BenchResults results) throws Exception
    {
        final Path shmBase = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") :
            Path.of(System.getProperty("java.io.tmpdir"));
        final Path work = SecureDirectory.ensure(shmBase.resolve("kvstash-bench-" + ProcessHandle.current().pid()));
        final Consumer<String> progress = this::progress;
        RedisContender redis = null;
        try
        {
            try (WorkerProcess worker = WorkerProcess.start(settings.workerHeap, progress))
            {
                machine.put("worker_jvm_flags", String.join(" ", worker.flags()));
                // The control pairs first: they are the most sensitive to what else runs, and redis-server is
                // not started yet.
                if (part("control"))
                {
                    controlPart(worker, settings, work, results);
                }
                if (!noRedis && part("data"))
                {
                    redis = startRedis(work, outDir, results);
                }
                for (final long size : part("data") ? BenchSettings.SIZES : new long[0])
                {
                    SizePart.run(worker, redis, settings, work, outDir, size, progress, results);
                }
                if (part("data"))
                {
                    FirstTouchPart.run(worker, work, progress, results);
                }
                if (null != only && only.contains("l2"))
                {
                    L2Part.run(worker, settings, work, null != l2Sizes ? l2Sizes : L2Part.SIZES, progress, results);
                }
                if (null != only ? only.contains("scale") : !quick)
                {
                    results.scale = ScalePart.run(quick, work, progress, results.control);
                }
            }
        }
        finally
        {
            if (null != redis)
            {
                redis.close();
            }
            ShmDirectories.delete(work);
        }
    }

    /** The control part in both wait modes and its alternating rounds, between two spin-gap measurements. */
    private void controlPart(
        final WorkerProcess worker, final BenchSettings settings, final Path work, final BenchResults results)
        throws Exception
    {
        final Consumer<String> progress = this::progress;
        progress("spin gaps: one thread per core reading the clock, gaps over 10 us");
        results.spinGaps.put("before_control", SpinGaps.measure(settings.spinGapsMs));
        for (final String waitMode : new String[]{ BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF })
        {
            ControlPart.run(worker, settings, work, waitMode, progress, results);
        }
        ControlRoundsPart.run(worker, settings, work, progress, results);
        results.spinGaps.put("after_control", SpinGaps.measure(settings.spinGapsMs));
        progress("spin gaps: " + results.spinGaps);
    }

    /**
     * Starts redis-server for the data part, installing it first when it is missing.
     *
     * @return the running contender, or null when it could not be installed.
     */
    private RedisContender startRedis(final Path work, final Path outDir, final BenchResults results)
        throws Exception
    {
        Path executable = RedisContender.find();
        if (null == executable)
        {
            results.redisInstalled = true;
            executable = RedisContender.install(this::progress);
        }
        if (null == executable)
        {
            return null;
        }
        final RedisContender redis = RedisContender.start(executable, work, outDir.resolve("redis.log"));
        results.redisVersion = redis.version();
        progress("redis-server " + redis.version() + " on 127.0.0.1:" + redis.port() +
            " (--save \"\" --appendonly no)");
        return redis;
    }

    /** Prints the report: as JSON on stdout (the verdict line on stderr), or as tables ending in the verdict. */
    private void print(final Map<String, Object> report, final BenchResults results, final BenchVerdict verdict)
    {
        if (json)
        {
            stdout.println(Json.write(report));
        }
        else
        {
            new BenchTables(stdout).print(report, results);
            ScalePart.print(stdout, results.scale);
            stdout.println(verdict.line);
        }
        stdout.flush();
        progress("done in " + Math.round(elapsedSeconds()) + " s");
        if (json)
        {
            stderr.println(verdict.line);
            stderr.flush();
        }
    }

    private void validate()
    {
        try
        {
            EvictionPolicy.ofName(eviction);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--eviction: " + ex.getMessage());
        }
        if (null != reps && reps < 1)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--reps " + reps + " is out of range: give at least 1 repetition");
        }
        for (final long size : null != l2Sizes ? l2Sizes : new long[0])
        {
            if (size < 1024 || 0 != size % 1024 || size > (1L << 30))
            {
                throw new CommandLine.ParameterException(spec.commandLine(),
                    "--l2-sizes: " + size + " is not a chunk size: give multiples of 1024 bytes up to 1 GiB");
            }
        }
        if (null != only)
        {
            for (final String part : only)
            {
                if (!PARTS.contains(part))
                {
                    throw new CommandLine.ParameterException(spec.commandLine(),
                        "--only: '" + part + "' is not a part: give data, control, l2, scale or several");
                }
            }
        }
    }

    private boolean part(final String name)
    {
        return null == only || only.contains(name);
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
}
