package io.kvstash.tier;

import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Layout;
import org.agrona.ErrorHandler;
import org.agrona.collections.Long2ObjectHashMap;

/**
 * One layout the workers registered, and the tier's own instance with it: its chunk bytes once the tier
 * registered, its layout hash and the key prefixes of its salts. Owner: the tier's thread.
 */
final class L2Layout
{
    private static final long TIER_INSTANCE_BASE = 0x4C32_0000_0000_0000L;
    private static final int PREFIXES_MAX = 4_096;

    final Layout layout;
    final long tierInstance;
    final long layoutHash;
    private final Long2ObjectHashMap<byte[]> keyPrefixes = new Long2ObjectHashMap<>();
    private long chunkBytes;
    private int registered; // 0 not yet, 1 yes, -1 refused

    L2Layout(final Layout layout, final int index)
    {
        this.layout = layout;
        this.tierInstance = TIER_INSTANCE_BASE | ((ProcessHandle.current().pid() & 0xFFFF) << 32) | index;
        this.layoutHash = L2Keys.layoutHash(layout);
    }

    /**
     * Registers the tier's instance with this layout on first use.
     *
     * @param client       the tier's client.
     * @param errorHandler where a refusal is reported (once).
     * @return true when registered.
     */
    boolean ensureRegistered(final KvStashClient client, final ErrorHandler errorHandler)
    {
        if (0 == registered)
        {
            final ClientResponse r = client.register(tierInstance, layout);
            if (Status.OK == r.status())
            {
                chunkBytes = r.chunkBytes();
                registered = 1;
            }
            else
            {
                registered = -1;
                errorHandler.onError(new IllegalStateException("l2: the tier could not register layout " +
                    layout + ": " + Status.name(r.status())));
            }
        }
        return 1 == registered;
    }

    /**
     * Chunk bytes of the layout, once registered.
     *
     * @return bytes.
     */
    int chunkBytes()
    {
        return (int)chunkBytes;
    }

    /**
     * The cluster key of one chunk under a salt.
     *
     * @param salt cache salt.
     * @param hi   key high half.
     * @param lo   key low half.
     * @return ASCII key bytes (a new array: the command holds it until it completes).
     */
    byte[] key(final long salt, final long hi, final long lo)
    {
        byte[] prefix = keyPrefixes.get(salt);
        if (null == prefix)
        {
            if (keyPrefixes.size() >= PREFIXES_MAX)
            {
                keyPrefixes.clear();
            }
            prefix = L2Keys.keyPrefix(L2Keys.namespace(layout, salt));
            keyPrefixes.put(salt, prefix);
        }
        return L2Keys.key(prefix, hi, lo);
    }
}
