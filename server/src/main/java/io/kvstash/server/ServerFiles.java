package io.kvstash.server;

import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.wire.PoolRegion;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.PoolFileDescriptor;
import io.kvstash.wire.file.PoolPages;
import io.kvstash.wire.file.SecureDirectory;
import io.kvstash.wire.file.SlotTableDescriptor;
import org.agrona.CloseHelper;
import org.agrona.IoUtil;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The server's files in its directory: the {@code server.lock} file it locks for its whole life (a second
 * server on the same directory is refused while the first lives), the pool file and the control file,
 * created fresh every start. At start the files of a dead server are reclaimed: its pool and client files
 * deleted, its control file kept as {@code dead-control-<incarnation>} (the error log survives; the three
 * newest are kept, and each is said on the start-up log). At a clean shutdown every file but the lock file is
 * removed: the lock file stays, so that the directory keeps one lock file for every server that ever starts on it.
 * A start that fails or is interrupted (a signal while the pool is prepared) removes everything it made, the lock
 * file included, and the directory when it created it. The pool must fit the free space of the directory's file
 * system, checked before anything is written.
 * <p>
 * A server in the blocking wait also listens on the doorbell, a Unix socket {@code doorbell} in the directory
 * ({@link ControlFileDescriptor#FEATURE_DOORBELL}), removed with the other files.
 * <p>
 * A second server on a live directory is refused before it changes anything: it deletes, truncates and renames
 * nothing. The lock is a POSIX ({@code fcntl}) lock, which belongs to the process and falls when the process closes
 * ANY descriptor of the file: this process never opens the lock file again while it holds the lock, and a clean
 * shutdown deletes only the files this server made (see {@link #close()}).
 */
final class ServerFiles implements AutoCloseable
{
    static final String LOCK_FILE = "server.lock";
    static final String DEAD_CONTROL_PREFIX = "dead-control-";
    static final int DEAD_CONTROLS_KEPT = 3;
    /** Times a start opens the lock file again when the one it locked was removed meanwhile. */
    static final int LOCK_ATTEMPTS = 3;
    /** How long a refused start waits for the owner line of a server that has just taken the lock. */
    static final long OWNER_WAIT_MS = 1_000;
    /** File system types whose files live in memory: a pool elsewhere is written back to disk. */
    static final java.util.Set<String> IN_MEMORY_FILE_SYSTEMS = java.util.Set.of("tmpfs", "hugetlbfs", "ramfs");

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

    private final ServerContext context;
    private final Path directory;
    private final Path lockPath;
    private final LockedFile locked;
    private Object controlKey;
    private final Path controlPath;
    private final Path poolPath;
    private final Path doorbellPath;
    private ServerSocketChannel doorbell;
    private Object doorbellKey;
    private FileChannel poolChannel;
    private MappedByteBuffer poolMeta;
    private final List<MappedByteBuffer> poolSegments = new ArrayList<>();
    private MappedByteBuffer controlMapped;
    private UnsafeBuffer control;
    private PoolRegion pool;
    private AtomicBuffer slotTable;
    private StoreCounters counters;
    private AtomicBuffer errorLogBuffer;
    private long dataOffset;
    private long slotTableOffset;
    private long slotTableLength;
    private boolean closed;
    private UnsafeBuffer[] pendingSegments;
    private Thread preparer;
    private volatile boolean stopPreparing;

    ServerFiles(final ServerContext context) throws IOException
    {
        this.context = context;
        final Path requested = context.directory();
        final boolean directoryExisted = Files.exists(requested, LinkOption.NOFOLLOW_LINKS);
        checkFreeSpace(requested, directoryExisted);
        this.directory = SecureDirectory.ensure(requested);
        final String fileSystem = Files.getFileStore(directory).type();
        if (!IN_MEMORY_FILE_SYSTEMS.contains(fileSystem))
        {
            log("kvstash: warning: " + directory + " is on a " + fileSystem + " file system, not in memory " +
                "(tmpfs): the pool's pages will be written back to disk; a directory under /dev/shm is the usual place");
        }
        lockPath = directory.resolve(LOCK_FILE);
        locked = lock(lockPath, context.incarnation());
        controlPath = directory.resolve(ControlFileDescriptor.FILE_NAME);
        poolPath = directory.resolve(PoolFileDescriptor.fileName(context.incarnation()));
        doorbellPath = directory.resolve(ControlFileDescriptor.DOORBELL_FILE_NAME);
        try
        {
            reclaim();
            checkAborted();
            if (WaitMode.BLOCKING == context.waitMode() && !context.useAgentInvoker())
            {
                openDoorbell();
            }
            createPool();
            checkAborted();
            createControl();
            if (null != pendingSegments)
            {
                startBackgroundPreparation(pendingSegments);
                pendingSegments = null;
            }
        }
        catch (final IOException | RuntimeException ex)
        {
            removeAfterFailedStart(directoryExisted);
            throw ex;
        }
    }

    /**
     * A failed or interrupted start leaves nothing: its files, the lock file (removed while still locked, see
     * {@link #lock(Path, long)}), and the directory when this start created it and nothing else is in it.
     */
    private void removeAfterFailedStart(final boolean directoryExisted)
    {
        try
        {
            if (isCurrentLockFile())
            {
                Files.deleteIfExists(lockPath);
            }
        }
        catch (final IOException ignore)
        {
            // The lock file is empty but for its owner; a later start reuses it.
        }
        close();
        if (!directoryExisted)
        {
            try
            {
                Files.deleteIfExists(directory);
            }
            catch (final IOException ignore)
            {
                // Not empty: something else was put there meanwhile; leave it.
            }
        }
    }

    private void checkAborted() throws IOException
    {
        if (context.startupContext().isStartAborted())
        {
            throw new IOException("the start was interrupted");
        }
    }

    private void log(final String line)
    {
        final java.util.function.Consumer<String> startupLog = context.startupContext().startupLog();
        if (null != startupLog)
        {
            startupLog.accept(line);
        }
    }

    /**
     * Refuses a pool that its file system cannot hold, before anything is written: tmpfs would otherwise fill the
     * machine's memory until a page fault fails. What a dead server's pool files hold counts as free: the start
     * reclaims them first.
     */
    private void checkFreeSpace(final Path requested, final boolean directoryExisted) throws IOException
    {
        Path existing = requested.toAbsolutePath();
        while (!directoryExisted && null != existing && !Files.exists(existing))
        {
            existing = existing.getParent();
        }
        if (null == existing)
        {
            return;
        }
        final FileStore store = Files.getFileStore(existing);
        long reclaimable = 0;
        if (directoryExisted && Files.isDirectory(requested, LinkOption.NOFOLLOW_LINKS))
        {
            try (DirectoryStream<Path> files = Files.newDirectoryStream(requested, PoolFileDescriptor.FILE_PREFIX + "*"))
            {
                for (final Path file : files)
                {
                    reclaimable += Files.size(file);
                }
            }
        }
        final StoreContext storeContext = context.storeContext();
        final long tableLength = SlotTableDescriptor.tableLength(storeContext.poolSizeBytes(), storeContext.alignment());
        final long needed = PoolFileDescriptor.dataOffset(tableLength, storeContext.alignment()) +
            storeContext.poolSizeBytes() + ControlFileDescriptor.fileLength(StoreCounters.LENGTH, context.errorLogLength());
        final long free = store.getUsableSpace() + reclaimable;
        if (needed > free)
        {
            throw new IOException("a pool of " + Sizes.formatSize(storeContext.poolSizeBytes()) + " (" +
                storeContext.poolSizeBytes() + " bytes, " + needed + " with its tables) does not fit in " +
                requested + ": its file system (" + store.type() + ") has " + Sizes.formatSize(free) + " (" + free +
                " bytes) free; give a smaller pool size or free some space");
        }
    }

    /**
     * Locks the path's current lock file for the life of this server, or refuses: another process or another
     * server in this JVM holds it. A server whose start failed removes the lock file while it holds the lock, so a
     * server that opened the file before that would lock a file no longer in the directory: the file locked is
     * checked to be the path's file, by the device and inode that the path names before the open and after the
     * lock (a stat opens no descriptor), and a stale one is given up and the path opened again. While this process
     * holds the lock, the lock file is never opened again and no other descriptor of it is closed: closing any
     * descriptor of a file releases every POSIX lock of the process on it.
     */
    private LockedFile lock(final Path lockPath, final long incarnation) throws IOException
    {
        synchronized (LOCKED_IN_THIS_JVM)
        {
            for (int attempt = 0; ; attempt++)
            {
                final Object before = createdFileKey(lockPath);
                final String heldHere = LOCKED_IN_THIS_JVM.get(before);
                if (null != heldHere)
                {
                    throw alreadyRunning(heldHere);
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
                    throw alreadyRunning(readLockOwner(channel, 0));
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
                    throw alreadyRunning(owner);
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
                    return new LockedFile(channel, acquired, before);
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

    private IllegalStateException alreadyRunning(final String owner)
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
            catch (final java.nio.file.FileAlreadyExistsException ignore)
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
     */
    private static Object fileKeyOrNull(final Path path)
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
     * Whether the directory's lock file is still the one this server locked (nobody removed it by hand).
     */
    private boolean isCurrentLockFile()
    {
        return locked.key.equals(fileKeyOrNull(lockPath));
    }

    /**
     * The owner line of a lock file that another process holds, read through the descriptor that failed to lock
     * it (this process holds no lock on it: closing that descriptor afterwards releases nothing). A server that
     * has just locked the file writes its line right after: an empty file is read again for a while.
     */
    private static String readLockOwner(final FileChannel channel, final long waitMs)
    {
        final long deadlineNs = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(waitMs);
        final java.nio.ByteBuffer bytes = java.nio.ByteBuffer.allocate(128);
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
        channel.write(java.nio.ByteBuffer.wrap((owner + "\n").getBytes(StandardCharsets.US_ASCII)), 0);
        return owner;
    }

    /**
     * The lock this server holds on its directory's lock file: the one descriptor of that file in this process.
     */
    private static final class LockedFile
    {
        private final FileChannel channel;
        private final FileLock lock;
        private final Object key;

        LockedFile(final FileChannel channel, final FileLock lock, final Object key)
        {
            this.channel = channel;
            this.lock = lock;
            this.key = key;
        }
    }

    /**
     * Removes what a dead server left: pool and client files; its control file is kept for its error log.
     */
    private void reclaim() throws IOException
    {
        final List<Path> deadControls = new ArrayList<>();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(directory))
        {
            for (final Path file : files)
            {
                final String name = file.getFileName().toString();
                if (name.startsWith(PoolFileDescriptor.FILE_PREFIX))
                {
                    final long bytes = Files.size(file);
                    Files.deleteIfExists(file);
                    log("kvstash: removed " + file + " (" + Sizes.formatSize(bytes) + "), the pool of a server that " +
                        "did not shut down cleanly");
                }
                else if (name.startsWith(ClientFileDescriptor.FILE_PREFIX) ||
                    name.startsWith(ControlFileDescriptor.FILE_NAME + ".new-") ||
                    name.equals(ControlFileDescriptor.DOORBELL_FILE_NAME))
                {
                    Files.deleteIfExists(file);
                }
                else if (name.startsWith(DEAD_CONTROL_PREFIX))
                {
                    deadControls.add(file);
                }
            }
        }
        if (Files.exists(controlPath))
        {
            final long oldIncarnation = readIncarnation(controlPath);
            final Path kept = directory.resolve(DEAD_CONTROL_PREFIX + Long.toHexString(oldIncarnation));
            Files.move(controlPath, kept, StandardCopyOption.REPLACE_EXISTING);
            log("kvstash: kept the control file of the server before (incarnation " + Long.toHexString(oldIncarnation) +
                ") as " + kept + " for 'kvstash errors' and 'kvstash stat --file'");
            deadControls.add(kept);
        }
        deadControls.sort(Comparator.comparingLong(ServerFiles::modifiedMs).reversed());
        for (int i = DEAD_CONTROLS_KEPT; i < deadControls.size(); i++)
        {
            Files.deleteIfExists(deadControls.get(i));
        }
    }

    /**
     * Binds the doorbell socket (owner-only, like every file of the directory). A path too long for a Unix socket
     * leaves the server without one: it still answers every request, each within a park period.
     */
    private void openDoorbell() throws IOException
    {
        final ServerSocketChannel channel = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try
        {
            channel.bind(UnixDomainSocketAddress.of(doorbellPath), context.maxClients());
        }
        catch (final IOException | IllegalArgumentException ex)
        {
            channel.close();
            log("kvstash: warning: no doorbell at " + doorbellPath + " (" + ex.getMessage() + "): with --wait " +
                "blocking every request waits up to " + DoorbellIdleStrategy.PARK_MS + " ms for the server to wake");
            return;
        }
        doorbell = channel;
        Files.setPosixFilePermissions(doorbellPath, PosixFilePermissions.fromString("rw-------"));
        doorbellKey = Files.readAttributes(doorbellPath, BasicFileAttributes.class).fileKey();
        channel.configureBlocking(false);
    }

    private static long modifiedMs(final Path file)
    {
        try
        {
            return Files.getLastModifiedTime(file).toMillis();
        }
        catch (final IOException ex)
        {
            return 0;
        }
    }

    private static long readIncarnation(final Path control)
    {
        try (FileChannel channel = FileChannel.open(control, StandardOpenOption.READ))
        {
            final java.nio.ByteBuffer bytes = java.nio.ByteBuffer.allocate(ControlFileDescriptor.HEADER_LENGTH)
                .order(java.nio.ByteOrder.LITTLE_ENDIAN);
            channel.read(bytes, 0);
            return bytes.getLong(ControlFileDescriptor.INCARNATION_OFFSET);
        }
        catch (final IOException ex)
        {
            return 0;
        }
    }

    private void createPool() throws IOException
    {
        final StoreContext store = context.storeContext();
        slotTableOffset = PoolFileDescriptor.HEADER_LENGTH;
        slotTableLength = SlotTableDescriptor.tableLength(store.poolSizeBytes(), store.alignment());
        dataOffset = PoolFileDescriptor.dataOffset(slotTableLength, store.alignment());
        SecureDirectory.createFile(poolPath);
        poolChannel = FileChannel.open(poolPath, StandardOpenOption.READ, StandardOpenOption.WRITE);
        poolChannel.truncate(0);
        poolChannel.write(java.nio.ByteBuffer.wrap(new byte[1]), dataOffset + store.poolSizeBytes() - 1);
        poolMeta = poolChannel.map(FileChannel.MapMode.READ_WRITE, 0, dataOffset);
        final UnsafeBuffer meta = new UnsafeBuffer(poolMeta);
        slotTable = new UnsafeBuffer(meta, (int)slotTableOffset, (int)Math.max(8, slotTableLength));
        final long segmentBytes = PoolFileDescriptor.SEGMENT_BYTES;
        final long[] addresses = new long[(int)((store.poolSizeBytes() + segmentBytes - 1) / segmentBytes)];
        final UnsafeBuffer[] segments = new UnsafeBuffer[addresses.length];
        for (int i = 0; i < addresses.length; i++)
        {
            final long start = i * segmentBytes;
            final long length = Math.min(segmentBytes, store.poolSizeBytes() - start);
            final MappedByteBuffer segment = poolChannel.map(FileChannel.MapMode.READ_WRITE, dataOffset + start, length);
            poolSegments.add(segment);
            addresses[i] = org.agrona.BufferUtil.address(segment);
            segments[i] = new UnsafeBuffer(segment);
        }
        if (context.startupContext().pretouch() && context.startupContext().prepareInBackground())
        {
            pendingSegments = segments;
        }
        else if (context.startupContext().pretouch())
        {
            log("kvstash: preparing a " + Sizes.formatSize(store.poolSizeBytes()) + " pool in " + poolPath +
                " (every page mapped before the first client connects)");
            PoolPages.prepareNewPool(poolChannel, dataOffset, store.poolSizeBytes(), segments, segmentBytes,
                Runtime.getRuntime().availableProcessors(), context.startupContext()::isStartAborted);
        }
        pool = PoolRegion.ofSegments(addresses, segmentBytes, store.poolSizeBytes(), poolSegments);
        meta.putLong(PoolFileDescriptor.MAGIC_OFFSET, PoolFileDescriptor.MAGIC);
        meta.putInt(PoolFileDescriptor.HEADER_LENGTH_OFFSET, PoolFileDescriptor.HEADER_LENGTH);
        meta.putLong(PoolFileDescriptor.INCARNATION_OFFSET, context.incarnation());
        meta.putLong(PoolFileDescriptor.POOL_SIZE_OFFSET, store.poolSizeBytes());
        meta.putLong(PoolFileDescriptor.DATA_OFFSET_OFFSET, dataOffset);
        meta.putLong(PoolFileDescriptor.SLOT_TABLE_OFFSET_OFFSET, slotTableOffset);
        meta.putLong(PoolFileDescriptor.SLOT_TABLE_LENGTH_OFFSET, slotTableLength);
        meta.putLong(PoolFileDescriptor.SEGMENT_BYTES_OFFSET, segmentBytes);
        meta.putInt(PoolFileDescriptor.ALIGNMENT_OFFSET, store.alignment());
        meta.putIntRelease(PoolFileDescriptor.VERSION_OFFSET, PoolFileDescriptor.VERSION);
    }

    private void createControl() throws IOException
    {
        final StoreContext store = context.storeContext();
        final int countersLength = ControlFileDescriptor.countersSectionLength(StoreCounters.LENGTH);
        final int length = ControlFileDescriptor.fileLength(StoreCounters.LENGTH, context.errorLogLength());
        final Path staging = directory.resolve(ControlFileDescriptor.FILE_NAME + ".new-" +
            Long.toHexString(context.incarnation()));
        SecureDirectory.createFile(staging);
        try (FileChannel channel = FileChannel.open(staging, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            channel.write(java.nio.ByteBuffer.wrap(new byte[1]), length - 1);
            controlMapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, length);
        }
        control = new UnsafeBuffer(controlMapped);
        final byte[] poolName = poolPath.getFileName().toString().getBytes(StandardCharsets.US_ASCII);
        final int c = ControlFileDescriptor.CONFIG_OFFSET;
        control.putInt(c + ControlFileDescriptor.POOL_NAME_LENGTH_OFFSET, poolName.length);
        control.putBytes(c + ControlFileDescriptor.POOL_NAME_OFFSET, poolName);
        control.putLong(c + ControlFileDescriptor.POOL_SIZE_OFFSET, store.poolSizeBytes());
        control.putLong(c + ControlFileDescriptor.DATA_OFFSET_OFFSET, dataOffset);
        control.putLong(c + ControlFileDescriptor.SLOT_TABLE_OFFSET_OFFSET, slotTableOffset);
        control.putLong(c + ControlFileDescriptor.SLOT_TABLE_LENGTH_OFFSET, slotTableLength);
        control.putLong(c + ControlFileDescriptor.SEGMENT_BYTES_OFFSET, PoolFileDescriptor.SEGMENT_BYTES);
        control.putInt(c + ControlFileDescriptor.ALIGNMENT_OFFSET, store.alignment());
        control.putInt(c + ControlFileDescriptor.CHUNK_TOKENS_OFFSET, store.chunkTokens());
        control.putLong(c + ControlFileDescriptor.LEASE_NS_OFFSET, store.leaseNs());
        control.putInt(c + ControlFileDescriptor.MAX_CHUNKS_OFFSET, store.maxChunksPerRequest());
        control.putInt(c + ControlFileDescriptor.MAX_INLINE_OFFSET, store.maxInlineBytes());
        control.putInt(c + ControlFileDescriptor.REQUEST_RING_CAPACITY_OFFSET, context.requestRingCapacity());
        control.putInt(c + ControlFileDescriptor.RESPONSE_RING_CAPACITY_OFFSET, context.responseRingCapacity());
        control.putInt(c + ControlFileDescriptor.MAX_CLIENTS_OFFSET, context.maxClients());
        control.putInt(c + ControlFileDescriptor.HEARTBEAT_INTERVAL_OFFSET, (int)context.heartbeatIntervalMs());
        control.putInt(c + ControlFileDescriptor.HEARTBEAT_TIMEOUT_OFFSET, (int)context.heartbeatTimeoutMs());
        control.putInt(c + ControlFileDescriptor.FEATURES_OFFSET,
            (null == context.responseObserver() ? 0 :
            ControlFileDescriptor.FEATURE_SECOND_TIER | ControlFileDescriptor.FEATURE_COMPLETED_TICKET) |
            (null == doorbell ? 0 : ControlFileDescriptor.FEATURE_DOORBELL));
        control.putInt(c + ControlFileDescriptor.EVICTION_POLICY_OFFSET, store.eviction().code() + 1);

        final int countersOffset = ControlFileDescriptor.COUNTERS_OFFSET;
        final int errorLogOffset = countersOffset + countersLength;
        counters = new StoreCounters(new UnsafeBuffer(control, countersOffset, StoreCounters.LENGTH));
        errorLogBuffer = new UnsafeBuffer(control, errorLogOffset, context.errorLogLength());

        control.putLong(ControlFileDescriptor.MAGIC_OFFSET, ControlFileDescriptor.MAGIC);
        control.putInt(ControlFileDescriptor.HEADER_LENGTH_OFFSET, ControlFileDescriptor.HEADER_LENGTH);
        control.putLong(ControlFileDescriptor.PID_OFFSET, ProcessHandle.current().pid());
        control.putLong(ControlFileDescriptor.INCARNATION_OFFSET, context.incarnation());
        control.putLong(ControlFileDescriptor.START_TIME_OFFSET, context.epochClock().time());
        control.putLongRelease(ControlFileDescriptor.HEARTBEAT_OFFSET, context.epochClock().time());
        control.putInt(ControlFileDescriptor.STATE_OFFSET, ControlFileDescriptor.STATE_RUNNING);
        control.putInt(ControlFileDescriptor.CONFIG_SECTION_OFFSET, ControlFileDescriptor.CONFIG_OFFSET);
        control.putInt(ControlFileDescriptor.CONFIG_SECTION_OFFSET + 4, ControlFileDescriptor.CONFIG_LENGTH);
        control.putInt(ControlFileDescriptor.COUNTERS_SECTION_OFFSET, countersOffset);
        control.putInt(ControlFileDescriptor.COUNTERS_SECTION_OFFSET + 4, StoreCounters.LENGTH);
        control.putInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET, errorLogOffset);
        control.putInt(ControlFileDescriptor.ERROR_LOG_SECTION_OFFSET + 4, context.errorLogLength());
        control.putIntRelease(ControlFileDescriptor.VERSION_OFFSET, ControlFileDescriptor.VERSION);
        controlKey = Files.readAttributes(staging, BasicFileAttributes.class).fileKey();
        Files.move(staging, controlPath, StandardCopyOption.ATOMIC_MOVE);
    }

    /**
     * Touches every page of the pool on a thread of its own while the server runs; {@link #close()} stops and
     * joins it before unmapping.
     */
    private void startBackgroundPreparation(final UnsafeBuffer[] segments)
    {
        final long poolBytes = context.storeContext().poolSizeBytes();
        log("kvstash: the " + Sizes.formatSize(poolBytes) + " pool's pages are prepared in the background (" +
            poolPath + ")");
        preparer = new Thread(() ->
        {
            final long startNs = System.nanoTime();
            try
            {
                if (PoolPages.touchSegments(poolBytes, segments, PoolFileDescriptor.SEGMENT_BYTES, 1,
                    () -> stopPreparing))
                {
                    log(String.format(java.util.Locale.ROOT, "kvstash: the pool's pages are prepared (%s in %.1f s)",
                        Sizes.formatSize(poolBytes), (System.nanoTime() - startNs) / 1e9));
                }
            }
            catch (final IOException | RuntimeException | InternalError ex)
            {
                // InternalError: a page the file system could not back (it filled up after the start's check).
                log("kvstash: error: preparing the pool's pages failed: " + ex);
            }
        }, "kvstash-pool-pages");
        preparer.setDaemon(true);
        preparer.start();
    }

    void heartbeat(final long nowMs)
    {
        control.putLongRelease(ControlFileDescriptor.HEARTBEAT_OFFSET, nowMs);
    }

    Path directory()
    {
        return directory;
    }

    Path poolPath()
    {
        return poolPath;
    }

    PoolRegion pool()
    {
        return pool;
    }

    AtomicBuffer slotTable()
    {
        return slotTable;
    }

    StoreCounters counters()
    {
        return counters;
    }

    AtomicBuffer errorLogBuffer()
    {
        return errorLogBuffer;
    }

    /**
     * The mapped control file.
     *
     * @return the control file's buffer.
     */
    AtomicBuffer control()
    {
        return control;
    }

    /**
     * The listening doorbell socket of a server in the blocking wait, non-blocking.
     *
     * @return the socket, or null without one.
     */
    ServerSocketChannel doorbell()
    {
        return doorbell;
    }

    long dataOffset()
    {
        return dataOffset;
    }

    /**
     * Marks the control file CLOSED, deletes every file of this server (never another server's, see
     * {@link #removeOwnFiles()}) and releases the lock.
     */
    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        stopPreparing = true;
        if (null != preparer)
        {
            // It reads the mapped pool: unmapping under it would crash the process.
            boolean interrupted = false;
            while (preparer.isAlive())
            {
                try
                {
                    preparer.join();
                }
                catch (final InterruptedException ex)
                {
                    interrupted = true;
                }
            }
            if (interrupted)
            {
                Thread.currentThread().interrupt();
            }
        }
        if (null != control)
        {
            control.putIntRelease(ControlFileDescriptor.STATE_OFFSET, ControlFileDescriptor.STATE_CLOSED);
        }
        removeOwnFiles();
        for (final MappedByteBuffer segment : poolSegments)
        {
            IoUtil.unmap(segment);
        }
        poolSegments.clear();
        if (null != poolMeta)
        {
            IoUtil.unmap(poolMeta);
        }
        if (null != controlMapped)
        {
            IoUtil.unmap(controlMapped);
        }
        try
        {
            if (null != poolChannel)
            {
                poolChannel.close();
            }
        }
        catch (final IOException ignore)
        {
            // Nothing else to release.
        }
        synchronized (LOCKED_IN_THIS_JVM)
        {
            try
            {
                locked.lock.release();
                locked.channel.close();
            }
            catch (final IOException ignore)
            {
                // Closing releases the lock in any case.
            }
            LOCKED_IN_THIS_JVM.remove(locked.key);
        }
    }

    /**
     * Deletes this server's files, and only its own: its control file when the path still names the file it
     * created, and the client files only while the lock file is still the one it locked. When the lock file was
     * removed by hand, another server may have taken the directory: its control and client files stay.
     */
    private void removeOwnFiles()
    {
        try
        {
            if (null != controlKey && controlKey.equals(fileKeyOrNull(controlPath)))
            {
                Files.deleteIfExists(controlPath);
            }
            if (null != doorbell)
            {
                CloseHelper.quietClose(doorbell);
                if (doorbellKey.equals(fileKeyOrNull(doorbellPath)))
                {
                    Files.deleteIfExists(doorbellPath);
                }
            }
            Files.deleteIfExists(poolPath);
            if (!isCurrentLockFile())
            {
                log("kvstash: warning: " + lockPath + " is no longer the lock file this server locked (removed by " +
                    "hand?): the client files in " + directory + " are left to the server that owns it now");
                return;
            }
            try (DirectoryStream<Path> files = Files.newDirectoryStream(directory, ClientFileDescriptor.FILE_PREFIX + "*"))
            {
                for (final Path file : files)
                {
                    Files.deleteIfExists(file);
                }
            }
        }
        catch (final IOException ignore)
        {
            // Best effort: the next start reclaims whatever is left.
        }
    }
}
