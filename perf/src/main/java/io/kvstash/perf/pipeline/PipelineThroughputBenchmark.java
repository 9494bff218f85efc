package io.kvstash.perf.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.store.KvStore;
import io.kvstash.perf.core.StoreFixture;
import io.kvstash.pipeline.Pipeline;
import io.kvstash.pipeline.PipelineAgent;
import io.kvstash.pipeline.PipelineContext;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.concurrent.NanoClock;
import org.agrona.concurrent.SystemNanoClock;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Requests per second of one stream of simple requests (LOOKUP of one present chunk, or PING), three ways:
 * <ul>
 * <li>{@link #direct}: {@link KvStore#execute} on one reusable command, the core's three stages called in
 * order with no ring;</li>
 * <li>{@link #shared}: the pipeline in SHARED mode on one thread: a batch of {@link #BATCH} requests is
 * claimed, filled and published into the Disruptor ring, then the {@link PipelineAgent} runs every stage
 * of them on the same thread (the server composes it with its receiver this way). Variants: latency
 * recording on (the server's default, stage timing of one event in 64), off, on with the journal on
 * {@code /dev/shm}, and on with every event stage-timed;</li>
 * <li>{@link #dedicated}: the pipeline in DEDICATED mode: the benchmark thread produces, the pipeline's
 * own thread runs the stages (two threads, one per core here).</li>
 * </ul>
 * Every iteration starts a fresh pipeline (so a journal file never outgrows one iteration) and fails the
 * run unless every request was answered OK (and every LOOKUP hit its chunk). The forks get a young generation
 * that holds the pipelines of the whole run: a young collection that copies a pipeline's events slows it by
 * 15-25 % ({@link PipelineSideBySide}).
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 2, jvmArgsAppend = { StoreFixture.ADD_EXPORTS, "-Xms4g", "-Xmn3g" })
public class PipelineThroughputBenchmark
{
    /** Requests published before the agent runs them (one duty cycle of the agent at most). */
    public static final int BATCH = PipelineAgent.MAX_EVENTS_PER_POLL;

    /**
     * Checks an iteration's answers: every request answered, none failed, and every LOOKUP hit its chunk.
     *
     * @param sink      the responses.
     * @param requests  requests issued.
     * @param type      their type.
     */
    static void verify(final PipelineFixture.CountingSink sink, final long requests, final int type)
    {
        StoreFixture.check(sink.responses() == requests,
            "answered " + sink.responses() + " of " + requests + " requests");
        StoreFixture.check(0 == sink.errors(), sink.errors() + " requests failed");
        StoreFixture.check(RequestType.LOOKUP != type || sink.hitChunks() == requests, "a lookup missed");
    }

    /**
     * The direct contender: a store and one reusable command.
     */
    @State(Scope.Thread)
    public static class Direct
    {
        /** Request of the stream. */
        @Param({ "LOOKUP", "PING" })
        public String request;

        KvStore store;
        StoreCommand command;
        NanoClock clock;
        int type;
        long requests;
        long missesBefore;

        /**
         * Builds the store with the one chunk.
         */
        @Setup(Level.Trial)
        public void setupTrial()
        {
            type = PipelineFixture.requestType(request);
            final io.kvstash.core.StoreContext context = PipelineFixture.storeContext();
            clock = new SystemNanoClock();
            store = new KvStore(context, clock);
            StoreFixture.check(Status.OK == store.register(StoreFixture.INSTANCE_ID, StoreFixture.LAYOUT).status,
                "register failed");
            StoreFixture.storeAll(store, io.kvstash.wire.ChunkKeys.ofHashes(
                new long[]{ PipelineFixture.KEY_HI }, new long[]{ PipelineFixture.KEY_LO }));
            command = new StoreCommand(context);
        }

        /**
         * Records the miss counter.
         */
        @Setup(Level.Iteration)
        public void setupIteration()
        {
            missesBefore = store.counters().get(CountersDescriptor.LOOKUP_MISS_CHUNKS);
        }

        /**
         * Fails the run if a lookup missed.
         */
        @TearDown(Level.Iteration)
        public void verifyIteration()
        {
            StoreFixture.check(missesBefore == store.counters().get(CountersDescriptor.LOOKUP_MISS_CHUNKS),
                "a lookup missed");
        }

        /**
         * One request.
         *
         * @return its status plus hits, for the blackhole.
         */
        public int execute()
        {
            final StoreCommand c = command.reset();
            PipelineFixture.fill(c, type, ++requests, clock.nanoTime());
            store.execute(c);
            return c.status + c.hitChunks;
        }
    }

    /**
     * The SHARED-mode pipeline run on the benchmark thread.
     */
    @State(Scope.Thread)
    public static class Shared
    {
        /** Request of the stream. */
        @Param({ "LOOKUP", "PING" })
        public String request;

        /**
         * {@code latency}: latency recording on, stage timing of one event in 64 (the server's defaults);
         * {@code no-latency}: latency recording off; {@code journal}: as {@code latency} with the journal in a
         * file on {@code /dev/shm}; {@code stage-timing-all}: as {@code latency} with every event stage-timed.
         */
        @Param({ "latency", "no-latency", "journal", "stage-timing-all" })
        public String variant;

        Pipeline pipeline;
        PipelineAgent agent;
        PipelineFixture.CountingSink sink;
        NanoClock clock;
        Path journalFile;
        int type;
        long requests;

        /**
         * A fresh pipeline per iteration.
         *
         * @throws IOException when the journal file cannot be created.
         */
        @Setup(Level.Iteration)
        public void setupIteration() throws IOException
        {
            type = PipelineFixture.requestType(request);
            final boolean latency = !"no-latency".equals(variant);
            final int mask = "stage-timing-all".equals(variant) ? 0 : PipelineContext.STAGE_SAMPLE_MASK_DEFAULT;
            journalFile = "journal".equals(variant) ? Files.createTempFile(journalDirectory(), "bench-", ".journal") :
                null;
            sink = new PipelineFixture.CountingSink();
            pipeline = PipelineFixture.newPipeline(ThreadingMode.SHARED, WaitMode.BUSY_SPIN, latency, mask,
                journalFile, sink);
            agent = pipeline.agent();
            clock = pipeline.context().clock();
            requests = 0;
        }

        /**
         * Checks the answers, closes the pipeline and deletes the journal.
         *
         * @throws IOException when the journal cannot be deleted.
         */
        @TearDown(Level.Iteration)
        public void tearDownIteration() throws IOException
        {
            verify(sink, requests, type);
            // The journal runs on its own thread behind the stages: let it catch up before counting its records.
            while (!pipeline.isDrained())
            {
                Thread.onSpinWait();
            }
            StoreFixture.check(null == journalFile || pipeline.journalRecords() >= requests, "journal missed records");
            pipeline.close();
            if (null != journalFile)
            {
                Files.deleteIfExists(journalFile);
            }
        }

        /**
         * Publishes a batch and runs the stages of it on this thread.
         *
         * @return responses so far.
         * @throws Exception never in practice.
         */
        public long batch() throws Exception
        {
            final Pipeline pipeline = this.pipeline;
            for (int i = 0; i < BATCH; i++)
            {
                final long sequence = pipeline.claim();
                final RequestEvent event = pipeline.event(sequence);
                final StoreCommand c = event.reset();
                PipelineFixture.fill(c, type, ++requests, clock.nanoTime());
                event.clientIndex = 0;
                pipeline.publish(sequence);
            }
            final long target = requests;
            final PipelineFixture.CountingSink sink = this.sink;
            while (sink.responses() < target)
            {
                agent.doWork();
            }
            return target;
        }
    }

    /**
     * The DEDICATED-mode pipeline: stages on the pipeline's thread, the benchmark thread produces.
     */
    @State(Scope.Thread)
    public static class Dedicated
    {
        /** Request of the stream. */
        @Param({ "LOOKUP", "PING" })
        public String request;

        /** Wait mode of the pipeline thread. */
        @Param({ "BUSY_SPIN", "BACKOFF" })
        public String waitMode;

        Pipeline pipeline;
        PipelineFixture.CountingSink sink;
        NanoClock clock;
        int type;
        long requests;

        /**
         * A fresh pipeline per iteration.
         */
        @Setup(Level.Iteration)
        public void setupIteration()
        {
            type = PipelineFixture.requestType(request);
            sink = new PipelineFixture.CountingSink();
            pipeline = PipelineFixture.newPipeline(ThreadingMode.DEDICATED, WaitMode.valueOf(waitMode), true,
                PipelineContext.STAGE_SAMPLE_MASK_DEFAULT, null, sink);
            clock = pipeline.context().clock();
            requests = 0;
        }

        /**
         * Waits for the last requests, checks the answers and closes the pipeline.
         */
        @TearDown(Level.Iteration)
        public void tearDownIteration()
        {
            PipelineFixture.drain(pipeline, sink, requests);
            verify(sink, requests, type);
            pipeline.close();
        }

        /**
         * Publishes one request, waiting while the ring is full.
         *
         * @return the request's correlation id.
         */
        public long publish()
        {
            final long sequence = pipeline.claim();
            final RequestEvent event = pipeline.event(sequence);
            final StoreCommand c = event.reset();
            PipelineFixture.fill(c, type, ++requests, clock.nanoTime());
            event.clientIndex = 0;
            pipeline.publish(sequence);
            return requests;
        }
    }

    /**
     * Directory of the journal files: {@code /dev/shm} when present (memory, as the issue asks), else the
     * temporary directory.
     *
     * @return the directory.
     */
    static Path journalDirectory()
    {
        final Path shm = Path.of("/dev/shm");
        try
        {
            return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Files.createTempDirectory("kvstash-journal");
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    /**
     * One request through {@link KvStore#execute}.
     *
     * @param state the store.
     * @return status plus hits.
     */
    @Benchmark
    public int direct(final Direct state)
    {
        return state.execute();
    }

    /**
     * {@link #BATCH} requests through the SHARED pipeline on this thread.
     *
     * @param state the pipeline.
     * @return responses so far.
     * @throws Exception never in practice.
     */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public long shared(final Shared state) throws Exception
    {
        return state.batch();
    }

    /**
     * One request published to the DEDICATED pipeline (the rate is the pipeline thread's once the ring fills).
     *
     * @param state the pipeline.
     * @return the correlation id.
     */
    @Benchmark
    public long dedicated(final Dedicated state)
    {
        return state.publish();
    }
}
