package io.kvstash.process;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Tells from a process of its own whether anybody holds the POSIX lock of a file, as the server and the clients
 * probe one another: {@code LockProbe FILE} tries the lock ({@code fcntl} {@code F_SETLK} over the whole file),
 * lets it go at once if it got it, and prints {@link #HELD} or {@link #FREE}. A test whose own process holds the
 * lock cannot probe it itself: its probe would see its own lock, or release it when the probe's descriptor closes.
 */
public final class LockProbe
{
    /** Printed when another process holds the lock. */
    public static final String HELD = "HELD";
    /** Printed when nobody holds the lock. */
    public static final String FREE = "FREE";

    private LockProbe()
    {
    }

    /**
     * Entry point (see the class comment).
     *
     * @param args the file.
     * @throws IOException when the file cannot be opened.
     */
    public static void main(final String[] args) throws IOException
    {
        System.out.println(isHeld(Path.of(args[0])) ? HELD : FREE);
        System.out.flush();
    }

    /**
     * Whether another process holds the lock of a file. Call it only in a process that holds no lock on the file:
     * closing the probe's descriptor releases every lock of this process on the file.
     *
     * @param file the file.
     * @return true when the lock could not be taken.
     * @throws IOException when the file cannot be opened.
     */
    public static boolean isHeld(final Path file) throws IOException
    {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            final FileLock lock = channel.tryLock();
            if (null == lock)
            {
                return true;
            }
            lock.release();
            return false;
        }
    }
}
