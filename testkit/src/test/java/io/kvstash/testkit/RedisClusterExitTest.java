package io.kvstash.testkit;

import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A JVM that started a {@link RedisCluster} and exits without closing it (Ctrl-C on a bench, a test run killed
 * with SIGTERM, a plain {@code System.exit}) stops the cluster's nodes on its way out: none is left running.
 */
class RedisClusterExitTest
{
    private static final String SEEDS = "SEEDS ";

    @Test
    void nodesStopWhenTheJvmExitsWithoutClosingTheCluster() throws Exception
    {
        assumeTrue(RedisCluster.available(), "redis-server and redis-cli are not installed");
        final String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        final Process child = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
            StartAndExit.class.getName()).redirectErrorStream(true).start();
        final List<Integer> ports = new ArrayList<>();
        try
        {
            final BufferedReader out = new BufferedReader(
                new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
            String line;
            while (null != (line = out.readLine()) && !line.startsWith(SEEDS))
            {
                // Lettuce-free child: nothing else is expected, but skip whatever it prints.
            }
            assertNotNull(line, "the child printed its cluster's seeds");
            for (final String hostPort : line.substring(SEEDS.length() + "redis://".length()).split(","))
            {
                ports.add(Integer.parseInt(hostPort.substring(hostPort.indexOf(':') + 1)));
            }
            assertEquals(RedisCluster.NODES, ports.size());
            assertTrue(child.waitFor(60, TimeUnit.SECONDS), "the child exited");
            for (final int port : ports)
            {
                assertTrue(closedWithin(port, 10_000), "node " + port + " stopped with the JVM that started it");
            }
        }
        finally
        {
            child.destroyForcibly();
            for (final int port : ports)
            {
                new ProcessBuilder("redis-cli", "-p", String.valueOf(port), "shutdown", "nosave")
                    .redirectErrorStream(true).start().waitFor(5, TimeUnit.SECONDS);
            }
        }
    }

    private static boolean closedWithin(final int port, final long timeoutMs) throws InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline)
        {
            try (Socket s = new Socket())
            {
                s.connect(new InetSocketAddress("127.0.0.1", port), 500);
            }
            catch (final IOException refused)
            {
                return true;
            }
            Thread.sleep(100);
        }
        return false;
    }

    /** The child: starts a cluster, prints its seeds and exits without closing it. */
    public static final class StartAndExit
    {
        private StartAndExit()
        {
        }

        /**
         * Entry point.
         *
         * @param args none.
         * @throws Exception when the cluster does not start.
         */
        public static void main(final String[] args) throws Exception
        {
            final RedisCluster cluster = RedisCluster.start();
            System.out.println(SEEDS + cluster.seeds());
            System.out.flush();
            System.exit(0);
        }
    }
}
