package io.kvstash.tier;

import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.ToByteBufEncoder;
import io.netty.buffer.ByteBuf;

import java.nio.ByteBuffer;

/**
 * Keys as ASCII bytes, values as {@link ByteBuffer}s, for the tier's small calls (EXISTS, the probe) and for
 * routing: the tier's GETs decode into an {@link L2ValueSink} each, straight into a pool slot, and its SETs encode
 * from a header buffer and the pinned slot through {@link L2SetNx}, so no value goes through {@link #decodeValue}
 * on the data path.
 */
final class L2Codec implements RedisCodec<byte[], ByteBuffer>, ToByteBufEncoder<byte[], ByteBuffer>
{
    static final L2Codec INSTANCE = new L2Codec();

    private L2Codec()
    {
    }

    @Override
    public byte[] decodeKey(final ByteBuffer bytes)
    {
        final byte[] key = new byte[bytes.remaining()];
        bytes.get(key);
        return key;
    }

    @Override
    public ByteBuffer decodeValue(final ByteBuffer bytes)
    {
        final ByteBuffer value = ByteBuffer.allocate(bytes.remaining());
        value.put(bytes).flip();
        return value;
    }

    @Override
    public ByteBuffer encodeKey(final byte[] key)
    {
        return ByteBuffer.wrap(key);
    }

    @Override
    public ByteBuffer encodeValue(final ByteBuffer value)
    {
        return value.duplicate();
    }

    @Override
    public void encodeKey(final byte[] key, final ByteBuf target)
    {
        target.writeBytes(key);
    }

    @Override
    public void encodeValue(final ByteBuffer value, final ByteBuf target)
    {
        target.writeBytes(value.duplicate());
    }

    @Override
    public int estimateSize(final Object keyOrValue)
    {
        if (keyOrValue instanceof byte[])
        {
            return ((byte[])keyOrValue).length;
        }
        return keyOrValue instanceof ByteBuffer ? ((ByteBuffer)keyOrValue).remaining() : 0;
    }

    @Override
    public boolean isEstimateExact()
    {
        return true;
    }
}
