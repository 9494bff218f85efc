package io.kvstash.perf.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.perf.core.StoreFixture;
import io.kvstash.pipeline.Pipeline;
import io.kvstash.pipeline.PipelineContext;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.pipeline.ResponseSink;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Layout;

import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Pipelines and the request stream shared by the pipeline benchmarks. The stream is the same for every
 * contender: a simple request (LOOKUP of one present chunk, or PING) filled into a reset command and stamped
 * with the clock, so direct calls and the pipeline do the same producer work per request.
 * <p>
 * The store has the core benchmarks' configuration ({@link StoreFixture}: 4 KiB slots and chunks, one
 * instance) with the server's defaults for everything else (1,024 chunks per request, 32 KiB inline data,
 * so each ring event is as large as the server's).
 */
public final class PipelineFixture
{
    /** Slots in the pool of every benchmark store. */
    public static final int SLOTS = 1024;
    /** High half of the one stored chunk's key. */
    public static final long KEY_HI = 0x5eed_0001_0002_0003L;
    /** Low half of the one stored chunk's key. */
    public static final long KEY_LO = 0x0004_0005_0006_0007L;

    private PipelineFixture()
    {
    }

    /**
     * The request type of a benchmark parameter.
     *
     * @param name {@code LOOKUP} or {@code PING}.
     * @return the type code.
     */
    public static int requestType(final String name)
    {
        switch (name)
        {
            case "LOOKUP":
                return RequestType.LOOKUP;
            case "PING":
                return RequestType.PING;
            default:
                throw new IllegalArgumentException("unknown request " + name);
        }
    }

    /**
     * A concluded store configuration of {@link #SLOTS} 4 KiB slots.
     *
     * @return the configuration.
     */
    public static StoreContext storeContext()
    {
        return new StoreContext()
            .poolSizeBytes((long)SLOTS * StoreFixture.SLOT_BYTES)
            .alignment(StoreFixture.SLOT_BYTES)
            .chunkTokens(StoreFixture.CHUNK_TOKENS)
            .conclude();
    }

    /**
     * Fills a reset command with one request of the stream.
     *
     * @param c             command, reset by the caller.
     * @param type          LOOKUP or PING.
     * @param correlationId correlation id.
     * @param timestampNs   the clock's now.
     */
    public static void fill(final StoreCommand c, final int type, final long correlationId, final long timestampNs)
    {
        c.type = type;
        c.correlationId = correlationId;
        c.instanceId = StoreFixture.INSTANCE_ID;
        if (RequestType.LOOKUP == type)
        {
            c.keyHi[0] = KEY_HI;
            c.keyLo[0] = KEY_LO;
            c.chunkCount = 1;
        }
        c.timestampNs = timestampNs;
    }

    /**
     * A pipeline over a fresh store with the benchmark instance registered and the one chunk stored.
     *
     * @param mode           threading mode.
     * @param waitMode       wait mode of stage threads.
     * @param latencyEnabled whether latency is recorded.
     * @param stageSampleMask stage timing sample mask.
     * @param journalFile    journal file or null.
     * @param sink           the response sink.
     * @return the started pipeline.
     */
    public static Pipeline newPipeline(
        final ThreadingMode mode,
        final WaitMode waitMode,
        final boolean latencyEnabled,
        final int stageSampleMask,
        final Path journalFile,
        final CountingSink sink)
    {
        final PipelineContext context = new PipelineContext()
            .storeContext(storeContext())
            .threadingMode(mode)
            .waitMode(waitMode)
            .latencyEnabled(latencyEnabled)
            .stageSampleMask(stageSampleMask)
            .journalFile(journalFile)
            .responseSink(sink);
        final Pipeline pipeline = new Pipeline(context).start();
        final Layout layout = StoreFixture.LAYOUT;
        StoreCommand c = begin(pipeline, RequestType.REGISTER);
        c.copyLayout(layout);
        finish(pipeline, sink);
        c = begin(pipeline, RequestType.PREPARE_STORE);
        c.keyHi[0] = KEY_HI;
        c.keyLo[0] = KEY_LO;
        c.chunkCount = 1;
        finish(pipeline, sink);
        final long transferId = sink.lastTransferId;
        c = begin(pipeline, RequestType.COMMIT_STORE);
        c.transferId = transferId;
        finish(pipeline, sink);
        StoreFixture.check(0 == sink.errors && 3 == sink.responses(), "setup requests failed");
        sink.clear();
        return pipeline;
    }

    private static long pendingSequence;

    private static StoreCommand begin(final Pipeline pipeline, final int type)
    {
        pendingSequence = pipeline.claim();
        final RequestEvent event = pipeline.event(pendingSequence);
        final StoreCommand c = event.reset();
        event.clientIndex = 0;
        c.type = type;
        c.instanceId = StoreFixture.INSTANCE_ID;
        c.timestampNs = System.nanoTime();
        return c;
    }

    private static void finish(final Pipeline pipeline, final CountingSink sink)
    {
        final long before = sink.responses();
        pipeline.publish(pendingSequence);
        drain(pipeline, sink, before + 1);
    }

    /**
     * Runs the pipeline (its agent in SHARED mode, else waits for its threads) until the sink has seen a
     * number of responses.
     *
     * @param pipeline pipeline.
     * @param sink     its sink.
     * @param target   responses to wait for.
     */
    public static void drain(final Pipeline pipeline, final CountingSink sink, final long target)
    {
        final long deadline = System.nanoTime() + 10_000_000_000L;
        while (sink.responses() < target)
        {
            pipeline.driveOnce();
            if (System.nanoTime() - deadline > 0)
            {
                throw new IllegalStateException("pipeline did not answer in 10 s");
            }
        }
    }

    /**
     * A response sink that counts responses, errors and LOOKUP hits, so a benchmark can check every request
     * it timed was answered as expected. Written by the publish stage's thread; {@link #responses()} may be
     * read from another.
     */
    public static final class CountingSink implements ResponseSink
    {
        // Release store per response (a plain store on x86), so the sink adds no fence to the timed path.
        private final AtomicLong responses = new AtomicLong();
        long errors;
        long hitChunks;
        long lastTransferId;

        /**
         * An empty sink.
         */
        public CountingSink()
        {
        }

        /** {@inheritDoc} */
        @Override
        public void onResponse(final RequestEvent event)
        {
            final StoreCommand c = event.command;
            if (Status.OK != c.status)
            {
                errors++;
            }
            hitChunks += c.hitChunks;
            lastTransferId = c.outTransferId;
            responses.lazySet(responses.get() + 1);
        }

        /**
         * Responses so far.
         *
         * @return count.
         */
        public long responses()
        {
            return responses.get();
        }

        /**
         * Error responses so far.
         *
         * @return count.
         */
        public long errors()
        {
            return errors;
        }

        /**
         * Hit chunks of the LOOKUP responses so far.
         *
         * @return count.
         */
        public long hitChunks()
        {
            return hitChunks;
        }

        void clear()
        {
            responses.set(0);
            errors = 0;
            hitChunks = 0;
        }
    }
}
