package io.kvstash.tier;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The write-through SET's arguments as they go on the wire: {@code key value NX} with the value from the header
 * buffer and the slot, the same again on a second encoding (a MOVED redirection), and once the tier took its
 * buffers back, a command the cluster refuses without reading them.
 */
class L2SetNxTest
{
    private static final byte[] KEY = "kvstash:1:00ff:abc".getBytes(StandardCharsets.US_ASCII);

    @Test
    void shouldEncodeKeyHeaderThenPayloadAndNxLeavingTheirPositions()
    {
        final ByteBuffer header = staging("0123");
        final ByteBuffer payload = staging("456789");
        final L2SetNx args = new L2SetNx(KEY, header, payload);
        assertEquals(3, args.count());
        final String expected = "$18\r\nkvstash:1:00ff:abc\r\n$10\r\n0123456789\r\n$2\r\nNX\r\n";
        assertEquals(expected, encode(args));
        assertEquals(0, header.position());
        assertEquals(0, payload.position());
        assertEquals(expected, encode(args), "encoded again after a redirection");
    }

    @Test
    void shouldEncodeAnEmptyAndALongValue()
    {
        assertEquals("$18\r\nkvstash:1:00ff:abc\r\n$0\r\n\r\n$2\r\nNX\r\n",
            encode(new L2SetNx(KEY, staging(""), staging(""))));
        final String longValue = "x".repeat(1_234_567);
        final String encoded = encode(new L2SetNx(KEY, staging("x"), staging(longValue.substring(1))));
        assertEquals("$18\r\nkvstash:1:00ff:abc\r\n$1234567\r\n", encoded.substring(0, 35));
    }

    @Test
    void shouldNeverReadTheBuffersOnceReleasedAndSendACommandTheClusterRefuses()
    {
        final ByteBuffer header = staging("sec");
        final ByteBuffer payload = staging("ret");
        final L2SetNx args = new L2SetNx(KEY, header, payload);
        args.release();
        header.put(0, (byte)'S'); // the tier refills its header
        payload.put(0, (byte)'R'); // and the slot, unpinned, holds another chunk
        assertEquals("$18\r\nkvstash:1:00ff:abc\r\n$0\r\n\r\n$2\r\nEX\r\n", encode(args));
        args.release();
    }

    private static ByteBuffer staging(final String content)
    {
        final byte[] bytes = content.getBytes(StandardCharsets.US_ASCII);
        final ByteBuffer buffer = ByteBuffer.allocateDirect(bytes.length + 16);
        buffer.put(bytes).flip();
        return buffer;
    }

    private static String encode(final L2SetNx args)
    {
        final ByteBuf buf = Unpooled.buffer();
        try
        {
            args.encode(buf);
            return buf.toString(StandardCharsets.US_ASCII);
        }
        finally
        {
            buf.release();
        }
    }
}
