package io.kvstash.tier;

import io.lettuce.core.RedisURI;

import java.util.ArrayList;
import java.util.List;

/**
 * The cluster seeds of {@code serve --l2}: {@code redis://host:port[,host:port...]}, checked when the tier's
 * context is concluded so a mistaken seed is a one-line usage error, not a tier that never connects.
 */
public final class L2Seeds
{
    private L2Seeds()
    {
    }

    /**
     * Parses the cluster seeds.
     *
     * @param seeds {@code redis://host:port[,host:port...]} (each may also carry its own {@code redis://}).
     * @return one URI per seed.
     * @throws IllegalArgumentException when a seed is not {@code host:port}.
     */
    public static List<RedisURI> parse(final String seeds)
    {
        final String body = seeds.startsWith("redis://") ? seeds.substring("redis://".length()) : seeds;
        final List<RedisURI> uris = new ArrayList<>();
        for (final String part : body.split(","))
        {
            final String seed = part.trim().startsWith("redis://") ? part.trim().substring(8) : part.trim();
            final int colon = seed.lastIndexOf(':');
            if (colon <= 0 || colon == seed.length() - 1)
            {
                throw new IllegalArgumentException("l2 seed '" + part + "' is not host:port (give " +
                    "redis://host:port[,host:port...])");
            }
            final int port;
            try
            {
                port = Integer.parseInt(seed.substring(colon + 1));
            }
            catch (final NumberFormatException ex)
            {
                throw new IllegalArgumentException("l2 seed '" + part + "' has no port number", ex);
            }
            if (port <= 0 || port > 65535)
            {
                throw new IllegalArgumentException("l2 seed '" + part + "' has a port out of range");
            }
            uris.add(RedisURI.create(seed.substring(0, colon), port));
        }
        return uris;
    }
}
