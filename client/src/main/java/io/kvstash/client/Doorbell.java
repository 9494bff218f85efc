package io.kvstash.client;

import io.kvstash.wire.file.ControlFileDescriptor;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.invoke.VarHandle;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;

/**
 * This client's connection to the doorbell of a server in its blocking wait
 * ({@link ControlFileDescriptor#FEATURE_DOORBELL}): after a request is published, {@link #ring()} wakes the server
 * when its Asleep word says it sleeps, so that the request is not left waiting out the server's park period. Any
 * failure (no socket, a full connection, a server gone) only stops the ringing: the server still finds every
 * request within its park period.
 * <p>
 * Single-threaded: owned by one client, used on the client's thread.
 */
final class Doorbell
{
    private final UnsafeBuffer control;
    private final ByteBuffer ding = ByteBuffer.allocateDirect(1);
    private SocketChannel channel;

    private Doorbell(final UnsafeBuffer control, final SocketChannel channel)
    {
        this.control = control;
        this.channel = channel;
    }

    /**
     * Connects to a server's doorbell when its control file offers one.
     *
     * @param directory the server's directory.
     * @param control   the mapped control file, its version written.
     * @return the doorbell, or null when the server offers none or the connection fails.
     */
    static Doorbell connect(final Path directory, final UnsafeBuffer control)
    {
        final int features = control.getInt(ControlFileDescriptor.CONFIG_OFFSET + ControlFileDescriptor.FEATURES_OFFSET);
        if (0 == (features & ControlFileDescriptor.FEATURE_DOORBELL))
        {
            return null;
        }
        SocketChannel channel = null;
        try
        {
            channel = SocketChannel.open(StandardProtocolFamily.UNIX);
            channel.configureBlocking(false);
            // A Unix socket connects at once or not at all (a full backlog): never wait for the server here.
            if (channel.connect(UnixDomainSocketAddress.of(directory.resolve(ControlFileDescriptor.DOORBELL_FILE_NAME))))
            {
                return new Doorbell(control, channel);
            }
        }
        catch (final IOException | RuntimeException ignore)
        {
            // No doorbell: the server still answers, each request within its park period.
        }
        close(channel);
        return null;
    }

    /**
     * Wakes the server if it sleeps; call after each request is published.
     */
    void ring()
    {
        if (null == channel)
        {
            return;
        }
        // The request's release store, then the Asleep load: a full fence between, or both sides may miss.
        VarHandle.fullFence();
        if (0 != control.getIntVolatile(ControlFileDescriptor.ASLEEP_OFFSET))
        {
            try
            {
                ding.clear();
                channel.write(ding);
            }
            catch (final IOException ex)
            {
                close();
            }
        }
    }

    /**
     * Closes the connection; later rings do nothing. Idempotent.
     */
    void close()
    {
        close(channel);
        channel = null;
    }

    private static void close(final SocketChannel channel)
    {
        if (null != channel)
        {
            try
            {
                channel.close();
            }
            catch (final IOException ignore)
            {
                // Nothing left to release.
            }
        }
    }
}
