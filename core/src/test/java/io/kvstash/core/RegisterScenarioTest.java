package io.kvstash.core;

import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;

import static io.kvstash.core.StoreHarness.OTHER_MODEL;
import static io.kvstash.core.StoreHarness.RANK0;
import static io.kvstash.core.StoreHarness.RANK1;
import static io.kvstash.core.StoreHarness.ids;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * REGISTER: idempotence, LAYOUT_MISMATCH, INVALID_LAYOUT, slot sizing.
 */
class RegisterScenarioTest
{
    private static final long A = 11;
    private static final long B = 22;

    private final StoreHarness h = new StoreHarness(8);

    @Test
    void shouldGiveTheSameAnswerWhenRegisteringTheSameLayoutAgain()
    {
        final StoreCommand first = h.store.register(A, RANK0);
        assertEquals(Status.OK, first.status);
        final long chunkBytes = first.chunkBytes;
        final long slotBytes = first.slotBytes;
        final int slotCapacity = first.slotCapacity;
        assertEquals(StoreHarness.CHUNK_BYTES, chunkBytes);
        assertEquals(64, slotBytes);
        assertEquals(8, slotCapacity);
        h.stored(A, ids(1));

        final StoreCommand again = h.store.register(A, Layout.of("llama", 2, 0, 1, 4, Dtype.FLOAT16, false));
        assertEquals(Status.OK, again.status);
        assertEquals(chunkBytes, again.chunkBytes);
        assertEquals(slotBytes, again.slotBytes);
        assertEquals(slotCapacity, again.slotCapacity);
        assertEquals(1, h.book().instanceCount());
        assertEquals(1, h.hits(A, ids(1)), "re-registering keeps the chunks");
    }

    @Test
    void shouldAnswerLayoutMismatchWhenTheSameInstanceRegistersAnotherLayout()
    {
        h.register(A, RANK0);
        final long t = h.prepared(A, ids(1));
        assertEquals(Status.LAYOUT_MISMATCH, h.store.register(A, RANK1).status);
        assertEquals(Status.LAYOUT_MISMATCH,
            h.store.register(A, Layout.of("llama", 2, 0, 1, 4, Dtype.BFLOAT16, false)).status);
        assertEquals(Status.LAYOUT_MISMATCH,
            h.store.register(A, Layout.of("llama", 2, 0, 1, 4, Dtype.FLOAT16, true)).status);
        assertEquals(Status.OK, h.store.commitStore(A, t).status, "the instance keeps its registration");
        assertEquals(1, h.hits(A, ids(1)));
    }

    @Test
    void shouldAnswerLayoutMismatchWhenAnotherInstanceOfTheSameIdentityHasAnotherLayout()
    {
        h.register(A, RANK0);
        assertEquals(Status.LAYOUT_MISMATCH,
            h.store.register(B, Layout.of("llama", 2, 0, 2, 4, Dtype.FLOAT16, false)).status);
        assertEquals(1, h.book().instanceCount());
        h.register(B, RANK0);
        h.register(33, RANK1);
        h.register(44, OTHER_MODEL);
        assertEquals(4, h.book().instanceCount());
    }

