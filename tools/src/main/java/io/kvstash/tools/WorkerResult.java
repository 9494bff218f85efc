package io.kvstash.tools;

import org.HdrHistogram.Histogram;

import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.zip.DataFormatException;

/**
 * What a replay worker did: counts by name, elapsed time and one client-side latency histogram (ns) per
 * operation type. Travels from a worker process to its coordinator as one JSON object whose histograms are
 * base64 of HdrHistogram's compressed encoding, and merges with the results of other workers. Not thread
 * safe.
 */
public final class WorkerResult
{
    /** Trace requests replayed. */
    public static final int REQUESTS = 0;
    /** Chunk references of those requests. */
    public static final int CHUNKS = 1;
    /** Chunks LOOKUP counted as hits (the readable prefix). */
    public static final int HIT_CHUNKS = 2;
    /** Chunks read and checked. */
    public static final int RETRIEVED_CHUNKS = 3;
    /** Chunks written into reserved slots. */
    public static final int STORED_CHUNKS = 4;
    /** Chunks of store ranges the server skipped (already readable or reserved). */
    public static final int SKIPPED_CHUNKS = 5;
    /** Bytes read from the pool. */
    public static final int BYTES_READ = 6;
    /** Bytes written into the pool. */
    public static final int BYTES_WRITTEN = 7;
    /** Chunks read whose key or checksum did not match. */
    public static final int CHECKSUM_MISMATCHES = 8;
    /** Slots whose reservation or readability ended under the worker (lease reclaimed): not checked. */
    public static final int FENCE_FAILURES = 9;
    /** PREPARE_RETRIEVE answered MISS. */
    public static final int RETRIEVE_MISSES = 10;
    /** PREPARE_STORE answered NO_SPACE. */
    public static final int NO_SPACE = 11;
    /** Any request answered UNKNOWN_TRANSFER. */
    public static final int UNKNOWN_TRANSFER = 12;
    /** Any other error status. */
    public static final int OTHER_ERRORS = 13;
    /** Number of counts. */
    public static final int COUNT_TYPES = 14;

    /** Names of the counts in JSON. */
    public static final String[] COUNT_NAMES =
    {
        "requests", "chunks", "hit_chunks", "retrieved_chunks", "stored_chunks", "skipped_chunks", "bytes_read",
        "bytes_written", "checksum_mismatches", "fence_failures", "retrieve_misses", "no_space", "unknown_transfer",
        "other_errors"
    };

    /** Operation: LOOKUP round trip. */
    public static final int OP_LOOKUP = 0;
    /** Operation: PREPARE_RETRIEVE round trip. */
    public static final int OP_PREPARE_RETRIEVE = 1;
    /** Operation: COMMIT_RETRIEVE round trip. */
    public static final int OP_COMMIT_RETRIEVE = 2;
    /** Operation: PREPARE_STORE round trip. */
    public static final int OP_PREPARE_STORE = 3;
    /** Operation: COMMIT_STORE round trip. */
    public static final int OP_COMMIT_STORE = 4;
    /** Operations {@code [0, ROUND_TRIP_OPERATIONS)} are request round trips to the server. */
    public static final int ROUND_TRIP_OPERATIONS = 5;
    /** Operation: copying one chunk out of the pool. */
    public static final int OP_READ_CHUNK = 5;
    /** Operation: copying one chunk into the pool. */
    public static final int OP_WRITE_CHUNK = 6;
    /** Operation: one whole trace request (lookup, retrieve, store). */
    public static final int OP_REQUEST = 7;
    /** Number of operation types. */
    public static final int OPERATION_TYPES = 8;

    /** Names of the operation types. */
    public static final String[] OPERATION_NAMES =
    {
        "lookup", "prepare_retrieve", "commit_retrieve", "prepare_store", "commit_store", "read_chunk",
        "write_chunk", "request"
    };

    private static final int SIGNIFICANT_DIGITS = 3;

    private final long[] counts = new long[COUNT_TYPES];
    private final Histogram[] histograms = new Histogram[OPERATION_TYPES];
    private long elapsedNs;

    /**
     * An empty result.
     */
    public WorkerResult()
    {
        for (int i = 0; i < OPERATION_TYPES; i++)
        {
            histograms[i] = newHistogram();
        }
    }

    /**
     * A histogram as the results use: ns, auto-resizing, 3 significant digits.
     *
     * @return a new histogram.
     */
    public static Histogram newHistogram()
    {
        final Histogram histogram = new Histogram(SIGNIFICANT_DIGITS);
        histogram.setAutoResize(true);
        return histogram;
    }

    /**
     * A count.
     *
     * @param id count id.
     * @return value.
     */
    public long count(final int id)
    {
        return counts[id];
    }

    /**
     * Adds to a count.
     *
     * @param id    count id.
     * @param delta amount.
     */
    public void add(final int id, final long delta)
    {
        counts[id] += delta;
    }

