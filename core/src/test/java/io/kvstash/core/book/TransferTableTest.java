package io.kvstash.core.book;

import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TransferTableTest
{
    @Test
    void shouldNeverResolveIdWhenItsEntryWasReleasedAndReused()
    {
        final TransferTable table = new TransferTable(4, 2);
        final int t = table.allocate();
        table.addChunk(t, 7);
        table.activate(t, TransferTable.KIND_STORE, 0, 100);
        final long first = table.id(t);
        assertEquals(t, table.resolve(first));
        table.release(t);
        assertEquals(-1, table.resolve(first), "released");

        final int again = table.allocate();
        assertEquals(t, again, "the freed entry is reused");
        table.activate(again, TransferTable.KIND_STORE, 0, 200);
        final long second = table.id(again);
        assertNotEquals(first, second);
        assertEquals(first & 0xFFFF_FFFFL, second & 0xFFFF_FFFFL, "same index");
        assertEquals(-1, table.resolve(first), "stale id of the reused entry");
        assertEquals(again, table.resolve(second));
        assertEquals(0, table.count(again), "the chunk list of the old transfer is gone");
    }

    @Test
    void shouldIssueDistinctIdsWhenEntriesCycleManyTimes()
    {
        final TransferTable table = new TransferTable(3, 1);
        final Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 3000; i++)
        {
            final int t = table.allocate();
            table.activate(t, TransferTable.KIND_LOOKUP, 0, i);
            assertTrue(seen.add(table.id(t)), "id issued twice");
            table.release(t);
        }
        assertEquals(0, table.active());
    }

    @Test
    void shouldNotResolveIdWhenNeverIssuedOrOutOfRange()
    {
        final TransferTable table = new TransferTable(4, 1);
        assertEquals(-1, table.resolve(0));
        assertEquals(-1, table.resolve(1L << 32), "generation 1 of an entry never activated");
        final int t = table.allocate();
        assertEquals(-1, table.resolve(table.id(t)), "allocated but not activated");
        table.activate(t, TransferTable.KIND_STORE, 0, 1);
        final long id = table.id(t);
        assertEquals(t, table.resolve(id));
        assertEquals(-1, table.resolve(id + 1000), "index out of range");
        assertEquals(-1, table.resolve(id | 0xFFFF_FFFFL), "index far out of range");
        assertEquals(-1, table.resolve(id + (1L << 32)), "future generation");
        assertEquals(-1, table.resolve(-1L));
    }

    @Test
    void shouldNotAdvanceGenerationWhenDiscardingAnUnactivatedEntry()
    {
        final TransferTable table = new TransferTable(4, 1);
        final int t = table.allocate();
        final long before = table.id(t);
        table.addChunk(t, 3);
        table.discard(t);
        final int again = table.allocate();
        assertEquals(t, again);
        assertEquals(before, table.id(again), "an id never handed out may be handed out now");
        assertEquals(0, table.count(again));
        assertEquals(0, table.active());
    }

    @Test
    void shouldMoveToNewIdWhenRenewed()
    {
        final TransferTable table = new TransferTable(4, 1);
        final int a = table.allocate();
        table.activate(a, TransferTable.KIND_LOOKUP, 0, 10);
        final int b = table.allocate();
        table.activate(b, TransferTable.KIND_LOOKUP, 0, 20);
        final long lookupId = table.id(a);
        table.renew(a, TransferTable.KIND_RETRIEVE, 30);
        assertEquals(-1, table.resolve(lookupId));
        assertEquals(a, table.resolve(table.id(a)));
        assertEquals(TransferTable.KIND_RETRIEVE, table.kind(a));
        assertEquals(30, table.deadlineNs(a));
        assertEquals(b, table.leaseHead(), "renewed entry moves to the lease tail");
        assertEquals(a, table.leaseNext(b));
        assertEquals(-1, table.leaseNext(a));
        assertEquals(2, table.active());
    }

    @Test
    void shouldKeepLeaseAndInstanceListsWhenReleasingFromTheMiddle()
    {
        final TransferTable table = new TransferTable(8, 2);
        final int[] t = new int[5];
        for (int i = 0; i < t.length; i++)
        {
            t[i] = table.allocate();
            table.activate(t[i], TransferTable.KIND_STORE, i % 2, i);
        }
        table.release(t[2]);
        table.release(t[0]);
        assertEquals(t[1], table.leaseHead());
        assertEquals(t[3], table.leaseNext(t[1]));
        assertEquals(t[4], table.leaseNext(t[3]));
        assertEquals(-1, table.leaseNext(t[4]));
        final Set<Integer> owner0 = new HashSet<>();
        for (int i = table.instanceHead(0); i >= 0; i = table.instanceNext(i))
        {
            owner0.add(i);
            assertEquals(0, table.instance(i));
        }
        assertEquals(Set.of(t[4]), owner0);
        final Set<Integer> owner1 = new HashSet<>();
        for (int i = table.instanceHead(1); i >= 0; i = table.instanceNext(i))
        {
            owner1.add(i);
        }
        assertEquals(Set.of(t[1], t[3]), owner1);
        assertEquals(3, table.active());
    }

    @Test
    void shouldGrowToItsLimitAndThenRefuseWhenAllocating()
    {
        final int limit = 600;
        final TransferTable table = new TransferTable(limit, 1);
        final Set<Long> ids = new HashSet<>();
        for (int i = 0; i < limit; i++)
        {
            final int t = table.allocate();
            assertTrue(t >= 0, "entry " + i);
            for (int c = 0; c < 20; c++)
            {
                table.addChunk(t, c);
            }
            table.activate(t, TransferTable.KIND_RETRIEVE, 0, i);
            ids.add(table.id(t));
        }
        assertEquals(limit, ids.size());
        assertEquals(-1, table.allocate());
        for (final long id : ids)
        {
            final int t = table.resolve(id);
            assertTrue(t >= 0);
            assertEquals(20, table.count(t));
            assertEquals(19, table.chunk(t, 19));
        }
        table.release(table.resolve(ids.iterator().next()));
        assertTrue(table.allocate() >= 0);
    }
}
