package io.kvstash.server;

import io.kvstash.core.StoreCounters;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.CountersDescriptor;
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
 * The blocking wait of the receiver's thread ({@code serve --wait blocking}): when a duty cycle finds nothing to
 * do, the thread sleeps in a selector on the doorbell ({@link ControlFileDescriptor#FEATURE_DOORBELL}) for at most
 * {@link #PARK_MS}, and a client that publishes a request meanwhile writes a byte on its doorbell connection, which
 * wakes the thread at once. Nothing else could wake it: the requests arrive in shared memory, which no system call
 * watches, so a sleep without the doorbell makes every request of a waiting client wait out the park.
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
    /** Longest sleep: the conductor's scans, liveness checks and the heartbeat run between sleeps. */
    static final long PARK_MS = 1;

    private final Selector selector;
    private final ServerSocketChannel doorbell;
    private final AtomicBuffer control;
    private final StoreCounters counters;
    private final ErrorHandler errorHandler;
    private final ByteBuffer drain = ByteBuffer.allocateDirect(256);
    private final Consumer<SelectionKey> onReady = this::onReady;
    private boolean asleep;
    private boolean rung;

    /**
     * A blocking wait on a bound doorbell.
     *
     * @param doorbell     the listening doorbell socket, non-blocking.
     * @param control      the mapped control file (its Asleep word).
     * @param counters     the server's counters.
     * @param errorHandler where an unexpected selector error goes (the thread then sleeps the park period).
     * @throws IOException when the selector cannot be opened or the socket registered.
     */
    DoorbellIdleStrategy(
        final ServerSocketChannel doorbell,
        final AtomicBuffer control,
        final StoreCounters counters,
        final ErrorHandler errorHandler)
        throws IOException
    {
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
        if (!asleep)
        {
            // Up before the next duty cycle's poll: a request published before a client read the word low is
            // found by that poll; one published after is rung.
            control.putIntVolatile(ControlFileDescriptor.ASLEEP_OFFSET, 1);
            asleep = true;
            return;
        }
        counters.increment(CountersDescriptor.WIRE_SLEEPS);
        rung = false;
        try
        {
            selector.select(onReady, PARK_MS);
        }
        catch (final IOException | RuntimeException ex)
        {
            errorHandler.onError(ex);
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(PARK_MS));
        }
        if (rung)
        {
            counters.increment(CountersDescriptor.WIRE_DOORBELL_WAKEUPS);
        }
        reset();
    }

    @Override
    public void reset()
    {
        if (asleep)
        {
            control.putIntRelease(ControlFileDescriptor.ASLEEP_OFFSET, 0);
            asleep = false;
        }
    }

    @Override
    public String alias()
    {
        return "doorbell";
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
                }
            }
        }
        catch (final IOException ex)
        {
            key.cancel();
            CloseHelper.quietClose(key.channel());
        }
    }
}
