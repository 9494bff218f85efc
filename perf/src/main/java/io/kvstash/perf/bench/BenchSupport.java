package io.kvstash.perf.bench;

import io.kvstash.core.StoreContext;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.HdrHistogram.Histogram;
import org.agrona.IoUtil;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Small helpers shared by the bench's coordinator and worker: chunk layouts, histograms on the wire, GC
 * counts, mapped files and idle strategies. Only the GC count is public: the pipeline side-by-side uses it too.
 */
public final class BenchSupport
{
    /** Largest latency a histogram tracks: 60 s in ns. */
    static final long HIGHEST_NS = TimeUnit.SECONDS.toNanos(60);
    /** Wait mode names of the command line and the JSON. */
    static final String BUSY_SPIN = "busy-spin";
    /** The default wait mode: spin, yield, park. */
    static final String BACKOFF = "backoff";

    private BenchSupport()
    {
    }

    /**
     * A histogram of nanoseconds, 3 significant digits.
     *
     * @return histogram.
     */
    static Histogram newHistogram()
    {
        return new Histogram(1, HIGHEST_NS, 3);
    }

    /**
     * Records a value clamped into the histogram's range.
     *
     * @param h  histogram.
     * @param ns value.
     */
    static void record(final Histogram h, final long ns)
    {
        h.recordValue(Math.max(1, Math.min(ns, HIGHEST_NS)));
    }

    /**
     * Collections of every garbage collector of this JVM so far.
     *
     * @return count.
     */
    public static long gcCount()
    {
        long count = 0;
        for (final GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans())
        {
            count += Math.max(0, gc.getCollectionCount());
        }
        return count;
    }

    /**
     * The idle strategy of a wait mode, for clients and the echo agents: the client library's default
     * backoff, or a busy spin.
     *
     * @param waitMode {@link #BUSY_SPIN} or {@link #BACKOFF}.
     * @return a fresh strategy.
     */
    static IdleStrategy clientIdle(final String waitMode)
    {
        return BUSY_SPIN.equals(waitMode) ? new BusySpinIdleStrategy() :
            new BackoffIdleStrategy(100, 100, TimeUnit.MICROSECONDS.toNanos(1), TimeUnit.MICROSECONDS.toNanos(100));
    }

    /**
     * A float16 layout whose chunk of 256 tokens is exactly {@code chunkBytes}: 4 KiB (1 layer, hidden 4),
     * 256 KiB (2 x 128), 2 MiB (8 x 256), 32 MiB (32 layers x 1,024, an 8B model with grouped-query attention),
     * other multiples of 1 KiB as one layer.
     *
     * @param chunkBytes bytes of one chunk.
     * @return the layout.
     */
    static Layout layout(final long chunkBytes)
    {
        final int tokens = StoreContext.CHUNK_TOKENS_DEFAULT;
        final long perLayerHidden = chunkBytes / (2L * tokens * 2);
        if (perLayerHidden * 2L * tokens * 2 != chunkBytes || perLayerHidden <= 0)
        {
            throw new IllegalArgumentException("chunk size must be a multiple of 1 KiB: " + chunkBytes);
        }
        final int layers;
        if (perLayerHidden >= 32 * 1024 && perLayerHidden % 32 == 0)
        {
            layers = 32;
        }
        else if (perLayerHidden >= 2048 && perLayerHidden % 8 == 0)
        {
            layers = 8;
        }
        else if (perLayerHidden >= 256 && perLayerHidden % 2 == 0)
        {
            layers = 2;
        }
        else
        {
            layers = 1;
        }
        return Layout.of("kvstash-bench-" + chunkBytes, 1, 0, layers, (int)(perLayerHidden / layers), Dtype.FLOAT16,
            false);
    }

    /**
     * A readable size: {@code 4 KiB}, {@code 32 MiB}.
     *
     * @param bytes bytes.
     * @return text.
     */
    static String size(final long bytes)
    {
        if (bytes >= (1L << 20) && bytes % (1L << 20) == 0)
        {
            return (bytes >> 20) + " MiB";
        }
        if (bytes >= 1024 && bytes % 1024 == 0)
        {
            return (bytes >> 10) + " KiB";
        }
        return bytes + " B";
    }

    /**
     * Formats a number for tables.
     *
     * @param format format.
     * @param args   values.
     * @return text.
     */
    static String fmt(final String format, final Object... args)
    {
        return String.format(Locale.ROOT, format, args);
    }

    /**
     * Creates a file of a length (0600), maps it and writes one byte per page so every page is in memory.
     *
     * @param file   path.
     * @param length bytes, at most 2 GiB - 1.
     * @return the mapping.
     * @throws IOException when the file cannot be created or mapped.
     */
    static MappedByteBuffer mapNew(final Path file, final long length) throws IOException
    {
        Files.deleteIfExists(file);
        Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            final MappedByteBuffer mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, length);
            for (int page = 0; page < length; page += 4096)
            {
                mapped.put(page, (byte)0);
            }
            return mapped;
        }
    }

    /**
     * Maps an existing file.
     *
     * @param file path.
     * @return the mapping of the whole file.
     * @throws IOException when it cannot be mapped.
     */
    static MappedByteBuffer mapExisting(final Path file) throws IOException
    {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            return channel.map(FileChannel.MapMode.READ_WRITE, 0, channel.size());
        }
    }

    /**
     * Unmaps a mapping, ignoring null.
     *
     * @param mapped mapping or null.
     */
    static void unmap(final MappedByteBuffer mapped)
    {
        if (null != mapped)
        {
            IoUtil.unmap(mapped);
        }
    }

    /**
     * Median of values.
     *
     * @param values values, not empty.
     * @return the median (mean of the middle two for an even count).
     */
    static double median(final double[] values)
    {
        final double[] sorted = values.clone();
        Arrays.sort(sorted);
        final int n = sorted.length;
        return 0 == (n & 1) ? (sorted[n / 2 - 1] + sorted[n / 2]) / 2 : sorted[n / 2];
    }
}
