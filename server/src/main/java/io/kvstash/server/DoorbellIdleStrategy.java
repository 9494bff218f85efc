package io.kvstash.server;

import io.kvstash.core.StoreCounters;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.idle.CountingBackoffIdleStrategy;
import io.kvstash.wire.idle.ResetOnWorkIdleStrategy;
import org.agrona.CloseHelper;
import org.agrona.ErrorHandler;
import org.agrona.concurrent.AtomicBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * The sleep of the receiver's thread on the doorbell ({@link ControlFileDescriptor#FEATURE_DOORBELL}): the thread
 * sleeps in a selector until the conductor's next timer is due ({@link Timers#sleepMs(int)}, at most
 * {@link #MAX_SLEEP_MS}), and a client that publishes a request meanwhile writes a byte on its doorbell connection,
 * which wakes the thread at once; so does a new client's file ({@link ClientConductor#wakeOnNewClients}). Nothing
 * else could wake it: the requests arrive in shared memory, which no system call watches, so a client that does not
 * ring would wait out the sleep; while fewer clients hold a doorbell connection than are attached, the thread
 * sleeps a millisecond at a time.
 * <p>
 * With {@code --wait blocking} the thread sleeps as soon as a duty cycle finds nothing to do. With the default
 * backoff it first backs off as that mode does (spin, yield, park up to 50 us: a request finds it within a park) and
 * sleeps only once it has found nothing to do for {@link #BACKOFF_SLEEP_AFTER_NS} after its first
 * {@link #IDLES_BEFORE_CLOCK} empty cycles: under load it never gets there, so a busy server reads no clock, raises
 * no word and is rung by nobody; an idle one wakes a few times a second.
 * <p>
 * No lost wake-up: the thread raises the control file's Asleep word (a volatile store, a full fence) and runs one
 * more duty cycle, which polls every ring, before it sleeps; a client publishes its request, fences, then reads the
 * word and rings when it is up. One of the two sees the other. The word goes down when the thread wakes.
 * <p>
 * Owner: the receiver's thread, which writes the counters {@link CountersDescriptor#WIRE_SLEEPS} and
 * {@link CountersDescriptor#WIRE_DOORBELL_WAKEUPS}. {@link #close()} after that thread has stopped.
 */
final class DoorbellIdleStrategy extends ResetOnWorkIdleStrategy implements AutoCloseable
{
    /**
     * Longest sleep, when no timer of the conductor is due sooner: what a missed ring can cost a request (a client
     * with no doorbell connection at all shortens the sleeps to a millisecond, see {@link Timers#sleepMs(int)}).
     */
    static final long MAX_SLEEP_MS = 100;
    /** How long the backoff wait backs off, after its first {@link #IDLES_BEFORE_CLOCK} empty cycles, before sleeping. */
    static final long BACKOFF_SLEEP_AFTER_NS = 4_000_000L;
    /** Empty cycles in a row before the backoff wait first reads the clock (its spins and yields, about 1 ms). */
    static final int IDLES_BEFORE_CLOCK = 1100;

    /**
     * When the thread may sleep until: the receiver's side.
     */
    interface Timers
    {
        /**
         * How long the thread may sleep before a timer of the conductor is due, a millisecond while fewer clients
         * hold a doorbell connection than are attached (one that does not ring is served within it); the duty cycle
         * after the sleep runs the conductor.
         *
         * @param doorbellConnections the clients' doorbell connections now open.
         * @return ms, 0 when one is due now.
         */
        long sleepMs(int doorbellConnections);

        /**
         * Requests read since the start: a cycle's work that read none (a timer's: a sweep, an attach) does not
         * start the backoff over.
         *
         * @return count.
         */
        long requestsRead();
    }

    private final Selector selector;
    private final ServerSocketChannel doorbell;
    private final AtomicBuffer control;
    private final StoreCounters counters;
    private final ErrorHandler errorHandler;
    private final Timers timers;
    /** The wait before sleeping, or null to sleep at once. */
    private final CountingBackoffIdleStrategy backoff;
    private final long sleepAfterNs;
    private int idlesInRow;
    private long backoffFromNs;
    /** True from the first sleep until a cycle reads a request; the requests read when it went true. */
    private boolean drowsy;
    private long requestsAtSleep;
    private final ByteBuffer drain = ByteBuffer.allocateDirect(256);
    private final Consumer<SelectionKey> onReady = this::onReady;
    private boolean asleep;
    private boolean rung;
    /** The clients' doorbell connections open. */
    private int connections;

    /**
     * A wait on a bound doorbell.
     *
     * @param doorbell     the listening doorbell socket, non-blocking.
     * @param control      the mapped control file (its Asleep word).
     * @param counters     the server's counters.
     * @param errorHandler where an unexpected selector error goes (the thread then sleeps a millisecond).
     * @param timers       how long the thread may sleep.
     * @param backoff      the wait before sleeping (the backoff mode's), or null to sleep at once (blocking).
     * @throws IOException when the selector cannot be opened or the socket registered.
     */
    DoorbellIdleStrategy(
        final ServerSocketChannel doorbell,
        final AtomicBuffer control,
        final StoreCounters counters,
        final ErrorHandler errorHandler,
        final Timers timers,
        final CountingBackoffIdleStrategy backoff)
        throws IOException
    {
        this.timers = timers;
        this.backoff = backoff;
        this.sleepAfterNs = null == backoff ? 0 : BACKOFF_SLEEP_AFTER_NS;
        this.doorbell = doorbell;
        this.control = control;
        this.counters = counters;
        this.errorHandler = errorHandler;
        selector = Selector.open();
        try
        {
            doorbell.register(selector, SelectionKey.OP_ACCEPT);
        }
        catch (final IOException | RuntimeException ex)
        {
            selector.close();
            throw ex;
        }
    }

    @Override
    public void idle()
    {
        if (null != backoff && backingOff())
        {
            backoff.idle();
            return;
        }
        if (!asleep)
        {
            // Up before the next duty cycle's poll: a request published before a client read the word low is
            // found by that poll; one published after is rung.
            control.putIntVolatile(ControlFileDescriptor.ASLEEP_OFFSET, 1);
            asleep = true;
            return;
        }
        if (!drowsy)
        {
            drowsy = true;
            requestsAtSleep = timers.requestsRead();
        }
        final long sleepMs = Math.min(MAX_SLEEP_MS, timers.sleepMs(connections));
        rung = false;
        try
        {
            if (sleepMs > 0)
            {
                counters.increment(CountersDescriptor.WIRE_SLEEPS);
                selector.select(onReady, sleepMs);
            }
            else
            {
                selector.selectNow(onReady);
            }
        }
        catch (final IOException | RuntimeException ex)
        {
            errorHandler.onError(ex);
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
        if (rung)
        {
            counters.increment(CountersDescriptor.WIRE_DOORBELL_WAKEUPS);
        }
        wake();
    }

    /**
     * Whether the wait still backs off: for {@link #IDLES_BEFORE_CLOCK} empty cycles without a clock read, then
     * until {@link #BACKOFF_SLEEP_AFTER_NS} have passed.
     */
    private boolean backingOff()
    {
        final int n = idlesInRow;
        if (n < IDLES_BEFORE_CLOCK)
        {
            idlesInRow = n + 1;
            return true;
        }
        if (n == IDLES_BEFORE_CLOCK)
        {
            idlesInRow = n + 1;
            backoffFromNs = System.nanoTime();
            return true;
        }
        return !asleep && System.nanoTime() - backoffFromNs < sleepAfterNs;
    }

    /**
     * After a sleep: the word goes down and the next sleep comes after one more duty cycle (the one that raises the
     * word again); the backoff is not waited out again until a cycle does work.
     */
    private void wake()
    {
        if (asleep)
        {
            control.putIntRelease(ControlFileDescriptor.ASLEEP_OFFSET, 0);
            asleep = false;
        }
    }

    /**
     * After a cycle that did work: the word goes down; the backoff starts over unless the work was a timer's
     * (no request read since the thread first slept), which sends the thread back to sleep after one more cycle.
     */
    @Override
    public void reset()
    {
        wake();
        if (drowsy)
        {
            if (timers.requestsRead() == requestsAtSleep)
            {
                return;
            }
            drowsy = false;
        }
        idlesInRow = 0;
        if (null != backoff)
        {
            backoff.reset();
        }
    }

    @Override
    public String alias()
    {
        return null == backoff ? "doorbell" : "backoff+doorbell";
    }

    /**
     * The backoff before sleeping, for its counts.
     *
     * @return the backoff, or null when the thread sleeps at once.
     */
    CountingBackoffIdleStrategy backoff()
    {
        return backoff;
    }

    /**
     * Ends a sleep now, from any thread (the thread that watches for new clients' files); a wake-up when the thread
     * is not asleep ends its next sleep at once.
     */
    void wakeUp()
    {
        selector.wakeup();
    }

    /**
     * Closes the selector and every client's doorbell connection; the listening socket is the server files'.
     */
    @Override
    public void close()
    {
        if (selector.isOpen())
        {
            for (final SelectionKey key : selector.keys())
            {
                if (key.channel() != doorbell)
                {
                    CloseHelper.quietClose(key.channel());
                }
            }
            CloseHelper.quietClose(selector);
        }
    }

    private void onReady(final SelectionKey key)
    {
        try
        {
            if (key.isAcceptable())
            {
                SocketChannel client;
                while (null != (client = doorbell.accept()))
                {
                    client.configureBlocking(false);
                    client.register(selector, SelectionKey.OP_READ);
                    connections++;
                }
            }
            else if (key.isReadable())
            {
                final SocketChannel client = (SocketChannel)key.channel();
                int read;
                do
                {
                    drain.clear();
                    read = client.read(drain);
                    rung |= read > 0;
                }
                while (read == drain.capacity());
                if (read < 0)
                {
                    // The client closed or died.
                    key.cancel();
                    client.close();
                    connections--;
                }
            }
        }
        catch (final IOException ex)
        {
            key.cancel();
            CloseHelper.quietClose(key.channel());
            if (key.channel() != doorbell)
            {
                connections--;
            }
        }
    }
}
