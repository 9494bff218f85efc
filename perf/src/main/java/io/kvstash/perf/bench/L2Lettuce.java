package io.kvstash.perf.bench;

import io.kvstash.tier.L2Seeds;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisAdvancedClusterAsyncCommands;
import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.ToByteBufEncoder;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import io.netty.buffer.ByteBuf;
import org.agrona.concurrent.ManyToManyConcurrentArrayQueue;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The cluster engine's own limit, for the l2 part of the bench: a bare Lettuce async cluster connection (the
 * client library the second tier uses) running pipelined SET and GET loops of whole chunk values, with no kvstash
 * code in between. A SET writes its value from direct buffers (a per-key header and the shared payload) straight
 * into the network buffer; a GET copies its value once out of the network buffer into one of a few preallocated
 * direct buffers, handed back when the loop has checked it. Up to {@code depth} commands are in flight, the oldest
 * awaited before the next goes out. Owner: the worker's thread; Lettuce's I/O threads only encode and decode.
 */
final class L2Lettuce implements AutoCloseable
{
    /** Bound of one command's wait. */
    private static final long COMMAND_TIMEOUT_S = 60;

    private final ClientResources resources;
    private final RedisClusterClient client;
    private final StatefulRedisClusterConnection<byte[], Value> connection;
    private final RedisAdvancedClusterAsyncCommands<byte[], Value> commands;
    private final Codec codec;

    /**
     * Connects to a cluster.
     *
     * @param seeds         {@code redis://host:port[,host:port...]}.
     * @param valueCapacity bytes of the largest value a GET reads.
     * @param depth         commands in flight; as many receive buffers are preallocated, plus two.
     */
    L2Lettuce(final String seeds, final int valueCapacity, final int depth)
    {
        final List<RedisURI> uris = L2Seeds.parse(seeds);
        resources = DefaultClientResources.builder().ioThreadPoolSize(2).computationThreadPoolSize(2).build();
        client = RedisClusterClient.create(resources, uris);
        codec = new Codec(valueCapacity, depth + 2);
        connection = client.connect(codec);
        commands = connection.async();
    }

    /**
     * SETs every key once, {@code depth} in flight.
     *
     * @param keys   the keys.
     * @param values the value of each key (same index).
     * @param depth  commands in flight.
     * @return nanoseconds from the first SET sent to the last one answered.
     * @throws Exception when a SET fails or times out.
     */
    @SuppressWarnings({ "unchecked", "rawtypes" })
    long set(final byte[][] keys, final Value[] values, final int depth) throws Exception
    {
        final RedisFuture<String>[] inFlight = new RedisFuture[depth];
        final long start = System.nanoTime();
        for (int i = 0; i < keys.length; i++)
        {
            final int slot = i % depth;
            if (null != inFlight[slot])
            {
                checkSet(inFlight[slot]);
            }
            inFlight[slot] = commands.set(keys[i], values[i]);
        }
        for (int i = keys.length; i < keys.length + depth; i++)
        {
            final int slot = i % depth;
            if (null != inFlight[slot])
            {
                checkSet(inFlight[slot]);
                inFlight[slot] = null;
            }
        }
        return System.nanoTime() - start;
    }

    /**
     * GETs every key once, {@code depth} in flight, each value copied into a reused direct buffer and its length
     * checked.
     *
     * @param keys          the keys.
     * @param expectedBytes bytes each value must have.
     * @param depth         commands in flight.
     * @return nanoseconds from the first GET sent to the last value checked.
     * @throws Exception when a GET fails, times out or reads a value of another length.
     */
    @SuppressWarnings({ "unchecked", "rawtypes" })
    long get(final byte[][] keys, final int expectedBytes, final int depth) throws Exception
    {
        final RedisFuture<Value>[] inFlight = new RedisFuture[depth];
        final long start = System.nanoTime();
        for (int i = 0; i < keys.length; i++)
        {
            final int slot = i % depth;
            if (null != inFlight[slot])
            {
                checkGet(inFlight[slot], expectedBytes);
            }
            inFlight[slot] = commands.get(keys[i]);
        }
        for (int i = keys.length; i < keys.length + depth; i++)
        {
            final int slot = i % depth;
            if (null != inFlight[slot])
            {
                checkGet(inFlight[slot], expectedBytes);
                inFlight[slot] = null;
            }
        }
        return System.nanoTime() - start;
    }

    /**
     * GETs every key in runs of {@code run}: a run's GETs go out together and the next run only after every value
     * of this one was checked, the pattern of read-throughs that each fetch one run.
     *
     * @param keys          the keys.
     * @param expectedBytes bytes each value must have.
     * @param run           GETs of a run.
     * @return nanoseconds from the first GET sent to the last value checked.
     * @throws Exception when a GET fails, times out or reads a value of another length.
     */
    @SuppressWarnings({ "unchecked", "rawtypes" })
    long getInRuns(final byte[][] keys, final int expectedBytes, final int run) throws Exception
    {
        final RedisFuture<Value>[] inFlight = new RedisFuture[run];
        final long start = System.nanoTime();
        for (int from = 0; from < keys.length; from += run)
        {
            final int n = Math.min(run, keys.length - from);
            for (int i = 0; i < n; i++)
            {
                inFlight[i] = commands.get(keys[from + i]);
            }
            for (int i = 0; i < n; i++)
            {
                checkGet(inFlight[i], expectedBytes);
                inFlight[i] = null;
            }
        }
        return System.nanoTime() - start;
    }

