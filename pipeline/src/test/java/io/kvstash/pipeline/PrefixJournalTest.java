package io.kvstash.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.journal.JournalReader;
import io.kvstash.pipeline.replay.Replayer;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A capture of prefix retrieves (a short prefix, a MISS, the flag refused on a LOOKUP and with FROM_LOOKUP) keeps
 * their flags in the journal and replays to identical responses and counters.
 */
@Timeout(60)
class PrefixJournalTest
{
    private static final long INSTANCE = 3;

    @TempDir
    Path tempDir;

    @Test
    void shouldReplayPrefixRetrievesToIdenticalResponsesAndCountersWhenCaptured() throws IOException
    {
        final Path journal = tempDir.resolve("prefix.journal");
        final StoreContext storeContext = PipelineTraceReplayTest.storeContext(16).conclude();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        try (Pipeline pipeline = new Pipeline(
            PipelineTraceReplayTest.context(ThreadingMode.SHARED, storeContext, router).journalFile(journal)).start())
        {
            final PipelineCaller caller = new PipelineCaller(pipeline, router, 0);
            assertEquals(Status.OK, caller.register(INSTANCE, Layout.of("m", 1, 0, 1, 4, Dtype.FLOAT16, false)).status);
            final StoreCommand store = caller.keyed(
                RequestType.PREPARE_STORE, INSTANCE, ChunkKeys.ofIds(1, 2, 4, 5), 0);
            assertEquals(Status.OK, caller.onTransfer(RequestType.COMMIT_STORE, INSTANCE, store.outTransferId).status);

            final StoreCommand prefix = caller.keyed(
                RequestType.PREPARE_RETRIEVE, INSTANCE, ChunkKeys.ofIds(1, 2, 3, 4, 5), RequestFlags.PREFIX);
            assertEquals(Status.OK, prefix.status, prefix.message);
            assertEquals(2, prefix.slotCount);
            assertEquals(Status.OK, caller.onTransfer(
                RequestType.COMMIT_RETRIEVE, INSTANCE, prefix.outTransferId).status);
            assertEquals(Status.MISS, caller.keyed(
                RequestType.PREPARE_RETRIEVE, INSTANCE, ChunkKeys.ofIds(3, 1), RequestFlags.PREFIX).status);
            assertEquals(Status.MISS, caller.keyed(
                RequestType.PREPARE_RETRIEVE, INSTANCE, ChunkKeys.ofIds(1, 2, 3), 0).status);
            assertEquals(Status.INVALID_REQUEST, caller.keyed(
                RequestType.LOOKUP, INSTANCE, ChunkKeys.ofIds(1), RequestFlags.PREFIX).status);
            final long lookup = caller.keyed(RequestType.LOOKUP, INSTANCE, ChunkKeys.ofIds(1), RequestFlags.PIN)
                .outTransferId;
            assertEquals(Status.INVALID_REQUEST, caller.call(c ->
            {
                c.type = RequestType.PREPARE_RETRIEVE;
                c.instanceId = INSTANCE;
                c.transferId = lookup;
                c.flags = RequestFlags.PREFIX | RequestFlags.FROM_LOOKUP;
            }).status);
            assertEquals(Status.OK, caller.onTransfer(RequestType.RELEASE, INSTANCE, lookup).status);
            assertNull(pipeline.book().verifyInvariants());
            assertEquals(0, pipeline.book().pendingTransfers());
        }

        int prefixed = 0;
        try (JournalReader reader = new JournalReader(journal))
        {
            final StoreCommand command = new StoreCommand(reader.maxChunksPerRequest(), reader.maxInlineBytes());
            while (reader.next(command))
            {
                prefixed += (command.flags & RequestFlags.PREFIX) != 0 ? 1 : 0;
            }
        }
        assertEquals(4, prefixed, "the journal holds each request's flags as sent");

        final Replayer.Result replayed = Replayer.replay(journal);
        assertTrue(replayed.identical(), replayed.firstMismatch() + " / " + replayed.firstCounterMismatch());
        assertEquals(11, replayed.records());
        assertEquals(3, replayed.counters()[CountersDescriptor.RETRIEVE_MISSES], "the short prefix and two MISSes");
        assertEquals(2, replayed.counters()[CountersDescriptor.RETRIEVE_HIT_CHUNKS]);
    }
}
