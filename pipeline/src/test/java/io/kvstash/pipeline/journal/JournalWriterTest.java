package io.kvstash.pipeline.journal;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The writer and the reader over many segments: records of random sizes written with flushes at random
 * points cross several segment ends (each closed by a padding record whose body is a hole in the file) and
 * read back in order, complete, with no torn tail, the counters snapshot last.
 */
class JournalWriterTest
{
    private static final long SEGMENT = 1 << 20;

    @Test
    void recordsCrossSegmentEndsAndReadBackInOrder(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("many-segments.journal");
        final StoreContext context = new StoreContext().poolSizeBytes(1 << 22).conclude();
        final StoreCommand command = new StoreCommand(context);
        final SplittableRandom random = new SplittableRandom(42);
        final int records = 60_000;
        final StoreCounters counters = StoreCounters.allocate();
        try (JournalWriter writer = new JournalWriter(file, context, 9, SEGMENT))
        {
            for (int i = 0; i < records; i++)
            {
                command.reset();
                command.type = RequestType.LOOKUP;
                command.correlationId = i + 1;
                command.chunkCount = random.nextInt(1, 9);
                for (int k = 0; k < command.chunkCount; k++)
                {
                    command.keyLo[k] = i * 16L + k;
                }
                writer.append(command, 1, 0);
                if (0 == random.nextInt(300))
                {
                    writer.flush();
                }
            }
            writer.appendCounters(counters);
            assertTrue(writer.length() > 4 * SEGMENT, "the records span several segments");
        }
        assertEquals(0, Files.size(file) % 8);

        try (JournalReader reader = new JournalReader(file))
        {
            final StoreCommand read = new StoreCommand(context);
            for (int i = 0; i < records; i++)
            {
                assertTrue(reader.next(read), "record " + i);
                assertEquals(i + 1, read.correlationId);
                assertEquals(i * 16L, read.keyLo[0]);
                assertEquals(i * 16L + read.chunkCount - 1, read.keyLo[read.chunkCount - 1]);
            }
            assertFalse(reader.next(read));
            assertFalse(reader.truncatedTail());
            assertNotNull(reader.counterIds());
        }
    }
}
