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
 * A capture of no-reply commits and releases (one that releases its pins, one of an unknown transfer, the flag
 * refused on a PING) keeps their flags in the journal and replays to identical outcomes and counters: a request
 * the server answers to no one is decided, journaled and replayed like any other.
 */
@Timeout(60)
class NoReplyJournalTest
{
    private static final long INSTANCE = 4;

    @TempDir
    Path tempDir;

    @Test
    void shouldReplayNoReplyCommitsToIdenticalOutcomesAndCountersWhenCaptured() throws IOException
    {
        final Path journal = tempDir.resolve("noreply.journal");
        final StoreContext storeContext = PipelineTraceReplayTest.storeContext(16).conclude();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        try (Pipeline pipeline = new Pipeline(
            PipelineTraceReplayTest.context(ThreadingMode.SHARED, storeContext, router).journalFile(journal)).start())
        {
            final PipelineCaller caller = new PipelineCaller(pipeline, router, 0);
            assertEquals(Status.OK, caller.register(INSTANCE, Layout.of("m", 1, 0, 1, 4, Dtype.FLOAT16, false)).status);
            final StoreCommand store = caller.keyed(RequestType.PREPARE_STORE, INSTANCE, ChunkKeys.ofIds(1, 2), 0);
            assertEquals(Status.OK, caller.onTransfer(RequestType.COMMIT_STORE, INSTANCE, store.outTransferId).status);
            final long retrieve = caller.keyed(RequestType.PREPARE_RETRIEVE, INSTANCE, ChunkKeys.ofIds(1, 2), 0)
                .outTransferId;
            assertEquals(Status.OK, noReply(caller, RequestType.COMMIT_RETRIEVE, retrieve));
            assertEquals(Status.UNKNOWN_TRANSFER, noReply(caller, RequestType.COMMIT_RETRIEVE, retrieve));
            assertEquals(Status.UNKNOWN_TRANSFER, noReply(caller, RequestType.RELEASE, 0xBADL));
            assertEquals(Status.INVALID_REQUEST, noReply(caller, RequestType.PING, 0));
            assertNull(pipeline.book().verifyInvariants());
            assertEquals(0, pipeline.book().pendingTransfers());
        }

        int unanswered = 0;
        try (JournalReader reader = new JournalReader(journal))
        {
            final StoreCommand command = new StoreCommand(reader.maxChunksPerRequest(), reader.maxInlineBytes());
            while (reader.next(command))
            {
                unanswered += (command.flags & RequestFlags.NO_REPLY) != 0 ? 1 : 0;
            }
        }
        assertEquals(4, unanswered, "the journal holds each request's flags as sent");

        final Replayer.Result replayed = Replayer.replay(journal);
        assertTrue(replayed.identical(), replayed.firstMismatch() + " / " + replayed.firstCounterMismatch());
        assertEquals(8, replayed.records());
        assertEquals(2, replayed.counters()[CountersDescriptor.RETRIEVED_CHUNKS]);
        assertEquals(2, replayed.counters()[
            CountersDescriptor.requestId(RequestType.COMMIT_RETRIEVE, Status.OK)] +
            replayed.counters()[CountersDescriptor.requestId(RequestType.COMMIT_RETRIEVE, Status.UNKNOWN_TRANSFER)]);
    }

    private static int noReply(final PipelineCaller caller, final int type, final long transferId)
    {
        return caller.call(c ->
        {
            c.type = type;
            c.instanceId = INSTANCE;
            c.transferId = transferId;
            c.flags = RequestFlags.NO_REPLY;
        }).status;
    }
}
