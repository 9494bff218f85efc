package io.kvstash.wire.file;

import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.WireVersion;

/**
 * Byte layout of the pool file ({@code <dir>/pool-<incarnation hex>}), little-endian: a header page, the
 * slot table ({@link io.kvstash.wire.file.SlotTableDescriptor}), then the data region of chunk slots. The
 * server creates it at start under a name carrying the incarnation, pre-touches every page, and never
 * truncates it; a new server creates a new file, so an old client's mapping stays valid (no SIGBUS).
 * <p>
 * The data region is mapped in segments of {@link #SEGMENT_BYTES} (Java maps at most 2 GiB at once); a slot
 * never straddles a segment end, so every chunk is contiguous in any client's mapping. A slot's offset is a
 * file offset: a client that maps the whole file (Python's mmap) uses it directly.
 * <pre>
 * Header (HEADER_LENGTH = 4096)
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                    Magic "KVSTPOOL" (i64)                     |  0
 *  |  Version 0x00MMmmpp (i32, last)   |  Header Length (i32)      |  8
 *  |                    Incarnation (i64)                          |  16
 *  |                    Pool Data Bytes (i64)                      |  24
 *  |                    Data Offset (i64)                          |  32
 *  |                    Slot Table Offset (i64)                    |  40
 *  |                    Slot Table Length (i64)                    |  48
 *  |                    Segment Bytes (i64)                        |  56
 *  |  Alignment (i32)                  |  reserved                 |  64
 *  +---------------------------------------------------------------+
 * Slot table at Slot Table Offset (8 bytes per alignment unit of the data region)
 * Data region at Data Offset (aligned to max(alignment, 4096)), Pool Data Bytes long
 * </pre>
 */
public final class PoolFileDescriptor
{
    /** File name prefix; the incarnation in hex follows. */
    public static final String FILE_PREFIX = "pool-";
    /** Magic. */
    public static final long MAGIC = 0x4C4F4F505453564BL;
    /** Version written last into the header: the contract's one {@link WireVersion}. */
    public static final int VERSION = WireVersion.CURRENT;
    /** Data mapping segment: 1 GiB. */
    public static final long SEGMENT_BYTES = SlotGeometry.SEGMENT_BYTES;

    /** Offset of the magic. */
    public static final int MAGIC_OFFSET = 0;
    /** Offset of the version. */
    public static final int VERSION_OFFSET = 8;
    /** Offset of the header length. */
    public static final int HEADER_LENGTH_OFFSET = 12;
    /** Offset of the incarnation. */
    public static final int INCARNATION_OFFSET = 16;
    /** Offset of the pool data bytes. */
    public static final int POOL_SIZE_OFFSET = 24;
    /** Offset of the data offset. */
    public static final int DATA_OFFSET_OFFSET = 32;
    /** Offset of the slot table offset. */
    public static final int SLOT_TABLE_OFFSET_OFFSET = 40;
    /** Offset of the slot table length. */
    public static final int SLOT_TABLE_LENGTH_OFFSET = 48;
    /** Offset of the segment bytes. */
    public static final int SEGMENT_BYTES_OFFSET = 56;
    /** Offset of the alignment. */
    public static final int ALIGNMENT_OFFSET = 64;
    /** Header length. */
    public static final int HEADER_LENGTH = 4096;

    private PoolFileDescriptor()
    {
    }

    /**
     * Pool file name of an incarnation.
     *
     * @param incarnation server incarnation.
     * @return file name.
     */
    public static String fileName(final long incarnation)
    {
        return FILE_PREFIX + Long.toHexString(incarnation);
    }

    /**
     * Data offset for a slot table length and alignment.
     *
     * @param slotTableLength bytes of the slot table.
     * @param alignment       slot alignment.
     * @return offset of the data region.
     */
    public static long dataOffset(final long slotTableLength, final int alignment)
    {
        final long unit = Math.max(alignment, 4096);
        return (HEADER_LENGTH + slotTableLength + unit - 1) / unit * unit;
    }
}
