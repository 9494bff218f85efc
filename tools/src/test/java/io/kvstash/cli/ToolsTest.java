package io.kvstash.cli;

import io.kvstash.server.Sizes;
import io.kvstash.tools.BundledTrace;
import io.kvstash.tools.ChunkPattern;
import io.kvstash.tools.Json;
import io.kvstash.tools.TraceReplay;
import io.kvstash.tools.WorkerResult;
import io.kvstash.wire.SlotGeometry;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The command line's helpers: sizes and durations, JSON, the chunk pattern, worker results, pool sizing.
 */
class ToolsTest
{
    @Test
    void shouldParseSizesWithBinarySuffixesAndRejectOthers()
    {
        assertEquals(4096, Sizes.parseSize("4096"));
        assertEquals(64 << 10, Sizes.parseSize("64k"));
        assertEquals(512L << 20, Sizes.parseSize("512m"));
        assertEquals(1L << 30, Sizes.parseSize("1g"));
        assertEquals(1L << 30, Sizes.parseSize("1GiB"));
        assertEquals(2L << 40, Sizes.parseSize("2t"));
        assertThrows(IllegalArgumentException.class, () -> Sizes.parseSize("1x"));
        assertThrows(IllegalArgumentException.class, () -> Sizes.parseSize("g"));
        assertThrows(IllegalArgumentException.class, () -> Sizes.parseSize("99999999999t"));
        assertEquals("1 GiB", Sizes.formatSize(1L << 30));
        assertEquals("1.50 KiB", Sizes.formatSize(1536));
    }

    @Test
    void shouldParseDurationsOnlyWithAUnit()
    {
        assertEquals(30_000_000_000L, Sizes.parseDurationNs("30s"));
        assertEquals(500_000_000L, Sizes.parseDurationNs("500ms"));
        assertEquals(100_000L, Sizes.parseDurationNs("100us"));
        assertEquals(120_000_000_000L, Sizes.parseDurationNs("2m"));
        assertThrows(IllegalArgumentException.class, () -> Sizes.parseDurationNs("30"));
        assertThrows(IllegalArgumentException.class, () -> Sizes.parseDurationNs("3 days"));
        assertEquals("30s", Sizes.formatDuration(30_000_000_000L));
        assertEquals("1500ms", Sizes.formatDuration(1_500_000_000L));
    }

    @Test
    void shouldReadBackWhatItWritesWhenRoundTrippingJson()
    {
        final String text = "{\"a\":1,\"b\":-2.5,\"c\":\"x\\\"y\\n\",\"d\":[true,false,null],\"e\":{}}";
        final Map<String, Object> map = Json.parseObject(text);
        assertEquals(1L, map.get("a"));
        assertEquals(-2.5, map.get("b"));
        assertEquals("x\"y\n", map.get("c"));
        assertEquals(List.of(true, false), ((List<?>)map.get("d")).subList(0, 2));
        assertEquals(text, Json.write(map));
        assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"a\":1"));
        assertThrows(IllegalArgumentException.class, () -> Json.parse("[1,]x"));
    }

    @Test
    void shouldDetectTheWrongKeyAndAnyFlippedByteWhenVerifyingTheChunkPattern()
    {
        final ChunkPattern pattern = new ChunkPattern();
        for (final int length : new int[]{ 32, 100, 4096 })
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(length));
            pattern.fill(buffer, length, 7, 42);
            assertTrue(pattern.verify(buffer, length, 7, 42));
            assertFalse(pattern.verify(buffer, length, 7, 43));
            final UnsafeBuffer copy = new UnsafeBuffer(new byte[length]);
            copy.putBytes(0, buffer, 0, length);
            assertTrue(pattern.verify(copy, length, 7, 42), "heap and direct buffers alike");
            for (int i = 0; i < length; i += 13)
            {
                copy.putByte(i, (byte)(copy.getByte(i) ^ 0x10));
                assertFalse(pattern.verify(copy, length, 7, 42), "byte " + i);
                copy.putByte(i, (byte)(copy.getByte(i) ^ 0x10));
            }
            final UnsafeBuffer other = new UnsafeBuffer(ByteBuffer.allocateDirect(length));
            pattern.fill(other, length, 7, 43);
            other.putLong(8, 42);
            assertFalse(pattern.verify(other, length, 7, 42), "another key's body");
        }
    }

    @Test
    void shouldAddCountsAndHistogramsWhenMergingEncodedWorkerResults()
    {
        final WorkerResult a = new WorkerResult();
        a.add(WorkerResult.HIT_CHUNKS, 5);
        a.record(WorkerResult.OP_LOOKUP, 1_000);
        a.elapsedNs(10);
        final WorkerResult b = new WorkerResult();
        b.add(WorkerResult.HIT_CHUNKS, 7);
        b.record(WorkerResult.OP_LOOKUP, 3_000);
        b.record(WorkerResult.OP_COMMIT_STORE, 20_000_000_000L);
        b.elapsedNs(20);

        final WorkerResult merged = new WorkerResult();
        merged.merge(WorkerResult.fromMap(Json.parseObject(Json.write(a.toMap()))));
        merged.merge(WorkerResult.fromMap(Json.parseObject(Json.write(b.toMap()))));
        assertEquals(12, merged.count(WorkerResult.HIT_CHUNKS));
        assertEquals(2, merged.histogram(WorkerResult.OP_LOOKUP).getTotalCount());
        assertEquals(3, merged.roundTrips().getTotalCount());
        assertEquals(20, merged.elapsedNs());
        assertTrue(merged.histogram(WorkerResult.OP_COMMIT_STORE).getMaxValue() >= 19_990_000_000L);
    }

    @Test
    void shouldSizeThePoolToExactlyTheCapacityWhenSlotsDoNotDivideASegment()
    {
        for (final long slot : new long[]{ 4096, 65536, 40960, 3 * 4096 })
        {
            for (final int capacity : new int[]{ 1, 1024, 16384, 65536, 100_000 })
            {
                assertEquals(capacity, SlotGeometry.capacity(TraceReplay.poolBytesFor(capacity, slot), slot));
            }
        }
    }

    @Test
    void shouldRecogniseTheBundledTrace() throws Exception
    {
        assertTrue(BundledTrace.isBundled(Cli.TRACE));
        assertEquals(Cli.TRACE, BundledTrace.locate().toAbsolutePath().normalize());
    }
}
