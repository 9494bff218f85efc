package io.kvstash.wire;

/**
 * Where slots lie in the pool's data region. The region is cut into mapping segments of
 * {@link #SEGMENT_BYTES} (Java maps at most 2 GiB at once) and a slot never straddles a segment
 * end: segment {@code s} holds {@code SEGMENT_BYTES / slotBytes} slots from its start, the last (partial)
 * segment as many as fit. So every chunk is contiguous in any client's mapping. For a pool of one segment
 * this is simply {@code offset = slot * slotBytes}.
 * <pre>
 *   slotsPerSegment = SEGMENT_BYTES / slotBytes
 *   offset(slot)    = (slot / slotsPerSegment) * SEGMENT_BYTES + (slot % slotsPerSegment) * slotBytes
 *   slot(offset)    = (offset / SEGMENT_BYTES) * slotsPerSegment + (offset % SEGMENT_BYTES) / slotBytes
 * </pre>
 * Offsets are relative to the data region; the pool file adds its data offset.
 * <p>
 * The static methods answer for any slot size; an instance caches one slot size's cut (a shift when the
 * slots per segment are a power of two) for the server's per-slot loop. Instances are not thread-safe.
 */
public final class SlotGeometry
{
    /**
     * Bytes of one mapping segment of the data region: no slot straddles a segment end, so a chunk is
     * contiguous in a mapping of at most 2 GiB. Also the largest slot.
     */
    public static final long SEGMENT_BYTES = 1L << 30;

    private long slotBytes = -1;
    private int slotsPerSegment;
    private int slotsPerSegmentShift;

    /**
     * Sets the slot size the instance methods answer for; a no-op when it is already set.
     *
     * @param slotBytes bytes of a slot, positive and at most {@link #SEGMENT_BYTES}.
     * @return this.
     */
    public SlotGeometry slotBytes(final long slotBytes)
    {
        if (slotBytes != this.slotBytes)
        {
            if (slotBytes <= 0 || slotBytes > SEGMENT_BYTES)
            {
                throw new IllegalArgumentException("slot bytes " + slotBytes + " not in [1, " + SEGMENT_BYTES + "]");
            }
            this.slotBytes = slotBytes;
            slotsPerSegment = (int)(SEGMENT_BYTES / slotBytes);
            slotsPerSegmentShift = Integer.bitCount(slotsPerSegment) == 1 ?
                Integer.numberOfTrailingZeros(slotsPerSegment) : -1;
        }
        return this;
    }

    /**
     * Offset of a slot in the data region, for the slot size set last.
     *
     * @param slot slot index.
     * @return byte offset.
     */
    public long offsetOf(final int slot)
    {
        final int segment = slotsPerSegmentShift >= 0 ? slot >>> slotsPerSegmentShift : slot / slotsPerSegment;
        final int within = slot - segment * slotsPerSegment;
        return segment * SEGMENT_BYTES + within * slotBytes;
    }

    /**
     * Slots of a size that fit a pool.
     *
     * @param poolBytes bytes of the data region.
     * @param slotBytes bytes of a slot, at most {@link #SEGMENT_BYTES}.
     * @return slot count.
     */
    public static long capacity(final long poolBytes, final long slotBytes)
    {
        final long perSegment = SEGMENT_BYTES / slotBytes;
        final long fullSegments = poolBytes / SEGMENT_BYTES;
        final long remainder = poolBytes % SEGMENT_BYTES;
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
        final long perSegment = SEGMENT_BYTES / slotBytes;
        return (slot / perSegment) * SEGMENT_BYTES + (slot % perSegment) * slotBytes;
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
        final long perSegment = SEGMENT_BYTES / slotBytes;
        return (int)((offset / SEGMENT_BYTES) * perSegment +
            (offset % SEGMENT_BYTES) / slotBytes);
    }
}
