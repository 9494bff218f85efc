package io.kvstash.cli;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A mistaken command prints one error line that names the value and what would be accepted, and one line
 * pointing at --help; never the usage. Every command validates the same option the same way.
 */
@Timeout(60)
class UsageErrorTest
{
    private static void assertOneLineError(final Cli cli, final int exitCode, final String... fragments)
    {
        assertEquals(exitCode, cli.exitCode, cli.toString());
        final String[] lines = cli.err.strip().split("\n");
        assertTrue(lines.length <= 2, "at most two lines: " + cli);
        assertTrue(lines[0].contains(": error: "), cli.toString());
        for (final String fragment : fragments)
        {
            assertTrue(lines[0].contains(fragment), "'" + fragment + "' in " + cli);
        }
        assertTrue(!cli.err.contains("Usage:"), "no usage: " + cli);
        assertEquals("", cli.out, cli.toString());
    }

    @Test
    void shouldPrintAtMostTwoLinesWithoutUsageWhenAnOptionIsMistaken()
    {
        assertOneLineError(Cli.run("demo", "--capacity-chunks", "-5"), 2, "--capacity-chunks -5", "at least 1");
        assertOneLineError(Cli.run("serve", "--pool-size", "1k", "--print-config"), 2, "1024", "at least 4096");
        assertOneLineError(Cli.run("serve", "--no-such-option"), 2, "--no-such-option");
        assertOneLineError(Cli.run("serve", "--threading", "many"), 2, "'many'", "thread-per-stage");
        assertOneLineError(Cli.run("serve", "--print-config", "--prometheus-port", "70000"), 2, "70000",
            "1 to 65535");
        assertOneLineError(Cli.run("demo", "--workers", "0"), 2, "--workers 0", "1 to 64");
        assertOneLineError(Cli.run("stat", "--watch", "soon"), 2, "soon");
        assertOneLineError(Cli.run(), 2, "a command is required");
        final Cli help = Cli.run("serve", "--help");
        assertEquals(0, help.exitCode);
        assertTrue(help.out.startsWith("Usage: kvstash serve"), help.out);
    }

    @Test
    void shouldRefuseTheSameValuesInEveryCommandWhenTheyMakeNoSense()
    {
        assertOneLineError(Cli.run("replay", "--trace", Cli.TRACE.toString(), "--capacity-chunks", "0"), 2,
            "--capacity-chunks 0", "at least 1");
        assertOneLineError(Cli.run("demo", "--capacity-chunks", "0"), 2, "--capacity-chunks 0", "at least 1");
        assertOneLineError(Cli.run("replay", "--trace", Cli.TRACE.toString(), "--workers", "65"), 2, "--workers 65",
            "1 to 64");
        assertOneLineError(Cli.run("demo", "--capacity-chunks", "1", "--quiet"), 2, "--capacity-chunks 1",
            "374 chunks", "at least 374");
    }

    @Test
    void shouldNameTheFileAndWhatIsWrongWhenATraceCannotBeReplayed(@TempDir final Path dir) throws Exception
    {
        final Path empty = Files.writeString(dir.resolve("empty.jsonl"), "", StandardCharsets.UTF_8);
        assertOneLineError(Cli.run("replay", "--trace", empty.toString(), "--quiet"), 1, empty.toString(),
            "holds no requests");
        assertOneLineError(Cli.run("replay", "--trace", dir.toString(), "--quiet"), 1, dir + " is a directory");
        final Path missing = dir.resolve("missing.jsonl");
        assertOneLineError(Cli.run("replay", "--trace", missing.toString(), "--quiet"), 1, missing.toString());
        final Path cut = Files.writeString(dir.resolve("cut.jsonl"), "{\"hash_ids\": [1, 2]}\n{\"hash_ids\": [3, \"x\"]}\n",
            StandardCharsets.UTF_8);
        assertOneLineError(Cli.run("replay", "--trace", cut.toString(), "--quiet"), 1, cut + ":2:",
            "hash id 2 is '\"x\"', not an integer");
        final Path binary = Files.write(dir.resolve("cap.journal"), new byte[]{ 'K', (byte)0xff, (byte)0xfe, 0 });
        assertOneLineError(Cli.run("replay", "--trace", binary.toString(), "--quiet"), 1, binary.toString(),
            "--format kvstash");
    }
}
