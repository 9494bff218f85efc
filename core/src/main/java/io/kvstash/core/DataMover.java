package io.kvstash.core;

import io.kvstash.wire.PoolRegion;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The commit stage: the data effects of decided requests. For the copy transport it moves bytes between a
 * message and a slot (WRITE_DATA into a reserved slot, READ_DATA out of a pinned one), for clients that
 * cannot map the pool. Shared-memory clients move their bytes themselves; for them this stage only passes
 * the command on. It owns the DATA counters.
 * <p>
 * Owner: the commit stage thread.
 */
public final class DataMover
{
    private final PoolRegion pool;
    private final UnsafeBuffer window = new UnsafeBuffer(0, 0);
    private final StoreCounters counters;

    /**
     * A data mover over the pool's data region.
     *
     * @param context  concluded store configuration.
     * @param pool     the data region (offset 0 is the first slot), {@link StoreContext#poolSizeBytes()} long.
     * @param counters counters; the DATA region is written by this stage's thread.
     */
    public DataMover(final StoreContext context, final PoolRegion pool, final StoreCounters counters)
    {
        if (pool.length() < context.poolSizeBytes())
        {
            throw new IllegalArgumentException("pool buffer smaller than the pool size");
        }
        this.pool = pool;
        this.counters = counters;
    }

    /**
     * Applies the command's data effects.
     *
     * @param command command with its slot offsets assigned.
     */
    public void commit(final StoreCommand command)
    {
        if (command.done || Status.OK != command.status)
        {
            return;
        }
        if (RequestType.WRITE_DATA == command.type)
        {
            final long at = command.slotOffset[0] + command.dataOffset;
            pool.wrap(window, at, command.dataLength).putBytes(0, command.data, 0, command.dataLength);
            counters.add(CountersDescriptor.COPY_BYTES_IN, command.dataLength);
        }
        else if (RequestType.READ_DATA == command.type)
        {
            final long at = command.slotOffset[0] + command.dataOffset;
            pool.wrap(window, at, command.dataLength).getBytes(0, command.data, 0, command.dataLength);
            counters.add(CountersDescriptor.COPY_BYTES_OUT, command.dataLength);
        }
        command.done = true;
    }
}
