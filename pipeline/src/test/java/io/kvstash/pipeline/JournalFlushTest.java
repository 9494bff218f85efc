package io.kvstash.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.journal.JournalReader;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The journal reaches its file while the pipeline keeps running: once requests stop, the staged records are
 * written by an idle duty cycle (SHARED: the pipeline agent's, run here by the caller; other modes: the
 * journal's own thread), not only at close. The records read back in order with their correlation ids.
 */
class JournalFlushTest
{
    private static final long INSTANCE = 7;

    @ParameterizedTest
    @EnumSource(ThreadingMode.class)
    void recordsReachTheFileWithoutAClose(final ThreadingMode mode, @TempDir final Path dir) throws Exception
    {
        final Path journal = dir.resolve("capture.journal");
        final StoreContext storeContext = PipelineTraceReplayTest.storeContext(64).conclude();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        final PipelineContext context = PipelineTraceReplayTest.context(mode, storeContext, router).journalFile(journal);
        try (Pipeline pipeline = new Pipeline(context).start())
        {
            final PipelineCaller caller = new PipelineCaller(pipeline, router, 0);
            assertEquals(Status.OK, caller.register(INSTANCE, Layout.of("m", 1, 0, 1, 4, Dtype.FLOAT16, false)).status);
            final int lookups = 100;
            for (int i = 0; i < lookups; i++)
            {
                assertEquals(0, caller.keyed(RequestType.LOOKUP, INSTANCE, ChunkKeys.ofIds(i), 0).hitChunks);
            }
            final int expected = 1 + lookups;

            // Requests have stopped; the pipeline stays open. Idle duty cycles write the staged records.
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            int read = 0;
            while (read < expected && System.nanoTime() - deadline < 0)
            {
                final PipelineAgent agent = pipeline.agent();
                if (null != agent)
                {
                    agent.doWork();
                }
                else
                {
                    Thread.sleep(1);
                }
                read = countRecords(journal, storeContext);
            }
            assertEquals(expected, read, "records in the file while the pipeline runs (" + mode + ")");
            assertTrue(pipeline.journalRecords() >= expected);
        }
        // and the closed journal holds them all, with the counters snapshot
        try (JournalReader reader = new JournalReader(journal))
        {
            final StoreCommand command = new StoreCommand(storeContext);
            assertTrue(reader.next(command));
            assertEquals(RequestType.REGISTER, command.type);
            for (int i = 0; i < 100; i++)
            {
                assertTrue(reader.next(command));
                assertEquals(RequestType.LOOKUP, command.type);
                assertEquals(i, command.keyLo[0]);
            }
            assertTrue(!reader.next(command) && !reader.truncatedTail());
            assertTrue(null != reader.counterIds(), "counters snapshot at close");
        }
    }

    private static int countRecords(final Path journal, final StoreContext storeContext) throws Exception
    {
        int n = 0;
        try (JournalReader reader = new JournalReader(journal))
        {
            final StoreCommand command = new StoreCommand(storeContext);
            while (reader.next(command))
            {
                n++;
            }
        }
        return n;
    }
}
