package io.kvstash.wire.layout;

import io.kvstash.wire.Status;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

class LayoutTest
{
    private static final long GIB = 1L << 30;

    @Test
    void shouldComputeKAndVShapeWhenNotMla()
    {
        final Layout layout = Layout.of("llama", 1, 0, 32, 1024, Dtype.BFLOAT16, false);
        assertEquals(2L * 32 * 256 * 1024 * 2, layout.chunkBytes(256));
        assertArrayEquals(new long[]{ 2, 32, 256, 1024 }, layout.shape(256));
    }

    @Test
    void shouldComputeSingleTensorShapeWhenMla()
    {
        final Layout layout = Layout.of("deepseek", 1, 0, 61, 576, Dtype.FLOAT16, true);
        assertEquals(61L * 256 * 576 * 2, layout.chunkBytes(256));
        assertArrayEquals(new long[]{ 61, 256, 576 }, layout.shape(256));
        assertEquals(2 * layout.chunkBytes(256),
            Layout.of("deepseek", 1, 0, 61, 576, Dtype.FLOAT16, false).chunkBytes(256));
    }

    @Test
    void shouldUseItemSizeOfEveryDtypeWhenComputingChunkBytes()
    {
        final int[] expected = { 4, 2, 2, 1, 1, 1, 1 };
        final Dtype[] dtypes = { Dtype.FLOAT32, Dtype.FLOAT16, Dtype.BFLOAT16, Dtype.FLOAT8_E4M3FN,
            Dtype.FLOAT8_E5M2, Dtype.INT8, Dtype.UINT8 };
        assertEquals(dtypes.length, Dtype.values().length, "every wire dtype is covered");
        for (int i = 0; i < dtypes.length; i++)
        {
            assertEquals(expected[i], dtypes[i].itemSize(), dtypes[i].dtypeName());
            assertEquals(2L * 3 * 16 * 8 * expected[i],
                Layout.of("m", 1, 0, 3, 8, dtypes[i], false).chunkBytes(16), dtypes[i].dtypeName());
            assertEquals(Status.OK, Layout.of("m", 1, 0, 3, 8, dtypes[i], false).validate(16, GIB));
        }
    }

    @Test
    void shouldResolveDtypesWhenGivenCodesOrTorchNames()
    {
        final String[] names = { "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8", "uint8" };
        for (int i = 0; i < names.length; i++)
        {
            final Dtype dtype = Dtype.fromName(names[i]);
            assertEquals(names[i], dtype.dtypeName());
            assertSame(dtype, Dtype.fromName("torch." + names[i]));
            assertSame(dtype, Dtype.fromCode(dtype.code()));
            assertNotEquals(0, dtype.code());
        }
        assertNull(Dtype.fromCode(0));
        assertNull(Dtype.fromCode(-1));
        assertNull(Dtype.fromCode(8));
        assertNull(Dtype.fromCode(Integer.MAX_VALUE));
        assertNull(Dtype.fromName("float64"));
        assertNull(Dtype.fromName("torch."));
        assertNull(Dtype.fromName(null));
    }

    @Test
    void shouldReturnMinusOneWhenChunkBytesOverflow()
    {
        final Layout huge = Layout.of("m", 1, 0, Integer.MAX_VALUE, Integer.MAX_VALUE, Dtype.FLOAT32, false);
        assertEquals(-1, huge.chunkBytes(1 << 20));
        assertEquals(Status.INVALID_LAYOUT, huge.validate(1 << 20, Long.MAX_VALUE));
        // L*C*H*item fits a long, the final x2 for K and V does not.
        final Layout edge = Layout.of("m", 1, 0, 1 << 30, 1 << 10, Dtype.FLOAT32, false);
        assertEquals(-1, edge.chunkBytes(1 << 20));
        assertEquals(1L << 62, Layout.of("m", 1, 0, 1 << 30, 1 << 10, Dtype.FLOAT32, true).chunkBytes(1 << 20));
        final Layout edgeMla = Layout.of("m", 1, 0, 1 << 30, 1 << 30, Dtype.INT8, true);
        assertEquals(1L << 60, edgeMla.chunkBytes(1));
    }

