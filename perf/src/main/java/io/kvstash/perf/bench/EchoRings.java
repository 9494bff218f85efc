package io.kvstash.perf.bench;

import io.kvstash.server.ServerConfiguration;
import io.kvstash.wire.ring.RingConsumer;
import io.kvstash.wire.ring.RingDescriptor;
import io.kvstash.wire.ring.RingProducer;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.MappedByteBuffer;

/**
 * The IPC floor: a bare ring echo over the project's SPSC rings ({@link RingProducer}, {@link RingConsumer})
 * in one mapped file, with the server's ring sizes (a 2 MiB request ring and a 256 KiB response ring). The
 * file holds the request ring, then the response ring. A request record's payload starts with the length of
 * the reply payload wanted (i32, pad i32) and a correlation id (i64); the echo agent answers with a record of
 * that length carrying the correlation id, so the echo moves exactly the bytes kvstash's requests and
 * responses do, with no decoding and no pipeline.
 * <p>
 * Every byte is written and read, as kvstash's client and server write and read theirs: the client fills the
 * whole request, the agent reads all of it and copies it into a reply it fills to the wanted length, and the
 * client copies the whole reply out. Across two cores a cache line moves only when it is touched, so an echo
 * that wrote only its first 16 bytes would cross fewer lines than the requests and responses it stands for.
 * That lighter form (<b>header only</b>: the client writes the reply length and the correlation id, the agent
 * reads those and writes the correlation id back, the client reads it) understates the floor for that reason;
 * it is still measured beside the other in the bench's alternating rounds, so the two floors can be compared.
 */
final class EchoRings
{
    /** Request ring capacity: the server's per-client default. */
    static final int REQUEST_CAPACITY = ServerConfiguration.REQUEST_RING_CAPACITY_DEFAULT;
    /** Response ring capacity: the server's per-client default. */
    static final int RESPONSE_CAPACITY = ServerConfiguration.RESPONSE_RING_CAPACITY_DEFAULT;
    /** Record type of echo requests and replies. */
    static final int ECHO_TYPE = 1;
    /** Offset of the wanted reply length in a request payload. */
    static final int REPLY_LENGTH_OFFSET = 0;
    /** Offset of the correlation id in a request payload. */
    static final int CORRELATION_OFFSET = 8;
    /** Offset of the correlation id in a reply payload. */
    static final int REPLY_CORRELATION_OFFSET = 0;
    /** Bytes of the echo file. */
    static final int FILE_LENGTH =
        RingDescriptor.totalLength(REQUEST_CAPACITY) + RingDescriptor.totalLength(RESPONSE_CAPACITY);

    private EchoRings()
    {
    }

    /**
     * The request ring of a mapped echo file.
     *
     * @param mapped the file.
     * @return ring region.
     */
    static UnsafeBuffer requestRing(final MappedByteBuffer mapped)
    {
        return new UnsafeBuffer(mapped, 0, RingDescriptor.totalLength(REQUEST_CAPACITY));
    }

    /**
     * The response ring of a mapped echo file.
     *
     * @param mapped the file.
     * @return ring region.
     */
    static UnsafeBuffer responseRing(final MappedByteBuffer mapped)
    {
        return new UnsafeBuffer(mapped, RingDescriptor.totalLength(REQUEST_CAPACITY),
            RingDescriptor.totalLength(RESPONSE_CAPACITY));
    }

    /**
     * The server side of the echo: reads requests, answers each with a reply of the wanted length. Leaves a
     * request in the ring while the response ring lacks room, as the kvstash receiver does. Owner: its
     * agent runner's thread.
     */
    static final class EchoAgent implements Agent
    {
        private static final int MAX_RECORDS_PER_CYCLE = 64;

        private final RingConsumer requests;
        private final RingProducer responses;
        private final boolean wholeRecords;
        private long echoed;

        /**
         * @param mapped       the echo file.
         * @param wholeRecords true to read every request byte and write every reply byte; false for the
         *                     header-only form.
         */
        EchoAgent(final MappedByteBuffer mapped, final boolean wholeRecords)
        {
            requests = new RingConsumer(requestRing(mapped));
            responses = new RingProducer(responseRing(mapped));
            this.wholeRecords = wholeRecords;
        }

        @Override
        public int doWork()
        {
            int work = 0;
            while (work < MAX_RECORDS_PER_CYCLE && requests.next())
            {
                final int at = requests.payloadOffset();
                final int length = requests.payloadLength();
                final int replyLength = requests.buffer().getInt(at + REPLY_LENGTH_OFFSET);
                final long correlationId = requests.buffer().getLong(at + CORRELATION_OFFSET);
                final int reply = responses.tryClaim(ECHO_TYPE, replyLength);
                if (reply < 0)
                {
                    break;
                }
                final AtomicBuffer out = responses.buffer();
                if (wholeRecords)
                {
                    final int copied = Math.min(length, replyLength);
                    out.putBytes(reply, requests.buffer(), at, copied);
                    out.setMemory(reply + copied, replyLength - copied, (byte)0);
                }
                out.putLong(reply + REPLY_CORRELATION_OFFSET, correlationId);
                responses.commit(replyLength);
                requests.consume();
                echoed++;
                work++;
            }
            return work;
        }

        @Override
        public String roleName()
        {
            return "kvstash-bench-echo";
        }

        long echoed()
        {
            return echoed;
        }
    }
}
