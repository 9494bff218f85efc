package io.kvstash.process;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Stream;

/**
 * Fresh server directories for runs that make their own (replays, demos, the chaos suites, tests): under
 * {@code /dev/shm} where it exists, else the temporary directory; removed, with whatever the server left in
 * them, when the run ends.
 */
public final class ShmDirectories
{
    private ShmDirectories()
    {
    }

    /**
     * Where fresh directories go: {@code /dev/shm}, or {@code java.io.tmpdir} where there is none.
     *
     * @return the base directory.
     */
    public static Path base()
    {
        final Path shm = Path.of("/dev/shm");
        return Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir"));
    }

    /**
     * A fresh, not yet existing path under {@link #base()}: the prefix and a random suffix.
     *
     * @param prefix start of the name, e.g. {@code kvstash-replay-}.
     * @return the path (the server creates it).
     */
    public static Path newPath(final String prefix)
    {
        return newPath(base(), prefix);
    }

    /**
     * A fresh, not yet existing path under a base directory: the prefix and a random suffix.
     *
     * @param base   where it goes.
     * @param prefix start of the name.
     * @return the path.
     */
    public static Path newPath(final Path base, final String prefix)
    {
        return base.resolve(prefix + Long.toHexString(ThreadLocalRandom.current().nextLong()));
    }

    /**
     * Removes a directory and everything under it, best effort: what cannot be removed stays (a directory left
     * under /dev/shm is reclaimed by its next server or by hand).
     *
     * @param dir the directory, or null.
     */
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
