package io.kvstash.pipeline.journal;

/**
 * Byte layout of a journal (capture) file: a header, then records, all little-endian, records 8-byte
 * aligned. The file grows in segments; a record never straddles a segment end (the writer fills the rest
 * of a segment with one padding record). A reader stops at the first record whose length word is 0, runs
 * past the end of the file, or fails its checksum: a truncated tail is tolerated.
 * <pre>
 * Header (HEADER_LENGTH bytes)
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                    Magic "KVSJRNL\0" (64)                     |  0
 *  +---------------------------------------------------------------+
 *  |  Version (major.minor.patch, 0x00MMmmpp)   |  Header Length   |  8
 *  +---------------------------------------------------------------+
 *  |              Configuration Digest (SHA-256, 32 bytes)         |  16
 *  +---------------------------------------------------------------+
 *  |                         Incarnation (64)                      |  48
 *  |                    Start Time, epoch ms (64)                  |  56
 *  |    Max Chunks Per Request     |       Max Inline Bytes        |  64
 *  |                   Segment Length, bytes (64)                  |  72
 *  |                   ... reserved up to 128 ...                  |
 *  |                   Pool Size, bytes (64)                       |  128
 *  |                   Lease, ns (64)                              |  136
 *  |                   Slot Bytes, 0 = from layouts (64)           |  144
 *  |                   Data Offset (64)                            |  152
 *  |    Alignment                  |       Chunk Tokens            |  160
 *  |    Max Transfers              |       Max Instances           |  168
 *  |    Sweep Limit                |  Eviction (policy code, 0 lru) |  176
 *  +---------------------------------------------------------------+
 * Record
 *  +---------------------------------------------------------------+
 *  |      Length (incl. header, written last with release)        |  0
 *  |      CRC-32C of bytes [8, length)                             |  4
 *  +---------------------------------------------------------------+
 *  |  Kind (1 = request, 2 = counters, -1 = padding) | reserved    |  8
 *  |  Request (RecordCodec) ... Outcome (RecordCodec) ...          |  16
 *  +---------------------------------------------------------------+
 * </pre>
 * The version is written last in the header; readers accept only their major version. The header carries
 * the capturing store's whole configuration, so a journal replays without being told how it was captured.
 */
public final class JournalDescriptor
{
    /** File magic. */
    public static final long MAGIC = 0x004C4E524A53564BL;
    /** Major version. 3: outcomes record slot offsets relative to the pool's data region (wire 3). */
    public static final int VERSION_MAJOR = 3;
    /** Minor version. */
    public static final int VERSION_MINOR = 0;
    /** Patch version. */
    public static final int VERSION_PATCH = 0;
    /** Packed version. */
    public static final int VERSION = (VERSION_MAJOR << 16) | (VERSION_MINOR << 8) | VERSION_PATCH;

    /** Offset of the magic. */
    public static final int MAGIC_OFFSET = 0;
    /** Offset of the version. */
    public static final int VERSION_OFFSET = 8;
    /** Offset of the header length. */
    public static final int HEADER_LENGTH_OFFSET = 12;
    /** Offset of the configuration digest. */
    public static final int CONFIG_DIGEST_OFFSET = 16;
    /** Length of the configuration digest. */
    public static final int CONFIG_DIGEST_LENGTH = 32;
    /** Offset of the incarnation. */
    public static final int INCARNATION_OFFSET = 48;
    /** Offset of the start time. */
    public static final int START_TIME_OFFSET = 56;
    /** Offset of max chunks per request. */
    public static final int MAX_CHUNKS_OFFSET = 64;
    /** Offset of max inline bytes. */
    public static final int MAX_INLINE_OFFSET = 68;
    /** Offset of the segment length. */
    public static final int SEGMENT_LENGTH_OFFSET = 72;
    /** Offset of the pool size. */
    public static final int POOL_SIZE_OFFSET = 128;
    /** Offset of the lease. */
    public static final int LEASE_NS_OFFSET = 136;
    /** Offset of the fixed slot size. */
    public static final int SLOT_BYTES_OFFSET = 144;
    /** Offset of the data offset. */
    public static final int DATA_OFFSET_OFFSET = 152;
    /** Offset of the alignment. */
    public static final int ALIGNMENT_OFFSET = 160;
    /** Offset of the chunk tokens. */
    public static final int CHUNK_TOKENS_OFFSET = 164;
    /** Offset of max transfers. */
    public static final int MAX_TRANSFERS_OFFSET = 168;
    /** Offset of max instances. */
    public static final int MAX_INSTANCES_OFFSET = 172;
    /** Offset of the sweep limit. */
    public static final int SWEEP_LIMIT_OFFSET = 176;
    /** Offset of the eviction policy's code (0, exact LRU, in journals written before policies existed). */
    public static final int EVICTION_OFFSET = 180;
    /** Header length: four cache lines. */
    public static final int HEADER_LENGTH = 256;

    /** Offset of a record's length word. */
    public static final int RECORD_LENGTH_OFFSET = 0;
    /** Offset of a record's checksum. */
    public static final int RECORD_CRC_OFFSET = 4;
    /** Offset of a record's kind. */
    public static final int RECORD_KIND_OFFSET = 8;
    /** Length of a record header; the body follows. */
    public static final int RECORD_HEADER_LENGTH = 16;
    /** Record kind: a request and its outcome. */
    public static final int KIND_REQUEST = 1;
    /** Record kind: the deterministic counters at a clean shutdown (ids, then values, i64 each). */
    public static final int KIND_COUNTERS = 2;
    /** Record kind: padding to the segment end. */
    public static final int KIND_PADDING = -1;
    /** Record alignment. */
    public static final int RECORD_ALIGNMENT = 8;

    private JournalDescriptor()
    {
    }

    /**
     * Major part of a packed version.
     *
     * @param version packed version.
     * @return major.
     */
    public static int major(final int version)
    {
        return (version >>> 16) & 0xFF;
    }

    /**
     * Rounds a length up to the record alignment.
     *
     * @param length bytes.
     * @return aligned length.
     */
    public static int align(final int length)
    {
        return (length + RECORD_ALIGNMENT - 1) & ~(RECORD_ALIGNMENT - 1);
    }
}
