package io.kvstash.chaos;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.testkit.TestServer;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.process.ChildJvm;
import io.kvstash.process.ShmDirectories;

import java.nio.file.Path;
import java.util.Map;

import static io.kvstash.chaos.ChaosRunner.CHUNK_BYTES;
import static io.kvstash.chaos.ChaosRunner.round;

/**
 * Wire fuzzing: random valid, mutated and malformed records ({@link WireFuzzer}) against a server in its own
 * process; every answerable record must be answered, without a stall, and the server must stay alive.
 */
final class FuzzSuite implements ChaosSuite
{
    @Override
    public String name()
    {
        return "fuzz";
    }

    @Override
    public void run(final ChaosRunner chaos) throws Exception
    {
        final ChaosRunner.Options options = chaos.options();
        final Map<String, Object> report = chaos.report();
        // The server runs in its own process, as in production: the fuzzer's own garbage and pauses stay in
        // this JVM, and the server is measured through its answers and its mapped counters alone.
        final Path dir = chaos.newDirectory("fuzz");
        final long poolBytes = 256L * CHUNK_BYTES;
        final WireFuzzer.Result result;
        try (ChildJvm server = ChildJvm.start(TestServer.class, TestServer.args(dir, poolBytes, 1000)))
        {
            final long incarnation = Long.parseUnsignedLong(
                TestServer.incarnation(server.await(TestServer.READY_PREFIX, 30_000)), 16);
            // The earlier suites leave this JVM's heap full of their garbage; collect it before the clock runs.
            System.gc();
            final long[] gcBefore = TestServer.gc();
            result = new WireFuzzer(dir, incarnation, poolBytes, options.seed + 2, options.progress)
                .run(options.fuzzRecords);
            final long[] gcAfter = TestServer.gc();
            try (KvStashClient observer = KvStashClient.connect(new ClientContext().directory(dir)))
            {
                report.put("fuzz_server_errors", observer.counter(CountersDescriptor.ERRORS));
                report.put("fuzz_malformed_counted", observer.counter(CountersDescriptor.WIRE_MALFORMED));
            }
            report.put("fuzz_client_gc_count", gcAfter[0] - gcBefore[0]);
            report.put("fuzz_client_gc_ms", gcAfter[1] - gcBefore[1]);
            server.signal("TERM");
            final String[] serverGc = server.await(TestServer.GC_PREFIX, 20_000).split(" ");
            report.put("fuzz_server_gc_count", Long.parseLong(serverGc[1]));
            report.put("fuzz_server_gc_ms", Long.parseLong(serverGc[2]));
            report.put("fuzz_server_allocated_bytes", Long.parseLong(serverGc[3]));
            server.waitFor(20_000);
        }
        finally
        {
            ShmDirectories.delete(dir);
        }
        report.put("fuzz_records", result.records);
        report.put("fuzz_answered", result.answered);
        report.put("fuzz_unanswerable", result.unanswerable);
        report.put("fuzz_unanswered", result.unanswered);
        report.put("fuzz_error_statuses", result.errorStatuses);
        report.put("fuzz_max_response_ms", round(result.maxResponseNs / 1e6));
        report.put("fuzz_max_response_without_fuzzer_gc_ms", round(result.maxResponseWithoutFuzzerGcNs / 1e6));
        report.put("fuzz_stalls_over_100ms", result.stalls);
        report.put("fuzz_stalls_over_100ms_during_fuzzer_gc", result.stallsDuringFuzzerGc);
        report.put("fuzz_slowest", result.slowest);
        report.put("fuzz_server_alive", result.serverAlive);
        if (null != result.shrunk)
        {
            report.put("fuzz_failure", result.shrunk);
        }
        chaos.progress("fuzz done: " + result.records + " records, " + result.unanswered +
            " unanswered, max response " + round(result.maxResponseNs / 1e6) + " ms");
    }
}
