package io.kvstash.perf.bench;

import io.kvstash.core.EvictionPolicy;

/**
 * Settings of one {@code kvstash bench} run: repetitions, durations, pool sizes and the worker's heap, full or
 * {@code --quick}. Fixed once the command line is parsed; every part of the run reads them.
 */
final class BenchSettings
{
    /** Chunk sizes of every run: 4 KiB, 256 KiB, 2 MiB and 32 MiB (a 256-token chunk of an 8B model). */
    static final long[] SIZES = { 4L << 10, 256L << 10, 2L << 20, 32L << 20 };
    /**
     * Wait modes of the data path, server and client alike: busy-spin (the latency configuration; the JSON
     * ratios) and backoff (the server's default; {@code ratios_backoff}).
     */
    static final String[] DATA_WAIT_MODES = { BenchSupport.BUSY_SPIN, BenchSupport.BACKOFF };

    int reps;
    int warmups;
    long bytesPerRep;
    int minChunks;
    int maxChunks;
    long poolBytes;
    long controlPoolBytes;
    /** Eviction policy of the control servers ({@code --eviction}). */
    EvictionPolicy eviction = EvictionPolicy.LRU;
    long warmupMs;
    long latencyMs;
    long throughputMs;
    long pacedMs;
    long pacedRate;
    int window;
    int rounds;
    /** Rounds of the eviction policy's comparison with lru ({@link EvictionRounds}). */
    int evictionRounds;
    long roundMs;
    long roundWarmupMs;
    long spinGapsMs;
    String workerHeap;
    String[] dataWaitModes;

    private BenchSettings()
    {
    }

    /**
     * The settings of a full or a quick run.
     *
     * @param quick {@code --quick}: smoke-test settings.
     * @param reps  {@code --reps}, or null for the default of the mode.
     * @return the settings.
     */
    static BenchSettings of(final boolean quick, final Integer reps)
    {
        final BenchSettings s = new BenchSettings();
        s.reps = null != reps ? reps : quick ? 3 : 15;
        s.warmups = quick ? 1 : 2;
        s.bytesPerRep = quick ? 32L << 20 : 256L << 20;
        s.minChunks = quick ? 4 : 8;
        s.maxChunks = quick ? 4096 : 8192;
        s.poolBytes = quick ? 256L << 20 : 1L << 30;
        s.controlPoolBytes = 64L << 20;
        s.warmupMs = quick ? 200 : 1000;
        s.latencyMs = quick ? 500 : 3000;
        s.throughputMs = quick ? 500 : 3000;
        s.pacedMs = quick ? 500 : 3000;
        s.pacedRate = 20_000;
        s.window = 64;
        s.rounds = quick ? 2 : 8;
        s.evictionRounds = quick ? 2 : 12;
        s.roundMs = quick ? 150 : 400;
        s.roundWarmupMs = quick ? 100 : 200;
        s.spinGapsMs = quick ? 300 : 1000;
        s.workerHeap = quick ? "2g" : "4g";
        // --quick measures the data path in busy-spin only, to stay under a minute on a loaded 2-core machine.
        s.dataWaitModes = quick ? new String[]{ BenchSupport.BUSY_SPIN } : DATA_WAIT_MODES;
        return s;
    }

    /**
     * Chunks per repetition of a chunk size: {@link #bytesPerRep} worth, within {@link #minChunks} and
     * {@link #maxChunks}.
     *
     * @param chunkBytes bytes of one chunk.
     * @return chunks per repetition.
     */
    int chunksPerRep(final long chunkBytes)
    {
        final long byBytes = bytesPerRep / chunkBytes;
        return (int)Math.min(maxChunks, Math.max(minChunks, byBytes));
    }
}