    /**
     * Deletes keys (one DEL per key, all in flight at once), not timed.
     *
     * @param keys the keys.
     * @throws Exception when a DEL fails.
     */
    @SuppressWarnings({ "unchecked", "rawtypes" })
    void delete(final byte[][] keys) throws Exception
    {
        final RedisFuture<Long>[] dels = new RedisFuture[keys.length];
        for (int i = 0; i < keys.length; i++)
        {
            dels[i] = commands.del(keys[i]);
        }
        for (final RedisFuture<Long> del : dels)
        {
            del.get(COMMAND_TIMEOUT_S, TimeUnit.SECONDS);
        }
    }

    /**
     * GETs that found no free receive buffer and allocated one (0 when the preallocated ones sufficed).
     *
     * @return count.
     */
    long receiveAllocations()
    {
        return codec.allocations.get();
    }

    private static void checkSet(final RedisFuture<String> set) throws Exception
    {
        final String reply = set.get(COMMAND_TIMEOUT_S, TimeUnit.SECONDS);
        if (!"OK".equals(reply))
        {
            throw new IllegalStateException("SET answered " + reply);
        }
    }

    private void checkGet(final RedisFuture<Value> get, final int expectedBytes) throws Exception
    {
        final Value v = get.get(COMMAND_TIMEOUT_S, TimeUnit.SECONDS);
        if (null == v)
        {
            throw new IllegalStateException("GET found no value");
        }
        final int length = v.body.remaining();
        codec.free.offer(v);
        if (length != expectedBytes)
        {
            throw new IllegalStateException("GET read " + length + " bytes, not " + expectedBytes);
        }
    }

    @Override
    public void close()
    {
        connection.close();
        client.shutdown(0, 2, TimeUnit.SECONDS);
        resources.shutdown(0, 2, TimeUnit.SECONDS);
    }

    /**
     * A value: written as its header (may be null) then its body; read into its body.
     */
    static final class Value
    {
        final ByteBuffer header;
        final ByteBuffer body;

        Value(final ByteBuffer header, final ByteBuffer body)
        {
            this.header = header;
            this.body = body;
        }

        int length()
        {
            return (null == header ? 0 : header.remaining()) + body.remaining();
        }
    }

    /**
     * Keys as ASCII bytes; values encoded from their direct buffers (a duplicate each, as several I/O threads may
     * encode the shared payload at once) and decoded into a free preallocated direct buffer.
     */
    private static final class Codec implements RedisCodec<byte[], Value>, ToByteBufEncoder<byte[], Value>
    {
        final ManyToManyConcurrentArrayQueue<Value> free;
        final int capacity;
        final AtomicLong allocations = new AtomicLong();

        Codec(final int capacity, final int buffers)
        {
            this.capacity = capacity;
            this.free = new ManyToManyConcurrentArrayQueue<>(buffers);
            for (int i = 0; i < buffers; i++)
            {
                free.offer(new Value(null, ByteBuffer.allocateDirect(capacity)));
            }
        }

        @Override
        public byte[] decodeKey(final ByteBuffer bytes)
        {
            final byte[] key = new byte[bytes.remaining()];
            bytes.get(key);
            return key;
        }

        @Override
        public Value decodeValue(final ByteBuffer bytes)
        {
            Value v = free.poll();
            if (null == v || v.body.capacity() < bytes.remaining())
            {
                allocations.incrementAndGet();
                v = new Value(null, ByteBuffer.allocateDirect(Math.max(capacity, bytes.remaining())));
            }
            v.body.clear();
            v.body.put(bytes).flip();
            return v;
        }

        @Override
        public ByteBuffer encodeKey(final byte[] key)
        {
            return ByteBuffer.wrap(key);
        }

        @Override
        public ByteBuffer encodeValue(final Value value)
        {
            final ByteBuffer b = ByteBuffer.allocate(value.length());
            if (null != value.header)
            {
                b.put(value.header.duplicate());
            }
            return b.put(value.body.duplicate()).flip();
        }

        @Override
        public void encodeKey(final byte[] key, final ByteBuf target)
        {
            target.writeBytes(key);
        }

        @Override
        public void encodeValue(final Value value, final ByteBuf target)
        {
            if (null != value.header)
            {
                target.writeBytes(value.header.duplicate());
            }
            target.writeBytes(value.body.duplicate());
        }

        @Override
        public int estimateSize(final Object keyOrValue)
        {
            if (keyOrValue instanceof byte[])
            {
                return ((byte[])keyOrValue).length;
            }
            return keyOrValue instanceof Value ? ((Value)keyOrValue).length() : 0;
        }

        @Override
        public boolean isEstimateExact()
        {
            return true;
        }
    }
}
