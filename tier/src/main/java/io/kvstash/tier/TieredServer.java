package io.kvstash.tier;

import io.kvstash.server.KvStashServer;
import io.kvstash.server.ServerContext;
import org.agrona.CloseHelper;

import java.io.IOException;

/**
 * A server and, beside it, its second tier, launched and closed together the way Aeron's
 * {@code ArchivingMediaDriver} holds a media driver and its archive: the tier's context is attached to the server's
 * before the launch, the tier starts once the server runs, and the tier is closed first, so that its client session
 * ends while the server still answers.
 */
public final class TieredServer implements AutoCloseable
{
    private final KvStashServer server;
    private final L2Tier tier;

    private TieredServer(final KvStashServer server, final L2Tier tier)
    {
        this.server = server;
        this.tier = tier;
    }

    /**
     * Launches a server and its tier.
     *
     * @param serverContext the server's configuration.
     * @param tierContext   the tier's configuration, or null for a server without a second tier.
     * @return the running pair.
     * @throws IOException when the server's files cannot be created.
     */
    public static TieredServer launch(final ServerContext serverContext, final TierContext tierContext)
        throws IOException
    {
        if (null != tierContext)
        {
            tierContext.attach(serverContext);
        }
        final KvStashServer server = KvStashServer.launch(serverContext);
        try
        {
            return new TieredServer(server, null == tierContext ? null : L2Tier.launch(server, tierContext));
        }
        catch (final RuntimeException ex)
        {
            server.close();
            throw ex;
        }
    }

    /**
     * @return the server.
     */
    public KvStashServer server()
    {
        return server;
    }

    /**
     * @return the second tier, or null for a server without one.
     */
    public L2Tier tier()
    {
        return tier;
    }

    /**
     * Closes the tier, then the server.
     */
    @Override
    public void close()
    {
        CloseHelper.closeAll(tier, server);
    }
}
