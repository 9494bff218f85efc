package io.kvstash.pipeline;

import io.kvstash.core.ChunkKeys;
import io.kvstash.core.RequestType;
import io.kvstash.core.Status;
import io.kvstash.core.StoreContext;
import io.kvstash.core.layout.Dtype;
import io.kvstash.core.layout.Layout;
import io.kvstash.pipeline.latency.IntervalLogger;
import io.kvstash.pipeline.latency.LatencyRecorders;
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.HistogramLogReader;
import org.HdrHistogram.HistogramLogWriter;
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

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(60)
class LatencyRecordingTest
{
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
        assertEquals(2, logger.requestTotal(RequestType.LOOKUP).getTotalCount(), "and the one before it, in the totals");
    }
}
