package io.kvstash.perf.pipeline;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Runs each pipeline benchmark's setup, a few operations and its checks directly (not through JMH), so a
 * benchmark that would time error answers or lose requests fails the build. Nothing here is timed.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PipelineBenchmarksTest
{
    private static final int OPERATIONS = 3;

    @ParameterizedTest
    @ValueSource(strings = { "LOOKUP", "PING" })
    void shouldAnswerEveryDirectRequestWhenTheChunkIsPresent(final String request)
    {
        final PipelineThroughputBenchmark.Direct state = new PipelineThroughputBenchmark.Direct();
        state.request = request;
        state.setupTrial();
        state.setupIteration();
        for (int i = 0; i < OPERATIONS; i++)
        {
            assertEquals("LOOKUP".equals(request) ? 1 : 0, new PipelineThroughputBenchmark().direct(state));
        }
        state.verifyIteration();
    }

    @ParameterizedTest
    @CsvSource({
        "LOOKUP, latency", "LOOKUP, no-latency", "LOOKUP, journal", "LOOKUP, stage-timing-all",
        "PING, latency", "PING, journal" })
    void shouldAnswerEveryBatchWhenTheSharedPipelineRunsOnTheCallingThread(final String request, final String variant)
        throws Exception
    {
        final PipelineThroughputBenchmark.Shared state = new PipelineThroughputBenchmark.Shared();
        state.request = request;
        state.variant = variant;
        for (int iteration = 0; iteration < 2; iteration++)
        {
            state.setupIteration();
            for (int i = 0; i < OPERATIONS; i++)
            {
                assertEquals((i + 1L) * PipelineThroughputBenchmark.BATCH, new PipelineThroughputBenchmark().shared(state));
            }
            state.tearDownIteration();
        }
    }

    @ParameterizedTest
    @CsvSource({ "LOOKUP, BUSY_SPIN", "PING, BACKOFF" })
    void shouldAnswerEveryRequestWhenTheDedicatedPipelineRunsOnItsThread(final String request, final String waitMode)
    {
        final PipelineThroughputBenchmark.Dedicated state = new PipelineThroughputBenchmark.Dedicated();
        state.request = request;
        state.waitMode = waitMode;
        state.setupIteration();
        for (int i = 0; i < 2000; i++)
        {
            new PipelineThroughputBenchmark().dedicated(state);
        }
        state.tearDownIteration();
    }
}
