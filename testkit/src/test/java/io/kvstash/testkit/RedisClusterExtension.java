package io.kvstash.testkit;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * One real {@link RedisCluster} for a test class: started before its first test (the class is skipped where
 * {@code redis-server} and {@code redis-cli} are not installed) and stopped after its last.
 * <pre>
 * &#64;RegisterExtension
 * static final RedisClusterExtension CLUSTER = new RedisClusterExtension();
 * </pre>
 */
public final class RedisClusterExtension implements BeforeAllCallback, AfterAllCallback
{
    private RedisCluster cluster;

    @Override
    public void beforeAll(final ExtensionContext context) throws Exception
    {
        assumeTrue(RedisCluster.available(), "redis-server and redis-cli are not installed");
        cluster = RedisCluster.start();
    }

    @Override
    public void afterAll(final ExtensionContext context)
    {
        if (null != cluster)
        {
            cluster.close();
            cluster = null;
        }
    }

    /**
     * The running cluster.
     *
     * @return the cluster of the class's tests.
     */
    public RedisCluster cluster()
    {
        return cluster;
    }
}
