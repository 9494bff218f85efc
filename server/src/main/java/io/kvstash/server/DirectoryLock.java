package io.kvstash.server;

import io.kvstash.wire.file.SecureDirectory;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The lock a server holds on its directory's {@code server.lock} file for its whole life: a second server on the
 * same directory is refused while the first lives, with the owner line ({@code pid <pid> incarnation <hex>}) the
 * first wrote in the file. The lock is a POSIX ({@code fcntl}) lock, which belongs to the process and falls when the
 * process closes ANY descriptor of the file: this process never opens the lock file again while it holds the lock,
 * and this lock's descriptor is the only one it closes (in {@link #release()}).
 */
final class DirectoryLock
{
    static final String LOCK_FILE = "server.lock";
    /** Times a start opens the lock file again when the one it locked was removed meanwhile. */
    static final int LOCK_ATTEMPTS = 3;
    /** How long a refused start waits for the owner line of a server that has just taken the lock. */
    static final long OWNER_WAIT_MS = 1_000;

    /**
     * The lock files this JVM holds, by file key (device and inode), with the owner line written in each. A POSIX
     * lock belongs to the process, and closing ANY descriptor of the file releases it: a second server started in
     * this JVM must learn that the lock file is held here without opening it.
     */
    private static final Map<Object, String> LOCKED_IN_THIS_JVM = new HashMap<>();
    /**
     * Descriptors of a lock file that this JVM locks through another descriptor, never closed: closing one would
     * release that lock. Only a lock taken outside this class (nothing in kvstash does) can put one here.
     */
    private static final List<FileChannel> NEVER_CLOSED = new ArrayList<>();

    private final Path lockPath;
    private final FileChannel channel;
    private final FileLock lock;
    private final Object key;

    private DirectoryLock(final Path lockPath, final FileChannel channel, final FileLock lock, final Object key)
    {
        this.lockPath = lockPath;
        this.channel = channel;
        this.lock = lock;
        this.key = key;
    }

    /**
     * Locks the directory's current lock file for the life of this server, or refuses: another process or another
     * server in this JVM holds it. A server whose start failed removes the lock file while it holds the lock, so a
     * server that opened the file before that would lock a file no longer in the directory: the file locked is
     * checked to be the path's file, by the device and inode that the path names before the open and after the
     * lock (a stat opens no descriptor), and a stale one is given up and the path opened again. While this process
     * holds the lock, the lock file is never opened again and no other descriptor of it is closed: closing any
     * descriptor of a file releases every POSIX lock of the process on it.
     *
     * @param directory   the server's directory.
     * @param incarnation the starting server's incarnation, for the owner line.
     * @return the lock held.
     * @throws IOException           when the lock file cannot be created or written.
     * @throws IllegalStateException when another server holds the directory.
     */
    static DirectoryLock acquire(final Path directory, final long incarnation) throws IOException
    {
        final Path lockPath = directory.resolve(LOCK_FILE);
        synchronized (LOCKED_IN_THIS_JVM)
        {
            for (int attempt = 0; ; attempt++)
            {
                final Object before = createdFileKey(lockPath);
                final String heldHere = LOCKED_IN_THIS_JVM.get(before);
                if (null != heldHere)
                {
                    throw alreadyRunning(directory, heldHere);
                }
                final FileChannel channel = FileChannel.open(lockPath, StandardOpenOption.READ, StandardOpenOption.WRITE);
                FileLock acquired = null;
                try
                {
                    acquired = channel.tryLock();
                }
                catch (final OverlappingFileLockException ex)
                {
                    NEVER_CLOSED.add(channel);
                    throw alreadyRunning(directory, readLockOwner(channel, 0));
                }
                catch (final IOException | RuntimeException ex)
                {
                    channel.close();
                    throw ex;
                }
                if (null == acquired)
                {
                    final String owner = readLockOwner(channel, OWNER_WAIT_MS);
                    channel.close();
                    throw alreadyRunning(directory, owner);
                }
                final String owner;
                try
                {
                    owner = writeLockOwner(channel, incarnation);
                }
                catch (final IOException | RuntimeException ex)
                {
                    acquired.release();
                    channel.close();
                    throw ex;
                }
                if (before.equals(fileKeyOrNull(lockPath)))
                {
                    LOCKED_IN_THIS_JVM.put(before, owner);
                    return new DirectoryLock(lockPath, channel, acquired, before);
                }
                acquired.release();
                channel.close();
                if (attempt >= LOCK_ATTEMPTS)
                {
                    throw new IllegalStateException("could not lock " + lockPath + ": it was replaced " +
                        LOCK_ATTEMPTS + " times while locking");
                }
            }
        }
    }

