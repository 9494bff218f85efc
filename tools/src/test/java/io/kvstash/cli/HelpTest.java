package io.kvstash.cli;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HelpTest
{
    @ParameterizedTest
    @ValueSource(strings = { "serve", "stat", "errors", "replay", "demo", "worker" })
    void shouldPrintUsageWithoutFormattingWarningsWhenAskedForHelp(final String command)
    {
        final PrintStream original = System.err;
        final ByteArrayOutputStream traced = new ByteArrayOutputStream();
        final Cli cli;
        System.setErr(new PrintStream(traced, true, StandardCharsets.UTF_8));
        try
        {
            cli = Cli.run(command, "--help");
        }
        finally
        {
            System.setErr(original);
        }
        assertEquals(0, cli.exitCode, cli.toString());
        assertTrue(cli.out.startsWith("Usage: kvstash " + command), cli.out);
        final String warnings = traced.toString(StandardCharsets.UTF_8);
        assertFalse(warnings.contains("WARN"), warnings);
    }

    @org.junit.jupiter.api.Test
    void shouldListEveryCommandIncludingBenchWithCompleteDescriptionsWhenAskedForHelp()
    {
        final Cli cli = Cli.run("--help");
        assertEquals(0, cli.exitCode, cli.toString());
        for (final String command : new String[]{ "serve", "stat", "errors", "replay", "demo", "latency", "chaos",
            "bench" })
        {
            assertTrue(cli.out.contains("\n  " + command + " "), command + " in\n" + cli.out);
        }
        for (final String line : cli.out.split("\n"))
        {
            assertFalse(line.strip().endsWith(":") && !line.startsWith("Commands"), "a description ends in ':' " + line);
        }
        final Cli serve = Cli.run("serve", "--help");
        assertTrue(serve.out.replaceAll("\\s+", " ").contains("on 127.0.0.1, port PORT, path /metrics"), serve.out);
        final Cli replay = Cli.run("replay", "--help");
        assertFalse(replay.out.contains("pass the capturing server's --pool-size"), replay.out);
    }

    @org.junit.jupiter.api.Test
    void shouldUseNoInternalWordsWhenTheDemoReports()
    {
        final Cli demo = Cli.run("demo", "--quiet", "--workers", "1", "--capacity-chunks", "1024",
            "--payload-bytes", "4k");
        assertEquals(0, demo.exitCode, demo.toString());
        assertFalse(demo.out.contains("SPEC"), demo.out);
        assertFalse(demo.out.matches("(?s).*issue \\d.*"), demo.out);
        assertTrue(demo.out.contains("(the published figure, traces/README.md)"), demo.out);
    }
}
