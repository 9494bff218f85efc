package io.kvstash.server.codec;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.codec.ResponseFlyweight;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.ring.RingProducer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import static io.kvstash.wire.codec.WireDescriptor.*;

/**
 * Encodes a finished command as a response record straight into a client's response ring (claim, write,
 * commit). Error reasons are constant strings; each is encoded once into a cache keyed by the string's
 * identity, so answering errors of many different reasons in turn allocates nothing once every reason has
 * been seen (a one-entry cache allocated on every change of reason: 170 bytes per fuzzed record, and
 * full collections of the server's heap).
 * <p>
 * Owner: the publish stage thread.
 */
public final class ResponseEncoder
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private static final int MESSAGE_CACHE_LENGTH = 256;
    private static final int MESSAGE_CACHE_PROBES = 8;
    private static final byte[] NO_MESSAGE = new byte[0];

    private final ResponseFlyweight flyweight = new ResponseFlyweight();
    private final StoreCounters counters;
    private final byte[] registerExtra;
    private final String[] cachedMessages = new String[MESSAGE_CACHE_LENGTH];
    private final byte[][] cachedMessageBytes = new byte[MESSAGE_CACHE_LENGTH][];

    /**
     * An encoder that answers STATS from a set of counters and REGISTER with the server's facts.
     *
     * @param counters      the server's counters.
     * @param registerExtra the extra part of every REGISTER answered OK ({@link #registerExtra}).
     */
    public ResponseEncoder(final StoreCounters counters, final byte[] registerExtra)
    {
        this.counters = counters;
        this.registerExtra = registerExtra.clone();
    }

    /**
     * The extra part of a REGISTER answered OK: what a registration returns beyond the
     * chunk and slot sizes of the header.
     * <pre>
     *   Incarnation (i64) | Pool Data Bytes (i64) | Lease ns (i64) | Chunk Tokens (i32) |
     *   Pool File Name Length (i32) | Pool File Name (ASCII)
     * </pre>
     *
     * @param incarnation   server incarnation.
     * @param poolSizeBytes pool data bytes.
     * @param leaseNs       lease.
     * @param chunkTokens   tokens per chunk.
     * @param poolFileName  pool file name in the server's directory.
     * @return the bytes.
     */
    public static byte[] registerExtra(
        final long incarnation,
        final long poolSizeBytes,
        final long leaseNs,
        final int chunkTokens,
        final String poolFileName)
    {
        final byte[] name = poolFileName.getBytes(StandardCharsets.US_ASCII);
        if (name.length > ResponseFlyweight.REGISTER_MAX_NAME_LENGTH)
        {
            throw new IllegalArgumentException("pool file name longer than " +
                ResponseFlyweight.REGISTER_MAX_NAME_LENGTH + " bytes: " + poolFileName);
        }
        final UnsafeBuffer b = new UnsafeBuffer(new byte[ResponseFlyweight.REGISTER_NAME_OFFSET + name.length]);
        b.putLong(ResponseFlyweight.REGISTER_INCARNATION_OFFSET, incarnation, LE);
        b.putLong(ResponseFlyweight.REGISTER_POOL_BYTES_OFFSET, poolSizeBytes, LE);
        b.putLong(ResponseFlyweight.REGISTER_LEASE_NS_OFFSET, leaseNs, LE);
        b.putInt(ResponseFlyweight.REGISTER_CHUNK_TOKENS_OFFSET, chunkTokens, LE);
        b.putInt(ResponseFlyweight.REGISTER_NAME_LENGTH_OFFSET, name.length, LE);
        b.putBytes(ResponseFlyweight.REGISTER_NAME_OFFSET, name);
        return b.byteArray();
    }

    /**
     * Writes the response of a command into a ring.
     *
     * @param c        finished command.
     * @param producer the client's response ring.
     * @return false when the ring has no room (the caller counts the drop).
     */
    public boolean encode(final StoreCommand c, final RingProducer producer)
    {
        return encode(c, producer, false, 0, 0);
    }

    /**
     * Writes the response of a command into a ring; a LOOKUP answered OK with {@code tierAnswer} also carries
     * the second tier's tickets as its extra part ({@link ResponseFlyweight#LOOKUP_TIER_EXTRA_LENGTH} bytes).
     *
     * @param c               finished command.
     * @param producer        the client's response ring.
     * @param tierAnswer      whether the answer carries the tier's tickets (a waiting LOOKUP on a server with a
     *                        tier); ignored for any other type and on an error status.
     * @param ticket          the read-through the LOOKUP started, 0 for none.
     * @param completedTicket the highest ticket whose read-through is over.
     * @return false when the ring has no room (the caller counts the drop).
     */
    public boolean encode(
        final StoreCommand c,
        final RingProducer producer,
        final boolean tierAnswer,
        final long ticket,
        final long completedTicket)
    {
        final int slots = Status.OK == c.status ? Math.max(0, c.slotCount) : 0;
        final byte[] message = Status.OK == c.status ? null : messageBytes(c.message);
        final int extra = extraLength(c, message, tierAnswer);
        final int length = ResponseFlyweight.length(slots, extra);
        if (length > producer.maxPayloadLength())
        {
            return false;
        }
        final int at = producer.tryClaim(RESPONSE_TYPE, length);
        if (at < 0)
        {
            return false;
        }
        final MutableDirectBuffer b = producer.buffer();
        final ResponseFlyweight r = flyweight.wrap(b, at, length);
        r.putHeader(
            c.correlationId, c.status, c.type, c.outTransferId, c.hitChunks, slots, c.removedCount, c.chunkBytes,
            c.slotBytes, c.slotCapacity, extra);
        for (int k = 0; k < slots; k++)
        {
            r.putSlot(k, c.slotRangeIndex[k], c.slotGeneration[k], c.slotOffset[k]);
        }
        putExtra(b, r.extraOffset(), c, message, extra, tierAnswer, ticket, completedTicket);
        producer.commit(length);
        return true;
    }

    /**
     * Length of a response's extra part: the error message, a READ_DATA's bytes, a STATS' counters, a REGISTER's
     * pool facts, or a tier LOOKUP's tickets; 0 for any other response.
     */
    private int extraLength(final StoreCommand c, final byte[] message, final boolean tierAnswer)
    {
        if (null != message)
        {
            return message.length;
        }
        if (RequestType.READ_DATA == c.type)
        {
            return c.dataLength;
        }
        if (RequestType.STATS == c.type)
        {
            return CountersDescriptor.COUNT * Long.BYTES;
        }
        if (RequestType.REGISTER == c.type)
        {
            return registerExtra.length;
        }
        if (tierAnswer && RequestType.LOOKUP == c.type)
        {
            return ResponseFlyweight.LOOKUP_TIER_EXTRA_LENGTH;
        }
        return 0;
    }

    /** Writes the extra part {@link #extraLength} sized at {@code i}, after the slots. */
    private void putExtra(
        final MutableDirectBuffer b,
        final int i,
        final StoreCommand c,
        final byte[] message,
        final int extra,
        final boolean tierAnswer,
        final long ticket,
        final long completedTicket)
    {
        if (null != message)
        {
            b.putBytes(i, message);
        }
        else if (RequestType.READ_DATA == c.type && extra > 0)
        {
            b.putBytes(i, c.data, 0, extra);
        }
        else if (RequestType.STATS == c.type)
        {
            for (int id = 0; id < CountersDescriptor.COUNT; id++)
            {
                b.putLong(i + id * Long.BYTES, counters.get(id), LE);
            }
        }
        else if (RequestType.REGISTER == c.type)
        {
            b.putBytes(i, registerExtra);
        }
        else if (tierAnswer && RequestType.LOOKUP == c.type)
        {
            b.putLong(i + ResponseFlyweight.LOOKUP_TIER_TICKET_OFFSET, ticket, LE);
            b.putLong(i + ResponseFlyweight.LOOKUP_TIER_COMPLETED_OFFSET, completedTicket, LE);
        }
    }

    private byte[] messageBytes(final String message)
    {
        if (null == message)
        {
            return NO_MESSAGE;
        }
        final int home = System.identityHashCode(message) & (MESSAGE_CACHE_LENGTH - 1);
        int free = home;
        for (int probe = 0; probe < MESSAGE_CACHE_PROBES; probe++)
        {
            final int i = (home + probe) & (MESSAGE_CACHE_LENGTH - 1);
            final String cached = cachedMessages[i];
            if (cached == message)
            {
                return cachedMessageBytes[i];
            }
            if (null == cached)
            {
                free = i;
                break;
            }
        }
        final byte[] bytes = message.getBytes(StandardCharsets.UTF_8);
        cachedMessages[free] = message;
        cachedMessageBytes[free] = bytes.length > MAX_MESSAGE_LENGTH ?
            java.util.Arrays.copyOf(bytes, MAX_MESSAGE_LENGTH) : bytes;
        return cachedMessageBytes[free];
    }
}
