package io.kvstash.wire.idle;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The counting backoff goes through its phases in order (spin, yield, park), counts each, starts over at a reset or
 * when a duty cycle did work, and parks once its yield phase has lasted its time when it has a bound.
 */
class CountingBackoffIdleStrategyTest
{
    @Test
    void shouldSpinThenYieldThenParkAndCountEachPhase()
    {
        final CountingBackoffIdleStrategy wait = new CountingBackoffIdleStrategy(2, 3, 1_000, 4_000);
        for (int i = 0; i < 7; i++)
        {
            wait.idle();
        }
        assertEquals(2, wait.spins());
        assertEquals(3, wait.yields());
        assertEquals(2, wait.parks());
    }

    @Test
    void shouldStartOverWithSpinsAfterAResetOrWork()
    {
        final CountingBackoffIdleStrategy wait = new CountingBackoffIdleStrategy(1, 1, 1_000, 1_000);
        wait.idle();
        wait.idle();
        wait.idle();
        assertEquals(1, wait.parks());
        wait.reset();
        wait.idle();
        assertEquals(2, wait.spins());
        wait.idle(0);
        assertEquals(2, wait.yields());
        wait.idle(5);
        wait.idle(0);
        assertEquals(3, wait.spins());
        assertEquals(1, wait.parks());
    }

    @Test
    void shouldNotParkWithinTheYieldsOfAWaitWithoutATimeBound()
    {
        final CountingBackoffIdleStrategy wait = new CountingBackoffIdleStrategy(100, 5_000, 1_000, 1_000);
        for (int i = 0; i < 5_100; i++)
        {
            wait.idle();
        }
        assertEquals(0, wait.parks());
        wait.idle();
        assertEquals(1, wait.parks());
    }

    @Test
    void shouldParkOnceTheYieldPhaseHasLastedItsTimeAndKeepParkingUntilReset() throws Exception
    {
        final CountingBackoffIdleStrategy wait =
            new CountingBackoffIdleStrategy(1, 1_000_000, 1_000_000L, 1_000, 1_000);
        wait.idle();
        wait.idle();
        assertEquals(1, wait.yields());
        Thread.sleep(5);
        wait.idle();
        assertEquals(1, wait.yields());
        assertEquals(1, wait.parks());
        wait.idle();
        assertEquals(2, wait.parks());
        wait.reset();
        wait.idle();
        wait.idle();
        assertEquals(2, wait.yields());
    }

    @Test
    void shouldRefusePhasesThatCannotBeRun()
    {
        assertThrows(IllegalArgumentException.class, () -> new CountingBackoffIdleStrategy(-1, 1, 1, 1));
        assertThrows(IllegalArgumentException.class, () -> new CountingBackoffIdleStrategy(1, 1, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> new CountingBackoffIdleStrategy(1, 1, 10, 5));
        assertThrows(IllegalArgumentException.class, () -> new CountingBackoffIdleStrategy(1, 1, -1, 1, 1));
    }
}
