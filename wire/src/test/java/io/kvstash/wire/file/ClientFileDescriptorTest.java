package io.kvstash.wire.file;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The one writer of client-file headers: every field at its offset, and nothing the server writes touched.
 */
class ClientFileDescriptorTest
{
    @Test
    void shouldWriteEveryFieldOfTheHeaderAndPublishTheVersion()
    {
        final UnsafeBuffer header = new UnsafeBuffer(new byte[ClientFileDescriptor.HEADER_LENGTH]);
        header.putInt(ClientFileDescriptor.ATTACH_STATE_OFFSET, ClientFileDescriptor.ATTACH_PENDING);

        ClientFileDescriptor.writeHeader(header, 77, 0x1234L, 1 << 16, 1 << 17,
            ClientFileDescriptor.FLAG_COPY_TRANSPORT);

        assertEquals(ClientFileDescriptor.MAGIC, header.getLong(ClientFileDescriptor.MAGIC_OFFSET));
        assertEquals(ClientFileDescriptor.VERSION, header.getIntVolatile(ClientFileDescriptor.VERSION_OFFSET));
        assertEquals(ClientFileDescriptor.HEADER_LENGTH, header.getInt(ClientFileDescriptor.HEADER_LENGTH_OFFSET));
        assertEquals(77, header.getLong(ClientFileDescriptor.PID_OFFSET));
        assertEquals(0x1234L, header.getLong(ClientFileDescriptor.INCARNATION_OFFSET));
        assertEquals(1 << 16, header.getInt(ClientFileDescriptor.REQUEST_CAPACITY_OFFSET));
        assertEquals(1 << 17, header.getInt(ClientFileDescriptor.RESPONSE_CAPACITY_OFFSET));
        assertEquals(ClientFileDescriptor.FLAG_COPY_TRANSPORT, header.getInt(ClientFileDescriptor.FLAGS_OFFSET));
        assertEquals(ClientFileDescriptor.ATTACH_PENDING, header.getInt(ClientFileDescriptor.ATTACH_STATE_OFFSET));
        assertEquals(0, header.getLong(ClientFileDescriptor.SESSION_ID_OFFSET));
        assertEquals(0, header.getInt(ClientFileDescriptor.CLOSING_OFFSET));
    }
}
