package io.kvstash.pipeline;

import io.kvstash.wire.idle.CountingBackoffIdleStrategy;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The backoff wait mode gives the server's agents the counting backoff, whose counts the server reports.
 */
class WaitModeIdleTest
{
    @Test
    void shouldBeTheAgentsIdleStrategyOfTheBackoffWaitMode()
    {
        assertTrue(WaitMode.BACKOFF.newIdleStrategy() instanceof CountingBackoffIdleStrategy);
    }
}
