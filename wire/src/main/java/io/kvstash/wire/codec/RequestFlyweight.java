package io.kvstash.wire.codec;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static io.kvstash.wire.codec.WireDescriptor.*;

/**
 * The common header of every request record (see {@link WireDescriptor} for the bytes), encoded by clients
 * and decoded by the server through the same class. The subclasses add each record's body.
 * <p>
 * {@link #wrap(DirectBuffer, int, int)} checks once that the record lies inside the buffer; the accessors then
 * read and write without per-field bounds checks. A decoder must check that the record is long enough for
 * a field before it reads it ({@link #length()}, {@link #hasHeader()} and the body checks of the
 * subclasses); an encoder claims the record's full length first (the static {@code length} methods).
 * Not thread-safe; allocation-free once constructed.
 */
public class RequestFlyweight extends RecordFlyweight
{
    /** Bytes of the common header. */
    public static final int HEADER_LENGTH = REQUEST_HEADER_LENGTH;

    @Override
    public RequestFlyweight wrap(final DirectBuffer buffer, final int offset, final int length)
    {
        super.wrap(buffer, offset, length);
        return this;
    }

    /**
     * Wraps a claimed record for writing.
     *
     * @param buffer buffer holding the claim.
     * @param offset offset of the claimed payload.
     * @param length bytes claimed.
     * @return this.
     */
    public RequestFlyweight wrapForEncode(final MutableDirectBuffer buffer, final int offset, final int length)
    {
        return wrap(buffer, offset, length);
    }

    /**
     * Writes the common header.
     *
     * @param correlationId correlation id.
     * @param instanceId    instance the request acts for, 0 for none.
     * @param transferId    transfer the request acts on, 0 for none.
     * @param salt          salt of the key range, 0 for none.
     * @param flags         {@link io.kvstash.wire.RequestFlags} bits.
     * @param keyMode       {@link WireDescriptor#KEY_MODE_NONE}, {@code _HASHES} or {@code _TOKENS}.
     * @return this.
     */
    public RequestFlyweight putHeader(
        final long correlationId,
        final long instanceId,
        final long transferId,
        final long salt,
        final int flags,
        final int keyMode)
    {
        putLong(CORRELATION_ID_OFFSET, correlationId);
        putLong(INSTANCE_ID_OFFSET, instanceId);
        putLong(TRANSFER_ID_OFFSET, transferId);
        putLong(SALT_OFFSET, salt);
        putInt(FLAGS_OFFSET, flags);
        putInt(KEY_MODE_OFFSET, keyMode);
        return this;
    }

    /**
     * Whether the record holds a correlation id (else it cannot be answered).
     *
     * @return true when at least 8 bytes long.
     */
    public final boolean hasCorrelationId()
    {
        return length() >= Long.BYTES;
    }

    /**
     * Whether the record holds the whole common header.
     *
     * @return true when at least {@link #HEADER_LENGTH} bytes long.
     */
    public final boolean hasHeader()
    {
        return length() >= HEADER_LENGTH;
    }

    /**
     * Correlation id.
     *
     * @return the client's correlation id.
     */
    public final long correlationId()
    {
        return getLong(CORRELATION_ID_OFFSET);
    }

    /**
     * Instance id.
     *
     * @return instance the request acts for.
     */
    public final long instanceId()
    {
        return getLong(INSTANCE_ID_OFFSET);
    }

    /**
     * Transfer id.
     *
     * @return transfer the request acts on.
     */
    public final long transferId()
    {
        return getLong(TRANSFER_ID_OFFSET);
    }

    /**
     * Salt.
     *
     * @return salt of the key range.
     */
    public final long salt()
    {
        return getLong(SALT_OFFSET);
    }

    /**
     * Flags.
     *
     * @return {@link io.kvstash.wire.RequestFlags} bits.
     */
    public final int flags()
    {
        return getInt(FLAGS_OFFSET);
    }

    /**
     * Key mode.
     *
     * @return key mode of the record's key range.
     */
    public final int keyMode()
    {
        return getInt(KEY_MODE_OFFSET);
    }
}
