package io.kvstash.perf.bench;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.pipeline.ThreadingMode;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Control and echo pairs with one in flight, busy-spin, in short alternating rounds: the host moves between
 * states in which a hand-off between the two vCPUs is cheap or several times dearer (it places them on one
 * physical core or on two), sometimes within a minute, so a control run and an echo run made a minute apart
 * can each catch a different state. Each round's control p50 is divided by the echo p50 measured right after
 * it; {@code control_p50_vs_echo} is the median of those ratios. Runs on the coordinator's thread.
 */
final class ControlRoundsPart
{
    private ControlRoundsPart()
    {
    }

    /**
     * Runs {@link BenchSettings#rounds} rounds of a control run, an echo run and a header-only echo run.
     *
     * @param worker   the worker JVM, the client.
     * @param settings settings of the run.
     * @param work     the bench's work directory.
     * @param progress where progress lines go.
     * @param results  where the rounds go.
     * @throws Exception when a server, the echo agent or the worker fails.
     */
    static void run(
        final WorkerProcess worker,
        final BenchSettings settings,
        final Path work,
        final Consumer<String> progress,
        final BenchResults results) throws Exception
    {
        final Map<String, Object> common = new LinkedHashMap<>();
        common.put("wait", BenchSupport.BUSY_SPIN);
        common.put("warmup_ms", settings.roundWarmupMs);
        common.put("latency_ms", settings.roundMs);
        common.put("latency_only", true);
        for (int round = 0; round < settings.rounds; round++)
        {
            progress.accept(BenchSupport.fmt("control and echo, busy-spin, alternating: round %d of %d", round + 1,
                settings.rounds));
            final Map<String, Object> control = ControlPart.control(worker, work, BenchSupport.BUSY_SPIN, common,
                settings, null, false, ThreadingMode.SHARED, EvictionPolicy.LRU);
            final Map<String, Object> echo = ControlPart.echo(worker, work, BenchSupport.BUSY_SPIN, common, true);
            // The echo in its lighter, header-only form (see EchoRings), for comparison only: the two floors
            // side by side.
            final Map<String, Object> headerOnly =
                ControlPart.echo(worker, work, BenchSupport.BUSY_SPIN, common, false);
            results.addRound(control, echo, headerOnly);
        }
    }
}
