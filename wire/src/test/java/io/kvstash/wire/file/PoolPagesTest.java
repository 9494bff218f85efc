package io.kvstash.wire.file;

import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class PoolPagesTest
{
    private static final int PAGES = 4096;
    private static final int LENGTH = PAGES * PoolPages.PAGE_BYTES;

    private Path dir;

    @AfterEach
    void cleanUp()
    {
        if (null != dir)
        {
            IoUtil.delete(dir.toFile(), true);
        }
    }

    @Test
    void fillWithZerosWritesZerosOverTheRegionOnlyAndKeepsTheLength() throws IOException
    {
        final Path file = newFile();
        final int length = (3 << 20) + 123;
        final byte[] ones = new byte[length + 2 * 4096];
        java.util.Arrays.fill(ones, (byte)1);
        Files.write(file, ones);
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            PoolPages.fillWithZeros(channel, 4096, length);
            assertEquals(ones.length, channel.size());
        }
        final byte[] after = Files.readAllBytes(file);
        for (int i = 0; i < after.length; i++)
        {
            final int expected = i >= 4096 && i < 4096 + length ? 0 : 1;
            assertEquals(expected, after[i], "byte " + i);
        }
    }

    @Test
    void aTouchedMappingTakesNoPageFaultOnItsFirstWrites() throws IOException
    {
        assumeTrue(Files.isReadable(Path.of("/proc/self/stat")), "needs Linux's /proc/self/stat");
        final Path file = newFile();
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            PoolPages.fillWithZeros(channel, 0, LENGTH);
            // The same writes into an untouched mapping of the same pages first: they must fault, or this test
            // could not see a fault at all.
            final long untouched = faultsWritingEveryPage(channel, false);
            final long touched = faultsWritingEveryPage(channel, true);
            assertTrue(untouched > PAGES / 2, "an untouched mapping took " + untouched + " faults for " + PAGES +
                " pages");
            assertTrue(touched < PAGES / 8, "a touched mapping took " + touched + " faults for " + PAGES + " pages");
        }
    }

    @Test
    void touchSegmentsOnSeveralThreadsLeavesEveryByteAndMapsEveryPage() throws IOException
    {
        assumeTrue(Files.isReadable(Path.of("/proc/self/stat")), "needs Linux's /proc/self/stat");
        final Path file = newFile();
        final int segmentBytes = 1 << 20;
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            PoolPages.fillWithZeros(channel, 0, LENGTH);
            final MappedByteBuffer writer = channel.map(FileChannel.MapMode.READ_WRITE, 0, LENGTH);
            final int count = LENGTH / segmentBytes;
            final MappedByteBuffer[] mapped = new MappedByteBuffer[count];
            final UnsafeBuffer[] segments = new UnsafeBuffer[count];
            for (int i = 0; i < count; i++)
            {
                mapped[i] = channel.map(FileChannel.MapMode.READ_WRITE, (long)i * segmentBytes, segmentBytes);
                segments[i] = new UnsafeBuffer(mapped[i]);
            }
            try
            {
                final UnsafeBuffer written = new UnsafeBuffer(writer);
                for (int i = 0; i < LENGTH; i += 8)
                {
                    written.putLong(i, i * 31L + 7);
                }
                PoolPages.touchSegments(LENGTH, segments, segmentBytes, 3);
                final long before = minorFaults();
                for (int i = 0; i < count; i++)
                {
                    for (int page = 0; page < segmentBytes; page += PoolPages.PAGE_BYTES)
                    {
                        segments[i].putByte(page + 100, segments[i].getByte(page + 100));
                    }
                }
                final long faults = minorFaults() - before;
                assertTrue(faults < PAGES / 8, "touched segments took " + faults + " faults for " + PAGES + " pages");
                for (int i = 0; i < LENGTH; i += 8)
                {
                    assertEquals(i * 31L + 7, segments[i / segmentBytes].getLong(i % segmentBytes), "offset " + i);
                }
            }
            finally
            {
                IoUtil.unmap(writer);
                for (final MappedByteBuffer m : mapped)
                {
                    IoUtil.unmap(m);
                }
            }
        }
    }

    @Test
    void prepareNewPoolZerosTheDataRegionAndTouchesEverySegmentOnSeveralThreads() throws IOException
    {
        assumeTrue(Files.isReadable(Path.of("/proc/self/stat")), "needs Linux's /proc/self/stat");
        dir = newDirectory();
        final Path file = dir.resolve("pool");
        final int header = 4096;
        final int segmentBytes = 1 << 20;
        // Five and a half segments: the parts of three threads end inside segments, and the last segment is short.
        final int dataBytes = 5 * segmentBytes + segmentBytes / 2;
        final byte[] ones = new byte[header + dataBytes];
        java.util.Arrays.fill(ones, (byte)1);
        Files.write(file, ones);
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            final int count = (dataBytes + segmentBytes - 1) / segmentBytes;
            final MappedByteBuffer[] mapped = new MappedByteBuffer[count];
            final UnsafeBuffer[] segments = new UnsafeBuffer[count];
            for (int i = 0; i < count; i++)
            {
                final long length = Math.min(segmentBytes, dataBytes - (long)i * segmentBytes);
                mapped[i] = channel.map(FileChannel.MapMode.READ_WRITE, header + (long)i * segmentBytes, length);
                segments[i] = new UnsafeBuffer(mapped[i]);
            }
            try
            {
                PoolPages.prepareNewPool(channel, header, dataBytes, segments, segmentBytes, 3, () -> false);
                final long before = minorFaults();
                for (int i = 0; i < count; i++)
                {
                    for (int page = 0; page < segments[i].capacity(); page += PoolPages.PAGE_BYTES)
                    {
                        segments[i].putByte(page + 100, (byte)7);
                    }
                }
                final long faults = minorFaults() - before;
                final int pages = dataBytes / PoolPages.PAGE_BYTES;
                assertTrue(faults < pages / 8, "a prepared pool took " + faults + " faults for " + pages + " pages");
            }
            finally
            {
                for (final MappedByteBuffer m : mapped)
                {
                    IoUtil.unmap(m);
                }
            }
        }
        final byte[] after = Files.readAllBytes(file);
        assertEquals(header + dataBytes, after.length);
        for (int i = 0; i < after.length; i++)
        {
            final int page = i - header;
            final int expected = i < header ? 1 : page % PoolPages.PAGE_BYTES == 100 ? 7 : 0;
            assertEquals(expected, after[i], "byte " + i);
        }
    }

    private static long faultsWritingEveryPage(final FileChannel channel, final boolean touch) throws IOException
    {
        final MappedByteBuffer mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, LENGTH);
        try
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(mapped);
            if (touch)
            {
                PoolPages.touchSegments(LENGTH, new UnsafeBuffer[]{ buffer }, LENGTH, 1);
            }
            final long before = minorFaults();
            for (int page = 0; page < PAGES; page++)
            {
                buffer.putByte(page * PoolPages.PAGE_BYTES + 100, (byte)7);
            }
            return minorFaults() - before;
        }
        finally
        {
            IoUtil.unmap(mapped);
        }
    }

    /**
     * The process's minor page faults so far: field 10 of /proc/self/stat.
     */
    private static long minorFaults() throws IOException
    {
        final String stat = Files.readString(Path.of("/proc/self/stat"));
        final String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(fields[7]);
    }

    /**
     * A fresh directory on tmpfs where there is one ({@code /dev/shm}, where the pool lives), else in the temporary
     * directory.
     */
    private static Path newDirectory() throws IOException
    {
        final Path shm = Path.of("/dev/shm");
        return Files.isDirectory(shm) ?
            Files.createTempDirectory(shm, "kvstash-test-pool-pages-") :
            Files.createTempDirectory("kvstash-test-pool-pages-");
    }

    private Path newFile() throws IOException
    {
        dir = newDirectory();
        final Path file = dir.resolve("pool");
        Files.write(file, new byte[0]);
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE))
        {
            channel.write(ByteBuffer.wrap(new byte[1]), LENGTH - 1);
        }
        return file;
    }
}
