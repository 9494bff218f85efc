package io.kvstash.e2e;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.process.ShmDirectories;
import io.kvstash.testkit.ServeProcess;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code serve} with its default wait (backoff) in a process of its own: once idle for a few milliseconds its thread
 * sleeps on the doorbell until its next timer, so over an idle period it wakes a handful of times a second, not
 * the tens of thousands of a thread that parks 50 us at a time; a request after the idle period rings it awake.
 * Counted, not timed: the receiver thread's context switches from {@code /proc}, and the server's counters.
 */
@Timeout(120)
class IdleServerTest
{
    static final long IDLE_MS = 1000;
    Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldSleepWhenIdleAndAnswerTheRequestThatRingsItAwake() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-idle-");
        try (ServeProcess serve = ServeProcess.start(dir, "16m"))
        {
            serve.awaitReady(30_000);
            try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
            {
                assertEquals(Status.OK, client.ping().status());
                // Long enough for it to fall asleep.
                Thread.sleep(100);
                final long sleeps = client.counter(CountersDescriptor.WIRE_SLEEPS);
                final long switches = receiverSwitches(serve.pid());
                Thread.sleep(IDLE_MS);
                final long woke = receiverSwitches(serve.pid()) - switches;
                final long slept = client.counter(CountersDescriptor.WIRE_SLEEPS) - sleeps;
                assertTrue(woke < 200, "the idle server's thread woke " + woke + " times in " + IDLE_MS + " ms");
                assertTrue(slept >= 1 && slept < 200, "the idle server slept " + slept + " times");

                final long wakeups = client.counter(CountersDescriptor.WIRE_DOORBELL_WAKEUPS);
                for (int i = 0; i < 5; i++)
                {
                    // Asleep again before each request.
                    Thread.sleep(30);
                    assertEquals(Status.OK, client.ping().status());
                }
                final long rung = client.counter(CountersDescriptor.WIRE_DOORBELL_WAKEUPS) - wakeups;
                assertTrue(rung >= 3, "the doorbell woke the server for " + rung + " of 5 requests");
            }
            assertEquals(143, serve.terminate(30_000));
        }
    }

    /**
     * Context switches so far of the server's receiver thread: each sleep or park it ends is one.
     */
    static long receiverSwitches(final long pid) throws IOException
    {
        try (Stream<Path> tasks = Files.list(Path.of("/proc", Long.toString(pid), "task")))
        {
            for (final Path task : (Iterable<Path>)tasks::iterator)
            {
                if (Files.readString(task.resolve("comm")).contains("kvstash-rece"))
                {
                    long switches = 0;
                    final List<String> status = Files.readAllLines(task.resolve("status"));
                    for (final String line : status)
                    {
                        if (line.contains("ctxt_switches"))
                        {
                            switches += Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
                        }
                    }
                    return switches;
                }
            }
        }
        throw new AssertionError("no receiver thread in process " + pid);
    }
}
