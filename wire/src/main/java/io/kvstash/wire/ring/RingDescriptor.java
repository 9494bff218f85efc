package io.kvstash.wire.ring;

/**
 * Byte layout of a single-producer single-consumer record ring in shared memory. One ring per client and
 * direction, so neither side ever needs compare-and-swap: the producer alone writes the tail and the
 * records, the consumer alone writes the head and zeroes what it consumed.
 * <pre>
 * Ring (HEADER_LENGTH + capacity bytes, capacity a power of two)
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                Tail Position (i64, producer, release)         |  0
 *  |                ... padding to 64 bytes ...                    |
 *  +---------------------------------------------------------------+
 *  |                Head Position (i64, consumer, release)         |  64
 *  |                ... padding to 128 bytes ...                   |
 *  +---------------------------------------------------------------+
 *  |                Records (capacity bytes)                       |  128
 *  +---------------------------------------------------------------+
 * Record (8-byte aligned; never wraps: a padding record fills the end)
 *  +---------------------------------------------------------------+
 *  |  Length (i32, header + payload, written LAST with release)    |  0
 *  |  Type (i32; PADDING_TYPE = -1)                                |  4
 *  |  Payload (Length - 8 bytes) ... zero padding to 8             |  8
 *  +---------------------------------------------------------------+
 * </pre>
 * Positions are byte counts since the ring was created and only grow; a record starts at
 * {@code position & (capacity - 1)}. The producer writes the type and payload with plain stores, then the
 * length with a release store, then advances the tail; it may write only while
 * {@code tail - head + aligned length <= capacity} (head read with acquire). The consumer reads the
 * length with acquire (0 means nothing yet), reads the record, zeroes it, then advances the head with a
 * release store. A length below 8 or running past the end of the ring means the ring is corrupt.
 */
public final class RingDescriptor
{
    /** Offset of the tail position. */
    public static final int TAIL_POSITION_OFFSET = 0;
    /** Offset of the head position. */
    public static final int HEAD_POSITION_OFFSET = 64;
    /** Bytes before the records. */
    public static final int HEADER_LENGTH = 128;
    /** Offset of a record's length. */
    public static final int RECORD_LENGTH_OFFSET = 0;
    /** Offset of a record's type. */
    public static final int RECORD_TYPE_OFFSET = 4;
    /** Bytes of a record header. */
    public static final int RECORD_HEADER_LENGTH = 8;
    /** Record alignment. */
    public static final int RECORD_ALIGNMENT = 8;
    /** Type of a padding record. */
    public static final int PADDING_TYPE = -1;
    /** Smallest ring capacity. */
    public static final int MIN_CAPACITY = 1024;

    private RingDescriptor()
    {
    }

    /**
     * Aligns a record length.
     *
     * @param length header plus payload.
     * @return length rounded up to {@link #RECORD_ALIGNMENT}.
     */
    public static int align(final int length)
    {
        return (length + RECORD_ALIGNMENT - 1) & ~(RECORD_ALIGNMENT - 1);
    }

    /**
     * Total bytes of a ring with a capacity.
     *
     * @param capacity record capacity, a power of two.
     * @return header plus capacity.
     */
    public static int totalLength(final int capacity)
    {
        return HEADER_LENGTH + capacity;
    }

    /**
     * Checks a capacity.
     *
     * @param capacity record capacity.
     * @throws IllegalArgumentException unless a power of two of at least {@link #MIN_CAPACITY}.
     */
    public static void checkCapacity(final int capacity)
    {
        if (capacity < MIN_CAPACITY || Integer.bitCount(capacity) != 1)
        {
            throw new IllegalArgumentException("ring capacity must be a power of two >= " + MIN_CAPACITY + ": " +
                capacity);
        }
    }

    /**
     * Largest payload one record can carry in a ring.
     *
     * @param capacity record capacity.
     * @return bytes.
     */
    public static int maxPayloadLength(final int capacity)
    {
        return capacity / 2 - RECORD_HEADER_LENGTH;
    }
}
