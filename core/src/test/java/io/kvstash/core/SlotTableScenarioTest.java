package io.kvstash.core;

import io.kvstash.wire.Status;
import io.kvstash.wire.file.SlotTableDescriptor;
import org.junit.jupiter.api.Test;

import static io.kvstash.core.StoreHarness.RANK0;
import static io.kvstash.core.StoreHarness.ids;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The slot table clients fence themselves with: every slot handed out carries the generation its slot word
 * holds, in the state the client expects.
 */
class SlotTableScenarioTest
{
    private static final long A = 11;

    private final StoreHarness h = new StoreHarness(4);

    @Test
    void shouldPublishResponseGenerationInSlotWordWhenSlotsAreHandedOut()
    {
        h.register(A, RANK0);
        final StoreCommand prepare = h.store.prepareStore(A, ids(1, 2, 3));
        final long store = prepare.outTransferId;
        final int[] slots = new int[3];
        final int[] generations = new int[3];
        for (int i = 0; i < 3; i++)
        {
            slots[i] = prepare.slotChunkId[i];
            generations[i] = prepare.slotGeneration[i];
            assertEquals(SlotTableDescriptor.word(SlotTableDescriptor.STATE_RESERVED, generations[i]),
                h.slotWord(slots[i]), "reserved slot " + i);
        }
        assertEquals(Status.OK, h.store.commitStore(A, store).status);
        for (int i = 0; i < 3; i++)
        {
            assertEquals(SlotTableDescriptor.word(SlotTableDescriptor.STATE_READABLE, generations[i]),
                h.slotWord(slots[i]), "committed slot " + i);
        }

        final StoreCommand retrieve = h.store.prepareRetrieve(A, ids(2, 3));
        for (int i = 0; i < retrieve.slotCount; i++)
        {
            final long word = h.slotWord(retrieve.slotChunkId[i]);
            assertEquals(SlotTableDescriptor.STATE_READABLE, SlotTableDescriptor.state(word));
            assertEquals(SlotTableDescriptor.generation(word), retrieve.slotGeneration[i]);
        }
        assertEquals(generations[1], retrieve.slotGeneration[0]);
        h.assertInvariants();
    }

    @Test
    void shouldAdvanceGenerationWhenASlotIsReused()
    {
        h.register(A, RANK0);
        h.stored(A, ids(1, 2, 3, 4));
        final int[] last = new int[4];
        for (int slot = 0; slot < 4; slot++)
        {
            last[slot] = SlotTableDescriptor.generation(h.slotWord(slot));
        }
        for (long id = 5; id < 40; id++)
        {
            final StoreCommand c = h.store.prepareStore(A, ids(id));
            final int slot = c.slotChunkId[0];
            final int generation = c.slotGeneration[0];
            assertTrue(generation > last[slot], "generation moves on for slot " + slot);
            assertEquals(SlotTableDescriptor.word(SlotTableDescriptor.STATE_RESERVED, generation), h.slotWord(slot));
            last[slot] = generation;
            if (id % 3 == 0)
            {
                assertEquals(Status.OK, h.store.abortStore(A, c.outTransferId).status);
                assertEquals(SlotTableDescriptor.word(SlotTableDescriptor.STATE_FREE, generation), h.slotWord(slot));
            }
            else
            {
                assertEquals(Status.OK, h.store.commitStore(A, c.outTransferId).status);
            }
        }
        h.assertInvariants();
    }

    @Test
    void shouldMarkSlotsFreeWhenStoresAreAbortedByUnregister()
    {
        h.register(A, RANK0);
        final StoreCommand prepare = h.store.prepareStore(A, ids(1, 2));
        final int slot = prepare.slotChunkId[1];
        final int generation = prepare.slotGeneration[1];
        h.store.unregister(A);
        assertEquals(SlotTableDescriptor.word(SlotTableDescriptor.STATE_FREE, generation), h.slotWord(slot));
    }
}
