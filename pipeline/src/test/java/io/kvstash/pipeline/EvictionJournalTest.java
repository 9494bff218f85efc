package io.kvstash.pipeline;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.journal.JournalReader;
import io.kvstash.pipeline.replay.Replayer;
import io.kvstash.wire.file.CountersDescriptor;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A capture records its eviction policy in the journal header and replays under it: the trace through a pipeline
 * under the default policy, its journal replayed from the header alone (identical), and a replay under exact LRU
 * refused (the policy is part of the configuration the journal records).
 */
@Timeout(120)
class EvictionJournalTest
{
    @TempDir
    Path tempDir;

    @BeforeAll
    static void readTrace() throws IOException
    {
        PipelineTraceReplayTest.readTrace();
    }

    @Test
    void shouldRecordThePolicyAndReplayUnderIt() throws IOException
    {
        final Path journal = tempDir.resolve("policy.journal");
        final StoreContext storeContext = PipelineTraceReplayTest.storeContext(1024)
            .eviction(EvictionPolicy.DEFAULT).conclude();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        final long hits;
        try (Pipeline pipeline = new Pipeline(
            PipelineTraceReplayTest.context(ThreadingMode.SHARED, storeContext, router).journalFile(journal)).start())
        {
            hits = PipelineTraceReplayTest.replayTrace(new PipelineCaller(pipeline, router, 0), Integer.MAX_VALUE);
            assertNull(pipeline.book().verifyInvariants());
        }
        assertTrue(hits > 10_219, "the default policy beats exact LRU's 10,219 hits at 1,024 chunks: " + hits);

        try (JournalReader reader = new JournalReader(journal))
        {
            assertEquals(EvictionPolicy.DEFAULT, reader.capturedContext().eviction());
        }
        final Replayer.Result own = Replayer.replay(journal);
        assertTrue(own.identical(), "the header's policy must reproduce the capture: " + own.firstMismatch());
        assertEquals(hits, own.counters()[CountersDescriptor.LOOKUP_HIT_CHUNKS]);

        // The policy is part of the configuration the header's digest covers: a replay under another is refused.
        assertThrows(IllegalArgumentException.class,
            () -> Replayer.replay(journal, PipelineTraceReplayTest.storeContext(1024).conclude()));
    }
}
