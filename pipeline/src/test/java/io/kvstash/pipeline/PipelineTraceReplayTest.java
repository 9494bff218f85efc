package io.kvstash.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.pipeline.journal.JournalReader;
import io.kvstash.pipeline.journal.JournalWriter;
import io.kvstash.pipeline.replay.Replayer;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(120)
class PipelineTraceReplayTest
{
    static final Path TRACE = Path.of("..", "traces", "mooncake_synthetic_trace.jsonl");
    static final long INSTANCE = 42;
    static MooncakeTrace trace;

    @TempDir
    Path tempDir;

    @BeforeAll
    static void readTrace() throws IOException
    {
        trace = MooncakeTrace.read(TRACE);
    }

    static StoreContext storeContext(final int capacityChunks)
    {
        return new StoreContext().poolSizeBytes(capacityChunks * 4096L).alignment(4096).chunkTokens(256);
    }

    /**
     * A pipeline of the tests' kind: the mode's wait strategy (yielding for four stage threads on two cores,
     * backoff otherwise), the given store and sink.
     */
    static PipelineContext context(final ThreadingMode mode, final StoreContext storeContext, final ResponseSink sink)
    {
        return new PipelineContext()
            .storeContext(storeContext)
            .threadingMode(mode)
            .waitMode(ThreadingMode.THREAD_PER_STAGE == mode ? WaitMode.YIELDING : WaitMode.BACKOFF)
            .responseSink(sink);
    }

    static long replayTrace(final PipelineCaller caller, final int requests)
    {
        assertEquals(Status.OK, caller.register(INSTANCE, Layout.of("m", 1, 0, 1, 4, Dtype.FLOAT16, false)).status);
        long hits = 0;
        int n = 0;
        for (final MooncakeTrace.Request request : trace.requests())
        {
            if (n++ == requests)
            {
                break;
            }
            final ChunkKeys keys = ChunkKeys.ofIds(request.hashIds());
            final int k = caller.keyed(RequestType.LOOKUP, INSTANCE, keys, 0).hitChunks;
            hits += k;
            if (k > 0)
            {
                final StoreCommand retrieve = caller.keyed(RequestType.PREPARE_RETRIEVE, INSTANCE, keys.range(0, k), 0);
                assertEquals(Status.OK, retrieve.status);
                assertEquals(Status.OK, caller.onTransfer(
                    RequestType.COMMIT_RETRIEVE, INSTANCE, retrieve.outTransferId).status);
            }
            final StoreCommand prepare = caller.keyed(
                RequestType.PREPARE_STORE, INSTANCE, keys.range(k, keys.count()), 0);
            assertEquals(Status.OK, prepare.status);
            if (0 != prepare.outTransferId)
            {
                assertEquals(Status.OK, caller.onTransfer(
                    RequestType.COMMIT_STORE, INSTANCE, prepare.outTransferId).status);
            }
        }
        return hits;
    }

    static long run(final ThreadingMode mode, final int capacityChunks, final Path journal)
    {
        final StoreContext storeContext = storeContext(capacityChunks).conclude();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        final PipelineContext context = context(mode, storeContext, router).journalFile(journal);
        try (Pipeline pipeline = new Pipeline(context).start())
        {
            final long hits = replayTrace(new PipelineCaller(pipeline, router, 0), Integer.MAX_VALUE);
            assertNull(pipeline.book().verifyInvariants());
            assertEquals(0, pipeline.book().pendingTransfers());
            return hits;
        }
    }

    @ParameterizedTest
    @CsvSource({
        "SHARED, 1024, 10219", "SHARED, 4096, 28871", "SHARED, 16384, 64724",
        "DEDICATED, 1024, 10219", "DEDICATED, 4096, 28871", "DEDICATED, 16384, 64724",
        "THREAD_PER_STAGE, 1024, 10219" })
    void shouldReproduceExactLruHitCountsThroughThePipeline(
        final ThreadingMode mode, final int capacityChunks, final long expectedHits)
    {
        assertEquals(expectedHits, run(mode, capacityChunks, null));
    }

    @Test
    void shouldReplayAJournalToIdenticalResponsesAndCounters() throws IOException
    {
        final Path journal = tempDir.resolve("trace.journal");
        assertEquals(10219, run(ThreadingMode.THREAD_PER_STAGE, 1024, journal));

        final Replayer.Result result = Replayer.replay(journal, storeContext(1024).conclude());
        assertTrue(result.records() > 3 * trace.requests().size(), "records " + result.records());
        final Replayer.Result selfDescribed = Replayer.replay(journal);
        assertTrue(selfDescribed.identical(), "the journal's own header must suffice: " + selfDescribed.firstMismatch());
        assertEquals(result.records(), selfDescribed.records());
        assertEquals(0, result.mismatches(), result.firstMismatch());
        assertTrue(result.hadCounters());
        assertEquals(0, result.counterMismatches(), result.firstCounterMismatch());
        assertFalse(result.truncatedTail());
        assertEquals(10219, result.counters()[CountersDescriptor.LOOKUP_HIT_CHUNKS]);
        assertTrue(result.identical());
    }

    @Test
    void shouldReplayUpToTheCutWhenTheJournalIsCutMidRecord() throws IOException
    {
        final Path journal = tempDir.resolve("cut.journal");
        run(ThreadingMode.DEDICATED, 1024, journal);
        long records = 0;
        final StoreCommand scratch = new StoreCommand(storeContext(1024).conclude());
        try (JournalReader reader = new JournalReader(journal))
        {
            while (reader.next(scratch))
            {
                records++;
            }
            assertFalse(reader.truncatedTail());
            assertNotNull(reader.counterIds());
        }
        final long size = Files.size(journal);
        final long cut = size / 2 + 3;
        try (FileChannel channel = FileChannel.open(journal, StandardOpenOption.WRITE))
        {
            channel.truncate(cut);
        }
        final Replayer.Result result = Replayer.replay(journal, storeContext(1024).conclude());
        assertTrue(result.truncatedTail());
        assertEquals(0, result.mismatches(), result.firstMismatch());
        assertFalse(result.hadCounters());
        assertTrue(result.records() > records / 3 && result.records() < records, result.records() + " of " + records);
    }

    @Test
    void shouldRefuseAJournalOfAnotherConfiguration() throws IOException
    {
        final Path journal = tempDir.resolve("other.journal");
        run(ThreadingMode.SHARED, 1024, journal);
        try
        {
            Replayer.replay(journal, storeContext(2048).conclude());
            throw new AssertionError("replay of another configuration was accepted");
        }
        catch (final IllegalArgumentException expected)
        {
            assertTrue(expected.getMessage().contains("another configuration"));
        }
        assertEquals(32, JournalWriter.configDigest(storeContext(1024).conclude()).length);
    }
}
