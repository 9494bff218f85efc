package io.kvstash.client;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The client's wait for a response goes through its phases in order (spin, yield, park), counts each, and
 * starts over at a reset or when work was done; a client's default wait is this one.
 */
class InFlightIdleStrategyTest
{
    @Test
    void shouldSpinThenYieldThenParkAndCountEachPhase()
    {
        final InFlightIdleStrategy wait = new InFlightIdleStrategy(2, 3, 1_000, 4_000);
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
        final InFlightIdleStrategy wait = new InFlightIdleStrategy(1, 1, 1_000, 1_000);
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
        final InFlightIdleStrategy wait = new InFlightIdleStrategy(100, 5_000, 1_000, 1_000);
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
        final InFlightIdleStrategy wait = new InFlightIdleStrategy(1, 1_000_000, 1_000_000L, 1_000, 1_000);
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
    void shouldBeTheDefaultWaitOfAClient()
    {
        final ClientContext context = new ClientContext().conclude();
        assertTrue(context.idleStrategy() instanceof InFlightIdleStrategy, String.valueOf(context.idleStrategy()));
    }

    @Test
    void shouldRefusePhasesThatCannotBeRun()
    {
        assertThrows(IllegalArgumentException.class, () -> new InFlightIdleStrategy(-1, 1, 1, 1));
        assertThrows(IllegalArgumentException.class, () -> new InFlightIdleStrategy(1, 1, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> new InFlightIdleStrategy(1, 1, 10, 5));
        assertThrows(IllegalArgumentException.class, () -> new InFlightIdleStrategy(1, 1, -1, 1, 1));
    }
}
