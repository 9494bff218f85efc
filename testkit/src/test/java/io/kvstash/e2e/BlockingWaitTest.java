package io.kvstash.e2e;

import io.kvstash.client.ClientContext;
import io.kvstash.client.KvStashClient;
import io.kvstash.process.ShmDirectories;
import io.kvstash.testkit.ServeProcess;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.CountersDescriptor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code serve --wait blocking} in a process of its own: its thread sleeps whenever a duty cycle finds nothing to
 * do, and nothing but a client's doorbell wakes it before its park period is over (the requests arrive in shared
 * memory). The test counts what woke the server rather than timing the requests: a server asleep on a timer alone,
 * or a client that does not ring, makes every request wait out the park, and leaves the wake-ups at 0.
 */
@Timeout(120)
class BlockingWaitTest
{
    static final int ROUND_TRIPS = 200;
    Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldBeWokenByTheClientsDoorbellWhenARequestArrivesWhileItSleeps() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-blocking-");
        final Path doorbell = dir.resolve(ControlFileDescriptor.DOORBELL_FILE_NAME);
        try (ServeProcess serve = ServeProcess.start(dir, "16m", "--wait", "blocking"))
        {
            serve.awaitReady(30_000);
            assertEquals("rw-------", PosixFilePermissions.toString(
                Files.getPosixFilePermissions(doorbell, LinkOption.NOFOLLOW_LINKS)), "the doorbell is the owner's");
            try (KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
            {
                assertEquals(Status.OK, client.ping().status());
                final long sleeps = client.counter(CountersDescriptor.WIRE_SLEEPS);
                final long wakeups = client.counter(CountersDescriptor.WIRE_DOORBELL_WAKEUPS);
                for (int i = 0; i < ROUND_TRIPS; i++)
                {
                    // Long enough for the idle server to fall asleep: the request finds it sleeping.
                    Thread.sleep(1);
                    assertEquals(Status.OK, client.ping().status());
                }
                final long slept = client.counter(CountersDescriptor.WIRE_SLEEPS) - sleeps;
                final long woken = client.counter(CountersDescriptor.WIRE_DOORBELL_WAKEUPS) - wakeups;
                // Most requests find it asleep; one may land in the cycle it runs after raising its Asleep word,
                // or find a timer due (no sleep counted), and be answered without a sleep.
                assertTrue(slept >= ROUND_TRIPS / 2, "the server slept between requests: " + slept + " sleeps");
                // A few may land between its sleeps (it wakes every park period) and be found without a ring.
                assertTrue(woken >= ROUND_TRIPS / 2, "the doorbell woke the server for " + woken + " of " +
                    ROUND_TRIPS + " requests (" + slept + " sleeps)");
            }
            assertEquals(143, serve.terminate(30_000));
        }
        assertFalse(Files.exists(doorbell, LinkOption.NOFOLLOW_LINKS), "a clean shutdown removes the doorbell");
    }
}
