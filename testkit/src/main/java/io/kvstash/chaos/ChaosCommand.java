package io.kvstash.chaos;

import io.kvstash.tools.Json;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code kvstash chaos}: the reliability suites (docs/RELIABILITY.md) with a real server and real worker processes.
 * {@code --quick} (the default, under two minutes) or {@code --long} (at least 10^6 verified reads, 1,000
 * zombie repetitions, 10^6 fuzz records), or {@code --soak DURATION} for the soak. Prints one JSON object
 * with {@code --json}; ends with a verdict line (PASS, or FAIL and every broken promise; on standard error with
 * {@code --json}) and exits 1 when a promise is broken.
 */
@Command(name = "chaos", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Runs the reliability suites against a real server and worker processes: kills at failpoints, " +
            "zombie fencing, server restarts, wire fuzzing, pool exhaustion, the second tier under Redis Cluster " +
            "faults; or a soak." })
public final class ChaosCommand implements Callable<Integer>
{
    /** The suites {@code --only} accepts. */
    static final List<String> SUITES = ChaosRunner.suiteNames();

    @Spec
    CommandSpec spec;

    @Option(names = "--quick", description = "The quick profile (default): under two minutes.")
    boolean quick;

    @Option(names = "--long", description = "The long profile: >= 10^6 verified reads, 1,000 zombies, 10^6 fuzz records.")
    boolean longProfile;

    @Option(names = "--soak", paramLabel = "MINUTES", description = "Run the soak for this many minutes instead.")
    double soakMinutes;

    @Option(names = "--workers", paramLabel = "W", description = "Load worker processes (default 3).")
    Integer workers;

    @Option(names = "--seed", paramLabel = "S", description = "Seed of every random choice (default 42).")
    Long seed;

    @Option(names = "--base-dir", paramLabel = "DIR", description = "Where server directories go (default /dev/shm).")
    Path baseDirectory;

    @Option(names = "--only", paramLabel = "SUITES", split = ",",
        description = "Run only these suites: kill, zombie, restart, fuzz, exhaustion, l2.")
    List<String> only;

    @Option(names = "--json", description = "Print one JSON object on standard output.")
    boolean json;

    /**
     * Runs the chosen profile.
     *
     * @return 0 when every promise held, 1 otherwise.
     * @throws Exception when a suite cannot run.
     */
    @Override
    public Integer call() throws Exception
    {
        validate();
        final Map<String, Object> report;
        if (soakMinutes > 0)
        {
            report = new SoakRunner((long)(soakMinutes * 60_000), null == workers ? 3 : workers, 20_000, 60_000,
                null == baseDirectory ? ChaosRunner.Options.quick().baseDirectory : baseDirectory, System.err).run();
        }
        else
        {
            final ChaosRunner.Options options = longProfile ? ChaosRunner.Options.full() : ChaosRunner.Options.quick();
            if (null != workers)
            {
                options.workers = workers;
            }
            if (null != seed)
            {
                options.seed = seed;
            }
            if (null != baseDirectory)
            {
                options.baseDirectory = baseDirectory;
            }
            if (null != only)
            {
                options.suites = new java.util.HashSet<>(only);
            }
            report = new ChaosRunner(options).run();
        }
        final List<String> broken = brokenPromises(report);
        report.put("verdict", broken.isEmpty() ? "PASS" : "FAIL");
        report.put("broken_promises", broken);
        final String verdict = verdictLine(report, broken);
        final java.io.PrintWriter out = spec.commandLine().getOut();
        if (json)
        {
            out.println(Json.write(report));
            spec.commandLine().getErr().println(verdict);
            spec.commandLine().getErr().flush();
        }
        else
        {
            for (final Map.Entry<String, Object> entry : report.entrySet())
            {
                if (!"verdict".equals(entry.getKey()) && !"broken_promises".equals(entry.getKey()))
                {
                    out.printf("%-36s %s%n", entry.getKey(), entry.getValue());
                }
            }
            out.println(verdict);
        }
        out.flush();
        return broken.isEmpty() ? 0 : 1;
    }

    /**
     * The last line of a run: PASS and what was checked, or FAIL and every broken promise.
     *
     * @param report chaos or soak report.
     * @param broken {@link #brokenPromises(Map)} of it.
     * @return one line.
     */
    static String verdictLine(final Map<String, Object> report, final List<String> broken)
    {
        if (!broken.isEmpty())
        {
            return "FAIL: " + broken.size() + " broken promise" + (1 == broken.size() ? "" : "s") + ": " +
                String.join(", ", broken);
        }
        final StringBuilder checked = new StringBuilder();
        appendIfPresent(checked, report, "kills", "%,d worker kills");
        appendIfPresent(checked, report, "verified_reads", "%,d verified reads");
        appendIfPresent(checked, report, "late_commits_total", "%,d zombie commits fenced");
        appendIfPresent(checked, report, "server_restarts", "%,d server restarts");
        appendIfPresent(checked, report, "fuzz_records", "%,d fuzz records");
        appendIfPresent(checked, report, "exhaustion_prepares", "%,d prepares on a full pool");
        appendIfPresent(checked, report, "soak_workers_churned", "%,d soak workers churned");
        appendIfPresent(checked, report, "l2_node_kills", "%,d cluster master kills");
        appendIfPresent(checked, report, "l2_verified_reads", "%,d verified reads through the second tier");
        return "PASS: every promise held" + (checked.length() == 0 ? "" : " (" + checked + ")") +
            "; no chunk lost or corrupted, nothing leaked, no crash" +
            (report.containsKey("l2_skipped") ? "; second tier suite skipped: " + report.get("l2_skipped") : "");
    }

