package io.kvstash.wire.codec;

import java.nio.ByteOrder;

/**
 * Byte layout of the request and response records carried in the rings (the ring record's type is the
 * {@link io.kvstash.wire.RequestType} code for requests and {@link #RESPONSE_TYPE} for responses). All fields
 * little-endian; variable parts padded to 8 bytes.
 * <pre>
 * Request payload: common header (REQUEST_HEADER_LENGTH = 40)
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                    Correlation Id (i64)                       |  0
 *  |                    Instance Id (i64)                          |  8
 *  |                    Transfer Id (i64)                          |  16
 *  |                    Salt (i64)                                 |  24
 *  |  Flags (i32)                      |  Key Mode (i32)           |  32
 *  +---------------------------------------------------------------+
 * Padding: REGISTER's model name need not be padded (it ends the record); LOOKUP_ALL_RANKS's model name is
 * padded to 8 because the key range follows it.
 * REGISTER body (after the header)
 *  |  World Size  |  Rank  |  Layers  |  Hidden  |  Dtype  |  MLA  |  6 x i32
 *  |  Model Length (i32) | reserved (i32) | Model (UTF-8, padded)  |
 * LOOKUP_ALL_RANKS body: World Size (i32) | Model Length (i32) | Model (padded) | key range
 * LOOKUP, PREPARE_STORE, PREPARE_RETRIEVE body: key range
 *   Key Mode 1 (hashes):  Chunk Count (i32) | reserved (i32) | Chunk Count x (Hi i64, Lo i64)
 *   Key Mode 2 (tokens):  Token Count (i32) | From Chunk (i32) | To Chunk (i32, -1 = every full chunk) |
 *                         reserved (i32) | Token Count x Token Id (i32), padded
 * WRITE_DATA body: Slot Index (i32) | Length (i32) | Offset in chunk (i64) | Length bytes, padded
 * READ_DATA body:  Slot Index (i32) | Length (i32) | Offset in chunk (i64)
 * Every other request: the header only.
 *
 * Response payload (RESPONSE_HEADER_LENGTH = 64)
 *  +---------------------------------------------------------------+
 *  |                    Correlation Id (i64)                       |  0
 *  |  Status (i32)                     |  Request Type (i32)       |  8
 *  |                    Transfer Id (i64)                          |  16
 *  |  Hit Chunks (i32)                 |  Slot Count (i32)         |  24
 *  |                    Count (i64: removed / reclaimed)           |  32
 *  |                    Chunk Bytes (i64)                          |  40
 *  |                    Slot Bytes (i64)                           |  48
 *  |  Slot Capacity (i32)              |  Extra Length (i32)       |  56
 *  +---------------------------------------------------------------+
 *  |  Slot Count x (Range Index i32, Generation i32, Offset i64)   |  64
 *  |  Extra (Extra Length bytes, padded):                          |
 *  |    status not OK: the reason, UTF-8                           |
 *  |    READ_DATA OK: the bytes read                               |
 *  |    STATS OK: every counter, i64 each, by counter id           |
 *  |    REGISTER OK: Incarnation i64 | Pool Data Bytes i64 |        |
 *  |      Lease ns i64 | Chunk Tokens i32 | Name Length i32 | Name  |
 *  +---------------------------------------------------------------+
 * </pre>
 */
public final class WireDescriptor
{
    /** Ring record type of a response. */
    public static final int RESPONSE_TYPE = 0x5250;

    /** Key mode: no key range. */
    public static final int KEY_MODE_NONE = 0;
    /** Key mode: precomputed 128-bit chunk hashes. */
    public static final int KEY_MODE_HASHES = 1;
    /** Key mode: token ids, hashed by the server. */
    public static final int KEY_MODE_TOKENS = 2;

    /** Request: correlation id. */
    public static final int CORRELATION_ID_OFFSET = 0;
    /** Request: instance id. */
    public static final int INSTANCE_ID_OFFSET = 8;
    /** Request: transfer id. */
    public static final int TRANSFER_ID_OFFSET = 16;
    /** Request: salt. */
    public static final int SALT_OFFSET = 24;
    /** Request: flags. */
    public static final int FLAGS_OFFSET = 32;
    /** Request: key mode. */
    public static final int KEY_MODE_OFFSET = 36;
    /** Request header length. */
    public static final int REQUEST_HEADER_LENGTH = 40;
    /** REGISTER body length before the model bytes. */
    public static final int REGISTER_BODY_LENGTH = 32;
    /** Key range header length (both modes). */
    public static final int HASHES_HEADER_LENGTH = 8;
    /** Token range header length. */
    public static final int TOKENS_HEADER_LENGTH = 16;
    /** Data request body header length. */
    public static final int DATA_HEADER_LENGTH = 16;

    /** Response: correlation id. */
    public static final int RESPONSE_CORRELATION_ID_OFFSET = 0;
    /** Response: status. */
    public static final int RESPONSE_STATUS_OFFSET = 8;
    /** Response: request type. */
    public static final int RESPONSE_TYPE_OFFSET = 12;
    /** Response: transfer id. */
    public static final int RESPONSE_TRANSFER_ID_OFFSET = 16;
    /** Response: hit chunks. */
    public static final int RESPONSE_HIT_CHUNKS_OFFSET = 24;
    /** Response: slot count. */
    public static final int RESPONSE_SLOT_COUNT_OFFSET = 28;
    /** Response: count. */
    public static final int RESPONSE_COUNT_OFFSET = 32;
    /** Response: chunk bytes. */
    public static final int RESPONSE_CHUNK_BYTES_OFFSET = 40;
    /** Response: slot bytes. */
    public static final int RESPONSE_SLOT_BYTES_OFFSET = 48;
    /** Response: slot capacity. */
    public static final int RESPONSE_SLOT_CAPACITY_OFFSET = 56;
    /** Response: extra length. */
    public static final int RESPONSE_EXTRA_LENGTH_OFFSET = 60;
    /** Response header length. */
    public static final int RESPONSE_HEADER_LENGTH = 64;
    /** Bytes of one slot entry. */
    public static final int SLOT_ENTRY_LENGTH = 16;
    /** Longest error reason carried. */
    public static final int MAX_MESSAGE_LENGTH = 192;

    private static final boolean NATIVE_LITTLE_ENDIAN = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

    private WireDescriptor()
    {
    }

    /**
     * Pads a length to 8.
     *
     * @param length bytes.
     * @return padded length.
     */
    public static int pad8(final int length)
    {
        return (length + 7) & ~7;
    }

    /**
     * A little-endian wire value in the platform's order, or the platform's value in the wire's: for raw
     * accesses ({@code UnsafeApi}) to records whose bounds were checked once; the identity on x86-64.
     *
     * @param value value.
     * @return the value with its bytes in the other order when the platform is big-endian.
     */
    public static long le(final long value)
    {
        return NATIVE_LITTLE_ENDIAN ? value : Long.reverseBytes(value);
    }

    /**
     * The 32-bit form of {@link #le(long)}.
     *
     * @param value value.
     * @return the value with its bytes in the other order when the platform is big-endian.
     */
    public static int le(final int value)
    {
        return NATIVE_LITTLE_ENDIAN ? value : Integer.reverseBytes(value);
    }
}
