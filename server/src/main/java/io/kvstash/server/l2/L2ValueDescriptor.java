package io.kvstash.server.l2;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.CRC32C;

/**
 * The value of one chunk in the cluster: a 64-byte header, then the chunk's bytes. All integers little-endian.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                     Magic i32 = "KVS2"                        |  0
 *  +---------------------------------------------------------------+
 *  |                     Version i32 = 1                           |  4
 *  +---------------------------------------------------------------+
 *  |                     Layout Hash i64                           |  8
 *  +---------------------------------------------------------------+
 *  |                     Salt i64                                  | 16
 *  +---------------------------------------------------------------+
 *  |                     Key Hi i64                                | 24
 *  +---------------------------------------------------------------+
 *  |                     Key Lo i64                                | 32
 *  +---------------------------------------------------------------+
 *  |                     Payload Length i64                        | 40
 *  +---------------------------------------------------------------+
 *  |                     Payload CRC32C i32                        | 48
 *  +---------------------------------------------------------------+
 *  |                     Header CRC32C i32 (bytes 0..51)           | 52
 *  +---------------------------------------------------------------+
 *  |                     Reserved i64 = 0                          | 56
 *  +---------------------------------------------------------------+
 *  |                     Payload (the chunk's bytes)              ...  64
 *  +---------------------------------------------------------------+
 * </pre>
 * A value is served only when every field matches what the reader expects (layout hash, salt, key, length =
 * the layout's chunk bytes, value length = header + payload) and both checksums hold; anything else is a miss.
 */
public final class L2ValueDescriptor
{
    /** Magic: "KVS2" read as a little-endian i32. */
    public static final int MAGIC = 0x3253564B;
    /** Format version. */
    public static final int VERSION = 1;
    /** Offset of the magic. */
    public static final int MAGIC_OFFSET = 0;
    /** Offset of the version. */
    public static final int VERSION_OFFSET = 4;
    /** Offset of the layout hash. */
    public static final int LAYOUT_HASH_OFFSET = 8;
    /** Offset of the salt. */
    public static final int SALT_OFFSET = 16;
    /** Offset of the key's high half. */
    public static final int KEY_HI_OFFSET = 24;
    /** Offset of the key's low half. */
    public static final int KEY_LO_OFFSET = 32;
    /** Offset of the payload length. */
    public static final int PAYLOAD_LENGTH_OFFSET = 40;
    /** Offset of the payload checksum. */
    public static final int PAYLOAD_CRC_OFFSET = 48;
    /** Offset of the header checksum (over the 52 bytes before it). */
    public static final int HEADER_CRC_OFFSET = 52;
    /** Header length; the payload starts here. */
    public static final int HEADER_LENGTH = 64;

    /** Check outcome: the value is good. */
    public static final int VALID = 0;
    /** Check outcome: shorter than a header, or its length disagrees with the header's. */
    public static final int TRUNCATED = 1;
    /** Check outcome: wrong magic, version or header checksum. */
    public static final int BAD_HEADER = 2;
    /** Check outcome: another layout, salt or key. */
    public static final int OTHER_CHUNK = 3;
    /** Check outcome: the payload's checksum does not hold. */
    public static final int BAD_CHECKSUM = 4;

    private L2ValueDescriptor()
    {
    }

    /**
     * Writes the header in front of a payload already at {@link #HEADER_LENGTH}.
     *
     * @param value         buffer whose position 0 is the value's start; its payload is in place.
     * @param crc           a checksum to reuse (reset here).
     * @param layoutHash    {@link L2Keys#layoutHash}.
     * @param salt          cache salt.
     * @param hi            key high half.
     * @param lo            key low half.
     * @param payloadLength payload bytes.
     */
    public static void writeHeader(
        final ByteBuffer value,
        final CRC32C crc,
        final long layoutHash,
        final long salt,
        final long hi,
        final long lo,
        final int payloadLength)
    {
        final ByteBuffer v = value.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        v.putInt(MAGIC_OFFSET, MAGIC);
        v.putInt(VERSION_OFFSET, VERSION);
        v.putLong(LAYOUT_HASH_OFFSET, layoutHash);
        v.putLong(SALT_OFFSET, salt);
        v.putLong(KEY_HI_OFFSET, hi);
        v.putLong(KEY_LO_OFFSET, lo);
        v.putLong(PAYLOAD_LENGTH_OFFSET, payloadLength);
        v.putInt(PAYLOAD_CRC_OFFSET, checksum(crc, v, HEADER_LENGTH, payloadLength));
        v.putInt(HEADER_CRC_OFFSET, checksum(crc, v, 0, HEADER_CRC_OFFSET));
        v.putLong(HEADER_CRC_OFFSET + 4, 0);
    }

    /**
     * Checks a value read from the cluster.
     *
     * @param value      the value, from its position to its limit.
     * @param crc        a checksum to reuse.
     * @param layoutHash expected layout hash.
     * @param salt       expected salt.
     * @param hi         expected key high half.
     * @param lo         expected key low half.
     * @param chunkBytes expected payload length.
     * @return {@link #VALID} or the reason it is not.
     */
    public static int check(
        final ByteBuffer value,
        final CRC32C crc,
        final long layoutHash,
        final long salt,
        final long hi,
        final long lo,
        final long chunkBytes)
    {
        final ByteBuffer v = value.slice().order(ByteOrder.LITTLE_ENDIAN);
        if (v.remaining() < HEADER_LENGTH)
        {
            return TRUNCATED;
        }
        if (MAGIC != v.getInt(MAGIC_OFFSET) || VERSION != v.getInt(VERSION_OFFSET) ||
            v.getInt(HEADER_CRC_OFFSET) != checksum(crc, v, 0, HEADER_CRC_OFFSET))
        {
            return BAD_HEADER;
        }
        final long length = v.getLong(PAYLOAD_LENGTH_OFFSET);
        if (length != v.remaining() - HEADER_LENGTH)
        {
            return TRUNCATED;
        }
        if (layoutHash != v.getLong(LAYOUT_HASH_OFFSET) || salt != v.getLong(SALT_OFFSET) ||
            hi != v.getLong(KEY_HI_OFFSET) || lo != v.getLong(KEY_LO_OFFSET) || length != chunkBytes)
        {
            return OTHER_CHUNK;
        }
        return v.getInt(PAYLOAD_CRC_OFFSET) == checksum(crc, v, HEADER_LENGTH, (int)length) ? VALID : BAD_CHECKSUM;
    }

    private static int checksum(final CRC32C crc, final ByteBuffer v, final int offset, final int length)
    {
        crc.reset();
        crc.update(v.duplicate().limit(offset + length).position(offset));
        return (int)crc.getValue();
    }
}
