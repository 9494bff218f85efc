package io.kvstash.tier;

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
    /** Check outcome: shorter than a header, or its length is not the header's plus the payload length. */
    public static final int TRUNCATED = 1;
    /** Check outcome: the magic is not "KVS2". */
    public static final int BAD_MAGIC = 2;
    /** Check outcome: a format version this reader does not know. */
    public static final int BAD_VERSION = 3;
    /** Check outcome: the header's checksum does not hold. */
    public static final int BAD_HEADER_CHECKSUM = 4;
    /** Check outcome: stored by a host with another layout for the same identity. */
    public static final int OTHER_LAYOUT = 5;
    /** Check outcome: another cache salt. */
    public static final int OTHER_SALT = 6;
    /** Check outcome: another chunk's key. */
    public static final int OTHER_KEY = 7;
    /** Check outcome: a payload length other than the layout's chunk bytes. */
    public static final int OTHER_LENGTH = 8;
    /** Check outcome: the payload's checksum does not hold. */
    public static final int BAD_CHECKSUM = 9;

    private static final String[] OUTCOMES = {
        "VALID", "TRUNCATED", "BAD_MAGIC", "BAD_VERSION", "BAD_HEADER_CHECKSUM", "OTHER_LAYOUT", "OTHER_SALT",
        "OTHER_KEY", "OTHER_LENGTH", "BAD_CHECKSUM"};

    private L2ValueDescriptor()
    {
    }

    /**
     * Writes the header in front of a payload already at {@link #HEADER_LENGTH}.
     *
     * @param value         buffer whose index 0 is the value's start; its payload is in place (nothing is allocated,
     *                      its position and limit are kept).
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
        writeFields(value, crc, layoutHash, salt, hi, lo, payloadLength,
            checksum(crc, value, HEADER_LENGTH, payloadLength));
    }

    /**
     * Writes the header of a payload that lies elsewhere (the chunk's pool slot): the value is {@code header}'s
     * first {@link #HEADER_LENGTH} bytes, then the payload.
     *
     * @param header     buffer whose index 0 is the value's start, at least {@link #HEADER_LENGTH} bytes (its
     *                   position and limit are kept).
     * @param payload    the payload from its position to its limit (both kept).
     * @param crc        a checksum to reuse (reset here).
     * @param layoutHash {@link L2Keys#layoutHash}.
     * @param salt       cache salt.
     * @param hi         key high half.
     * @param lo         key low half.
     */
    public static void writeHeader(
        final ByteBuffer header,
        final ByteBuffer payload,
        final CRC32C crc,
        final long layoutHash,
        final long salt,
        final long hi,
        final long lo)
    {
        final int payloadLength = payload.remaining();
        writeFields(header, crc, layoutHash, salt, hi, lo, payloadLength,
            checksum(crc, payload, payload.position(), payloadLength));
    }

    private static void writeFields(
        final ByteBuffer value,
        final CRC32C crc,
        final long layoutHash,
        final long salt,
        final long hi,
        final long lo,
        final int payloadLength,
        final int payloadCrc)
    {
        putInt(value, MAGIC_OFFSET, MAGIC);
        putInt(value, VERSION_OFFSET, VERSION);
        putLong(value, LAYOUT_HASH_OFFSET, layoutHash);
        putLong(value, SALT_OFFSET, salt);
        putLong(value, KEY_HI_OFFSET, hi);
        putLong(value, KEY_LO_OFFSET, lo);
        putLong(value, PAYLOAD_LENGTH_OFFSET, payloadLength);
        putInt(value, PAYLOAD_CRC_OFFSET, payloadCrc);
        putInt(value, HEADER_CRC_OFFSET, checksum(crc, value, 0, HEADER_CRC_OFFSET));
        putLong(value, HEADER_CRC_OFFSET + 4, 0);
    }

    /**
     * Checks a value read from the cluster without copying it or allocating: the header's fields, in the order
     * of the outcomes' numbers, then the payload's checksum.
     *
     * @param value      the value, from its position to its limit (both as they were on return).
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
        final int start = value.position();
        final int length = value.remaining();
        if (length < HEADER_LENGTH)
        {
            return TRUNCATED;
        }
        if (MAGIC != getInt(value, start + MAGIC_OFFSET))
        {
            return BAD_MAGIC;
        }
        if (VERSION != getInt(value, start + VERSION_OFFSET))
        {
            return BAD_VERSION;
        }
        if (getInt(value, start + HEADER_CRC_OFFSET) != checksum(crc, value, start, HEADER_CRC_OFFSET))
        {
            return BAD_HEADER_CHECKSUM;
        }
        if (layoutHash != getLong(value, start + LAYOUT_HASH_OFFSET))
        {
            return OTHER_LAYOUT;
        }
        if (salt != getLong(value, start + SALT_OFFSET))
        {
            return OTHER_SALT;
        }
        if (hi != getLong(value, start + KEY_HI_OFFSET) || lo != getLong(value, start + KEY_LO_OFFSET))
        {
            return OTHER_KEY;
        }
        final long payloadLength = getLong(value, start + PAYLOAD_LENGTH_OFFSET);
        if (payloadLength != chunkBytes)
        {
            return OTHER_LENGTH;
        }
        if (payloadLength != length - HEADER_LENGTH)
        {
            return TRUNCATED;
        }
        return getInt(value, start + PAYLOAD_CRC_OFFSET) ==
            checksum(crc, value, start + HEADER_LENGTH, (int)payloadLength) ? VALID : BAD_CHECKSUM;
    }

    /**
     * The name of a check outcome, for messages.
     *
     * @param outcome {@link #VALID} or a reason.
     * @return its name.
     */
    public static String outcomeName(final int outcome)
    {
        return outcome >= 0 && outcome < OUTCOMES.length ? OUTCOMES[outcome] : "UNKNOWN(" + outcome + ")";
    }

    /**
     * CRC32C of {@code length} bytes at {@code offset}; the buffer's position and limit are restored.
     */
    private static int checksum(final CRC32C crc, final ByteBuffer v, final int offset, final int length)
    {
        final int position = v.position();
        final int limit = v.limit();
        crc.reset();
        v.limit(offset + length).position(offset);
        crc.update(v);
        v.limit(limit).position(position);
        return (int)crc.getValue();
    }

    private static void putInt(final ByteBuffer v, final int index, final int value)
    {
        v.putInt(index, ByteOrder.LITTLE_ENDIAN == v.order() ? value : Integer.reverseBytes(value));
    }

    private static void putLong(final ByteBuffer v, final int index, final long value)
    {
        v.putLong(index, ByteOrder.LITTLE_ENDIAN == v.order() ? value : Long.reverseBytes(value));
    }

    private static int getInt(final ByteBuffer v, final int index)
    {
        final int raw = v.getInt(index);
        return ByteOrder.LITTLE_ENDIAN == v.order() ? raw : Integer.reverseBytes(raw);
    }

    private static long getLong(final ByteBuffer v, final int index)
    {
        final long raw = v.getLong(index);
        return ByteOrder.LITTLE_ENDIAN == v.order() ? raw : Long.reverseBytes(raw);
    }
}
