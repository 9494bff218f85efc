package io.kvstash.wire.file;

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
class CountersDescriptorTest
{
    @Test
    void shouldDescribeEveryNamedCounterOutsideTheResponsesTable()
    {
        int described = 0;
        for (int id = 0; id < CountersDescriptor.COUNT; id++)
        {
            final boolean response = id >= CountersDescriptor.REQUESTS_BASE && id < CountersDescriptor.ERRORS;
            if (null == CountersDescriptor.name(id) || response)
            {
                assertNull(CountersDescriptor.description(id), "id " + id);
                assertFalse(CountersDescriptor.isGauge(id), "id " + id);
            }
            else
            {
                assertNotNull(CountersDescriptor.description(id), "no description for " + CountersDescriptor.name(id));
                described++;
            }
        }
        assertEquals(54, described, "book 24, data 2, wire 9, errors, invalid types and no-reply failures 3, l2 13, pool 3");
        for (final int gauge : new int[]{ CountersDescriptor.READABLE_CHUNKS, CountersDescriptor.FREE_SLOTS,
            CountersDescriptor.INSTANCES, CountersDescriptor.WIRE_CLIENTS, CountersDescriptor.L2_STATE,
            CountersDescriptor.L2_COMPLETED_TICKET, CountersDescriptor.POOL_BYTES_CONFIGURED,
            CountersDescriptor.POOL_BYTES_COMMITTED })
        {
            assertTrue(CountersDescriptor.isGauge(gauge), CountersDescriptor.name(gauge));
        }
        assertFalse(CountersDescriptor.isGauge(CountersDescriptor.EVICTIONS));
        assertFalse(CountersDescriptor.isGauge(CountersDescriptor.WIRE_CLIENTS_ATTACHED));
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
            assertEquals(expected[id], CountersDescriptor.name(id), "id " + id);
        }
        assertEquals("copy_bytes_in", CountersDescriptor.name(CountersDescriptor.COPY_BYTES_IN));
        assertEquals("clients_attached", CountersDescriptor.name(CountersDescriptor.WIRE_CLIENTS_ATTACHED));
        assertEquals("back_pressure", CountersDescriptor.name(CountersDescriptor.WIRE_BACK_PRESSURE));
        assertEquals("sleeps", CountersDescriptor.name(CountersDescriptor.WIRE_SLEEPS));
        assertEquals("doorbell_wakeups", CountersDescriptor.name(CountersDescriptor.WIRE_DOORBELL_WAKEUPS));
        assertEquals("errors", CountersDescriptor.name(CountersDescriptor.ERRORS));
        assertEquals("requests.invalid_type", CountersDescriptor.name(CountersDescriptor.REQUESTS_INVALID_TYPE));
        assertEquals("no_reply_failures", CountersDescriptor.name(CountersDescriptor.NO_REPLY_FAILURES));
        assertEquals("pool_bytes_configured", CountersDescriptor.name(328));
        assertEquals("pool_bytes_committed", CountersDescriptor.name(329));
        assertEquals("pool_commit_misses", CountersDescriptor.name(330));
        assertEquals("requests.lookup.ok", CountersDescriptor.name(CountersDescriptor.requestId(RequestType.LOOKUP, Status.OK)));
        for (final CountersDescriptor.Counter descriptor : CountersDescriptor.Counter.values())
        {
            assertEquals(descriptor, CountersDescriptor.counter(descriptor.id()), descriptor.counterName());
        }
    }
}
