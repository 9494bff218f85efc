package io.kvstash.server;

import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.wire.PoolRegion;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.ControlFileFlyweight;
import io.kvstash.wire.file.CounterLabelsFlyweight;
import io.kvstash.wire.file.CountersDescriptor;
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
import java.nio.channels.ServerSocketChannel;
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
import java.util.List;

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
 * A server in the blocking or the backoff wait (the default) also listens on the doorbell, a Unix socket
 * {@code doorbell} in the directory ({@link ControlFileDescriptor#FEATURE_DOORBELL}), removed with the other files.
 * <p>
 * A second server on a live directory is refused before it changes anything: it deletes, truncates and renames
 * nothing. The lock is a POSIX ({@code fcntl}) lock, which belongs to the process and falls when the process closes
 * ANY descriptor of the file: this process never opens the lock file again while it holds the lock, and a clean
 * shutdown deletes only the files this server made (see {@link #close()}).
 * <p>
 * The lock is {@link DirectoryLock}'s, the reclaiming of a dead server's files {@link DeadServerFiles}', the control
 * file's fields {@link ControlFileFlyweight}'s.
 */
final class ServerFiles implements AutoCloseable
{
    /** File system types whose files live in memory: a pool elsewhere is written back to disk. */
    static final java.util.Set<String> IN_MEMORY_FILE_SYSTEMS = java.util.Set.of("tmpfs", "hugetlbfs", "ramfs");

    private final ServerContext context;
    private final Path directory;
    private final DirectoryLock locked;
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
    private final ControlFileFlyweight controlFile = new ControlFileFlyweight();
    private PoolRegion pool;
    private AtomicBuffer slotTable;
    private StoreCounters counters;
    private AtomicBuffer errorLogBuffer;
    private long dataOffset;
    private long slotTableOffset;
    private long slotTableLength;
    private boolean closed;
    private PoolPreparer preparer;
    private long committedAtStart;
    private Thread preparerThread;
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
        locked = DirectoryLock.acquire(directory, context.incarnation());
        controlPath = directory.resolve(ControlFileDescriptor.FILE_NAME);
        poolPath = directory.resolve(PoolFileDescriptor.fileName(context.incarnation()));
        doorbellPath = directory.resolve(ControlFileDescriptor.DOORBELL_FILE_NAME);
        try
        {
            DeadServerFiles.reclaim(directory, this::log);
            checkAborted();
            if ((WaitMode.BLOCKING == context.waitMode() || WaitMode.BACKOFF == context.waitMode()) &&
                !context.useAgentInvoker())
            {
                openDoorbell();
            }
            createPool();
            checkAborted();
            createControl();
            if (null != preparer)
            {
                startPreparer();
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
     * {@link DirectoryLock#deleteWhileHeld()}), and the directory when this start created it and nothing else is in
     * it.
     */
    private void removeAfterFailedStart(final boolean directoryExisted)
    {
        locked.deleteWhileHeld();
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
            storeContext.poolSizeBytes() +
            ControlFileDescriptor.fileLength(CountersDescriptor.LENGTH, context.errorLogLength());
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
     * Binds the doorbell socket (owner-only, like every file of the directory). A path too long for a Unix socket
     * leaves the server without one: it still answers every request, each within a park period (it never sleeps).
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
            log("kvstash: warning: no doorbell at " + doorbellPath + " (" + ex.getMessage() + "): an idle server " +
                "backs off (--wait backoff) or sleeps a millisecond at a time (--wait blocking) rather than sleep");
            return;
        }
        doorbell = channel;
        Files.setPosixFilePermissions(doorbellPath, PosixFilePermissions.fromString("rw-------"));
        doorbellKey = Files.readAttributes(doorbellPath, BasicFileAttributes.class).fileKey();
        channel.configureBlocking(false);
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
        final StartupContext startup = context.startupContext();
        store.poolCommitment(null);
        if (startup.poolOnDemand())
        {
            preparer = new PoolPreparer(poolChannel, dataOffset, segments, segmentBytes, store.poolSizeBytes(),
                startup.onDemandHeadroomBytes(), true, this::log);
            log("kvstash: the " + Sizes.formatSize(store.poolSizeBytes()) + " pool in " + poolPath + " is committed " +
                "on demand (" + Sizes.formatSize(Math.min(store.poolSizeBytes(), startup.onDemandHeadroomBytes())) +
                " now, then as the store grows)");
            preparer.commitBeforeReady(startup::isStartAborted);
            store.poolCommitment(preparer);
        }
        else if (startup.pretouch() && startup.prepareInBackground())
        {
            preparer = new PoolPreparer(poolChannel, dataOffset, segments, segmentBytes, store.poolSizeBytes(),
                store.poolSizeBytes(), false, this::log);
        }
        else if (startup.pretouch())
        {
            log("kvstash: preparing a " + Sizes.formatSize(store.poolSizeBytes()) + " pool in " + poolPath +
                " (every page mapped before the first client connects)");
            PoolPages.prepareNewPool(poolChannel, dataOffset, store.poolSizeBytes(), segments, segmentBytes,
                Runtime.getRuntime().availableProcessors(), context.startupContext()::isStartAborted);
            committedAtStart = store.poolSizeBytes();
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
        final int length = ControlFileDescriptor.fileLength(CountersDescriptor.LENGTH, context.errorLogLength());
        final Path staging = directory.resolve(ControlFileDescriptor.FILE_NAME + ".new-" +
            Long.toHexString(context.incarnation()));
        SecureDirectory.createFile(staging);
        try (FileChannel channel = FileChannel.open(staging, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            channel.write(java.nio.ByteBuffer.wrap(new byte[1]), length - 1);
            controlMapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, length);
        }
        control = new UnsafeBuffer(controlMapped);
        controlFile.wrap(control).config()
            .poolFileName(poolPath.getFileName().toString())
            .pool(store.poolSizeBytes(), dataOffset, slotTableOffset, slotTableLength, PoolFileDescriptor.SEGMENT_BYTES,
                store.alignment())
            .store(store.chunkTokens(), store.leaseNs(), store.maxChunksPerRequest(), store.maxInlineBytes())
            .clients(context.requestRingCapacity(), context.responseRingCapacity(), context.maxClients(),
                (int)context.heartbeatIntervalMs(), (int)context.heartbeatTimeoutMs())
            .features(features(), store.eviction().code() + 1);
        counters = new StoreCounters(new UnsafeBuffer(control, ControlFileDescriptor.COUNTERS_OFFSET,
            CountersDescriptor.LENGTH));
        if (null != preparer)
        {
            preparer.counters(counters);
        }
        counters.set(CountersDescriptor.POOL_BYTES_CONFIGURED, store.poolSizeBytes());
        counters.set(CountersDescriptor.POOL_BYTES_COMMITTED,
            null == preparer ? committedAtStart : preparer.committedBytes());
        errorLogBuffer = new UnsafeBuffer(control, ControlFileDescriptor.errorLogOffset(CountersDescriptor.LENGTH),
            context.errorLogLength());
        final long nowMs = context.epochClock().time();
        controlFile.header(ProcessHandle.current().pid(), context.incarnation(), nowMs)
            .heartbeatMsRelease(nowMs)
            .stateRelease(ControlFileDescriptor.STATE_RUNNING)
            .sections(CountersDescriptor.LENGTH, context.errorLogLength());
        writeCounterLabels();
        controlFile.versionRelease(ControlFileDescriptor.VERSION);
        controlKey = Files.readAttributes(staging, BasicFileAttributes.class).fileKey();
        Files.move(staging, controlPath, StandardCopyOption.ATOMIC_MOVE);
    }

    /**
     * Every counter's name into the labels section, so that readers print the names this server counts by, whatever
     * version they are (PROTOCOL 2.3).
     */
    private void writeCounterLabels()
    {
        final CounterLabelsFlyweight labels = controlFile.counterLabels();
        for (int id = 0; id < CountersDescriptor.COUNT; id++)
        {
            final String name = CountersDescriptor.name(id);
            if (null != name)
            {
                labels.label(id, name);
            }
        }
    }

    private int features()
    {
        return (null == context.responseObserver() ? 0 :
            ControlFileDescriptor.FEATURE_SECOND_TIER | ControlFileDescriptor.FEATURE_COMPLETED_TICKET) |
            (null == doorbell ? 0 : ControlFileDescriptor.FEATURE_DOORBELL) |
            (context.startupContext().poolOnDemand() ? ControlFileDescriptor.FEATURE_POOL_ON_DEMAND : 0);
    }

    /**
     * Starts the pool's preparer on a thread of its own (on demand: it commits regions as the store asks; in the
     * background: it touches every page, then ends); {@link #close()} stops and joins it before unmapping.
     */
    private void startPreparer()
    {
        if (!context.startupContext().poolOnDemand())
        {
            log("kvstash: the " + Sizes.formatSize(context.storeContext().poolSizeBytes()) + " pool's pages are " +
                "prepared in the background (" + poolPath + ")");
        }
        preparerThread = new Thread(() -> preparer.run(() -> stopPreparing), "kvstash-pool-pages");
        preparerThread.setDaemon(true);
        preparerThread.start();
    }

    void heartbeat(final long nowMs)
    {
        controlFile.heartbeatMsRelease(nowMs);
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
     * The listening doorbell socket of a server in the blocking or backoff wait, non-blocking.
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
        if (null != preparerThread)
        {
            // It reads the mapped pool: unmapping under it would crash the process.
            boolean interrupted = false;
            while (preparerThread.isAlive())
            {
                java.util.concurrent.locks.LockSupport.unpark(preparerThread);
                try
                {
                    preparerThread.join(100);
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
            controlFile.stateRelease(ControlFileDescriptor.STATE_CLOSED);
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
        locked.release();
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
            if (null != controlKey && controlKey.equals(DirectoryLock.fileKeyOrNull(controlPath)))
            {
                Files.deleteIfExists(controlPath);
            }
            if (null != doorbell)
            {
                CloseHelper.quietClose(doorbell);
                if (doorbellKey.equals(DirectoryLock.fileKeyOrNull(doorbellPath)))
                {
                    Files.deleteIfExists(doorbellPath);
                }
            }
            Files.deleteIfExists(poolPath);
            if (!locked.isCurrent())
            {
                log("kvstash: warning: " + locked.path() + " is no longer the lock file this server locked (removed by " +
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
