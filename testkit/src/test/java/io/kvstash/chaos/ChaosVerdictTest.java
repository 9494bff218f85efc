package io.kvstash.chaos;

import io.kvstash.tools.Json;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code kvstash chaos} ends with one verdict line: PASS and what was checked, or FAIL and every broken promise,
 * with exit code 1.
 */
class ChaosVerdictTest
{
    @Test
    void shouldNameEveryBrokenPromiseWhenTheReportShowsThem()
    {
        final Map<String, Object> report = new LinkedHashMap<>();
        report.put("kills", 5L);
        report.put("checksum_mismatches", 2L);
        report.put("leaked_pins", 0L);
        report.put("fuzz_server_alive", false);
        report.put("late_commits_total", 10L);
        report.put("late_commits_rejected", 9L);
        final List<String> broken = ChaosCommand.brokenPromises(report);
        assertEquals(List.of("checksum_mismatches 2", "fuzz_server_alive false", "late_commits_rejected 9 of 10"),
            broken);
        assertEquals("FAIL: 3 broken promises: checksum_mismatches 2, fuzz_server_alive false, " +
            "late_commits_rejected 9 of 10", ChaosCommand.verdictLine(report, broken));
    }

    @Test
    void shouldNameTheSecondTiersBrokenPromisesAndSayWhenItsSuiteWasSkipped()
    {
        final Map<String, Object> report = new LinkedHashMap<>();
        report.put("l2_node_kills", 1L);
        report.put("l2_resumed", false);
        report.put("l2_corrupted_keys", 2L);
        report.put("l2_corrupted_keys_counted", 1L);
        report.put("l2_verified_reads", 10L);
        report.put("l2_checksum_mismatches", 0L);
        report.put("l2_corrupt_values_served", 1L);
        report.put("l2_requests_over_timeout", 3L);
        report.put("l2_leaked_pins", 0L);
        report.put("l2_corrupt_values", 1L);
        assertEquals(List.of("l2_corrupt_values_served 1", "l2_requests_over_timeout 3", "l2_resumed false",
            "l2_corrupted_keys_counted 1 of 2", "l2_corrupt_values 1 < 2"), ChaosCommand.brokenPromises(report));

        final Map<String, Object> failed = new LinkedHashMap<>();
        failed.put("l2_error", "java.io.IOException: no failover");
        failed.put("l2_verified_reads", 0L);
        assertEquals(List.of("l2_error java.io.IOException: no failover", "l2_verified_reads 0"),
            ChaosCommand.brokenPromises(failed));

        final Map<String, Object> skipped = new LinkedHashMap<>();
        skipped.put("exhaustion_prepares", 4L);
        skipped.put("l2_skipped", "redis-server and redis-cli are not installed");
        assertEquals(List.of(), ChaosCommand.brokenPromises(skipped));
        assertTrue(ChaosCommand.verdictLine(skipped, List.of())
            .endsWith("; second tier suite skipped: redis-server and redis-cli are not installed"));
    }

    @Test
    @Timeout(180)
    void shouldEndWithAPassLineAndExitZeroWhenEveryPromiseHeld()
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final CommandLine commandLine = ChaosMain.newCommandLine();
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(err, true));
        final int exitCode = commandLine.execute("chaos", "--quick", "--only", "exhaustion");
        assertEquals(0, exitCode, out + "\n" + err);
        final String[] lines = out.toString().strip().split("\n");
        final String last = lines[lines.length - 1];
        assertTrue(last.startsWith("PASS: every promise held ("), last);
        assertTrue(last.contains("prepares on a full pool"), last);

        final StringWriter jsonOut = new StringWriter();
        final StringWriter jsonErr = new StringWriter();
        final CommandLine json = ChaosMain.newCommandLine();
        json.setOut(new PrintWriter(jsonOut, true));
        json.setErr(new PrintWriter(jsonErr, true));
        assertEquals(0, json.execute("chaos", "--only", "exhaustion", "--json"));
        final Map<String, Object> parsed = Json.parseObject(jsonOut.toString().strip());
        assertEquals("PASS", parsed.get("verdict"));
        assertEquals(List.of(), parsed.get("broken_promises"));
        assertTrue(jsonErr.toString().strip().endsWith("no crash"), jsonErr.toString());
    }

    @Test
    void shouldRefuseContradictoryOptionsInOneLineWhenTheyMakeNoSense()
    {
        assertOneLineUsageError(new String[]{ "chaos", "--quick", "--long" }, "--quick and --long");
        assertOneLineUsageError(new String[]{ "chaos", "--soak", "5", "--long" }, "--soak", "--long");
        assertOneLineUsageError(new String[]{ "chaos", "--only", "kill,typo" }, "'typo'", "kill, zombie");
    }

    @Test
    void shouldListChaosOnceWhenTheTestkitCommandLineIsAskedForHelp()
    {
        final StringWriter out = new StringWriter();
        final CommandLine commandLine = ChaosMain.newCommandLine();
        commandLine.setOut(new PrintWriter(out, true));
        assertEquals(0, commandLine.execute("--help"));
        assertEquals(out.toString().indexOf("\n  chaos "), out.toString().lastIndexOf("\n  chaos "), out.toString());
        assertTrue(out.toString().contains("\n  bench "), out.toString());
    }

    private static void assertOneLineUsageError(final String[] args, final String... fragments)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final CommandLine commandLine = ChaosMain.newCommandLine();
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(err, true));
        final String what = String.join(" ", args) + "\n--- out\n" + out + "--- err\n" + err;
        assertEquals(2, commandLine.execute(args), what);
        final String[] lines = err.toString().strip().split("\n");
        assertTrue(lines.length <= 2, "at most two lines: " + err);
        assertTrue(lines[0].contains(": error: "), err.toString());
        for (final String fragment : fragments)
        {
            assertTrue(lines[0].contains(fragment), "'" + fragment + "' in " + err);
        }
        assertFalse(err.toString().contains("Usage:"), "no usage: " + err);
        assertEquals("", out.toString(), what);
    }
}
