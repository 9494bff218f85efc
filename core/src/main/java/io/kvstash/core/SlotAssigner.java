package io.kvstash.core;

import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.Status;

/**
 * The slot-assign stage: turns the book's slot decisions (slot ids) into byte offsets in the pool file and
 * checks each lies inside the data region. Its only state is the pool geometry, fixed at construction, so
 * it may run on its own thread while the book decides the next request.
 * <p>
 * Owner: the slot-assign stage thread.
 */
public final class SlotAssigner
{
    private final long dataOffset;
    private final long poolEnd;
    private long cachedSlotBytes = -1;
    private int slotsPerSegment;
    private int slotsPerSegmentShift;

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
        if (command.done && 0 == n)
        {
            return;
        }
        final long slotBytes = command.slotBytes;
        if (slotBytes != cachedSlotBytes && slotBytes > 0)
        {
            // Slots per segment change only when the pool is re-cut: divide once here, not per slot.
            cachedSlotBytes = slotBytes;
            slotsPerSegment = (int)(SlotGeometry.SEGMENT_BYTES / slotBytes);
            slotsPerSegmentShift = Integer.bitCount(slotsPerSegment) == 1 ?
                Integer.numberOfTrailingZeros(slotsPerSegment) : -1;
        }
        for (int i = 0; i < n; i++)
        {
            final int slot = command.slotChunkId[i];
            final int segment = slotsPerSegmentShift >= 0 ? slot >>> slotsPerSegmentShift : slot / slotsPerSegment;
            final int within = slot - segment * slotsPerSegment;
            final long offset = dataOffset + segment * SlotGeometry.SEGMENT_BYTES + within * slotBytes;
            if (offset + command.chunkBytes > poolEnd || command.chunkBytes > slotBytes)
            {
                command.fail(Status.SERVER_ERROR, "slot outside the pool");
                return;
            }
            command.slotOffset[i] = offset;
        }
    }
}
