package io.kvstash.tier;

import io.lettuce.core.protocol.CommandArgs;
import io.netty.buffer.ByteBuf;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The arguments of one write-through {@code SET key value NX}, whose value is a header buffer of the tier's
 * followed by the chunk's bytes in its pool slot (pinned by the tier), both encoded straight into Netty's buffer
 * when the command is written: the slot's bytes are copied once, into the network buffer.
 * <p>
 * <b>When the slot and the header are the tier's again.</b> A SET that ran past the tier's deadline may still sit
 * in Lettuce's queue and be encoded later, or be encoded again after a MOVED redirection; the tier must not unpin
 * the slot (which may then hold another chunk) or refill its header while that can happen. So the encoding goes
 * through one atomic state:
 * <pre>
 *   QUEUED | ENCODED --(encoder)--> ENCODING --> ENCODED
 *   QUEUED | ENCODED --(tier, {@link #release()})--> RELEASED
 * </pre>
 * The encoder reads the buffers only while ENCODING; {@link #release()} waits out an encoding under way. A command
 * encoded after its release becomes {@code SET key "" EX}, which the cluster refuses (a syntax error): nothing is
 * stored and neither buffer is read.
 * <p>
 * Threads: constructed and released on the tier's thread; encoded on a Netty thread.
 */
final class L2SetNx extends CommandArgs<byte[], ByteBuffer>
{
    private static final int QUEUED = 0;
    private static final int ENCODING = 1;
    private static final int ENCODED = 2;
    private static final int RELEASED = 3;
    private static final byte[] CRLF = {'\r', '\n'};
    private static final byte[] NX = "NX".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] EX = "EX".getBytes(StandardCharsets.US_ASCII);

    private final AtomicInteger state = new AtomicInteger(QUEUED);
    private final byte[] key;
    private final ByteBuffer header;
    private final ByteBuffer payload;

    /**
     * Arguments of a SET NX of one value: {@code header} then {@code payload}.
     *
     * @param key     the key (routes the command to its node).
     * @param header  the value's first bytes, from its position to its limit; not read after {@link #release()}.
     * @param payload the rest, from its position to its limit; not read after {@link #release()}.
     */
    L2SetNx(final byte[] key, final ByteBuffer header, final ByteBuffer payload)
    {
        super(L2Codec.INSTANCE);
        addKey(key);
        this.key = key;
        this.header = header;
        this.payload = payload;
    }

    @Override
    public int count()
    {
        return 3;
    }

    @Override
    public void encode(final ByteBuf buf)
    {
        int s;
        do
        {
            s = state.get();
        }
        while (RELEASED != s && !state.compareAndSet(s, ENCODING));
        bulk(buf, key, key.length);
        if (RELEASED == s)
        {
            bulk(buf, key, 0);
            bulk(buf, EX, EX.length);
            return;
        }
        try
        {
            header(buf, header.remaining() + payload.remaining());
            writeKeepingPosition(buf, header);
            writeKeepingPosition(buf, payload);
            buf.writeBytes(CRLF);
            bulk(buf, NX, NX.length);
        }
        finally
        {
            state.set(ENCODED);
        }
    }

    /**
     * Takes the buffers back: from now on the encoder never reads them. Tier thread; waits while an encoding is
     * under way (a copy into Netty's buffer).
     */
    void release()
    {
        while (true)
        {
            final int s = state.get();
            if (ENCODING == s)
            {
                Thread.onSpinWait();
            }
            else if (RELEASED == s || state.compareAndSet(s, RELEASED))
            {
                return;
            }
        }
    }

    private static void writeKeepingPosition(final ByteBuf buf, final ByteBuffer bytes)
    {
        final int position = bytes.position();
        buf.writeBytes(bytes);
        bytes.position(position);
    }

    private static void bulk(final ByteBuf buf, final byte[] bytes, final int length)
    {
        header(buf, length);
        buf.writeBytes(bytes, 0, length);
        buf.writeBytes(CRLF);
    }

    private static void header(final ByteBuf buf, final int length)
    {
        buf.writeByte('$');
        if (0 == length)
        {
            buf.writeByte('0');
        }
        else
        {
            int divisor = 1;
            while (length / divisor >= 10)
            {
                divisor *= 10;
            }
            for (; divisor > 0; divisor /= 10)
            {
                buf.writeByte('0' + (length / divisor) % 10);
            }
        }
        buf.writeBytes(CRLF);
    }
}
