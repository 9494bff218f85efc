package io.kvstash.wire.idle;

import org.agrona.concurrent.IdleStrategy;

/**
 * An Agrona {@link IdleStrategy} whose duty-cycle form starts over after work: {@link #idle(int)} resets the
 * strategy when the cycle did work and idles once when it did none, so a strategy only says how it idles and how it
 * starts over. The server's and the client's waits share it.
 * <p>
 * It lives in {@code wire} because that is the one module both the server and the client jar reach: the client
 * depends on {@code wire} and Agrona alone.
 */
public abstract class ResetOnWorkIdleStrategy implements IdleStrategy
{
    /**
     * Resets after a cycle that did work, idles once after one that did none.
     *
     * @param workCount work the last duty cycle did.
     */
    @Override
    public final void idle(final int workCount)
    {
        if (workCount > 0)
        {
            reset();
        }
        else
        {
            idle();
        }
    }
}