    @Test
    void shouldRememberTheLayoutOfAnIdentityWhenItsInstanceIsGone()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1));
        h.store.unregister(A);
        assertEquals(Status.LAYOUT_MISMATCH,
            h.store.register(B, Layout.of("llama", 2, 0, 1, 4, Dtype.INT8, false)).status,
            "its chunks are still in the pool with the old shape");
        h.register(B, RANK0);
        assertEquals(1, h.hits(B, ids(1)));
    }

    @Test
    void shouldAnswerInvalidLayoutWhenLayoutIsBad()
    {
        final Layout[] bad = {
            new Layout(bytes("m"), 1, 0, 1, 4, 0, false),
            new Layout(bytes("m"), 1, 0, 1, 4, 99, false),
            new Layout(bytes("m"), 1, 0, 1, 4, -1, false),
            Layout.of("m", 1, 0, 0, 4, Dtype.FLOAT16, false),
            Layout.of("m", 1, 0, 1, 0, Dtype.FLOAT16, false),
            Layout.of("m", 1, 0, -1, 4, Dtype.FLOAT16, false),
            Layout.of("m", 0, 0, 1, 4, Dtype.FLOAT16, false),
            Layout.of("m", 2, 2, 1, 4, Dtype.FLOAT16, false),
            Layout.of("m", 2, -1, 1, 4, Dtype.FLOAT16, false),
            Layout.of("", 1, 0, 1, 4, Dtype.FLOAT16, false),
            Layout.of("x".repeat(256), 1, 0, 1, 4, Dtype.FLOAT16, false),
            Layout.of("m", 1, 0, Integer.MAX_VALUE, Integer.MAX_VALUE, Dtype.FLOAT32, false),
        };
        for (final Layout layout : bad)
        {
            final StoreCommand c = h.store.register(A, layout);
            assertEquals(Status.INVALID_LAYOUT, c.status, layout.toString());
        }
        assertEquals(0, h.book().instanceCount());
        assertEquals(0, h.book().slotCapacity(), "no layout cut the pool");
    }

    @Test
    void shouldNameTheReasonWhenALayoutIsInvalid()
    {
        final Object[][] cases = {
            { Layout.of("m", 2, 2, 1, 4, Dtype.FLOAT16, false), "rank must be at least 0 and below the world size" },
            { Layout.of("m", 1, 0, 0, 4, Dtype.FLOAT16, false), "layers must be at least 1" },
            { Layout.of("m", 1, 0, 1, 0, Dtype.FLOAT16, false), "hidden size (heads x head size) must be at least 1" },
            { Layout.of("m", 0, 0, 1, 4, Dtype.FLOAT16, false), "world size must be 1 to 4096" },
            { Layout.of("", 1, 0, 1, 4, Dtype.FLOAT16, false), "model name must be 1 to 255 UTF-8 bytes" },
            { new Layout(bytes("m"), 1, 0, 1, 4, 99, false), "unknown dtype code" },
            { Layout.of("m", 1, 0, 1, 33, Dtype.FLOAT16, false), "one chunk of this layout is larger than the whole pool" },
        };
        for (final Object[] c : cases)
        {
            final StoreCommand command = h.store.register(A, (Layout)c[0]);
            assertEquals(Status.INVALID_LAYOUT, command.status, c[0].toString());
            assertEquals(c[1], command.message, c[0].toString());
        }
    }

    @Test
    void shouldAnswerInvalidLayoutWhenChunkIsLargerThanThePool()
    {
        // 8 slots of 64 bytes: a 2 x 1 x 4 x 32 x 2 = 512 byte chunk fits exactly, one more hidden unit does not.
        assertEquals(Status.INVALID_LAYOUT, h.store.register(A, Layout.of("m", 1, 0, 1, 33, Dtype.FLOAT16, false)).status);
        final StoreCommand fits = h.store.register(A, Layout.of("m", 1, 0, 1, 32, Dtype.FLOAT16, false));
        assertEquals(Status.OK, fits.status);
        assertEquals(1, fits.slotCapacity);
    }

    @Test
    void shouldAnswerInvalidLayoutWhenTheAlignedSlotDoesNotFitThePool()
    {
        // A 96-byte pool with 64-byte alignment: a 80-byte chunk is smaller than the pool, its slot is not.
        final StoreHarness odd = new StoreHarness(new StoreContext()
            .poolSizeBytes(96).alignment(64).chunkTokens(5).leaseNs(StoreHarness.LEASE_NS));
        final Layout layout = Layout.of("m", 1, 0, 1, 4, Dtype.FLOAT16, false);
        assertEquals(80, layout.chunkBytes(5));
        assertEquals(Status.INVALID_LAYOUT, odd.store.register(A, layout).status);
        assertEquals(0, odd.book().instanceCount());
    }

    @Test
    void shouldGiveEachLayoutItsOwnSlotSizeWhenLayoutsOfTwoSizesRegister()
    {
        h.register(A, RANK0);
        final long t = h.prepared(A, ids(1));
        assertEquals(Status.OK, h.store.abortStore(A, t).status);
        final StoreCommand c = h.store.register(B, Layout.of("big", 1, 0, 1, 8, Dtype.FLOAT16, false));
        assertEquals(Status.OK, c.status);
        assertEquals(128, c.chunkBytes);
        assertEquals(128, c.slotBytes);
        assertEquals(4, c.slotCapacity, "the most chunks of the layout the pool holds");
        assertEquals(8, h.book().slotCapacity(), "the one region went to the small class on its first store");
        assertEquals(8, h.book().freeSlots());
        final StoreCommand small = h.store.prepareStore(A, ids(1));
        assertEquals(64, small.slotBytes, "smaller chunks keep slots of their own size");
        assertEquals(64, small.chunkBytes);
        h.assertInvariants();
    }

    @Test
    void shouldRegisterABiggerLayoutWhenPoolHoldsChunks()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1));
        assertEquals(Status.OK, h.store.register(B, Layout.of("big", 1, 0, 1, 8, Dtype.FLOAT16, false)).status);
        final StoreCommand big = h.store.prepareStore(B, ids(1));
        assertEquals(Status.OK, big.status, "the small class's one region, all evictable, is given to the big one");
        assertEquals(128, big.slotBytes);
        assertEquals(0, h.book().readableChunks(), "the small chunk went with its region");
        h.assertInvariants();
    }

    @Test
    void shouldAcceptSmallerLayoutsWhenBiggerChunksAreStored()
    {
        h.register(A, Layout.of("big", 1, 0, 1, 8, Dtype.FLOAT16, false));
        h.stored(A, ids(1));
        final StoreCommand c = h.store.register(B, RANK0);
        assertEquals(Status.OK, c.status);
        assertEquals(64, c.slotBytes);
        assertEquals(64, c.chunkBytes);
    }

    @Test
    void shouldAnswerInvalidLayoutWhenChunkExceedsAFixedSlotSize()
    {
        final StoreHarness fixed = new StoreHarness(StoreHarness.context(8).slotBytes(100));
        assertEquals(128, fixed.book().slotBytes(), "rounded up to the alignment");
        assertEquals(4, fixed.book().slotCapacity());
        fixed.register(A, RANK0);
        assertEquals(Status.INVALID_LAYOUT,
            fixed.store.register(B, Layout.of("huge", 1, 0, 1, 9, Dtype.FLOAT16, false)).status);
        fixed.register(B, Layout.of("big", 1, 0, 1, 8, Dtype.FLOAT16, false));
    }

    @Test
    void shouldAnswerBusyWithoutRecuttingSlotsWhenTheInstanceLimitIsReached()
    {
        final StoreHarness small = new StoreHarness(StoreHarness.context(8).maxInstances(1));
        small.register(A, RANK0);
        final StoreCommand c = small.store.register(B, Layout.of("big", 1, 0, 1, 8, Dtype.FLOAT16, false));
        assertEquals(Status.BUSY, c.status);
        assertEquals(64, small.book().slotBytes(), "a refused REGISTER changes nothing");
        assertEquals(8, small.book().slotCapacity());
        small.store.unregister(A);
        small.register(B, Layout.of("big", 1, 0, 1, 8, Dtype.FLOAT16, false));
        assertEquals(4, small.book().slotCapacity());
    }

    @Test
    void shouldAnswerInvalidLayoutWhenModelNameIsTooLongForACommand()
    {
        final Layout layout = Layout.of("y".repeat(300), 1, 0, 1, 4, Dtype.FLOAT16, false);
        assertEquals(Status.INVALID_LAYOUT, h.store.register(A, layout).status);
    }

    private static byte[] bytes(final String s)
    {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
