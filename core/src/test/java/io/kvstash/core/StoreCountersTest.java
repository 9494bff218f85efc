package io.kvstash.core;

import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The counters' names and meanings, which {@code kvstash stat} and the Prometheus endpoint print: every named
 * counter outside the responses table says what it counts, and only named counters are gauges.
 */
class StoreCountersTest
{
    @Test
    void shouldDescribeEveryNamedCounterOutsideTheResponsesTable()
    {
        int described = 0;
        for (int id = 0; id < StoreCounters.COUNT; id++)
        {
            final boolean response = id >= StoreCounters.REQUESTS_BASE && id < StoreCounters.ERRORS;
            if (null == StoreCounters.name(id) || response)
            {
                assertNull(StoreCounters.description(id), "id " + id);
                assertFalse(StoreCounters.isGauge(id), "id " + id);
            }
            else
            {
                assertNotNull(StoreCounters.description(id), "no description for " + StoreCounters.name(id));
                described++;
            }
        }
        assertEquals(50, described, "book 24, data 2, wire 9, errors and invalid types 2, l2 13");
        for (final int gauge : new int[]{ StoreCounters.READABLE_CHUNKS, StoreCounters.FREE_SLOTS,
            StoreCounters.INSTANCES, StoreCounters.WIRE_CLIENTS, StoreCounters.L2_STATE,
            StoreCounters.L2_COMPLETED_TICKET })
        {
            assertTrue(StoreCounters.isGauge(gauge), StoreCounters.name(gauge));
        }
        assertFalse(StoreCounters.isGauge(StoreCounters.EVICTIONS));
        assertFalse(StoreCounters.isGauge(StoreCounters.WIRE_CLIENTS_ATTACHED));
    }

    @Test
    void shouldKeepEveryRowAtItsIdWithItsContractName()
    {
        final String[] expected =
        {
            "readable_chunks", "reserved_chunks", "pinned_chunks", "free_slots", "slot_capacity",
            "pending_transfers", "instances", "lookup_hit_chunks", "lookup_miss_chunks", "retrieve_hit_chunks",
            "retrieve_misses", "stored_chunks", "retrieved_chunks", "evictions", "bytes_in", "bytes_out",
            "reclaimed_leases", "aborted_chunks", "no_space", "unregister_unknown", "empty_prepares",
            "dead_clients", "cleared_chunks", "cold_chunks"
        };
        for (int id = 0; id < expected.length; id++)
        {
            assertEquals(expected[id], StoreCounters.name(id), "id " + id);
        }
        assertEquals("copy_bytes_in", StoreCounters.name(StoreCounters.COPY_BYTES_IN));
        assertEquals("clients_attached", StoreCounters.name(StoreCounters.WIRE_CLIENTS_ATTACHED));
        assertEquals("back_pressure", StoreCounters.name(StoreCounters.WIRE_BACK_PRESSURE));
        assertEquals("sleeps", StoreCounters.name(StoreCounters.WIRE_SLEEPS));
        assertEquals("doorbell_wakeups", StoreCounters.name(StoreCounters.WIRE_DOORBELL_WAKEUPS));
        assertEquals("errors", StoreCounters.name(StoreCounters.ERRORS));
        assertEquals("requests.invalid_type", StoreCounters.name(StoreCounters.REQUESTS_INVALID_TYPE));
        assertEquals("requests.lookup.ok", StoreCounters.name(StoreCounters.requestId(RequestType.LOOKUP, Status.OK)));
        for (final StoreCounters.Descriptor descriptor : StoreCounters.Descriptor.values())
        {
            assertEquals(descriptor, StoreCounters.descriptor(descriptor.id()), descriptor.counterName());
        }
    }
}
