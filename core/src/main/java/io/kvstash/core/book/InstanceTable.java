package io.kvstash.core.book;

import io.kvstash.wire.layout.Layout;
import org.agrona.collections.Long2LongHashMap;

import java.util.HashMap;
import java.util.Map;

/**
 * Registered instances and the layout registry. An instance id maps to a dense index; per index the table
 * keeps the layout, its chunk bytes and the namespace of its (model, world size, rank) with no salt. The
 * registry remembers the layout of every (model, world size, rank) ever registered, because chunks outlive
 * their instance: a later instance of the same identity with another layout would read bytes of the wrong
 * shape, so it gets LAYOUT_MISMATCH. The registry holds at most {@link #MAX_IDENTITIES} identities: a client
 * that registers and unregisters ever new ones must not grow the server's heap without end.
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}).
 */
final class InstanceTable
{
    /**
     * Most (model, world size, rank) identities the registry remembers; a REGISTER of a new identity beyond
     * them is refused (BUSY). About 400 bytes each, so 26 MiB at most.
     */
    static final int MAX_IDENTITIES = 65_536;

    private final Long2LongHashMap idToIndex = new Long2LongHashMap(-1);
    private final long[] instanceId;
    private final Layout[] layout;
    private final byte[][] model;
    private final long[] chunkBytes;
    private final int[] slotClass;
    private final long[] namespace;
    private final long[] ownerSession;
    private final long[] lastSalt;
    private final long[] lastSaltNamespace;
    private final int[] freeStack;
    private int freeTop;
    private final Map<Identity, Layout> registry = new HashMap<>();

    InstanceTable(final int maxInstances)
    {
        instanceId = new long[maxInstances];
        layout = new Layout[maxInstances];
        model = new byte[maxInstances][];
        chunkBytes = new long[maxInstances];
        slotClass = new int[maxInstances];
        namespace = new long[maxInstances];
        ownerSession = new long[maxInstances];
        lastSalt = new long[maxInstances];
        lastSaltNamespace = new long[maxInstances];
        freeStack = new int[maxInstances];
        for (int i = maxInstances - 1; i >= 0; i--)
        {
            freeStack[freeTop++] = i;
        }
    }

    int indexOf(final long id)
    {
        return (int)idToIndex.get(id);
    }

    int size()
    {
        return idToIndex.size();
    }

    boolean isFull()
    {
        return 0 == freeTop;
    }

    int add(
        final long id,
        final Layout instanceLayout,
        final long instanceChunkBytes,
        final int instanceSlotClass,
        final long instanceNamespace)
    {
        final int index = freeStack[--freeTop];
        slotClass[index] = instanceSlotClass;
        instanceId[index] = id;
        layout[index] = instanceLayout;
        model[index] = instanceLayout.modelBytes();
        chunkBytes[index] = instanceChunkBytes;
        namespace[index] = instanceNamespace;
        idToIndex.put(id, index);
        registry.putIfAbsent(new Identity(instanceLayout), instanceLayout);
        return index;
    }

    /**
     * The last non-zero salt an instance used (0 for none), so a worker's run of requests under one cache
     * salt hashes its namespace once.
     */
    long lastSalt(final int index)
    {
        return lastSalt[index];
    }

    long lastSaltNamespace(final int index)
    {
        return lastSaltNamespace[index];
    }

    void lastSalt(final int index, final long salt, final long namespace)
    {
        lastSalt[index] = salt;
        lastSaltNamespace[index] = namespace;
    }

    void owner(final int index, final long session)
    {
        ownerSession[index] = session;
    }

    /**
     * Next registered instance owned by a session, scanning from an index.
     *
     * @return index or -1.
     */
    int nextOwned(final long session, final int from)
    {
        for (int i = from; i < layout.length; i++)
        {
            if (null != layout[i] && ownerSession[i] == session)
            {
                return i;
            }
        }
        return -1;
    }

    void remove(final int index)
    {
        ownerSession[index] = 0;
        lastSalt[index] = 0;
        idToIndex.remove(instanceId[index]);
        layout[index] = null;
        model[index] = null;
        freeStack[freeTop++] = index;
    }

    Layout layout(final int index)
    {
        return layout[index];
    }

    /**
     * Model name bytes of an instance's layout; the table's own copy, never to be changed by the caller.
     */
    byte[] model(final int index)
    {
        return model[index];
    }

    /**
     * The size class an instance's chunks take slots of.
     */
    int slotClass(final int index)
    {
        return slotClass[index];
    }

    long chunkBytes(final int index)
    {
        return chunkBytes[index];
    }

    long namespace(final int index)
    {
        return namespace[index];
    }

    long instanceId(final int index)
    {
        return instanceId[index];
    }

    /**
     * Whether the registry has no room for one more identity.
     */
    boolean isRegistryFull()
    {
        return registry.size() >= MAX_IDENTITIES;
    }

    /**
     * The layout registered before for the same (model, world size, rank), or null.
     */
    Layout registered(final Layout candidate)
    {
        return registry.get(new Identity(candidate));
    }

    private static final class Identity
    {
        private final Layout layout;

        Identity(final Layout layout)
        {
            this.layout = layout;
        }

        @Override
        public boolean equals(final Object o)
        {
            return o instanceof Identity && layout.sameIdentity(((Identity)o).layout);
        }

        @Override
        public int hashCode()
        {
            return 31 * (31 * layout.model().hashCode() + layout.worldSize()) + layout.rank();
        }
    }
}
