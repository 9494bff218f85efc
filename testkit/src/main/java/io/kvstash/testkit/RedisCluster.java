package io.kvstash.testkit;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real Redis Cluster for tests: Debian's {@code redis-server}, 3 masters and 3 replicas on free loopback ports,
 * each in its own folder of a temporary directory, joined with {@code redis-cli --cluster create
 * --cluster-replicas 1}. {@link #start()} returns once {@code cluster info} says {@code cluster_state:ok} on every
 * node; {@link #stopAll()} stops every process (the nodes' files stay, so {@link #startAll()} brings the same
 * cluster back, empty: no persistence); {@link #close()} stops every process and removes the directory.
 */
public final class RedisCluster implements AutoCloseable
{
    /** Nodes: 3 masters, 3 replicas. */
    public static final int NODES = 6;
    private static final long READY_TIMEOUT_MS = 30_000;
    /** Lowest node port; its bus port is 10,000 higher. */
    private static final int PORT_MIN = 20_000;
    /** Highest node port: its bus port stays below the ephemeral range. */
    private static final int PORT_MAX = 22_767;

    private final Path directory;
    private final int[] ports = new int[NODES];
    private final Process[] processes = new Process[NODES];
    private final Thread stopOnExit = new Thread(this::removeAll, "redis-cluster-stop");

    private RedisCluster(final Path directory)
    {
        this.directory = directory;
    }

    /**
     * Whether {@code redis-server} and {@code redis-cli} are on this machine (tests skip without them).
     *
     * @return true when both run.
     */
    public static boolean available()
    {
        return runs("redis-server", "--version") && runs("redis-cli", "--version");
    }

    /**
     * Starts a cluster of {@link #NODES} nodes and waits until it serves.
     *
     * @return the running cluster.
     * @throws IOException          when a node cannot start or the cluster does not form.
     * @throws InterruptedException when interrupted while waiting.
     */
    public static RedisCluster start() throws IOException, InterruptedException
    {
        final RedisCluster cluster = new RedisCluster(Files.createTempDirectory("kvstash-redis-cluster"));
        // A JVM that exits without close() (Ctrl-C on `kvstash bench --only l2`, a killed test run) still stops
        // its nodes: Java does not stop child processes at exit, and six orphaned redis-servers would stay.
        Runtime.getRuntime().addShutdownHook(cluster.stopOnExit);
        try
        {
            for (int i = 0; i < NODES; i++)
            {
                cluster.ports[i] = freePort(cluster.ports, i);
            }
            cluster.startAll();
            final List<String> create = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
            for (final int port : cluster.ports)
            {
                create.add("127.0.0.1:" + port);
            }
            create.addAll(List.of("--cluster-replicas", "1", "--cluster-yes"));
            final Process p = new ProcessBuilder(create).redirectErrorStream(true).start();
            final String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(60, TimeUnit.SECONDS) || 0 != p.exitValue())
            {
                throw new IOException("redis-cli --cluster create failed: " + out);
            }
            cluster.awaitOk();
            return cluster;
        }
        catch (final IOException | InterruptedException | RuntimeException ex)
        {
            cluster.close();
            throw ex;
        }
    }

    /**
     * The seeds in the form {@code serve --l2} takes.
     *
     * @return {@code redis://127.0.0.1:p1,127.0.0.1:p2,...}.
     */
    public String seeds()
    {
        final StringBuilder b = new StringBuilder("redis://");
        for (int i = 0; i < NODES; i++)
        {
            b.append(0 == i ? "" : ",").append("127.0.0.1:").append(ports[i]);
        }
        return b.toString();
    }

    /**
     * The port of one node.
     *
     * @param node 0 to {@link #NODES} - 1.
     * @return port on 127.0.0.1.
     */
    public int port(final int node)
    {
        return ports[node];
    }

    /**
     * Sets every master's and replica's memory bound and eviction policy ({@code CONFIG SET maxmemory},
     * {@code maxmemory-policy}), as an operator sizes a cluster; {@code 0} removes the bound.
     *
     * @param maxMemoryBytes bytes each node may use, 0 for no bound.
     * @param policy         {@code allkeys-lru}, {@code noeviction}, ...
     * @throws IOException          when a node refuses.
     * @throws InterruptedException when interrupted.
     */
    public void maxMemory(final long maxMemoryBytes, final String policy) throws IOException, InterruptedException
    {
        for (int i = 0; i < NODES; i++)
        {
            nodeCli(i, "CONFIG", "SET", "maxmemory", String.valueOf(maxMemoryBytes));
            nodeCli(i, "CONFIG", "SET", "maxmemory-policy", policy);
        }
    }

    /**
     * Runs {@code redis-cli} against one node (no redirections followed).
     *
     * @param node 0 to {@link #NODES} - 1.
     * @param args the command and its arguments.
     * @return its standard output, trimmed.
     * @throws IOException          when it cannot run, fails or the node answers with an error.
     * @throws InterruptedException when interrupted.
     */
    public String nodeCli(final int node, final String... args) throws IOException, InterruptedException
    {
        final List<String> command = new ArrayList<>(List.of("redis-cli", "-p", String.valueOf(ports[node])));
        command.addAll(List.of(args));
        final Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        final String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        if (!p.waitFor(10, TimeUnit.SECONDS) || 0 != p.exitValue() || out.startsWith("ERR"))
        {
            throw new IOException("redis-cli -p " + ports[node] + " " + String.join(" ", args) + " failed: " + out);
        }
        return out;
    }

    /**
     * Runs {@code redis-cli -c} against the cluster (any node; redirections followed).
     *
     * @param args the command and its arguments.
     * @return its standard output, trimmed.
     * @throws IOException          when it cannot run or fails.
     * @throws InterruptedException when interrupted.
     */
    public String cli(final String... args) throws IOException, InterruptedException
    {
        final List<String> command = new ArrayList<>(List.of("redis-cli", "-c", "-p", String.valueOf(livePort())));
        command.addAll(List.of(args));
        final Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        final String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        if (!p.waitFor(10, TimeUnit.SECONDS) || 0 != p.exitValue())
        {
            throw new IOException("redis-cli " + String.join(" ", args) + " failed: " + out);
        }
        return out;
    }

    /**
     * Starts every node that is not running (their cluster configuration is kept in their folders).
     *
     * @throws IOException          when a node cannot start.
     * @throws InterruptedException when interrupted.
     */
    public void startAll() throws IOException, InterruptedException
    {
        for (int i = 0; i < NODES; i++)
        {
            if (null != processes[i] && processes[i].isAlive())
            {
                continue;
            }
            final Path dir = directory.resolve(String.valueOf(ports[i]));
            Files.createDirectories(dir);
            processes[i] = new ProcessBuilder("redis-server",
                "--port", String.valueOf(ports[i]), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000", "--save", "",
                "--appendonly", "no", "--dir", dir.toString(), "--daemonize", "no", "--protected-mode", "no",
                "--logfile", dir.resolve("redis.log").toString())
                .redirectErrorStream(true).redirectOutput(dir.resolve("stdout.log").toFile()).start();
        }
        for (int i = 0; i < NODES; i++)
        {
            awaitPing(ports[i]);
        }
    }

    /**
     * Starts every node again after {@link #stopAll()} and waits until the cluster serves.
     *
     * @throws IOException          when it does not come back.
     * @throws InterruptedException when interrupted.
     */
    public void restart() throws IOException, InterruptedException
    {
        startAll();
        awaitOk();
    }

    /**
     * Stops every node (SIGTERM, then SIGKILL after 5 s).
     */
    public void stopAll()
    {
        for (final Process p : processes)
        {
            if (null != p)
            {
                p.destroy();
            }
        }
        for (final Process p : processes)
        {
            if (null != p)
            {
                try
                {
                    if (!p.waitFor(5, TimeUnit.SECONDS))
                    {
                        p.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
                    }
                }
                catch (final InterruptedException ex)
                {
                    p.destroyForcibly();
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    /**
     * Stops every node and removes the cluster's directory.
     */
    @Override
    public void close()
    {
        try
        {
            Runtime.getRuntime().removeShutdownHook(stopOnExit);
        }
        catch (final IllegalStateException ex)
        {
            // The JVM is exiting: the hook stops the nodes (or already did).
        }
        removeAll();
    }

    private void removeAll()
    {
        stopAll();
        try (Stream<Path> paths = Files.walk(directory))
        {
            paths.sorted(Comparator.reverseOrder()).forEach((path) -> path.toFile().delete());
        }
        catch (final IOException ignore)
        {
            // A temporary directory left behind is harmless.
        }
    }

    private void awaitOk() throws IOException, InterruptedException
    {
        awaitOk(READY_TIMEOUT_MS);
    }

    /**
     * Waits until {@code cluster info} says {@code cluster_state:ok} on every running node.
     *
     * @param timeoutMs longest wait.
     * @throws IOException          when a running node does not say so in time.
     * @throws InterruptedException when interrupted.
     */
    public void awaitOk(final long timeoutMs) throws IOException, InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        for (int i = 0; i < NODES; i++)
        {
            while (isRunning(i) && !info(ports[i]).contains("cluster_state:ok"))
            {
                if (System.currentTimeMillis() > deadline)
                {
                    throw new IOException("the cluster did not reach cluster_state:ok on port " + ports[i]);
                }
                Thread.sleep(100);
            }
        }
    }

    /**
     * Whether a node's process runs.
     *
     * @param node 0 to {@link #NODES} - 1.
     * @return true while its redis-server runs.
     */
    public boolean isRunning(final int node)
    {
        return null != processes[node] && processes[node].isAlive();
    }

    /**
     * Kills one node with SIGKILL ({@code kill -9}: no shutdown, no goodbye to the cluster) and waits until it is
     * gone; {@link #startAll()} starts it again.
     *
     * @param node 0 to {@link #NODES} - 1.
     * @throws InterruptedException when interrupted.
     */
    public void kill9(final int node) throws InterruptedException
    {
        final Process p = processes[node];
        if (null != p)
        {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
    }

    /**
     * The nodes that are masters serving slots, as a running node's {@code cluster nodes} says (a master the
     * cluster marked failed is left out).
     *
     * @return node indexes, ascending.
     * @throws IOException          when no running node answers.
     * @throws InterruptedException when interrupted.
     */
    public int[] masters() throws IOException, InterruptedException
    {
        final List<Integer> masters = new ArrayList<>();
        for (final String line : run("redis-cli", "-p", String.valueOf(livePort()), "cluster", "nodes").split("\n"))
        {
            final String[] fields = line.trim().split(" ");
            if (fields.length < 9 || !fields[2].contains("master") || fields[2].contains("fail"))
            {
                continue; // a replica, a failed master or one without slots
            }
            final int port = Integer.parseInt(fields[1].substring(fields[1].lastIndexOf(':') + 1).split("[@,]")[0]);
            for (int i = 0; i < NODES; i++)
            {
                if (ports[i] == port)
                {
                    masters.add(i);
                }
            }
        }
        return masters.stream().mapToInt(Integer::intValue).sorted().toArray();
    }

    /**
     * Waits until the cluster has failed over from a killed master: another node serves its slots, there are
     * again as many masters serving slots as before, and every running node says {@code cluster_state:ok}.
     *
     * @param killed    the killed master's index.
     * @param masters   masters serving slots before the kill.
     * @param timeoutMs longest wait.
     * @return the masters after the failover.
     * @throws IOException          when the failover does not happen in time.
     * @throws InterruptedException when interrupted.
     */
    public int[] awaitFailover(final int killed, final int masters, final long timeoutMs)
        throws IOException, InterruptedException
    {
        final long deadline = System.currentTimeMillis() + timeoutMs;
        while (true)
        {
            final int[] now = masters();
            boolean killedServes = false;
            for (final int node : now)
            {
                killedServes |= node == killed;
            }
            if (!killedServes && now.length == masters)
            {
                awaitOk(Math.max(1, deadline - System.currentTimeMillis()));
                return now;
            }
            if (System.currentTimeMillis() > deadline)
            {
                throw new IOException("no failover from node " + killed + " (port " + ports[killed] + ") in " +
                    timeoutMs + " ms: masters now " + java.util.Arrays.toString(now));
            }
            Thread.sleep(100);
        }
    }

    private int livePort() throws IOException
    {
        for (int i = 0; i < NODES; i++)
        {
            if (isRunning(i))
            {
                return ports[i];
            }
        }
        throw new IOException("no node of the cluster runs");
    }

    private static String run(final String... command) throws IOException, InterruptedException
    {
        final Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        final String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(10, TimeUnit.SECONDS) || 0 != p.exitValue())
        {
            throw new IOException(String.join(" ", command) + " failed: " + out);
        }
        return out;
    }

    private static String info(final int port) throws IOException, InterruptedException
    {
        final Process p = new ProcessBuilder("redis-cli", "-p", String.valueOf(port), "cluster", "info")
            .redirectErrorStream(true).start();
        final String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor(10, TimeUnit.SECONDS);
        return out;
    }

    private static void awaitPing(final int port) throws IOException, InterruptedException
    {
        final long deadline = System.currentTimeMillis() + READY_TIMEOUT_MS;
        while (true)
        {
            final Process p = new ProcessBuilder("redis-cli", "-p", String.valueOf(port), "ping")
                .redirectErrorStream(true).start();
            final String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            p.waitFor(10, TimeUnit.SECONDS);
            if (out.contains("PONG"))
            {
                return;
            }
            if (System.currentTimeMillis() > deadline)
            {
                throw new IOException("redis-server on port " + port + " did not answer: " + out);
            }
            Thread.sleep(50);
        }
    }

    /**
     * A port for a node, free with its bus port (port + 10,000) and different from the ones already taken. Both lie
     * below Linux's ephemeral range (32,768 on): a port taken from that range and closed again may be given to an
     * outgoing connection (a client's, another node's bus) before the node binds it.
     */
    private static int freePort(final int[] taken, final int count)
    {
        while (true)
        {
            final int port = PORT_MIN + ThreadLocalRandom.current().nextInt(PORT_MAX - PORT_MIN + 1);
            boolean used = false;
            for (int i = 0; i < count; i++)
            {
                used |= taken[i] == port;
            }
            if (!used && isFree(port) && isFree(port + 10_000))
            {
                return port;
            }
        }
    }

    private static boolean isFree(final int port)
    {
        try (ServerSocket probe = new ServerSocket(port, 1, InetAddress.getLoopbackAddress()))
        {
            return probe.isBound();
        }
        catch (final IOException ex)
        {
            return false;
        }
    }

    private static boolean runs(final String... command)
    {
        try
        {
            final Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            return p.waitFor(10, TimeUnit.SECONDS) && 0 == p.exitValue();
        }
        catch (final IOException ex)
        {
            return false;
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
