package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Two models on one pool through a real server and the Java client: a small layout (256 KiB chunks) and a
 * big one (8 MiB chunks) register in either order, each stores chunks of its own size, and every chunk
 * reads back byte for byte from slots that do not overlap.
 */
@Timeout(60)
class SizeClassServerTest
{
    private static final Layout SMALL = Layout.of("small-model", 1, 0, 2, 128, Dtype.BFLOAT16, false);
    private static final Layout BIG = Layout.of("big-model", 1, 0, 8, 1024, Dtype.BFLOAT16, false);

    private Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @ParameterizedTest
    @ValueSource(booleans = { true, false })
    void shouldStoreAndRetrieveTwoLayoutsRegisteredInEitherOrder(final boolean smallFirst) throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-size-classes-");
        final ServerContext context = new ServerContext()
            .directory(dir)
            .storeContext(new StoreContext().poolSizeBytes(64L << 20));
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            assertTrue(server.directory().endsWith(dir.getFileName()));
            final List<long[]> slots = new ArrayList<>();
            final long first = smallFirst ? 1 : 2;
            final long second = smallFirst ? 2 : 1;
            storeAndCheck(client, first, smallFirst ? SMALL : BIG, slots);
            storeAndCheck(client, second, smallFirst ? BIG : SMALL, slots);
            // The first layout's chunks are still there, intact, after the second class took its regions.
            retrieveAndCheck(client, first, smallFirst ? SMALL : BIG);
            retrieveAndCheck(client, second, smallFirst ? BIG : SMALL);
            for (int a = 0; a < slots.size(); a++)
            {
                for (int b = a + 1; b < slots.size(); b++)
                {
                    final long[] x = slots.get(a);
                    final long[] y = slots.get(b);
                    assertTrue(x[0] + x[1] <= y[0] || y[0] + y[1] <= x[0],
                        "slots at " + x[0] + " and " + y[0] + " overlap");
                }
            }
        }
    }

    private static ChunkKeys keys(final long instance)
    {
        return ChunkKeys.ofIds(instance * 100 + 1, instance * 100 + 2, instance * 100 + 3);
    }

    private static byte pattern(final long instance, final int chunk, final int b)
    {
        return (byte)(instance * 31 + chunk * 7 + b * 13);
    }

    private static void storeAndCheck(
        final KvStashClient client, final long instance, final Layout layout, final List<long[]> slots)
    {
        final ClientResponse registered = client.register(instance, layout);
        assertEquals(Status.OK, registered.status(), registered.toString());
        final long chunkBytes = registered.chunkBytes();
        assertTrue(registered.slotBytes() >= chunkBytes, registered.toString());
        final ClientResponse r = client.prepareStore(instance, keys(instance));
        assertEquals(Status.OK, r.status(), r.toString());
        assertEquals(3, r.slotCount(), r.toString());
        final UnsafeBuffer view = new UnsafeBuffer(0, 0);
        for (int i = 0; i < r.slotCount(); i++)
        {
            assertTrue(client.chunks().isStillReserved(r, i));
            client.chunks().slotView(r, i, view);
            assertEquals(chunkBytes, view.capacity());
            for (int b = 0; b < chunkBytes; b++)
            {
                view.putByte(b, pattern(instance, r.slotRangeIndex(i), b));
            }
            slots.add(new long[] { r.slotOffset(i), r.slotBytes() });
        }
        final ClientResponse committed = client.commitStore(instance, r.transferId());
        assertEquals(Status.OK, committed.status(), committed.toString());
    }

    private static void retrieveAndCheck(final KvStashClient client, final long instance, final Layout layout)
    {
        final ClientResponse r = client.prepareRetrieve(instance, keys(instance));
        assertEquals(Status.OK, r.status(), r.toString());
        assertEquals(3, r.slotCount(), r.toString());
        final UnsafeBuffer view = new UnsafeBuffer(0, 0);
        for (int i = 0; i < r.slotCount(); i++)
        {
            client.chunks().slotView(r, i, view);
            for (int b = 0; b < view.capacity(); b++)
            {
                assertEquals(pattern(instance, r.slotRangeIndex(i), b), view.getByte(b),
                    layout.model() + " chunk " + i + " byte " + b);
            }
            assertTrue(client.chunks().isStillReadable(r, i));
        }
        assertEquals(Status.OK, client.commitRetrieve(instance, r.transferId()).status());
    }
}
