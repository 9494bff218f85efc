package io.kvstash.ipc.cli;

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
}
