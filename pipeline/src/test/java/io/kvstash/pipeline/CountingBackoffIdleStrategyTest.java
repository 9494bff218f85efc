package io.kvstash.pipeline;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The server's backoff goes through spin, yield and park as Agrona's does, counting each, and is what the
 * backoff wait mode gives the server's agents.
 */
class CountingBackoffIdleStrategyTest
{
    @Test
    void shouldSpinThenYieldThenParkAndStartOverAfterWork()
    {
        final CountingBackoffIdleStrategy backoff = new CountingBackoffIdleStrategy(3, 2, 1_000, 2_000);
        for (int i = 0; i < 6; i++)
        {
            backoff.idle(0);
        }
        assertEquals(3, backoff.spins());
        assertEquals(2, backoff.yields());
        assertEquals(1, backoff.parks());
        backoff.idle(1);
        backoff.idle(0);
        assertEquals(4, backoff.spins());
        assertEquals(1, backoff.parks());
    }

    @Test
    void shouldBeTheAgentsIdleStrategyOfTheBackoffWaitMode()
    {
        assertTrue(WaitMode.BACKOFF.newIdleStrategy() instanceof CountingBackoffIdleStrategy);
    }
}
