package io.kvstash.wire;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SlotGeometryTest
{
    private static final long[] SLOT_SIZES = { 4096, 65_536, 3 * 4096, 2_101_248, 56L << 20, SlotGeometry.SEGMENT_BYTES };

    @Test
    void shouldAgreeBetweenCachedCutAndStaticFormulas()
    {
        final SlotGeometry geometry = new SlotGeometry();
        for (final long slotBytes : SLOT_SIZES)
        {
            geometry.slotBytes(slotBytes);
            final long perSegment = SlotGeometry.SEGMENT_BYTES / slotBytes;
            for (int slot = 0; slot < 3 * perSegment + 5 && slot < 200_000; slot += 1 + slot / 7)
            {
                final long offset = geometry.offsetOf(slot);
                assertEquals(SlotGeometry.offset(slot, slotBytes), offset, "slot " + slot + " of " + slotBytes);
                assertEquals(slot, SlotGeometry.slot(offset, slotBytes), "offset " + offset + " of " + slotBytes);
            }
        }
    }

    @Test
    void shouldNeverLetASlotStraddleASegmentEnd()
    {
        final SlotGeometry geometry = new SlotGeometry();
        for (final long slotBytes : SLOT_SIZES)
        {
            geometry.slotBytes(slotBytes);
            final long poolBytes = 3 * SlotGeometry.SEGMENT_BYTES + SlotGeometry.SEGMENT_BYTES / 2;
            final long capacity = SlotGeometry.capacity(poolBytes, slotBytes);
            for (long slot = Math.max(0, capacity - 50); slot < capacity; slot++)
            {
                final long start = geometry.offsetOf((int)slot);
                final long end = start + slotBytes;
                assertTrue(end <= poolBytes, "slot " + slot + " of " + slotBytes + " ends past the pool");
                assertEquals(start / SlotGeometry.SEGMENT_BYTES, (end - 1) / SlotGeometry.SEGMENT_BYTES,
                    "slot " + slot + " of " + slotBytes + " straddles a segment end");
            }
        }
    }

    @Test
    void shouldRefuseSlotSizesThatCannotBeCut()
    {
        final SlotGeometry geometry = new SlotGeometry();
        assertThrows(IllegalArgumentException.class, () -> geometry.slotBytes(0));
        assertThrows(IllegalArgumentException.class, () -> geometry.slotBytes(SlotGeometry.SEGMENT_BYTES + 1));
    }
}
