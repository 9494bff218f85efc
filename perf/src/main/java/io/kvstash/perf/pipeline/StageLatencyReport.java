package io.kvstash.perf.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.perf.core.StoreFixture;
import io.kvstash.pipeline.Pipeline;
import io.kvstash.pipeline.PipelineAgent;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.pipeline.latency.IntervalLogger;
import org.HdrHistogram.HistogramLogWriter;
import org.agrona.concurrent.NanoClock;

import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * Per-stage latency of the pipeline from its own {@code LatencyRecorders}, read through {@link IntervalLogger}
 * with every event stage-timed ({@code stageSampleMask} 0): the stream of LOOKUPs of one present chunk, in
 * SHARED mode one request at a time and in batches of {@link PipelineThroughputBenchmark#BATCH}, and in
 * DEDICATED mode with this thread producing as fast as the ring admits. Prints the report (p50, p90, p99,
 * p99.9, max per request type and per stage, service time and time queued before the stage) and writes each
 * run's interval log to {@code <dir>/stages-<run>.hlog}.
 * <p>
 * Usage: {@code StageLatencyReport [seconds per run] [hlog directory]}.
 */
public final class StageLatencyReport
{
    private StageLatencyReport()
    {
    }

    /**
     * Runs the three streams.
     *
     * @param args seconds per run (default 3), directory of the .hlog files (default the temporary directory).
     * @throws Exception when a run fails its checks.
     */
    public static void main(final String[] args) throws Exception
    {
        final long seconds = args.length > 0 ? Long.parseLong(args[0]) : 3;
        final String dir = args.length > 1 ? args[1] : System.getProperty("java.io.tmpdir");
        final PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        run(out, "shared-single", ThreadingMode.SHARED, 1, seconds, dir);
        run(out, "shared-batch", ThreadingMode.SHARED, PipelineThroughputBenchmark.BATCH, seconds, dir);
        run(out, "dedicated", ThreadingMode.DEDICATED, 0, seconds, dir);
    }

    private static void run(
        final PrintStream out, final String name, final ThreadingMode mode, final int batch, final long seconds,
        final String dir) throws Exception
    {
        final PipelineFixture.CountingSink sink = new PipelineFixture.CountingSink();
        final Pipeline pipeline = PipelineFixture.newPipeline(mode, WaitMode.BUSY_SPIN, true, 0, null, sink);
        final File hlog = new File(dir, "stages-" + name + ".hlog");
        final IntervalLogger logger = new IntervalLogger(pipeline.latency(), new HistogramLogWriter(hlog),
            System.currentTimeMillis());
        final NanoClock clock = pipeline.context().clock();
        final PipelineAgent agent = pipeline.agent();
        long requests = 0;
        // One warm-up second whose histograms are read and dropped, then the measured run.
        for (int phase = 0; phase < 2; phase++)
        {
            final long deadline = System.nanoTime() + (0 == phase ? 1 : seconds) * 1_000_000_000L;
            long nextPollMs = System.currentTimeMillis() + 1000;
            while (System.nanoTime() < deadline)
            {
                final int n = null == agent ? 1024 : batch;
                for (int i = 0; i < n; i++)
                {
                    final long sequence = pipeline.claim();
                    final RequestEvent event = pipeline.event(sequence);
                    final StoreCommand c = event.reset();
                    PipelineFixture.fill(c, io.kvstash.wire.RequestType.LOOKUP, ++requests, clock.nanoTime());
                    event.clientIndex = 0;
                    pipeline.publish(sequence);
                }
                if (null != agent)
                {
                    while (sink.responses() < requests)
                    {
                        agent.doWork();
                    }
                }
                if (System.currentTimeMillis() >= nextPollMs && 1 == phase)
                {
                    logger.poll(System.currentTimeMillis());
                    nextPollMs += 1000;
                }
            }
            PipelineFixture.drain(pipeline, sink, requests);
            if (0 == phase)
            {
                // Drop the warm-up: read the intervals into a logger that is not reported.
                new IntervalLogger(pipeline.latency(), null, System.currentTimeMillis())
                    .poll(System.currentTimeMillis());
            }
        }
        logger.poll(System.currentTimeMillis());
        PipelineThroughputBenchmark.verify(sink, requests, io.kvstash.wire.RequestType.LOOKUP);
        out.println("== " + name + " (" + mode + (null == agent ? ", this thread producing" : ", batches of " + batch) +
            "), every event stage-timed, " + requests + " LOOKUPs; hlog " + hlog);
        logger.report(out);
        logger.close();
        pipeline.close();
        StoreFixture.check(0 == sink.errors(), "errors");
    }
}
