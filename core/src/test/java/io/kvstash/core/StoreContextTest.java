package io.kvstash.core;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;

class StoreContextTest
{
    @Test
    void shouldRejectConfigurationWhenAValueIsOutOfRange()
    {
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().alignment(3000).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().alignment(0).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().poolSizeBytes(100).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().chunkTokens(0).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().leaseNs(0).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().slotBytes(-1).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().maxChunksPerRequest(0).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().maxTransfers(0).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().sweepLimit(0).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().dataOffset(100).conclude());
        assertThrows(IllegalArgumentException.class, () -> new StoreContext().maxInlineBytes(0).conclude());
        assertDoesNotThrow(() -> new StoreContext().conclude());
    }

    @Test
    void shouldRejectFixedSlotSizeWhenItsAlignedSizeExceedsThePool()
    {
        final StoreContext context = new StoreContext().poolSizeBytes(96).alignment(64);
        assertThrows(IllegalArgumentException.class, () -> context.slotBytes(97).conclude());
        assertThrows(IllegalArgumentException.class, () -> context.slotBytes(65).conclude(), "rounds up to 128");
        assertThrows(IllegalArgumentException.class, () -> context.slotBytes(Long.MAX_VALUE).conclude());
        assertDoesNotThrow(() -> context.slotBytes(64).conclude());
    }
}