    @Test
    void shouldReturnMinusOneWhenASizeIsNotPositive()
    {
        assertEquals(-1, Layout.of("m", 1, 0, 0, 8, Dtype.FLOAT16, false).chunkBytes(16));
        assertEquals(-1, Layout.of("m", 1, 0, 4, 0, Dtype.FLOAT16, false).chunkBytes(16));
        assertEquals(-1, Layout.of("m", 1, 0, -4, 8, Dtype.FLOAT16, false).chunkBytes(16));
        assertEquals(-1, Layout.of("m", 1, 0, 4, 8, Dtype.FLOAT16, false).chunkBytes(0));
        assertEquals(-1, new Layout(bytes("m"), 1, 0, 4, 8, 99, false).chunkBytes(16));
    }

    @Test
    void shouldRejectLayoutWhenValidatingBadFields()
    {
        final int c = 16;
        assertEquals(Status.OK, Layout.of("m", 2, 1, 4, 8, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT, new Layout(bytes("m"), 1, 0, 4, 8, 0, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT, new Layout(bytes("m"), 1, 0, 4, 8, 42, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT, Layout.of("", 1, 0, 4, 8, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT,
            Layout.of("x".repeat(256), 1, 0, 4, 8, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.OK, Layout.of("x".repeat(255), 1, 0, 4, 8, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT, Layout.of("m", 0, 0, 4, 8, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT,
            Layout.of("m", Layout.MAX_WORLD_SIZE + 1, 0, 4, 8, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT, Layout.of("m", 2, 2, 4, 8, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT, Layout.of("m", 2, -1, 4, 8, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT, Layout.of("m", 1, 0, 0, 8, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT, Layout.of("m", 1, 0, 4, 0, Dtype.FLOAT16, false).validate(c, GIB));
        assertEquals(Status.INVALID_LAYOUT, Layout.of("m", 1, 0, 4, -8, Dtype.FLOAT16, false).validate(c, GIB));
    }

    @Test
    void shouldRejectLayoutWhenChunkIsLargerThanThePool()
    {
        final Layout layout = Layout.of("m", 1, 0, 4, 8, Dtype.FLOAT16, false);
        final long bytes = layout.chunkBytes(16);
        assertEquals(Status.OK, layout.validate(16, bytes));
        assertEquals(Status.INVALID_LAYOUT, layout.validate(16, bytes - 1));
    }

    @Test
    void shouldCompareAllFieldsWhenTestingEquality()
    {
        final Layout a = Layout.of("m", 2, 1, 4, 8, Dtype.FLOAT16, false);
        assertEquals(a, Layout.of("m", 2, 1, 4, 8, Dtype.FLOAT16, false));
        assertEquals(a.hashCode(), Layout.of("m", 2, 1, 4, 8, Dtype.FLOAT16, false).hashCode());
        final Layout[] others = {
            Layout.of("n", 2, 1, 4, 8, Dtype.FLOAT16, false),
            Layout.of("m", 4, 1, 4, 8, Dtype.FLOAT16, false),
            Layout.of("m", 2, 0, 4, 8, Dtype.FLOAT16, false),
            Layout.of("m", 2, 1, 5, 8, Dtype.FLOAT16, false),
            Layout.of("m", 2, 1, 4, 9, Dtype.FLOAT16, false),
            Layout.of("m", 2, 1, 4, 8, Dtype.BFLOAT16, false),
            Layout.of("m", 2, 1, 4, 8, Dtype.FLOAT16, true),
        };
        for (final Layout other : others)
        {
            assertNotEquals(a, other, other.toString());
        }
        assertTrue(a.sameIdentity(others[3]));
        assertTrue(a.sameIdentity(others[6]));
        assertFalse(a.sameIdentity(others[0]));
        assertFalse(a.sameIdentity(others[1]));
        assertFalse(a.sameIdentity(others[2]));
    }

    @Test
    void shouldKeepModelBytesWhenCallerChangesItsArray()
    {
        final byte[] model = bytes("abc");
        final Layout layout = new Layout(model, 1, 0, 1, 1, Dtype.INT8.code(), false);
        model[0] = 'z';
        assertEquals("abc", layout.model());
        layout.modelBytes()[1] = 'z';
        assertEquals("abc", layout.model());
        assertTrue(layout.modelEquals(bytes("abcdef"), 3));
        assertFalse(layout.modelEquals(bytes("abd"), 3));
    }

    private static byte[] bytes(final String s)
    {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
