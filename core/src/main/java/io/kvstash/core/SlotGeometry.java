package io.kvstash.core;

/**
 * Where slots lie in the pool's data region. The region is cut into mapping segments of
 * {@link StoreContext#SEGMENT_BYTES} (Java maps at most 2 GiB at once) and a slot never straddles a segment
 * end: segment {@code s} holds {@code SEGMENT_BYTES / slotBytes} slots from its start, the last (partial)
 * segment as many as fit. So every chunk is contiguous in any client's mapping. For a pool of one segment
 * this is simply {@code offset = slot * slotBytes}.
 * <pre>
 *   slotsPerSegment = SEGMENT_BYTES / slotBytes
 *   offset(slot)    = (slot / slotsPerSegment) * SEGMENT_BYTES + (slot % slotsPerSegment) * slotBytes
 *   slot(offset)    = (offset / SEGMENT_BYTES) * slotsPerSegment + (offset % SEGMENT_BYTES) / slotBytes
 * </pre>
 * Offsets are relative to the data region; the pool file adds its data offset.
 */
public final class SlotGeometry
{
    private SlotGeometry()
    {
    }

    /**
     * Slots of a size that fit a pool.
     *
     * @param poolBytes bytes of the data region.
     * @param slotBytes bytes of a slot, at most {@link StoreContext#SEGMENT_BYTES}.
     * @return slot count.
     */
    public static long capacity(final long poolBytes, final long slotBytes)
    {
        final long perSegment = StoreContext.SEGMENT_BYTES / slotBytes;
        final long fullSegments = poolBytes / StoreContext.SEGMENT_BYTES;
        final long remainder = poolBytes % StoreContext.SEGMENT_BYTES;
        return fullSegments * perSegment + remainder / slotBytes;
    }

    /**
     * Offset of a slot in the data region.
     *
     * @param slot      slot index.
     * @param slotBytes bytes of a slot.
     * @return byte offset.
     */
    public static long offset(final int slot, final long slotBytes)
    {
        final long perSegment = StoreContext.SEGMENT_BYTES / slotBytes;
        return (slot / perSegment) * StoreContext.SEGMENT_BYTES + (slot % perSegment) * slotBytes;
    }

    /**
     * Slot at an offset of the data region.
     *
     * @param offset    byte offset of a slot's start.
     * @param slotBytes bytes of a slot.
     * @return slot index.
     */
    public static int slot(final long offset, final long slotBytes)
    {
        final long perSegment = StoreContext.SEGMENT_BYTES / slotBytes;
        return (int)((offset / StoreContext.SEGMENT_BYTES) * perSegment +
            (offset % StoreContext.SEGMENT_BYTES) / slotBytes);
    }
}
