package io.kvstash.wire.hash;

import io.kvstash.wire.ChunkKeys;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Checks {@link ChunkHasher} against vectors computed by an independent implementation (Python hashlib,
 * {@code hash-vectors.py}) from the hasher's javadoc.
 */
class ChunkHasherTest
{
    private static final List<ChunkVector> CHUNKS = new ArrayList<>();
    private static final List<String[]> NAMESPACES = new ArrayList<>();
    private static final List<String[]> SALTS = new ArrayList<>();

    private final ChunkHasher hasher = new ChunkHasher();

    private static final class ChunkVector
    {
        final int chunkTokens;
        final int[] tokens;
        final long[] hi;
        final long[] lo;

        ChunkVector(final int chunkTokens, final int[] tokens, final long[] hi, final long[] lo)
        {
            this.chunkTokens = chunkTokens;
            this.tokens = tokens;
            this.hi = hi;
            this.lo = lo;
        }

        @Override
        public String toString()
        {
            return "chunkTokens=" + chunkTokens + " tokens=" + tokens.length;
        }
    }

    @BeforeAll
    static void loadVectors() throws IOException
    {
        try (InputStream in = ChunkHasherTest.class.getResourceAsStream("/hash-vectors.txt"))
        {
            assertTrue(null != in, "hash-vectors.txt on the test class path");
            final BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            String line;
            while (null != (line = reader.readLine()))
            {
                if (line.isBlank() || line.startsWith("#"))
                {
                    continue;
                }
                final String[] f = line.trim().split(" ");
                switch (f[0])
                {
                    case "chunk":
                    {
                        final int[] tokens = "-".equals(f[2]) ? new int[0] :
                            Arrays.stream(f[2].split(",")).mapToInt(Integer::parseInt).toArray();
                        final String[] pairs = "-".equals(f[3]) ? new String[0] : f[3].split(",");
                        final long[] hi = new long[pairs.length];
                        final long[] lo = new long[pairs.length];
                        for (int i = 0; i < pairs.length; i++)
                        {
                            final String[] halves = pairs[i].split(":");
                            hi[i] = Long.parseUnsignedLong(halves[0], 16);
                            lo[i] = Long.parseUnsignedLong(halves[1], 16);
                        }
                        CHUNKS.add(new ChunkVector(Integer.parseInt(f[1]), tokens, hi, lo));
                        break;
                    }
                    case "ns":
                        NAMESPACES.add(f);
                        break;
                    case "salt":
                        SALTS.add(f);
                        break;
                    default:
                        throw new IllegalStateException("unknown vector line: " + line);
                }
            }
        }
        assertTrue(CHUNKS.size() >= 10 && NAMESPACES.size() >= 40 && SALTS.size() >= 4, "vectors loaded");
    }

    @Test
    void shouldMatchVectorsWhenHashingTokenArrays()
    {
        for (final ChunkVector v : CHUNKS)
        {
            final long[] hi = new long[v.hi.length + 1];
            final long[] lo = new long[v.lo.length + 1];
            assertEquals(v.hi.length, hasher.hashTokens(v.tokens, v.tokens.length, v.chunkTokens, hi, lo), v.toString());
            assertArrayEquals(v.hi, Arrays.copyOf(hi, v.hi.length), v.toString());
            assertArrayEquals(v.lo, Arrays.copyOf(lo, v.lo.length), v.toString());
            assertEquals(0, hi[v.hi.length], "nothing written past the full chunks");
        }
    }

    @Test
    void shouldMatchVectorsWhenHashingBuffersInEitherByteOrder()
    {
        for (final ByteOrder order : new ByteOrder[]{ ByteOrder.LITTLE_ENDIAN, ByteOrder.BIG_ENDIAN })
        {
            for (final ChunkVector v : CHUNKS)
            {
                final int offset = 12;
                final UnsafeBuffer buffer = tokenBuffer(v.tokens, offset, order);
                final int full = v.hi.length;
                final long[] hi = new long[full];
                final long[] lo = new long[full];
                final int n = hasher.hashTokens(buffer, offset, order, v.tokens.length, v.chunkTokens, 0, full, hi, lo);
                assertEquals(full, n, v + " " + order);
                assertArrayEquals(v.hi, hi, v + " " + order);
                assertArrayEquals(v.lo, lo, v + " " + order);
            }
        }
    }

