package io.kvstash.core;

import io.kvstash.wire.Status;

/**
 * The slot-assign stage: turns the book's slot decisions (offsets relative to the data region, decided with the
 * slot ids, since a slot's place depends on the size class its region was given) into byte offsets in the pool
 * file and checks each lies inside the data region. Its only state is the pool geometry, fixed at construction,
 * so it may run on its own thread while the book decides the next request.
 * <p>
 * Owner: the slot-assign stage thread.
 */
public final class SlotAssigner
{
    private final long dataOffset;
    private final long poolEnd;

    /**
     * A slot assigner for a configuration.
     *
     * @param context concluded store configuration.
     */
    public SlotAssigner(final StoreContext context)
    {
        this.dataOffset = context.dataOffset();
        this.poolEnd = context.dataOffset() + context.poolSizeBytes();
    }

    /**
     * Writes the offsets of the command's slot list.
     *
     * @param command command decided by the book.
     */
    public void assign(final StoreCommand command)
    {
        final int n = command.slotCount;
        if (0 == n)
        {
            return;
        }
        final long slotBytes = command.slotBytes;
        if (slotBytes <= 0)
        {
            command.fail(Status.SERVER_ERROR, "slot outside the pool");
            return;
        }
        for (int i = 0; i < n; i++)
        {
            final long offset = dataOffset + command.slotOffset[i];
            if (offset + command.chunkBytes > poolEnd || command.chunkBytes > slotBytes)
            {
                command.fail(Status.SERVER_ERROR, "slot outside the pool");
                return;
            }
            command.slotOffset[i] = offset;
        }
    }
}
