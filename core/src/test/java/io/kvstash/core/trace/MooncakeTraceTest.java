package io.kvstash.core.trace;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MooncakeTraceTest
{
    @Test
    void shouldReadEveryFieldWhenLineIsATraceRecord()
    {
        final MooncakeTrace.Request r = MooncakeTrace.parse(
            "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, \"hash_ids\": [46, 47, 48]}");
        assertEquals(27482, r.timestampMs());
        assertEquals(6955, r.inputLength());
        assertEquals(52, r.outputLength());
        assertArrayEquals(new long[]{ 46, 47, 48 }, r.hashIds());
        assertEquals(3, r.blockCount());
        assertEquals(47, r.hashId(1));
    }

    @Test
    void shouldReadFieldsWhenOrderAndSpacingDifferAndOtherFieldsArePresent()
    {
        final MooncakeTrace.Request r = MooncakeTrace.parse(
            "{ \"hash_ids\":[1,2 ,  3],\"model\":\"x\",\"output_length\":7,\"timestamp\":1.5,\"input_length\" :  9 }");
        assertArrayEquals(new long[]{ 1, 2, 3 }, r.hashIds());
        assertEquals(7, r.outputLength());
        assertEquals(1, r.timestampMs(), "fractional milliseconds are truncated");
        assertEquals(9, r.inputLength());
    }

    @Test
    void shouldReadNumbersWhenWrittenWithAnExponent()
    {
        final MooncakeTrace.Request r = MooncakeTrace.parse(
            "{\"timestamp\": 1.5e3, \"input_length\": 2E2, \"output_length\": 3e+1, \"hash_ids\": [5]}");
        assertEquals(1500, r.timestampMs());
        assertEquals(200, r.inputLength());
        assertEquals(30, r.outputLength());
    }

    @Test
    void shouldGiveEmptyIdsWhenHashIdsIsEmpty()
    {
        final MooncakeTrace.Request r = MooncakeTrace.parse("{\"timestamp\": 0, \"hash_ids\": [ ]}");
        assertEquals(0, r.blockCount());
        assertEquals(0, r.inputLength(), "a missing field reads as 0");
    }

    @Test
    void shouldReadLargeIdsWhenTheyExceedAnInt()
    {
        final MooncakeTrace.Request r = MooncakeTrace.parse("{\"hash_ids\": [9007199254740993, -1]}");
        assertArrayEquals(new long[]{ 9007199254740993L, -1 }, r.hashIds());
    }

    @Test
    void shouldRejectLineWhenHashIdsAreMissingOrBroken()
    {
        assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.parse("{\"timestamp\": 1}"));
        assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.parse("{\"hash_ids\": 5}"));
        assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.parse("{\"hash_ids\": [1, 2"));
        assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.parse("{\"hash_ids\": [1, x]}"));
        assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.parse("{\"timestamp\": , \"hash_ids\": []}"));
    }

    @Test
    void shouldCountReferencesAndSkipBlankLinesWhenReadingAFile(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("t.jsonl");
        Files.writeString(file,
            "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [0, 1]}\n" +
            "\n" +
            "   \n" +
            "{\"timestamp\": 5, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [0, 1, 2]}\n",
            StandardCharsets.UTF_8);
        final MooncakeTrace trace = MooncakeTrace.read(file);
        assertEquals(2, trace.requests().size());
        assertEquals(5, trace.chunkReferences());
        assertEquals(5, trace.requests().get(1).timestampMs());
        assertThrows(UnsupportedOperationException.class, () -> trace.requests().clear());
    }

    @Test
    void shouldNameTheLineWhenARecordIsBroken(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("bad.jsonl");
        Files.writeString(file, "{\"hash_ids\": [1]}\n\n{\"hash_ids\": [1, oops]}\n", StandardCharsets.UTF_8);
        final IllegalArgumentException ex = assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.read(file));
        assertTrue(ex.getMessage().contains("bad.jsonl:3"), ex.getMessage());
    }

    @Test
    void shouldSayWhatIsWrongWithALineWhenARecordIsBroken(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("bad.jsonl");
        Files.writeString(file, "{\"hash_ids\": [1, \"x\"]}\n", StandardCharsets.UTF_8);
        String message = assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.read(file)).getMessage();
        assertTrue(message.startsWith(file + ":1: hash id 2 is '\"x\"', not an integer"), message);

        Files.writeString(file, "{\"hash_ids\": [1]}\n{\"timestamp\": 5, \"hash_ids\": [1, 2, 3\n", StandardCharsets.UTF_8);
        message = assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.read(file)).getMessage();
        assertTrue(message.startsWith(file + ":2: the \"hash_ids\" array has no closing ']' (is the line cut off?)"),
            message);

        Files.writeString(file, "{\"timestamp\": \"soon\", \"hash_ids\": [1]}\n", StandardCharsets.UTF_8);
        message = assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.read(file)).getMessage();
        assertTrue(message.startsWith(file + ":1: \"timestamp\" is not a number"), message);
    }

    @Test
    void shouldRefuseAFileWhenItHoldsNoRequestOrIsNotATrace(@TempDir final Path dir) throws Exception
    {
        final Path empty = Files.writeString(dir.resolve("empty.jsonl"), "\n\n", StandardCharsets.UTF_8);
        final String message = assertThrows(IllegalArgumentException.class, () -> MooncakeTrace.read(empty)).getMessage();
        assertEquals(empty + " holds no requests (an empty trace replays nothing)", message);

        final String directory = assertThrows(java.io.IOException.class, () -> MooncakeTrace.read(dir)).getMessage();
        assertEquals(dir + " is a directory, not a trace file", directory);

        final Path binary = Files.write(dir.resolve("cap.journal"), new byte[]{ 'K', (byte)0xff, (byte)0xfe, 0, 1 });
        final String notText = assertThrows(java.io.IOException.class, () -> MooncakeTrace.read(binary)).getMessage();
        assertTrue(notText.startsWith(binary + " is not a text file of JSON lines"), notText);
    }

    @Test
    void shouldNotExposeInternalIdsWhenCallerChangesTheCopy()
    {
        final MooncakeTrace.Request r = MooncakeTrace.parse("{\"hash_ids\": [1, 2]}");
        r.hashIds()[0] = 99;
        assertEquals(1, r.hashId(0));
    }
}
