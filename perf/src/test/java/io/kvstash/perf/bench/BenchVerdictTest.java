package io.kvstash.perf.bench;

import org.junit.jupiter.api.Test;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class BenchVerdictTest
{
    private static Map<String, Object> target(final Object value, final String bound, final Boolean met)
    {
        final Map<String, Object> t = new LinkedHashMap<>();
        t.put("value", value);
        t.put("target", bound);
        t.put("met", met);
        return t;
    }

    private static Map<String, Object> targets()
    {
        final Map<String, Object> targets = new LinkedHashMap<>();
        targets.put("store_vs_copy", target(0.85, ">= 0.9", false));
        targets.put("control_p999_us", target(12.5, "<= 20", true));
        targets.put("store_vs_redis_large", target(null, ">= 10", null));
        return targets;
    }

    private static Map<String, Object> machine(final double load, final double timeLostPct)
    {
        final Map<String, Object> machine = new LinkedHashMap<>();
        machine.put("cores", 2);
        machine.put("load_average", load);
        machine.put("spin_gaps", Map.of("before_control", Map.of("time_lost_pct", timeLostPct)));
        return machine;
    }

    @Test
    void shouldFailAndNameTheMissedTargetWhenAFullRunMissesOne()
    {
        final BenchVerdict verdict = BenchVerdict.of(targets(), machine(0.1, 0.2), false);
        assertEquals("FAIL", verdict.verdict);
        assertEquals(List.of("store_vs_copy 0.850 (want >= 0.9)"), verdict.missed);
        assertNull(verdict.loaded);
        assertEquals("FAIL: 1 of 2 targets missed: store_vs_copy 0.850 (want >= 0.9); not measured in this run: " +
            "store_vs_redis_large", verdict.line);
    }

    @Test
    void shouldSayTheMachineWasLoadedWhenTheLoadOrTheSpinGapsWereHigh()
    {
        final BenchVerdict verdict = BenchVerdict.of(targets(), machine(3.5, 4.2), false);
        assertEquals("FAIL", verdict.verdict);
        assertTrue(verdict.line.endsWith("; the machine was loaded (load average 3.50 at the start on 2 cores, " +
            "spin gaps before control took 4.2 % of the time): rerun on an idle machine before trusting a miss"),
            verdict.line);
    }

    @Test
    void shouldPassAQuickRunWhenTargetsAreMissedBecauseItIsTooShortToJudgeThem()
    {
        final BenchVerdict verdict = BenchVerdict.of(targets(), machine(0.1, 0.2), true);
        assertEquals("PASS", verdict.verdict);
        assertTrue(verdict.line.startsWith("PASS: quick smoke run, every contender ran; targets are judged by the " +
            "full run (1 of 2 met here)"), verdict.line);
    }

    @Test
    void shouldDescribeEveryTargetTheBenchJudges()
    {
        for (final String name : new String[]{ "store_vs_copy", "retrieve_vs_copy", "store_vs_redis_small",
            "retrieve_vs_redis_small", "store_vs_redis_large", "retrieve_vs_redis_large", "control_p50_vs_echo",
            "control_p999_us", "control_pairs_per_s", "gc_count_steady" })
        {
            assertTrue(BenchVerdict.DESCRIPTIONS.containsKey(name), name);
        }
    }

    @Test
    void shouldRefuseAMistakenOptionInTwoLinesWhenBenchIsGivenOne()
    {
        for (final String[] args : new String[][]{ { "bench", "--reps", "0" }, { "bench", "--only", "data,typo" },
            { "bench", "--quik" } })
        {
            final java.io.StringWriter err = new java.io.StringWriter();
            final picocli.CommandLine commandLine = io.kvstash.cli.KvStashCommand.newCommandLine()
                .addSubcommand("bench", new BenchCommand());
            commandLine.setErr(new java.io.PrintWriter(err, true));
            assertEquals(2, commandLine.execute(args), err.toString());
            final String[] lines = err.toString().strip().split("\n");
            assertEquals(2, lines.length, err.toString());
            assertTrue(lines[0].startsWith("kvstash bench: error: "), err.toString());
            assertTrue(lines[0].contains(args[args.length - 1].replace("data,", "")), err.toString());
        }
    }
}