    private static void appendIfPresent(
        final StringBuilder out, final Map<String, Object> report, final String key, final String format)
    {
        final Object value = report.get(key);
        if (value instanceof Number)
        {
            out.append(out.length() == 0 ? "" : ", ").append(String.format(java.util.Locale.ROOT, format,
                ((Number)value).longValue()));
        }
    }

    private void validate()
    {
        final CommandLine.ParseResult parsed = spec.commandLine().getParseResult();
        final boolean soak = parsed.hasMatchedOption("--soak");
        if (quick && longProfile)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--quick and --long are two profiles: give one of them");
        }
        if (soak && (quick || longProfile))
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--soak runs instead of the suites: give it without " + (quick ? "--quick" : "--long"));
        }
        if (soak && !(soakMinutes > 0))
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--soak " + parsed.matchedOptionValue("--soak", soakMinutes) + " is not a duration: give minutes > 0");
        }
        if (null != workers && workers < 1)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--workers " + workers + " is out of range: give at least 1");
        }
        if (null != only)
        {
            for (final String suite : only)
            {
                if (!SUITES.contains(suite))
                {
                    throw new CommandLine.ParameterException(spec.commandLine(),
                        "--only: '" + suite + "' is not a suite: give some of " + String.join(", ", SUITES));
                }
            }
            if (soak)
            {
                throw new CommandLine.ParameterException(spec.commandLine(), "--only selects suites, not the soak");
            }
        }
    }

    /**
     * Whether a report shows a broken promise.
     *
     * @param report chaos or soak report.
     * @return true when something was lost, leaked, crashed or left behind.
     */
    public static boolean broken(final Map<String, Object> report)
    {
        return !brokenPromises(report).isEmpty();
    }

    /**
     * The promises a report shows broken, each as {@code key value} of the report.
     *
     * @param report chaos or soak report.
     * @return empty when every promise held.
     */
    public static List<String> brokenPromises(final Map<String, Object> report)
    {
        final List<String> broken = new java.util.ArrayList<>();
        for (final String key : new String[]{ "checksum_mismatches", "leaked_reservations", "leaked_pins",
            "pending_transfers", "worker_crashes", "late_writes", "fuzz_unanswered", "fuzz_stalls_over_100ms",
            "soak_checksum_mismatches", "soak_stale_files", "l2_checksum_mismatches", "l2_corrupt_values_served",
            "l2_requests_over_timeout", "l2_leaked_reservations", "l2_leaked_pins", "l2_pending_transfers",
            "l2_worker_crashes" })
        {
            if (nonZero(report, key))
            {
                broken.add(key + " " + report.get(key));
            }
        }
        for (final String key : new String[]{ "free_plus_readable_equals_total", "fuzz_server_alive",
            "exhaustion_pinned_intact", "exhaustion_reserved_intact", "l2_free_plus_readable_equals_total",
            "l2_resumed", "l2_state_up_at_end" })
        {
            if (Boolean.FALSE.equals(report.get(key)))
            {
                broken.add(key + " false");
            }
        }
        if (report.containsKey("late_commits_total") &&
            !report.get("late_commits_total").equals(report.get("late_commits_rejected")))
        {
            broken.add("late_commits_rejected " + report.get("late_commits_rejected") + " of " +
                report.get("late_commits_total"));
        }
        brokenL2Promises(report, broken);
        return broken;
    }

    private static void brokenL2Promises(final Map<String, Object> report, final List<String> broken)
    {
        if (report.containsKey("l2_error"))
        {
            broken.add("l2_error " + report.get("l2_error"));
        }
        if (report.containsKey("l2_verified_reads") && !nonZero(report, "l2_verified_reads"))
        {
            broken.add("l2_verified_reads 0");
        }
        if (report.containsKey("l2_corrupted_keys"))
        {
            final long corrupted = ((Number)report.get("l2_corrupted_keys")).longValue();
            if (!report.get("l2_corrupted_keys").equals(report.get("l2_corrupted_keys_counted")))
            {
                broken.add("l2_corrupted_keys_counted " + report.get("l2_corrupted_keys_counted") + " of " + corrupted);
            }
            if (((Number)report.get("l2_corrupt_values")).longValue() < corrupted)
            {
                broken.add("l2_corrupt_values " + report.get("l2_corrupt_values") + " < " + corrupted);
            }
        }
    }

    private static boolean nonZero(final Map<String, Object> report, final String key)
    {
        final Object value = report.get(key);
        return value instanceof Number && ((Number)value).longValue() != 0;
    }
}
