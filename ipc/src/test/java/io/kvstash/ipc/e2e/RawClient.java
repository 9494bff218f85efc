package io.kvstash.ipc.e2e;

import io.kvstash.ipc.file.ClientFileDescriptor;
import io.kvstash.ipc.file.SecureDirectory;
import io.kvstash.ipc.ring.RingConsumer;
import io.kvstash.ipc.ring.RingDescriptor;
import io.kvstash.ipc.ring.RingProducer;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A client built from the file layouts alone, for writing arbitrary records into a request ring.
 */
final class RawClient implements AutoCloseable
{
    final Path file;
    final FileChannel channel;
    final FileLock lock;
    final MappedByteBuffer mapped;
    final UnsafeBuffer header;
    final RingProducer requests;
    final RingConsumer responses;
    final UnsafeBuffer requestRing;

    RawClient(final Path dir, final long incarnation, final int requestCapacity, final int responseCapacity)
        throws IOException
    {
        file = dir.resolve(ClientFileDescriptor.fileName(ProcessHandle.current().pid(), System.nanoTime()));
        SecureDirectory.createFile(file);
        channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
        lock = channel.lock();
        final int length = ClientFileDescriptor.fileLength(requestCapacity, responseCapacity);
        channel.write(java.nio.ByteBuffer.wrap(new byte[1]), length - 1);
        mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, length);
        header = new UnsafeBuffer(mapped, 0, ClientFileDescriptor.HEADER_LENGTH);
        header.putLong(ClientFileDescriptor.MAGIC_OFFSET, ClientFileDescriptor.MAGIC);
        header.putInt(ClientFileDescriptor.HEADER_LENGTH_OFFSET, ClientFileDescriptor.HEADER_LENGTH);
        header.putLong(ClientFileDescriptor.PID_OFFSET, ProcessHandle.current().pid());
        header.putLong(ClientFileDescriptor.INCARNATION_OFFSET, incarnation);
        header.putInt(ClientFileDescriptor.REQUEST_CAPACITY_OFFSET, requestCapacity);
        header.putInt(ClientFileDescriptor.RESPONSE_CAPACITY_OFFSET, responseCapacity);
        requestRing = new UnsafeBuffer(mapped, ClientFileDescriptor.REQUEST_RING_OFFSET,
            RingDescriptor.totalLength(requestCapacity));
        requests = new RingProducer(requestRing);
        responses = new RingConsumer(new UnsafeBuffer(mapped, ClientFileDescriptor.responseRingOffset(requestCapacity),
            RingDescriptor.totalLength(responseCapacity)));
        header.putIntRelease(ClientFileDescriptor.VERSION_OFFSET, ClientFileDescriptor.VERSION);
    }

    int attachState()
    {
        return header.getIntAcquire(ClientFileDescriptor.ATTACH_STATE_OFFSET);
    }

    void awaitAttached() throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + 10_000;
        while (ClientFileDescriptor.ATTACH_ATTACHED != attachState())
        {
            if (System.currentTimeMillis() > deadline)
            {
                throw new AssertionError("not attached, state " + attachState());
            }
            Thread.sleep(2);
        }
    }

    /**
     * Writes one record with the given payload bytes.
     */
    void send(final int type, final byte[] payload) throws InterruptedException
    {
        int at;
        while ((at = requests.tryClaim(type, payload.length)) < 0)
        {
            Thread.sleep(1);
        }
        requests.buffer().putBytes(at, payload);
        requests.commit(payload.length);
    }

    /**
     * Waits for the next response payload.
     *
     * @return a copy of the payload, or null on timeout.
     */
    UnsafeBuffer nextResponse(final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (!responses.next())
        {
            if (System.currentTimeMillis() > deadline)
            {
                return null;
            }
            Thread.sleep(1);
        }
        final byte[] copy = new byte[responses.payloadLength()];
        responses.buffer().getBytes(responses.payloadOffset(), copy);
        responses.consume();
        return new UnsafeBuffer(copy);
    }

    @Override
    public void close() throws IOException
    {
        lock.release();
        channel.close();
        IoUtil.unmap(mapped);
    }
}