    @Test
    void shouldHashOnlyTheWindowWhenGivenFromAndToChunks()
    {
        for (final ChunkVector v : CHUNKS)
        {
            final UnsafeBuffer buffer = tokenBuffer(v.tokens, 0, ByteOrder.LITTLE_ENDIAN);
            final int full = v.hi.length;
            for (int from = 0; from <= full; from++)
            {
                for (int to = from; to <= full; to++)
                {
                    final long[] hi = new long[full + 2];
                    final long[] lo = new long[full + 2];
                    Arrays.fill(hi, 42);
                    final int n = hasher.hashTokens(
                        buffer, 0, ByteOrder.LITTLE_ENDIAN, v.tokens.length, v.chunkTokens, from, to, hi, lo);
                    assertEquals(to - from, n);
                    for (int i = 0; i < to - from; i++)
                    {
                        assertEquals(v.hi[from + i], hi[i], "window [" + from + "," + to + ") of " + v);
                        assertEquals(v.lo[from + i], lo[i], "window [" + from + "," + to + ") of " + v);
                    }
                    assertEquals(42, hi[to - from], "nothing written past the window");
                }
            }
        }
    }

    @Test
    void shouldNeverHashTrailingPartialChunkWhenTokensAreNotAMultiple()
    {
        final int[] tokens = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
        final long[] hi = new long[3];
        final long[] lo = new long[3];
        assertEquals(2, hasher.hashTokens(tokens, 10, 4, hi, lo));
        assertEquals(0, hi[2]);
        assertEquals(0, lo[2]);
        assertEquals(0, hasher.hashTokens(tokens, 3, 4, hi, lo));
        assertEquals(-1, hasher.hashTokens(tokenBuffer(tokens, 0, ByteOrder.LITTLE_ENDIAN), 0,
            ByteOrder.LITTLE_ENDIAN, 10, 4, 0, 3, hi, lo), "a window reaching the partial chunk is refused");

        final ChunkKeys keys = ChunkKeys.ofTokens(tokens, 4);
        assertEquals(2, keys.count());
        final ChunkKeys exact = ChunkKeys.ofTokens(Arrays.copyOf(tokens, 8), 4);
        assertEquals(exact.hi(1), keys.hi(1));
        assertEquals(exact.lo(1), keys.lo(1));
    }

    @Test
    void shouldMatchVectorsWhenBuildingChunkKeysFromTokens()
    {
        for (final ChunkVector v : CHUNKS)
        {
            final ChunkKeys keys = ChunkKeys.ofTokens(v.tokens, v.chunkTokens);
            assertEquals(v.hi.length, keys.count());
            for (int i = 0; i < keys.count(); i++)
            {
                assertEquals(v.hi[i], keys.hi(i));
                assertEquals(v.lo[i], keys.lo(i));
            }
            assertEquals(0, keys.salt());
        }
    }

    @Test
    void shouldChainPrefixesWhenChunksShareAPrefix()
    {
        final long[] hiA = new long[2];
        final long[] loA = new long[2];
        final long[] hiB = new long[2];
        final long[] loB = new long[2];
        hasher.hashTokens(new int[]{ 1, 2, 3, 4, 9, 9, 9, 9 }, 8, 4, hiA, loA);
        hasher.hashTokens(new int[]{ 5, 2, 3, 4, 9, 9, 9, 9 }, 8, 4, hiB, loB);
        assertNotEquals(hiA[0], hiB[0]);
        assertNotEquals(hiA[1], hiB[1], "the same second chunk after another first chunk hashes differently");
    }

    @Test
    void shouldMatchVectorsWhenComputingNamespaces()
    {
        for (final String[] f : NAMESPACES)
        {
            final byte[] model = "-".equals(f[1]) ? new byte[0] : HexFormat.of().parseHex(f[1]);
            final int worldSize = Integer.parseInt(f[2]);
            final int rank = Integer.parseInt(f[3]);
            final long salt = Long.parseUnsignedLong(f[4], 16);
            final long expected = Long.parseUnsignedLong(f[5], 16);
            final byte[] padded = Arrays.copyOf(model, model.length + 7);
            Arrays.fill(padded, model.length, padded.length, (byte)'z');
            assertEquals(expected, hasher.namespace(padded, model.length, worldSize, rank, salt), String.join(" ", f));
        }
    }

    @Test
    void shouldMatchVectorsWhenComputingSalts()
    {
        for (final String[] f : SALTS)
        {
            final long expected = Long.parseUnsignedLong(f[2], 16);
            if ("-".equals(f[1]))
            {
                assertEquals(expected, ChunkHasher.salt(null));
                assertEquals(expected, ChunkHasher.salt(""));
            }
            else
            {
                final String salt = new String(HexFormat.of().parseHex(f[1]), StandardCharsets.UTF_8);
                assertEquals(expected, ChunkHasher.salt(salt), salt);
            }
        }
    }

