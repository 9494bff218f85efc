package io.kvstash.server;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Stream;

/**
 * Per-test shared-memory directories under /dev/shm, removed afterwards.
 */
public final class TestDirs
{
    private TestDirs()
    {
    }

    public static Path newDirectory(final String name)
    {
        final Path base = Files.isDirectory(Path.of("/dev/shm")) ? Path.of("/dev/shm") :
            Path.of(System.getProperty("java.io.tmpdir"));
        return base.resolve("kvstash-test-" + name + "-" + Long.toHexString(ThreadLocalRandom.current().nextLong()));
    }

    public static void delete(final Path dir)
    {
        if (null == dir || !Files.exists(dir))
        {
            return;
        }
        try (Stream<Path> files = Files.walk(dir))
        {
            files.sorted(Comparator.reverseOrder()).forEach(p ->
            {
                try
                {
                    Files.deleteIfExists(p);
                }
                catch (final IOException ignore)
                {
                    // best effort
                }
            });
        }
        catch (final IOException ignore)
        {
            // best effort
        }
    }
}
