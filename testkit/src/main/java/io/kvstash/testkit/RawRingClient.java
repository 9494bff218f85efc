package io.kvstash.testkit;

import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.SecureDirectory;
import io.kvstash.wire.ring.RingConsumer;
import io.kvstash.wire.ring.RingDescriptor;
import io.kvstash.wire.ring.RingProducer;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A client built from the file layouts alone, which writes arbitrary records into its request ring: the
 * fuzzer's way in, and the end-to-end tests' way to send what no real client would. It takes the client
 * file's lock like any client.
 */
public final class RawRingClient implements AutoCloseable
{
    private final Path file;
    private final FileChannel channel;
    private final FileLock lock;
    private final MappedByteBuffer mapped;
    private final UnsafeBuffer header;
    private final UnsafeBuffer requestRing;
    private final RingProducer requests;
    private final RingConsumer responses;

    /**
     * Creates, locks and maps a client file in a server directory, with both rings empty.
     *
     * @param dir              server directory.
     * @param incarnation      the server's incarnation, as a client writes it.
     * @param requestCapacity  request ring capacity.
     * @param responseCapacity response ring capacity.
     * @throws IOException when the file cannot be created or mapped.
     */
    public RawRingClient(final Path dir, final long incarnation, final int requestCapacity, final int responseCapacity)
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
        requestRing = new UnsafeBuffer(mapped, ClientFileDescriptor.REQUEST_RING_OFFSET,
            RingDescriptor.totalLength(requestCapacity));
        requests = new RingProducer(requestRing);
        responses = new RingConsumer(new UnsafeBuffer(mapped, ClientFileDescriptor.responseRingOffset(requestCapacity),
            RingDescriptor.totalLength(responseCapacity)));
        ClientFileDescriptor.writeHeader(header, ProcessHandle.current().pid(), incarnation, requestCapacity,
            responseCapacity, 0);
    }

    /**
     * The attach state the server wrote into the file's header.
     *
     * @return one of the {@code ClientFileDescriptor.ATTACH_*} states.
     */
    public int attachState()
    {
        return header.getIntAcquire(ClientFileDescriptor.ATTACH_STATE_OFFSET);
    }

    /**
     * Waits for the server to attach this client.
     *
     * @param timeoutMs longest wait.
     * @return false when it was not attached in time.
     * @throws InterruptedException when interrupted while waiting.
     */
    public boolean awaitAttached(final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (ClientFileDescriptor.ATTACH_ATTACHED != attachState())
        {
            if (System.currentTimeMillis() > deadline)
            {
                return false;
            }
            Thread.sleep(1);
        }
        return true;
    }

    /**
     * Largest record payload the request ring takes.
     *
     * @return bytes.
     */
    public int maxPayload()
    {
        return requests.maxPayloadLength();
    }

    /**
     * Writes one record, waiting for room.
     *
     * @param type      record type.
     * @param payload   record payload, any bytes.
     * @param timeoutMs longest wait for room.
     * @return false when no room came within the timeout.
     */
    public boolean send(final int type, final byte[] payload, final long timeoutMs)
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        int at;
        while ((at = requests.tryClaim(type, payload.length)) < 0)
        {
            if (System.currentTimeMillis() > deadline)
            {
                return false;
            }
            Thread.onSpinWait();
        }
        requests.buffer().putBytes(at, payload);
        requests.commit(payload.length);
        return true;
    }

    /**
     * Writes a length word that runs past the ring's end where the next record would start, so the server can
     * no longer parse this client's ring (and must detach it without harm to the others).
     */
    public void corruptNextRecordLength()
    {
        final int index = (int)(requests.tail() & (requests.capacity() - 1));
        requestRing.putIntRelease(RingDescriptor.HEADER_LENGTH + index, requests.capacity() + 64);
    }

    /**
     * The next response payload.
     *
     * @param timeoutMs longest wait.
     * @return a copy, or null when none arrived within the timeout.
     */
    public UnsafeBuffer receive(final long timeoutMs)
    {
        final long deadline = System.nanoTime() + timeoutMs * 1_000_000;
        while (!responses.next())
        {
            if (System.nanoTime() - deadline > 0)
            {
                return null;
            }
            Thread.onSpinWait();
        }
        final byte[] copy = new byte[responses.payloadLength()];
        responses.buffer().getBytes(responses.payloadOffset(), copy);
        responses.consume();
        return new UnsafeBuffer(copy);
    }

    /**
     * Marks the client closing, unlocks, unmaps and deletes its file.
     *
     * @throws IOException when the file cannot be closed or deleted.
     */
    @Override
    public void close() throws IOException
    {
        header.putIntRelease(ClientFileDescriptor.CLOSING_OFFSET, 1);
        lock.release();
        channel.close();
        IoUtil.unmap(mapped);
        Files.deleteIfExists(file);
    }
}
