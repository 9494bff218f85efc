package io.kvstash.pipeline;

import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.latency.IntervalLogger;
import io.kvstash.pipeline.latency.LatencyRecorders;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.HistogramLogReader;
import org.HdrHistogram.HistogramLogWriter;
import org.agrona.concurrent.NanoClock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(60)
class LatencyRecordingTest
{
    private static final StoreContext STORE_CONTEXT =
        new StoreContext().poolSizeBytes(64 * 4096L).alignment(4096).conclude();

    @TempDir
    Path tempDir;

    @Test
    void shouldWriteTaggedIntervalLogsAndReportPercentilesPerTypeAndStage() throws Exception
    {
        final StoreContext storeContext = new StoreContext().poolSizeBytes(64 * 4096L).alignment(4096).conclude();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, storeContext);
        final PipelineContext context = new PipelineContext()
            .storeContext(storeContext)
            .threadingMode(ThreadingMode.THREAD_PER_STAGE)
            .waitMode(WaitMode.YIELDING)
            .stageSampleMask(0)
            .responseSink(router);
        final Path hlog = tempDir.resolve("pipeline.hlog");
        try (Pipeline pipeline = new Pipeline(context).start();
            IntervalLogger logger = new IntervalLogger(pipeline.latency(), new HistogramLogWriter(hlog.toFile()), 0))
        {
            final PipelineCaller caller = new PipelineCaller(pipeline, router, 0);
            assertEquals(Status.OK, caller.register(1, Layout.of("m", 1, 0, 1, 4, Dtype.FLOAT16, false)).status);
            for (int i = 0; i < 200; i++)
            {
                final long transfer = caller.keyed(RequestType.PREPARE_STORE, 1, ChunkKeys.ofIds(i), 0).outTransferId;
                assertEquals(Status.OK, caller.onTransfer(RequestType.COMMIT_STORE, 1, transfer).status);
                assertEquals(1, caller.keyed(RequestType.LOOKUP, 1, ChunkKeys.ofIds(i), 0).hitChunks);
            }
            assertTrue(logger.poll(1000) > 0);
            assertEquals(200, logger.requestTotal(RequestType.LOOKUP).getTotalCount());
            assertEquals(200, logger.requestTotal(RequestType.PREPARE_STORE).getTotalCount());
            assertEquals(601, logger.stageServiceTotal(LatencyRecorders.STAGE_RESERVE).getTotalCount());
            assertEquals(601, logger.stageQueuedTotal(LatencyRecorders.STAGE_PUBLISH).getTotalCount());
            assertTrue(logger.requestTotal(RequestType.LOOKUP).getMaxValue() > 0);

            final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            logger.report(new PrintStream(bytes, true, StandardCharsets.UTF_8));
            final String report = bytes.toString(StandardCharsets.UTF_8);
            assertTrue(report.contains("type.LOOKUP"), report);
            assertTrue(report.contains("stage.reserve.service"), report);
            assertTrue(report.contains("p99.9"), report);
        }
        final Set<String> tags = new HashSet<>();
        final HistogramLogReader reader = new HistogramLogReader(hlog.toFile());
        EncodableHistogram histogram;
        while (null != (histogram = reader.nextIntervalHistogram()))
        {
            tags.add(histogram.getTag());
        }
        assertTrue(tags.contains("type.LOOKUP"), tags.toString());
        assertTrue(tags.contains("type.COMMIT_STORE"), tags.toString());
        assertTrue(tags.contains("stage.slot-assign.queued"), tags.toString());
    }

    @Test
    void shouldAllocateNoHistogramWhenPollingARunningServersRecorders()
    {
        final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        final long thread = Thread.currentThread().getId();
        final LatencyRecorders recorders = new LatencyRecorders();
        recorders.recordRequest(RequestType.LOOKUP, 1_500);
        final IntervalLogger logger = new IntervalLogger(recorders, null, 0);
        recorders.recordRequest(RequestType.LOOKUP, 2_500);
        recorders.recordStage(LatencyRecorders.STAGE_COMMIT, 10, 20);

        final long before = threads.getThreadAllocatedBytes(thread);
        final long values = logger.poll(1_000);
        final long allocated = threads.getThreadAllocatedBytes(thread) - before;

        // Each recorder allocates a spare histogram (about 230 KiB) at its first interval: the logger takes that
        // interval when it is built, so a server's first poll, long after it started, allocates none of them.
        assertTrue(allocated < 16 * 1024, "the first poll allocated " + allocated + " bytes");
        assertEquals(3, values, "the values recorded since the logger was built");
        assertEquals(2, logger.requestTotal(RequestType.LOOKUP).getTotalCount(),
            "and the one before it, in the totals");
    }

    @Test
    void shouldTimeEveryRequestOfAnIdlePipelineAndFewOfASaturatedOne() throws Exception
    {
        final AtomicLong reads = new AtomicLong();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, STORE_CONTEXT);
        final PipelineContext context = countingShared(reads, router).stageSampleMask((1 << 30) - 1);
        try (Pipeline pipeline = new Pipeline(context).start();
            IntervalLogger logger = new IntervalLogger(pipeline.latency(), null, 0))
        {
            final PipelineAgent agent = pipeline.agent();
            // The first event is one the stages time.
            pings(pipeline, agent, 1);

            // One request at a time: each is timed, at the cost of one clock read when it is answered.
            long before = reads.get();
            for (int i = 0; i < 100; i++)
            {
                pings(pipeline, agent, 1);
            }
            assertEquals(100, reads.get() - before);

            // Saturated, in batches of 256: the first batch still runs at the weight of one, the next ones time
            // about one request in 256, at strides of 128 to 384.
            before = reads.get();
            for (int i = 0; i < 40; i++)
            {
                pings(pipeline, agent, 256);
            }
            final long saturatedReads = reads.get() - before - 256;
            assertTrue(saturatedReads >= 39 * 256 / 384 && saturatedReads <= 39 * 256 / 128 + 1,
                saturatedReads + " clock reads for 39 batches of 256");
            final long requests = 1 + 100 + 40 * 256;
            assertEquals(requests, router.responses.get());

            logger.poll(1_000);
            final long counted = logger.requestTotal(RequestType.PING).getTotalCount();
            assertTrue(Math.abs(counted - requests) < requests / 5,
                counted + " counted for " + requests + " requests: the timed requests' counts estimate them all");
        }
    }

    @Test
    void shouldSwitchLatencyRecordingOfASharedPipelineBetweenDutyCycles() throws Exception
    {
        final AtomicLong reads = new AtomicLong();
        final PipelineCaller.Router router = new PipelineCaller.Router(1, STORE_CONTEXT);
        try (Pipeline pipeline = new Pipeline(countingShared(reads, router)).start();
            IntervalLogger logger = new IntervalLogger(pipeline.latency(), null, 0))
        {
            final PipelineAgent agent = pipeline.agent();
            pipeline.latencyEnabled(false);
            assertTrue(!pipeline.isStageTimed(0), "no stage timing while off");
            pings(pipeline, agent, 1);
            for (int i = 0; i < 50; i++)
            {
                pings(pipeline, agent, 1);
            }
            assertEquals(0, reads.get(), "no clock read while off");

            pipeline.latencyEnabled(true);
            assertTrue(pipeline.isStageTimed(4096));
            for (int i = 0; i < 50; i++)
            {
                pings(pipeline, agent, 1);
            }
            assertEquals(50, reads.get(), "one end time per request, one at a time");
            logger.poll(1_000);
            assertEquals(50, logger.requestTotal(RequestType.PING).getTotalCount());
        }

        final PipelineContext dedicated = new PipelineContext()
            .storeContext(STORE_CONTEXT)
            .threadingMode(ThreadingMode.DEDICATED)
            .waitMode(WaitMode.YIELDING)
            .responseSink(router);
        try (Pipeline pipeline = new Pipeline(dedicated).start())
        {
            assertThrows(IllegalStateException.class, () -> pipeline.latencyEnabled(false));
        }
    }

    /**
     * A SHARED pipeline's configuration whose clock counts its readings, for a test to run its duty cycles.
     */
    private static PipelineContext countingShared(final AtomicLong reads, final PipelineCaller.Router router)
    {
        final NanoClock clock = () ->
        {
            reads.incrementAndGet();
            return System.nanoTime();
        };
        return new PipelineContext()
            .storeContext(STORE_CONTEXT)
            .threadingMode(ThreadingMode.SHARED)
            .clock(clock)
            .responseSink(router);
    }

    private static void pings(final Pipeline pipeline, final PipelineAgent agent, final int count) throws Exception
    {
        for (int i = 0; i < count; i++)
        {
            final long sequence = pipeline.claim();
            final RequestEvent event = pipeline.event(sequence);
            event.reset();
            event.command.type = RequestType.PING;
            event.command.timestampNs = System.nanoTime();
            pipeline.publish(sequence);
        }
        final long target = agent.doWork();
        assertEquals(count, target, "one duty cycle ran the batch");
    }
}