    /**
     * The lock file's path.
     *
     * @return path.
     */
    Path path()
    {
        return lockPath;
    }

    /**
     * Whether the directory's lock file is still the one this server locked (nobody removed it by hand).
     *
     * @return true while the path names the file locked.
     */
    boolean isCurrent()
    {
        return key.equals(fileKeyOrNull(lockPath));
    }

    /**
     * Removes the lock file while still holding its lock, for a start that failed: a server that opened the file
     * meanwhile finds, once it locks it, that the path no longer names it (see {@link #acquire(Path, long)}).
     */
    void deleteWhileHeld()
    {
        try
        {
            if (isCurrent())
            {
                Files.deleteIfExists(lockPath);
            }
        }
        catch (final IOException ignore)
        {
            // The lock file is empty but for its owner; a later start reuses it.
        }
    }

    /**
     * Releases the lock and closes its descriptor; the file stays.
     */
    void release()
    {
        synchronized (LOCKED_IN_THIS_JVM)
        {
            try
            {
                lock.release();
                channel.close();
            }
            catch (final IOException ignore)
            {
                // Closing releases the lock in any case.
            }
            LOCKED_IN_THIS_JVM.remove(key);
        }
    }

    private static IllegalStateException alreadyRunning(final Path directory, final String owner)
    {
        return new IllegalStateException("a kvstash server is already running on " + directory +
            (owner.isEmpty() ? "" : " (" + owner + ")") + "; stop it first, or use another directory");
    }

    /**
     * The file key of the lock file, created when absent.
     */
    private static Object createdFileKey(final Path lockPath) throws IOException
    {
        for (int attempt = 0; ; attempt++)
        {
            final Object key = fileKeyOrNull(lockPath);
            if (null != key)
            {
                return key;
            }
            try
            {
                SecureDirectory.createFile(lockPath);
            }
            catch (final FileAlreadyExistsException ignore)
            {
                // Another server is starting too: the lock decides.
            }
            if (attempt >= LOCK_ATTEMPTS)
            {
                throw new IOException("could not create " + lockPath + ": it was removed " + LOCK_ATTEMPTS +
                    " times meanwhile");
            }
        }
    }

    /**
     * The device and inode a path names now (from a stat, which opens no descriptor), or null when it names none.
     *
     * @param path a file.
     * @return its file key, or null.
     */
    static Object fileKeyOrNull(final Path path)
    {
        try
        {
            return Files.readAttributes(path, BasicFileAttributes.class).fileKey();
        }
        catch (final IOException ex)
        {
            return null;
        }
    }

    /**
     * The owner line of a lock file that another process holds, read through the descriptor that failed to lock
     * it (this process holds no lock on it: closing that descriptor afterwards releases nothing). A server that
     * has just locked the file writes its line right after: an empty file is read again for a while.
     */
    private static String readLockOwner(final FileChannel channel, final long waitMs)
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        final java.nio.ByteBuffer bytes = ByteBuffer.allocate(128);
        try
        {
            while (true)
            {
                bytes.clear();
                final int n = Math.max(0, channel.read(bytes, 0));
                if ((n > 0 && '\n' == bytes.get(n - 1)) || System.nanoTime() - deadlineNs >= 0)
                {
                    return new String(bytes.array(), 0, n, StandardCharsets.US_ASCII).trim();
                }
                Thread.sleep(10);
            }
        }
        catch (final IOException ex)
        {
            return "";
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return "";
        }
    }

    private static String writeLockOwner(final FileChannel channel, final long incarnation) throws IOException
    {
        final String owner = "pid " + ProcessHandle.current().pid() + " incarnation " + Long.toHexString(incarnation);
        channel.truncate(0);
        channel.write(ByteBuffer.wrap((owner + "\n").getBytes(StandardCharsets.US_ASCII)), 0);
        return owner;
    }
}
