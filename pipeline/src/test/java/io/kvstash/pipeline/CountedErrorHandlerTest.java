package io.kvstash.pipeline;

import io.kvstash.core.StoreCounters;
import io.kvstash.wire.file.CountersDescriptor;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

class CountedErrorHandlerTest
{
    @Test
    void shouldCountEachErrorBeforeHandingItOn()
    {
        final StoreCounters counters = StoreCounters.allocate();
        final List<Long> countSeenByDelegate = new ArrayList<>();
        final List<Throwable> handled = new ArrayList<>();
        final CountedErrorHandler handler = new CountedErrorHandler(
            ex ->
            {
                countSeenByDelegate.add(counters.get(CountersDescriptor.ERRORS));
                handled.add(ex);
            },
            counters);
        final IllegalStateException first = new IllegalStateException("first");
        handler.onError(first);
        handler.onError(new IllegalArgumentException("second"));
        assertEquals(2, counters.get(CountersDescriptor.ERRORS));
        assertEquals(List.of(1L, 2L), countSeenByDelegate);
        assertSame(first, handled.get(0));
    }

    @Test
    void shouldRefuseMissingParts()
    {
        assertThrows(IllegalArgumentException.class, () -> new CountedErrorHandler(null, StoreCounters.allocate()));
        assertThrows(IllegalArgumentException.class, () -> new CountedErrorHandler(Throwable::printStackTrace, null));
    }
}
