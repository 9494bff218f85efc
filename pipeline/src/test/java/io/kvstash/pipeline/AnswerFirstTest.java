package io.kvstash.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.SlotTableDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.AtomicBuffer;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The book does some of a request's bookkeeping after the publish stage wrote its answer
 * ({@code ChunkBook.afterAnswer}), but what a worker may read once it has its answer is already there: a
 * PREPARE_STORE's slots are RESERVED under the answer's generations, a COMMIT_STORE's READABLE under the same
 * (PROTOCOL 3.3). The sink reads the slot words while the answer is being written, before anything deferred
 * has run, and every later request sees the whole commit.
 */
class AnswerFirstTest
{
    private static final long INSTANCE = 3;

    @ParameterizedTest
    @EnumSource(ThreadingMode.class)
    @Timeout(60)
    void shouldShowEverySlotWordAWorkerReadsBeforeTheAnswerLeaves(final ThreadingMode mode)
    {
        // A pool of 8 slots and 24 chunks in ranges of 3: the later prepares evict.
        final StoreContext storeContext = new StoreContext().poolSizeBytes(8 * 4096L).alignment(4096).conclude();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        final List<String> wrong = Collections.synchronizedList(new ArrayList<>());
        final AtomicBuffer slotTable = KvStore.newSlotTable(storeContext);
        final PipelineContext context =
            new PipelineContext().storeContext(storeContext).threadingMode(mode).slotTable(slotTable);
        final int[] preparedSlots = new int[4];
        final int[] preparedGenerations = new int[4];
        final int[] preparedCount = new int[1];
        context.responseSink(event ->
        {
            final StoreCommand c = event.command;
            if (Status.OK == c.status && RequestType.PREPARE_STORE == c.type)
            {
                preparedCount[0] = c.slotCount;
                for (int k = 0; k < c.slotCount; k++)
                {
                    preparedSlots[k] = c.slotChunkId[k];
                    preparedGenerations[k] = c.slotGeneration[k];
                    check(slotTable, c.slotChunkId[k], SlotTableDescriptor.STATE_RESERVED, c.slotGeneration[k],
                        "prepare " + c.correlationId, wrong);
                }
            }
            else if (Status.OK == c.status && RequestType.COMMIT_STORE == c.type)
            {
                for (int k = 0; k < preparedCount[0]; k++)
                {
                    check(slotTable, preparedSlots[k], SlotTableDescriptor.STATE_READABLE, preparedGenerations[k],
                        "commit " + c.correlationId, wrong);
                }
            }
            router.onResponse(event);
        });
        try (Pipeline pipeline = new Pipeline(context).start())
        {
            final PipelineCaller caller = new PipelineCaller(pipeline, router, 0);
            assertEquals(Status.OK, caller.register(INSTANCE, Layout.of("m", 1, 0, 1, 4, Dtype.FLOAT16, false)).status);
            for (int range = 0; range < 8; range++)
            {
                final ChunkKeys keys = ChunkKeys.ofIds(3 * range + 1, 3 * range + 2, 3 * range + 3);
                final StoreCommand prepared = caller.keyed(RequestType.PREPARE_STORE, INSTANCE, keys, 0);
                assertEquals(Status.OK, prepared.status, prepared.message);
                assertEquals(3, prepared.slotCount);
                final long transfer = prepared.outTransferId;
                assertEquals(Status.OK, caller.onTransfer(RequestType.COMMIT_STORE, INSTANCE, transfer).status);
                // The next request is decided on the whole commit: the three chunks are there.
                assertEquals(3, caller.keyed(RequestType.LOOKUP, INSTANCE, keys, 0).hitChunks);
            }
            assertEquals(List.of(), wrong);
        }
    }

    private static void check(
        final AtomicBuffer slotTable,
        final int slot,
        final int state,
        final int generation,
        final String what,
        final List<String> wrong)
    {
        final long word = slotTable.getLongVolatile((int)SlotTableDescriptor.wordOffset(slot));
        if (SlotTableDescriptor.state(word) != state || SlotTableDescriptor.generation(word) != generation)
        {
            wrong.add(what + ": slot " + slot + " word state " + SlotTableDescriptor.state(word) + " generation " +
                SlotTableDescriptor.generation(word) + ", expected state " + state + " generation " + generation);
        }
    }
}
