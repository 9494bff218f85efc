package io.kvstash.core;

import io.kvstash.wire.Status;

/**
 * The slot check: the book decides each slot's offset in the pool's data region together with its slot id (a
 * slot's place depends on the size class its region was given), and that offset is what the response carries
 * (PROTOCOL 3.2: offsets are data-relative). This only checks that each slot of a decided command lies inside the
 * data region and holds the chunk, so a wrong decision is answered SERVER_ERROR instead of handing out bytes
 * outside the pool. Its only state is the pool geometry, fixed at construction.
 * <p>
 * Owner: the commit stage's thread ({@code Stages.Commit}, run inline after reserve in SHARED and DEDICATED).
 */
public final class SlotAssigner
{
    private final long poolSizeBytes;

    /**
     * A slot check for a configuration.
     *
     * @param context concluded store configuration.
     */
    public SlotAssigner(final StoreContext context)
    {
        this.poolSizeBytes = context.poolSizeBytes();
    }

    /**
     * Checks the offsets of the command's slot list; fails the command SERVER_ERROR when one lies outside the
     * data region or is smaller than the chunk.
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
        if (slotBytes <= 0 || command.chunkBytes > slotBytes)
        {
            command.fail(Status.SERVER_ERROR, "slot outside the pool");
            return;
        }
        for (int i = 0; i < n; i++)
        {
            final long offset = command.slotOffset[i];
            if (offset < 0 || offset + command.chunkBytes > poolSizeBytes)
            {
                command.fail(Status.SERVER_ERROR, "slot outside the pool");
                return;
            }
        }
    }
}
