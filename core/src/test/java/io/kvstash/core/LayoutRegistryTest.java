package io.kvstash.core;

import io.kvstash.core.book.ChunkBook;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The layout registry's bound. Not a *ScenarioTest: the pipeline module runs those through the pipeline, where
 * 131,072 synchronous requests take minutes; this one needs the store alone.
 */
class LayoutRegistryTest
{
    private static final long A = 11;
    private static final long B = 22;

    private final StoreHarness h = new StoreHarness(8);

    @Test
    void shouldBoundTheLayoutRegistryWhenClientsRegisterEverNewIdentities()
    {
        // A client that registers and unregisters a new (model, world size, rank) each time: every identity is
        // remembered (its chunks may outlive the instance), up to the bound, then a new one is refused.
        final int bound = ChunkBook.MAX_LAYOUT_IDENTITIES;
        for (int i = 0; i < bound; i++)
        {
            final StoreCommand c = h.store.register(A, Layout.of("model-" + i, 1, 0, 1, 4, Dtype.FLOAT16, false));
            assertEquals(Status.OK, c.status, "identity " + i);
            assertEquals(Status.OK, h.store.unregister(A).status);
        }
        final StoreCommand refused = h.store.register(A, Layout.of("one-more", 1, 0, 1, 4, Dtype.FLOAT16, false));
        assertEquals(Status.BUSY, refused.status, refused.message);
        assertEquals(0, h.book().instanceCount(), "a refused REGISTER registers nothing");
        // Identities already remembered still register, and still refuse another layout.
        h.register(A, Layout.of("model-7", 1, 0, 1, 4, Dtype.FLOAT16, false));
        assertEquals(Status.LAYOUT_MISMATCH,
            h.store.register(B, Layout.of("model-8", 1, 0, 1, 4, Dtype.BFLOAT16, false)).status);
    }
}
