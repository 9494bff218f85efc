package io.kvstash.core;

import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import static io.kvstash.core.StoreHarness.CHUNK_BYTES;
import static io.kvstash.core.StoreHarness.LEASE_NS;
import static io.kvstash.core.StoreHarness.RANK0;
import static io.kvstash.core.StoreHarness.ids;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The fallback copy transport: WRITE_DATA / READ_DATA through messages, same semantics.
 */
class CopyTransportTest
{
    private static final long A = 11;
    private static final long B = 22;

    private final StoreHarness h = new StoreHarness(StoreHarness.context(8).maxInlineBytes(24));

    @Test
    void shouldRoundTripChunkBytesWhenWrittenAndReadThroughMessages()
    {
        h.register(A, RANK0);
        final StoreCommand prepare = h.store.prepareStore(A, ids(1, 2, 3));
        final long store = prepare.outTransferId;
        final long[] offsets = java.util.Arrays.copyOf(prepare.slotOffset, 3);
        final UnsafeBuffer source = new UnsafeBuffer(new byte[(int)CHUNK_BYTES]);
        for (int slot = 0; slot < 3; slot++)
        {
            fill(source, slot);
            // 64 bytes in messages of at most 24.
            for (int offset = 0; offset < CHUNK_BYTES; offset += 24)
            {
                final int length = (int)Math.min(24, CHUNK_BYTES - offset);
                final StoreCommand c = h.store.writeData(A, store, slot, offset, source, offset, length);
                assertEquals(Status.OK, c.status, c.message);
            }
        }
        assertEquals(Status.OK, h.store.commitStore(A, store).status);
        assertEquals(3 * CHUNK_BYTES, h.counter(CountersDescriptor.COPY_BYTES_IN));
        for (int slot = 0; slot < 3; slot++)
        {
            final UnsafeBuffer view = h.store.pool().wrap(new UnsafeBuffer(0, 0), offsets[slot], (int)CHUNK_BYTES);
            for (int i = 0; i < CHUNK_BYTES; i++)
            {
                assertEquals(expected(slot, i), view.getByte(i), "pool byte " + i + " of chunk " + slot);
            }
        }

        final StoreCommand retrieve = h.store.prepareRetrieve(A, ids(3, 1));
        final long t = retrieve.outTransferId;
        final int[] chunkOf = { 2, 0 };
        for (int slot = 0; slot < 2; slot++)
        {
            for (int offset = 0; offset < CHUNK_BYTES; offset += 20)
            {
                final int length = (int)Math.min(20, CHUNK_BYTES - offset);
                final StoreCommand c = h.store.readData(A, t, slot, offset, length);
                assertEquals(Status.OK, c.status, c.message);
                for (int i = 0; i < length; i++)
                {
                    assertEquals(expected(chunkOf[slot], offset + i), c.data.getByte(i));
                }
            }
        }
        assertEquals(2 * CHUNK_BYTES, h.counter(CountersDescriptor.COPY_BYTES_OUT));
        assertEquals(Status.OK, h.store.commitRetrieve(A, t).status);
        h.assertInvariants();
    }

    @Test
    void shouldRefuseDataWhenTransferIsNotOfTheRightKindOrOwner()
    {
        h.register(A, RANK0);
        h.register(B, RANK0);
        h.stored(A, ids(9));
        final UnsafeBuffer source = new UnsafeBuffer(new byte[8]);
        final long store = h.prepared(A, ids(1));
        final long lookup = h.pinned(A, ids(9), 1);
        final long retrieve = h.store.prepareRetrieve(A, ids(9)).outTransferId;

        assertEquals(Status.UNKNOWN_TRANSFER, h.store.writeData(A, retrieve, 0, 0, source, 0, 8).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.writeData(A, lookup, 0, 0, source, 0, 8).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.writeData(B, store, 0, 0, source, 0, 8).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.writeData(A, 0, 0, 0, source, 0, 8).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.readData(A, store, 0, 0, 8).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.readData(A, lookup, 0, 0, 8).status);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.readData(B, retrieve, 0, 0, 8).status);
        assertEquals(Status.UNKNOWN_INSTANCE, h.store.readData(33, retrieve, 0, 0, 8).status);
        assertEquals(0, h.counter(CountersDescriptor.COPY_BYTES_IN) + h.counter(CountersDescriptor.COPY_BYTES_OUT));
        assertEquals(3, h.book().pendingTransfers());
    }

    @Test
    void shouldRefuseDataWhenRangeIsOutsideTheChunkOrMessage()
    {
        h.register(A, RANK0);
        final UnsafeBuffer source = new UnsafeBuffer(new byte[64]);
        final long store = h.prepared(A, ids(1, 2));
        assertEquals(Status.INVALID_REQUEST, h.store.writeData(A, store, 2, 0, source, 0, 8).status, "slot index");
        assertEquals(Status.INVALID_REQUEST, h.store.writeData(A, store, -1, 0, source, 0, 8).status);
        assertEquals(Status.INVALID_REQUEST, h.store.writeData(A, store, 0, 60, source, 0, 8).status, "past chunk");
        assertEquals(Status.INVALID_REQUEST, h.store.writeData(A, store, 0, -8, source, 0, 8).status);
        assertEquals(Status.INVALID_REQUEST, h.store.writeData(A, store, 0, 0, source, 0, 25).status, "past message");
        assertEquals(Status.INVALID_REQUEST, h.store.writeData(A, store, 0, 0, source, 0, -1).status);
        assertEquals(Status.OK, h.store.writeData(A, store, 1, 40, source, 0, 24).status, "last bytes of the chunk");
        assertEquals(Status.OK, h.store.writeData(A, store, 1, 64, source, 0, 0).status, "empty at the end");
        assertEquals(Status.OK, h.store.commitStore(A, store).status);
        final long t = h.store.prepareRetrieve(A, ids(1)).outTransferId;
        assertEquals(Status.INVALID_REQUEST, h.store.readData(A, t, 1, 0, 8).status);
        assertEquals(Status.INVALID_REQUEST, h.store.readData(A, t, 0, 57, 8).status);
        assertEquals(Status.INVALID_REQUEST, h.store.readData(A, t, 0, 0, 25).status);
        h.assertInvariants();
    }

    @Test
    void shouldRefuseDataWhenLeaseExpired()
    {
        h.register(A, RANK0);
        final UnsafeBuffer source = new UnsafeBuffer(new byte[8]);
        final long store = h.prepared(A, ids(1));
        h.clock.advance(LEASE_NS + 1);
        assertEquals(Status.UNKNOWN_TRANSFER, h.store.writeData(A, store, 0, 0, source, 0, 8).status);
        assertEquals(0, h.book().reservedChunks(), "reclaimed");
        assertEquals(0, h.counter(CountersDescriptor.COPY_BYTES_IN));
    }

    private static void fill(final UnsafeBuffer buffer, final int chunk)
    {
        for (int i = 0; i < buffer.capacity(); i++)
        {
            buffer.putByte(i, expected(chunk, i));
        }
    }

    private static byte expected(final int chunk, final int i)
    {
        return (byte)(chunk * 64 + i * 7 + 1);
    }
}
