package io.kvstash.tier;

import io.lettuce.core.RedisURI;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class L2SeedsTest
{
    @Test
    void shouldParseOneOrSeveralSeedsWithOrWithoutTheScheme()
    {
        final List<RedisURI> seeds = L2Seeds.parse("redis://10.0.0.1:7000, 10.0.0.2:7001,redis://node-3:7002");
        assertEquals(3, seeds.size());
        assertEquals("10.0.0.1", seeds.get(0).getHost());
        assertEquals(7000, seeds.get(0).getPort());
        assertEquals("10.0.0.2", seeds.get(1).getHost());
        assertEquals(7001, seeds.get(1).getPort());
        assertEquals("node-3", seeds.get(2).getHost());
        assertEquals(7002, seeds.get(2).getPort());
    }

    @Test
    void shouldRefuseASeedWithoutAValidPortNamingIt()
    {
        for (final String bad : new String[] { "redis://host", "host:", ":7000", "host:port", "host:70000", "a:1,b" })
        {
            final IllegalArgumentException ex =
                assertThrows(IllegalArgumentException.class, () -> L2Seeds.parse(bad), bad);
            assertTrue(ex.getMessage().startsWith("l2 seed '"), ex.getMessage());
        }
    }
}
