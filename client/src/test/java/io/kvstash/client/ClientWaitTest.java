package io.kvstash.client;

import io.kvstash.wire.idle.CountingBackoffIdleStrategy;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A client's default wait for a response is the counting backoff with the in-flight phases: it spins, then yields.
 */
class ClientWaitTest
{
    @Test
    void shouldBeTheCountingBackoffWithTheInFlightPhases()
    {
        final ClientContext context = new ClientContext().conclude();
        assertTrue(context.idleStrategy() instanceof CountingBackoffIdleStrategy, String.valueOf(context.idleStrategy()));
        final CountingBackoffIdleStrategy wait = (CountingBackoffIdleStrategy)context.idleStrategy();
        for (int i = 0; i <= ClientContext.WAIT_SPINS_DEFAULT; i++)
        {
            wait.idle();
        }
        assertEquals(ClientContext.WAIT_SPINS_DEFAULT, wait.spins());
        assertEquals(1, wait.yields());
        assertEquals(0, wait.parks());
    }
}
