package io.kvstash.pipeline;

import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.core.store.KvStore;
import io.kvstash.wire.PoolRegion;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.ErrorHandler;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.NanoClock;
import org.agrona.concurrent.SystemNanoClock;

import java.nio.file.Path;

/**
 * Configuration of a {@link Pipeline}, validated once by {@link #conclude()}. Memory regions (pool, slot
 * table, counters) are supplied by the IPC layer as mapped files; when absent, {@code conclude()} allocates
 * plain direct memory (tests, embedded use).
 */
public final class PipelineContext
{
    /** Default Disruptor ring size (events). */
    public static final int RING_SIZE_DEFAULT = 1024;
    /** Default stage timing sample: every 4,096th event gets per-stage timestamps. */
    public static final int STAGE_SAMPLE_MASK_DEFAULT = 4095;
    /** Default journal segment: files grow by this many bytes at a time. */
    public static final long JOURNAL_SEGMENT_BYTES_DEFAULT = 64L << 20;

    private StoreContext storeContext;
    private int ringSize = RING_SIZE_DEFAULT;
    private ThreadingMode threadingMode = ThreadingMode.DEDICATED;
    private WaitMode waitMode = WaitMode.BACKOFF;
    private boolean multiProducer;
    private ResponseSink responseSink;
    private ErrorHandler errorHandler;
    private CountedErrorHandler countedErrorHandler;
    private NanoClock clock;
    private boolean latencyEnabled = true;
    private int stageSampleMask = STAGE_SAMPLE_MASK_DEFAULT;
    private Path journalFile;
    private long journalSegmentBytes = JOURNAL_SEGMENT_BYTES_DEFAULT;
    private long incarnation;
    private PoolRegion pool;
    private AtomicBuffer slotTable;
    private StoreCounters counters;
    private String threadNamePrefix = "kvstash-";
    private boolean concluded;

    /**
     * Validates and completes the configuration.
     *
     * @return this.
     * @throws IllegalArgumentException when a value is out of range or a required part is missing.
     */
    public PipelineContext conclude()
    {
        if (concluded)
        {
            return this;
        }
        if (null == storeContext)
        {
            storeContext = new StoreContext();
        }
        if (!storeContext.isConcluded())
        {
            storeContext.conclude();
        }
        if (ringSize < 2 || Integer.bitCount(ringSize) != 1)
        {
            throw new IllegalArgumentException("ring size must be a power of two >= 2: " + ringSize);
        }
        if (stageSampleMask < 0 || Integer.bitCount(stageSampleMask + 1) != 1)
        {
            throw new IllegalArgumentException("stage sample mask must be 2^k - 1: " + stageSampleMask);
        }
        if (null == responseSink)
        {
            throw new IllegalArgumentException("a response sink is required");
        }
        if (null == errorHandler)
        {
            errorHandler = Throwable::printStackTrace;
        }
        if (null == clock)
        {
            clock = new SystemNanoClock();
        }
        if (journalSegmentBytes < (1 << 20) || journalSegmentBytes > (1L << 30))
        {
            throw new IllegalArgumentException("journal segment must be in [1 MiB, 1 GiB]");
        }
        if (null == pool)
        {
            pool = PoolRegion.allocateDirect(storeContext.poolSizeBytes());
        }
        if (null == slotTable)
        {
            slotTable = KvStore.newSlotTable(storeContext);
        }
        if (null == counters)
        {
            counters = StoreCounters.allocate();
        }
        countedErrorHandler = new CountedErrorHandler(errorHandler, counters);
        concluded = true;
        return this;
    }

    /**
     * Store configuration.
     *
     * @return the store context.
     */
    public StoreContext storeContext()
    {
        return storeContext;
    }

    /**
     * Sets the store configuration.
     *
     * @param storeContext store context.
     * @return this.
     */
    public PipelineContext storeContext(final StoreContext storeContext)
    {
        this.storeContext = storeContext;
        return this;
    }

    /**
     * Ring size.
     *
     * @return events in the ring.
     */
    public int ringSize()
    {
        return ringSize;
    }

    /**
     * Sets the ring size.
     *
     * @param ringSize events, a power of two.
     * @return this.
     */
    public PipelineContext ringSize(final int ringSize)
    {
        this.ringSize = ringSize;
        return this;
    }

    /**
     * Threading mode.
     *
     * @return mode.
     */
    public ThreadingMode threadingMode()
    {
        return threadingMode;
    }

    /**
     * Sets the threading mode.
     *
     * @param threadingMode mode.
     * @return this.
     */
    public PipelineContext threadingMode(final ThreadingMode threadingMode)
    {
        this.threadingMode = threadingMode;
        return this;
    }

    /**
     * Wait mode of idle stage threads.
     *
     * @return mode.
     */
    public WaitMode waitMode()
    {
        return waitMode;
    }

    /**
     * Sets the wait mode.
     *
     * @param waitMode mode.
     * @return this.
     */
    public PipelineContext waitMode(final WaitMode waitMode)
    {
        this.waitMode = waitMode;
        return this;
    }

    /**
     * Whether several threads publish into the ring.
     *
     * @return true for a multi-producer ring.
     */
    public boolean multiProducer()
    {
        return multiProducer;
    }

    /**
     * Sets whether several threads publish (the server has one receiver: false).
     *
     * @param multiProducer true for a multi-producer ring.
     * @return this.
     */
    public PipelineContext multiProducer(final boolean multiProducer)
    {
        this.multiProducer = multiProducer;
        return this;
    }