    @Test
    void shouldReturnMinusOneWhenArrayArgumentsAreBad()
    {
        final int[] tokens = new int[16];
        final long[] hi = new long[4];
        final long[] lo = new long[4];
        assertEquals(-1, hasher.hashTokens(tokens, 16, 0, hi, lo), "zero chunk tokens");
        assertEquals(-1, hasher.hashTokens(tokens, 16, -4, hi, lo), "negative chunk tokens");
        assertEquals(-1, hasher.hashTokens(tokens, 16, ChunkHasher.MAX_CHUNK_TOKENS + 1, hi, lo), "huge chunk");
        assertEquals(-1, hasher.hashTokens(tokens, -1, 4, hi, lo), "negative token count");
        assertEquals(-1, hasher.hashTokens(tokens, 17, 4, hi, lo), "count past the array");
        assertEquals(-1, hasher.hashTokens(tokens, 16, 4, new long[3], lo), "hi too short");
        assertEquals(-1, hasher.hashTokens(tokens, 16, 4, hi, new long[3]), "lo too short");
        assertEquals(4, hasher.hashTokens(tokens, 16, 4, hi, lo));
    }

    @Test
    void shouldReturnMinusOneWhenBufferArgumentsAreBad()
    {
        final int[] tokens = new int[16];
        final UnsafeBuffer buffer = tokenBuffer(tokens, 0, ByteOrder.LITTLE_ENDIAN);
        final ByteOrder le = ByteOrder.LITTLE_ENDIAN;
        final long[] hi = new long[4];
        final long[] lo = new long[4];
        assertEquals(-1, hasher.hashTokens(buffer, 0, le, 16, 0, 0, 1, hi, lo), "zero chunk tokens");
        assertEquals(-1, hasher.hashTokens(buffer, 0, le, 16, ChunkHasher.MAX_CHUNK_TOKENS + 1, 0, 0, hi, lo));
        assertEquals(-1, hasher.hashTokens(buffer, 0, le, -1, 4, 0, 0, hi, lo), "negative token count");
        assertEquals(-1, hasher.hashTokens(buffer, 0, le, 16, 4, -1, 2, hi, lo), "negative from");
        assertEquals(-1, hasher.hashTokens(buffer, 0, le, 16, 4, 3, 2, hi, lo), "from after to");
        assertEquals(-1, hasher.hashTokens(buffer, 0, le, 16, 4, 0, 5, new long[5], new long[5]), "past last chunk");
        assertEquals(-1, hasher.hashTokens(buffer, 0, le, 16, 4, 0, 4, new long[3], lo), "hi too short");
        assertEquals(-1, hasher.hashTokens(buffer, 0, le, 16, 4, 0, 4, hi, new long[3]), "lo too short");
        assertEquals(-1, hasher.hashTokens(buffer, -4, le, 16, 4, 0, 1, hi, lo), "negative offset");
        assertEquals(-1, hasher.hashTokens(buffer, 4, le, 16, 4, 0, 1, hi, lo), "tokens past the buffer");
        assertEquals(-1, hasher.hashTokens(buffer, 0, le, 17, 4, 0, 1, hi, lo), "count past the buffer");
        assertEquals(0, hasher.hashTokens(buffer, 0, le, 16, 4, 2, 2, hi, lo), "an empty window is fine");
        assertEquals(4, hasher.hashTokens(buffer, 0, le, 16, 4, 0, 4, hi, lo));
    }

    @Test
    void shouldRejectModelNameWhenLengthIsOutOfRange()
    {
        assertThrows(IllegalArgumentException.class, () -> hasher.namespace(new byte[300], 256, 1, 0, 0));
        assertThrows(IllegalArgumentException.class, () -> hasher.namespace(new byte[4], -1, 1, 0, 0));
    }

    @Test
    void shouldGiveSameHashesWhenOneHasherIsReused()
    {
        final ChunkVector big = CHUNKS.stream().filter(v -> v.chunkTokens == 256).findFirst().orElseThrow();
        final long[] hi = new long[big.hi.length];
        final long[] lo = new long[big.hi.length];
        hasher.hashTokens(new int[]{ 1 }, 1, 1, new long[1], new long[1]);
        hasher.namespace(new byte[]{ 1 }, 1, 1, 0, 7);
        hasher.hashTokens(big.tokens, big.tokens.length, big.chunkTokens, hi, lo);
        assertArrayEquals(big.hi, hi);
        assertArrayEquals(big.lo, lo);
    }

    private static UnsafeBuffer tokenBuffer(final int[] tokens, final int offset, final ByteOrder order)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[offset + tokens.length * Integer.BYTES]);
        for (int i = 0; i < tokens.length; i++)
        {
            buffer.putInt(offset + i * Integer.BYTES, tokens[i], order);
        }
        return buffer;
    }
}
