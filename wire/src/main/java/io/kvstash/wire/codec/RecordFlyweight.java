package io.kvstash.wire.codec;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.UnsafeApi;

import static io.kvstash.wire.codec.WireDescriptor.le;

/**
 * What every record flyweight shares: a record wrapped in a buffer, checked once to lie inside it, and
 * little-endian field accessors that go without per-field bounds checks after that one check. The
 * subclasses name the fields and know their own lengths; a decoder checks that a record is long enough for
 * a field before it reads it, an encoder claims the record's full length first.
 * Not thread-safe; allocation-free once constructed.
 */
public abstract class RecordFlyweight
{
    private DirectBuffer buffer;
    private MutableDirectBuffer mutableBuffer;
    private Object base;
    private long address;
    private int offset;
    private int length;

    /**
     * Wraps a record (a {@link MutableDirectBuffer} to encode into it).
     *
     * @param buffer buffer holding the record.
     * @param offset offset of the record's payload.
     * @param length bytes of the record's payload.
     * @return this.
     * @throws IndexOutOfBoundsException when the record does not lie inside the buffer.
     */
    public RecordFlyweight wrap(final DirectBuffer buffer, final int offset, final int length)
    {
        if (offset < 0 || length < 0 || offset + (long)length > buffer.capacity())
        {
            throw new IndexOutOfBoundsException(
                "record at " + offset + " of " + length + " bytes outside a buffer of " + buffer.capacity());
        }
        this.buffer = buffer;
        this.mutableBuffer = buffer instanceof MutableDirectBuffer ? (MutableDirectBuffer)buffer : null;
        this.base = buffer.byteArray();
        this.address = buffer.addressOffset() + offset;
        this.offset = offset;
        this.length = length;
        return this;
    }

    /**
     * Bytes of the record.
     *
     * @return payload length.
     */
    public final int length()
    {
        return length;
    }

    /**
     * Offset of the record in its buffer.
     *
     * @return payload offset.
     */
    public final int offset()
    {
        return offset;
    }

    /**
     * The wrapped buffer.
     *
     * @return buffer.
     */
    public final DirectBuffer buffer()
    {
        return buffer;
    }

    /**
     * The wrapped buffer, to write into.
     *
     * @return buffer.
     * @throws IllegalStateException when the record was wrapped in a read-only buffer.
     */
    public final MutableDirectBuffer mutableBuffer()
    {
        if (null == mutableBuffer)
        {
            throw new IllegalStateException("record wrapped read-only");
        }
        return mutableBuffer;
    }

    /**
     * Reads a little-endian i64 of the record, unchecked.
     *
     * @param at offset in the record.
     * @return value.
     */
    protected final long getLong(final int at)
    {
        return le(UnsafeApi.getLong(base, address + at));
    }

    /**
     * Reads a little-endian i32 of the record, unchecked.
     *
     * @param at offset in the record.
     * @return value.
     */
    protected final int getInt(final int at)
    {
        return le(UnsafeApi.getInt(base, address + at));
    }

    /**
     * Writes a little-endian i64 of the record, unchecked.
     *
     * @param at    offset in the record.
     * @param value value.
     */
    protected final void putLong(final int at, final long value)
    {
        UnsafeApi.putLong(base, address + at, le(value));
    }

    /**
     * Writes a little-endian i32 of the record, unchecked.
     *
     * @param at    offset in the record.
     * @param value value.
     */
    protected final void putInt(final int at, final int value)
    {
        UnsafeApi.putInt(base, address + at, le(value));
    }

    /**
     * Copies bytes into the record (bounds-checked by the buffer).
     *
     * @param at     offset in the record.
     * @param source bytes.
     * @param from   offset in the source.
     * @param count  bytes.
     */
    protected final void putBytes(final int at, final byte[] source, final int from, final int count)
    {
        mutableBuffer().putBytes(offset + at, source, from, count);
    }

    /**
     * Copies bytes into the record from another buffer (bounds-checked by the buffers).
     *
     * @param at     offset in the record.
     * @param source bytes.
     * @param from   offset in the source.
     * @param count  bytes.
     */
    protected final void putBytes(final int at, final DirectBuffer source, final int from, final int count)
    {
        mutableBuffer().putBytes(offset + at, source, from, count);
    }

    /**
     * Copies bytes of the record out (bounds-checked by the buffer).
     *
     * @param at          offset in the record.
     * @param destination receives the bytes.
     * @param count       bytes.
     */
    protected final void getBytes(final int at, final byte[] destination, final int count)
    {
        buffer.getBytes(offset + at, destination, 0, count);
    }
}
