package io.kvstash.core;

import org.agrona.concurrent.NanoClock;

/**
 * A clock that moves only when a test moves it, so lease expiry is decided by the test, never by timing.
 */
final class TestClock implements NanoClock
{
    private long nowNs;

    TestClock(final long nowNs)
    {
        this.nowNs = nowNs;
    }

    @Override
    public long nanoTime()
    {
        return nowNs;
    }

    void advance(final long deltaNs)
    {
        nowNs += deltaNs;
    }

    void set(final long nowNs)
    {
        this.nowNs = nowNs;
    }
}
