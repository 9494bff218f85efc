package io.kvstash.wire.file;

import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.util.Set;

/**
 * The shared-memory directory's safety rules: created 0700, every file 0600, and refused when it belongs to
 * another user, is writable by group or others, or is a symbolic link — otherwise another local user could
 * plant or read KV caches.
 */
public final class SecureDirectory
{
    /** Permissions of the directory. */
    public static final Set<PosixFilePermission> DIRECTORY_PERMISSIONS = PosixFilePermissions.fromString("rwx------");
    /** Permissions of every file in it. */
    public static final Set<PosixFilePermission> FILE_PERMISSIONS = PosixFilePermissions.fromString("rw-------");

    private SecureDirectory()
    {
    }

    /**
     * The default directory: {@code /dev/shm/kvstash-$USER}.
     *
     * @return path.
     */
    public static Path defaultDirectory()
    {
        final String user = System.getProperty("user.name", "user");
        final Path shm = Path.of("/dev/shm");
        final Path base = Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir"));
        return base.resolve("kvstash-" + user);
    }

    /**
     * Creates the directory 0700 when absent (its parent must exist), then checks it.
     *
     * @param dir directory.
     * @return the directory.
     * @throws IOException when it cannot be created, or is unsafe (the message says why).
     */
    public static Path ensure(final Path dir) throws IOException
    {
        if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS))
        {
            try
            {
                final Path parent = dir.toAbsolutePath().getParent();
                if (null != parent && !Files.isDirectory(parent))
                {
                    // Creating a whole chain from / on a typo would scatter directories: only the last one is ours.
                    throw new NoSuchFileException(parent.toString(), null, "cannot create " + dir + ": " +
                        (Files.exists(parent) ? parent + " is not a directory" :
                        "its parent directory does not exist (create it first)"));
                }
                Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(DIRECTORY_PERMISSIONS));
                Files.setPosixFilePermissions(dir, DIRECTORY_PERMISSIONS);
            }
            catch (final FileAlreadyExistsException ignore)
            {
                // Created by a racing process: check it like any existing directory.
            }
        }
        check(dir);
        return dir;
    }

    /**
     * Checks an existing directory: a real directory, owned by this user, not writable by group or others.
     *
     * @param dir directory.
     * @throws IOException when unsafe; the message names the reason.
     */
    public static void check(final Path dir) throws IOException
    {
        if (Files.isSymbolicLink(dir))
        {
            throw new IOException("refusing " + dir + ": it is a symbolic link");
        }
        final PosixFileAttributes attributes =
            Files.readAttributes(dir, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        if (!attributes.isDirectory())
        {
            throw new IOException("refusing " + dir + ": not a directory");
        }
        final int owner = (Integer)Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        final int me = currentUid();
        if (owner != me)
        {
            throw new IOException("refusing " + dir + ": owned by uid " + owner + ", not this user's uid " + me);
        }
        final Set<PosixFilePermission> permissions = attributes.permissions();
        if (permissions.contains(PosixFilePermission.GROUP_WRITE) ||
            permissions.contains(PosixFilePermission.OTHERS_WRITE))
        {
            throw new IOException("refusing " + dir + ": writable by group or others (" +
                PosixFilePermissions.toString(permissions) + ")");
        }
    }

    /**
     * This process's user id (the owner of {@code /proc/self}).
     *
     * @return uid.
     * @throws IOException when it cannot be read.
     */
    public static int currentUid() throws IOException
    {
        return (Integer)Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    }

    /**
     * Creates a new file 0600 (failing if it exists).
     *
     * @param file path.
     * @return the path.
     * @throws IOException when it exists or cannot be created.
     */
    public static Path createFile(final Path file) throws IOException
    {
        final FileAttribute<Set<PosixFilePermission>> attribute = PosixFilePermissions.asFileAttribute(FILE_PERMISSIONS);
        Files.createFile(file, attribute);
        Files.setPosixFilePermissions(file, EnumSet.copyOf(FILE_PERMISSIONS));
        return file;
    }
}