    /**
     * Response sink.
     *
     * @return sink.
     */
    public ResponseSink responseSink()
    {
        return responseSink;
    }

    /**
     * Sets the response sink.
     *
     * @param responseSink sink called by the publish stage.
     * @return this.
     */
    public PipelineContext responseSink(final ResponseSink responseSink)
    {
        this.responseSink = responseSink;
        return this;
    }

    /**
     * Error handler of unexpected errors.
     *
     * @return handler.
     */
    public ErrorHandler errorHandler()
    {
        return errorHandler;
    }

    /**
     * Sets the error handler (the server's distinct error log).
     *
     * @param errorHandler handler; must be thread safe in THREAD_PER_STAGE mode.
     * @return this.
     */
    public PipelineContext errorHandler(final ErrorHandler errorHandler)
    {
        this.errorHandler = errorHandler;
        return this;
    }

    /**
     * The error path of the pipeline's stages and journal: counts into {@link CountersDescriptor#ERRORS}, then
     * hands the error to {@link #errorHandler()}. Set by {@link #conclude()}.
     *
     * @return the counted handler, null before {@link #conclude()}.
     */
    public CountedErrorHandler countedErrorHandler()
    {
        return countedErrorHandler;
    }

    /**
     * Clock of the latency recording.
     *
     * @return clock.
     */
    public NanoClock clock()
    {
        return clock;
    }

    /**
     * Sets the clock of the latency recording (producers stamp requests with the same clock).
     *
     * @param clock clock.
     * @return this.
     */
    public PipelineContext clock(final NanoClock clock)
    {
        this.clock = clock;
        return this;
    }

    /**
     * Whether latency is recorded.
     *
     * @return true when recording.
     */
    public boolean latencyEnabled()
    {
        return latencyEnabled;
    }

    /**
     * Turns latency recording on or off.
     *
     * @param latencyEnabled true to record.
     * @return this.
     */
    public PipelineContext latencyEnabled(final boolean latencyEnabled)
    {
        this.latencyEnabled = latencyEnabled;
        return this;
    }

    /**
     * Stage timing sample mask: an event is timed per stage when {@code (sequence & mask) == 0}.
     *
     * @return mask.
     */
    public int stageSampleMask()
    {
        return stageSampleMask;
    }

    /**
     * Sets the stage timing sample mask (0 times every event).
     *
     * @param stageSampleMask {@code 2^k - 1}.
     * @return this.
     */
    public PipelineContext stageSampleMask(final int stageSampleMask)
    {
        this.stageSampleMask = stageSampleMask;
        return this;
    }

    /**
     * Journal file, null for none.
     *
     * @return path or null.
     */
    public Path journalFile()
    {
        return journalFile;
    }

    /**
     * Sets the journal (capture) file.
     *
     * @param journalFile path, null for none.
     * @return this.
     */
    public PipelineContext journalFile(final Path journalFile)
    {
        this.journalFile = journalFile;
        return this;
    }

    /**
     * Journal segment size.
     *
     * @return bytes.
     */
    public long journalSegmentBytes()
    {
        return journalSegmentBytes;
    }

    /**
     * Sets the journal segment size.
     *
     * @param journalSegmentBytes bytes.
     * @return this.
     */
    public PipelineContext journalSegmentBytes(final long journalSegmentBytes)
    {
        this.journalSegmentBytes = journalSegmentBytes;
        return this;
    }

    /**
     * Server incarnation recorded in the journal header.
     *
     * @return incarnation.
     */
    public long incarnation()
    {
        return incarnation;
    }

    /**
     * Sets the server incarnation.
     *
     * @param incarnation incarnation.
     * @return this.
     */
    public PipelineContext incarnation(final long incarnation)
    {
        this.incarnation = incarnation;
        return this;
    }

    /**
     * The pool's data region.
     *
     * @return pool.
     */
    public PoolRegion pool()
    {
        return pool;
    }

    /**
     * Sets the pool's data region (a mapped file).
     *
     * @param pool pool region.
     * @return this.
     */
    public PipelineContext pool(final PoolRegion pool)
    {
        this.pool = pool;
        return this;
    }

    /**
     * Slot table.
     *
     * @return slot words.
     */
    public AtomicBuffer slotTable()
    {
        return slotTable;
    }

    /**
     * Sets the slot table (a mapped region).
     *
     * @param slotTable slot words.
     * @return this.
     */
    public PipelineContext slotTable(final AtomicBuffer slotTable)
    {
        this.slotTable = slotTable;
        return this;
    }

    /**
     * Counters.
     *
     * @return counters.
     */
    public StoreCounters counters()
    {
        return counters;
    }

    /**
     * Sets the counters (a mapped region).
     *
     * @param counters counters.
     * @return this.
     */
    public PipelineContext counters(final StoreCounters counters)
    {
        this.counters = counters;
        return this;
    }

    /**
     * Prefix of the pipeline's thread names.
     *
     * @return prefix.
     */
    public String threadNamePrefix()
    {
        return threadNamePrefix;
    }

    /**
     * Sets the prefix of the pipeline's thread names.
     *
     * @param threadNamePrefix prefix.
     * @return this.
     */
    public PipelineContext threadNamePrefix(final String threadNamePrefix)
    {
        this.threadNamePrefix = threadNamePrefix;
        return this;
    }
}
