package io.kvstash.perf.core;

import io.kvstash.wire.hash.ChunkHasher;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.nio.ByteOrder;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Hash of one 256-token chunk (SHA-256 over a 16-byte prefix and 1 KiB of token ids), from an {@code int[]}
 * and from a buffer of little-endian ids as a client ring would carry them.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 4, time = 1)
@Measurement(iterations = 8, time = 1)
@Fork(value = 3, jvmArgsAppend = StoreFixture.ADD_EXPORTS)
@State(Scope.Thread)
public class ChunkHasherBenchmark
{
    /** Vocabulary size the random token ids are drawn from (Qwen2's, a large one). */
    static final int VOCABULARY = 151_936;

    final ChunkHasher hasher = new ChunkHasher();
    final int[] tokens = new int[StoreFixture.CHUNK_TOKENS];
    final UnsafeBuffer tokenBuffer =
        new UnsafeBuffer(BufferUtil.allocateDirectAligned(StoreFixture.CHUNK_TOKENS * Integer.BYTES, 64));
    final long[] hi = new long[1];
    final long[] lo = new long[1];

    /**
     * Fills one chunk of random token ids, in the array and little-endian in the buffer.
     */
    @Setup
    public void setup()
    {
        final SplittableRandom random = new SplittableRandom(42);
        for (int i = 0; i < tokens.length; i++)
        {
            tokens[i] = random.nextInt(VOCABULARY);
            tokenBuffer.putInt(i * Integer.BYTES, tokens[i], ByteOrder.LITTLE_ENDIAN);
        }
    }

    /**
     * Hashes the chunk from the {@code int[]}.
     *
     * @return chunks hashed: 1, or -1 on bad arguments.
     */
    @Benchmark
    public int hashIntArray()
    {
        return hasher.hashTokens(tokens, StoreFixture.CHUNK_TOKENS, StoreFixture.CHUNK_TOKENS, hi, lo);
    }

    /**
     * Hashes the chunk from the direct buffer.
     *
     * @return chunks hashed: 1, or -1 on bad arguments.
     */
    @Benchmark
    public int hashDirectBuffer()
    {
        return hasher.hashTokens(
            tokenBuffer, 0, ByteOrder.LITTLE_ENDIAN, StoreFixture.CHUNK_TOKENS, StoreFixture.CHUNK_TOKENS, 0, 1, hi, lo);
    }
}
