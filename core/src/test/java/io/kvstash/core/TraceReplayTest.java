package io.kvstash.core;

import io.kvstash.core.store.KvStore;
import io.kvstash.core.trace.MooncakeTrace;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

class TraceReplayTest
{
    static final Path TRACE = Path.of("..", "traces", "mooncake_synthetic_trace.jsonl");

    @ParameterizedTest
    @CsvSource({ "1024, 10219", "4096, 28871", "16384, 64724", "65536, 77953" })
    void shouldReproduceExactLruHitCountsWhenReplayingTheMooncakeTraceInFileOrder(
        final int capacityChunks, final long expectedHits) throws Exception
    {
        final MooncakeTrace trace = MooncakeTrace.read(TRACE);
        assertEquals(3993, trace.requests().size());
        assertEquals(121877, trace.chunkReferences());

        final StoreContext context = new StoreContext()
            .poolSizeBytes(capacityChunks * 4096L)
            .alignment(4096)
            .chunkTokens(256)
            .conclude();
        final KvStore store = new KvStore(context);
        final long instance = 7;
        assertEquals(Status.OK, store.register(instance, Layout.of("m", 1, 0, 1, 4, Dtype.FLOAT16, false)).status);
        assertEquals(capacityChunks, store.book().slotCapacity());

        long hits = 0;
        for (final MooncakeTrace.Request request : trace.requests())
        {
            final ChunkKeys keys = ChunkKeys.ofIds(request.hashIds());
            final int k = store.lookup(instance, keys, false).hitChunks;
            hits += k;
            if (k > 0)
            {
                final StoreCommand retrieve = store.prepareRetrieve(instance, keys.range(0, k));
                assertEquals(Status.OK, retrieve.status);
                assertEquals(Status.OK, store.commitRetrieve(instance, retrieve.outTransferId).status);
            }
            final StoreCommand prepare = store.prepareStore(instance, keys.range(k, keys.count()));
            assertEquals(Status.OK, prepare.status);
            if (0 != prepare.outTransferId)
            {
                assertEquals(Status.OK, store.commitStore(instance, prepare.outTransferId).status);
            }
        }
        assertEquals(expectedHits, hits);
        assertNull(store.book().verifyInvariants());
        assertEquals(0, store.book().pendingTransfers());
    }
}