    /**
     * Records a latency.
     *
     * @param operation operation type.
     * @param ns        nanoseconds.
     */
    public void record(final int operation, final long ns)
    {
        histograms[operation].recordValue(Math.max(0, ns));
    }

    /**
     * Histogram of an operation type.
     *
     * @param operation operation type.
     * @return the histogram (ns).
     */
    public Histogram histogram(final int operation)
    {
        return histograms[operation];
    }

    /**
     * Every request round trip together (LOOKUP, PREPARE_* and COMMIT_*).
     *
     * @return a new histogram (ns).
     */
    public Histogram roundTrips()
    {
        final Histogram all = newHistogram();
        for (int i = 0; i < ROUND_TRIP_OPERATIONS; i++)
        {
            all.add(histograms[i]);
        }
        return all;
    }

    /**
     * Time the worker spent replaying.
     *
     * @return ns.
     */
    public long elapsedNs()
    {
        return elapsedNs;
    }

    /**
     * Sets the time spent replaying.
     *
     * @param elapsedNs ns.
     */
    public void elapsedNs(final long elapsedNs)
    {
        this.elapsedNs = elapsedNs;
    }

    /**
     * Adds another worker's result: counts and histograms add up, elapsed time is the longest.
     *
     * @param other result to add.
     */
    public void merge(final WorkerResult other)
    {
        for (int i = 0; i < COUNT_TYPES; i++)
        {
            counts[i] += other.counts[i];
        }
        for (int i = 0; i < OPERATION_TYPES; i++)
        {
            histograms[i].add(other.histograms[i]);
        }
        elapsedNs = Math.max(elapsedNs, other.elapsedNs);
    }

    /**
     * The result as a JSON-ready map.
     *
     * @return counts, {@code elapsed_ns} and {@code histograms} (name to base64).
     */
    public Map<String, Object> toMap()
    {
        final Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i < COUNT_TYPES; i++)
        {
            map.put(COUNT_NAMES[i], counts[i]);
        }
        map.put("elapsed_ns", elapsedNs);
        final Map<String, Object> encoded = new LinkedHashMap<>();
        for (int i = 0; i < OPERATION_TYPES; i++)
        {
            encoded.put(OPERATION_NAMES[i], encode(histograms[i]));
        }
        map.put("histograms", encoded);
        return map;
    }

    /**
     * Reads a result from its map form.
     *
     * @param map parsed JSON of {@link #toMap()}.
     * @return the result.
     * @throws IllegalArgumentException when a field is missing or a histogram cannot be decoded.
     */
    public static WorkerResult fromMap(final Map<String, Object> map)
    {
        final WorkerResult result = new WorkerResult();
        for (int i = 0; i < COUNT_TYPES; i++)
        {
            result.counts[i] = longField(map, COUNT_NAMES[i]);
        }
        result.elapsedNs = longField(map, "elapsed_ns");
        final Object histograms = map.get("histograms");
        if (!(histograms instanceof Map))
        {
            throw new IllegalArgumentException("worker result has no histograms");
        }
        final Map<?, ?> encoded = (Map<?, ?>)histograms;
        for (int i = 0; i < OPERATION_TYPES; i++)
        {
            final Object text = encoded.get(OPERATION_NAMES[i]);
            if (text instanceof String)
            {
                result.histograms[i].add(decode((String)text));
            }
        }
        return result;
    }

    private static long longField(final Map<String, Object> map, final String name)
    {
        final Object value = map.get(name);
        if (!(value instanceof Number))
        {
            throw new IllegalArgumentException("worker result has no number '" + name + "'");
        }
        return ((Number)value).longValue();
    }

    /**
     * Encodes a histogram: base64 of its compressed HdrHistogram encoding.
     *
     * @param histogram histogram.
     * @return text.
     */
    public static String encode(final Histogram histogram)
    {
        final ByteBuffer buffer = ByteBuffer.allocate(histogram.getNeededByteBufferCapacity());
        final int length = histogram.encodeIntoCompressedByteBuffer(buffer);
        final byte[] bytes = new byte[length];
        buffer.flip();
        buffer.get(bytes);
        return Base64.getEncoder().encodeToString(bytes);
    }

    /**
     * Decodes a histogram of {@link #encode(Histogram)}.
     *
     * @param text base64.
     * @return the histogram.
     * @throws IllegalArgumentException when the text is not an encoded histogram.
     */
    public static Histogram decode(final String text)
    {
        try
        {
            return Histogram.decodeFromCompressedByteBuffer(ByteBuffer.wrap(Base64.getDecoder().decode(text)), 0);
        }
        catch (final DataFormatException | RuntimeException ex)
        {
            throw new IllegalArgumentException("not an encoded histogram", ex);
        }
    }
}
