package io.kvstash.testkit;

import java.io.OutputStream;

/**
 * A {@link RedisCluster} in a process of its own, for tests in other languages (the Python client's):
 * <pre>
 * RedisClusterProcess
 * </pre>
 * Prints {@code READY seeds=redis://127.0.0.1:p1,...} once the cluster serves, and stops every node and removes
 * its directory at the end of its standard input (the test closed it, or died) or on SIGTERM. Exit code 3 when the
 * cluster could not start (the reason on standard error).
 */
public final class RedisClusterProcess
{
    /** Start of the line printed once the cluster serves. */
    public static final String READY_PREFIX = "READY seeds=";

    private RedisClusterProcess()
    {
    }

    /**
     * Entry point (see the class comment).
     *
     * @param args none.
     * @throws Exception when reading standard input fails.
     */
    public static void main(final String[] args) throws Exception
    {
        final RedisCluster cluster;
        try
        {
            cluster = RedisCluster.start();
        }
        catch (final Exception ex)
        {
            ex.printStackTrace();
            System.exit(3);
            return;
        }
        // SIGTERM: the cluster's own exit hook stops the nodes and removes the directory.
        System.out.println(READY_PREFIX + cluster.seeds());
        System.out.flush();
        System.in.transferTo(OutputStream.nullOutputStream());
        cluster.close();
        System.exit(0);
    }
}
