package io.kvstash.server;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.Pipeline;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.WireVersion;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.ErrorHandler;
import org.agrona.IoUtil;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.CachedNanoClock;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.NanoClock;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.ClosedWatchServiceException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.StandardWatchEventKinds;
import java.nio.file.WatchKey;
import java.nio.file.WatchService;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * The client conductor of the server: on timers it beats the server heartbeat, watches the directory for new
 * client files and attaches them (or rejects them in their header), checks that attached clients live, publishes
 * lease sweeps, and reaps and frees the sessions of clients that closed or died.
 * <p>
 * Ownership, single writer each:
 * <ul>
 *     <li>The conductor owns the life of every {@link ClientSession}: it alone moves a session FREE to ATTACHED
 *     ({@link #tryAttach}), ATTACHED to CLOSING ({@link #closeSession}, also on the receiver's behalf) and CLOSING
 *     to FREE ({@link #finishDetaches}); it alone writes the list of sessions in use ({@link #activeSessions()},
 *     {@link #activeCount()}), the directory's bookkeeping, the timers and the REAP sequences.</li>
 *     <li>The {@link ReceiverAgent} owns the reading side of an ATTACHED session: its request ring, its
 *     {@code lastSequence}, admitted bytes and back-pressure flag; it reads the list of sessions in use and
 *     never changes it. A session the receiver must give up (a corrupt ring) goes back through
 *     {@link #closeSession}.</li>
 *     <li>The hand-over: a session enters the list ATTACHED, and the receiver reads it from its next duty
 *     cycle; once CLOSING the receiver skips it, so the REAP the conductor publishes is the session's last
 *     event, and the session is freed only when the pipeline has passed that REAP and the receiver's last
 *     event for it.</li>
 * </ul>
 * Both agents publish into the pipeline, whose ring has a single producer, and share the session list with plain
 * fields: the conductor runs on the receiver's thread, its duty cycle invoked by the receiver on the cycles that
 * read the clock (see {@link ReceiverAgent#doWork()}), with the time of that reading in {@link CachedNanoClock}.
 * <p>
 * Owner: the receiver thread.
 */
final class ClientConductor implements Agent
{
    /** A full scan of the directory for new client files runs this often even when no file event arrived. */
    static final long FULL_SCAN_INTERVAL_MS = 1000;
    /**
     * A client file still unpublished after this long with its lock free is a dead client's leftover and is deleted
     * (a live client locks its file right after creating it, before it writes anything).
     */
    static final long ABANDONED_FILE_MS = 2000;

    private final ServerContext context;
    private final ServerFiles files;
    private final Pipeline pipeline;
    private final ClientSession[] sessions;
    private final StoreCounters counters;
    private final ErrorHandler errorHandler;
    private final EpochClock epochClock;
    private final NanoClock nanoClock;
    private final CachedNanoClock cachedClock;
    private final Set<String> knownFiles = new HashSet<>();
    private final Set<String> presentFiles = new HashSet<>();
    /**
     * Client files the last scan left neither attached nor rejected (not yet published), by name: when a scan first
     * found each (server clock, ms).
     */
    private final Map<String, Long> unsettledSinceMs = new HashMap<>();
    /**
     * The descriptors of the client files left unattached (not yet published, or rejected), by name, kept open
     * until the file leaves the directory or is attached. A POSIX lock belongs to the process and falls when the
     * process closes ANY descriptor of the file: the second tier's client runs in this process, so closing a
     * descriptor of its file while it connects would release its lock.
     */
    private final Map<String, FileChannel> heldOpen = new HashMap<>();
    private final long[] reapSequence;
    /** Indices of the sessions that are not FREE, dense: the receiver visits these, not every slot. */
    private final int[] active;
    private int activeCount;
    private int attached;
    private long nextHeartbeatMs;
    private long nextScanMs;
    // The directory is listed (which allocates) only when inotify reports a new entry, again soon while a listed
    // file is not yet published, and once a second as a safety net; polling an empty WatchService allocates nothing.
    private long nextFullScanMs;
    /** Delay of the next rescan while unsettled files remain: doubles from the scan interval, 0 when none. */
    private long unsettledRescanMs;
    private WatchService watcher;
    /** Wakes the receiver's sleep when a client's file appears, or null when the receiver never sleeps long. */
    private Runnable wake;
    /** The thread that waits for the directory's events to {@link #wake}, or null. */
    private Thread watching;
    /** A directory event the watching thread saw that no scan has looked at yet. */
    private volatile boolean directoryEvent;
    private long nextLivenessMs;
    private long nextSweepMs;

    /**
     * A conductor over the server's session slots.
     *
     * @param context      the server's configuration, concluded.
     * @param files        the server's files.
     * @param pipeline     the pipeline the REAPs and sweeps go into.
     * @param sessions     every session slot, FREE at the start.
     * @param errorHandler the server's counted error handler.
     * @param epochClock   the wall clock of the heartbeat.
     * @param nanoClock    the monotonic clock a REAP is stamped with.
     * @param cachedClock  the receiver's last reading of the monotonic clock: the time of the timers.
     */
    ClientConductor(
        final ServerContext context,
        final ServerFiles files,
        final Pipeline pipeline,
        final ClientSession[] sessions,
        final ErrorHandler errorHandler,
        final EpochClock epochClock,
        final NanoClock nanoClock,
        final CachedNanoClock cachedClock)
    {
        this.context = context;
        this.files = files;
        this.pipeline = pipeline;
        this.sessions = sessions;
        this.counters = files.counters();
        this.errorHandler = errorHandler;
        this.epochClock = epochClock;
        this.nanoClock = nanoClock;
        this.cachedClock = cachedClock;
        this.reapSequence = new long[sessions.length];
        this.active = new int[sessions.length];
        final long nowMs = cachedClock.nanoTime() / 1_000_000L;
        nextHeartbeatMs = nowMs;
        nextScanMs = nowMs;
        nextFullScanMs = nowMs;
        nextLivenessMs = nowMs;
        nextSweepMs = nowMs;
    }

    @Override
    public String roleName()
    {
        return "kvstash-client-conductor";
    }

    /**
     * Has a thread of its own wait for the directory's events and call {@code wake} on each, for a receiver that
     * sleeps longer than the scan interval: a new client then attaches at once, not at the end of the sleep. Before
     * {@link #onStart()}.
     *
     * @param wake ends the receiver's sleep, from the watching thread.
     */
    void wakeOnNewClients(final Runnable wake)
    {
        this.wake = wake;
    }

    @Override
    public void onStart()
    {
        if (null == wake)
        {
            return;
        }
        try
        {
            watcher = files.directory().getFileSystem().newWatchService();
            files.directory().register(watcher, StandardWatchEventKinds.ENTRY_CREATE);
        }
        catch (final IOException ex)
        {
            // No events: the receiver sleeps no longer than the scan interval (msUntilNextTimer).
            errorHandler.onError(ex);
            watcher = null;
            return;
        }
        final WatchService events = watcher;
        watching = new Thread(() -> watchDirectory(events), "kvstash-client-files");
        watching.setDaemon(true);
        watching.start();
    }

    private void watchDirectory(final WatchService events)
    {
        try
        {
            while (true)
            {
                final WatchKey key = events.take();
                key.pollEvents();
                directoryEvent = true;
                key.reset();
                wake.run();
            }
        }
        catch (final ClosedWatchServiceException | InterruptedException ex)
        {
            // Closed at shutdown (onClose).
        }
    }

    /**
     * How long the receiver may sleep before one of the timers is due: the heartbeat, the liveness check, the lease
     * sweep and the full scan; the scan interval too while a directory event is unread or no thread watches the
     * directory; a millisecond while a session detaches or while fewer doorbell connections are open than clients
     * attached (a client that does not ring is then answered within it, PROTOCOL 2.6).
     *
     * @param nowMs               the monotonic clock now, ms.
     * @param doorbellConnections the clients' doorbell connections now open.
     * @return ms, 0 when a timer is due.
     */
    long msUntilNextTimer(final long nowMs, final int doorbellConnections)
    {
        long next = Math.min(Math.min(nextHeartbeatMs, nextLivenessMs), Math.min(nextSweepMs, nextFullScanMs));
        if (null == watching || directoryEvent)
        {
            next = Math.min(next, nextScanMs);
        }
        if (doorbellConnections < attached || isDetaching())
        {
            next = Math.min(next, nowMs + 1);
        }
        return Math.max(0, next - nowMs);
    }

    private boolean isDetaching()
    {
        for (int u = 0; u < activeCount; u++)
        {
            if (ClientSession.CLOSING == sessions[active[u]].state())
            {
                return true;
            }
        }
        return false;
    }

    @Override
    public void onClose()
    {
        for (final FileChannel channel : heldOpen.values())
        {
            closeQuietly(channel);
        }
        heldOpen.clear();
        if (null != watcher)
        {
            try
            {
                watcher.close();
            }
            catch (final IOException ignore)
            {
                // closing at shutdown: nothing to do
            }
        }
        if (null != watching)
        {
            // Its take() ends with the watcher.
            try
            {
                watching.join(1000);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * The conductor's duties, each on its own timer, at the time of the receiver's last clock reading.
     *
     * @return work done: clients attached, closed or freed, sweeps and REAPs published.
     */
    @Override
    public int doWork()
    {
        final long nowNs = cachedClock.nanoTime();
        final long nowMs = nowNs / 1_000_000L;
        int workCount = 0;
        beatHeartbeat(nowMs);
        workCount += attachNewClients(nowMs);
        workCount += checkLiveness(nowMs);
        workCount += sweepLeases(nowNs, nowMs);
        workCount += finishDetaches();
        return workCount;
    }

    /**
     * The indices of the sessions in use (not FREE), the first {@link #activeCount()} of them. The receiver reads
     * them; only the conductor writes them.
     *
     * @return the array, the same for the conductor's life.
     */
    int[] activeSessions()
    {
        return active;
    }

    /**
     * How many of {@link #activeSessions()} are in use.
     *
     * @return sessions not FREE.
     */
    int activeCount()
    {
        return activeCount;
    }

    /**
     * Closes an ATTACHED session: the receiver stops reading it, and the conductor reaps and frees it.
     *
     * @param session       a session in use.
     * @param processIsDead true when its client's process died (its pins are released as reaped).
     */
    void closeSession(final ClientSession session, final boolean processIsDead)
    {
        session.beginClosing(processIsDead);
    }

    private void beatHeartbeat(final long nowMs)
    {
        if (nowMs - nextHeartbeatMs >= 0)
        {
            files.heartbeat(epochClock.time());
            nextHeartbeatMs = nowMs + context.heartbeatIntervalMs();
        }
    }

    private int attachNewClients(final long nowMs)
    {
        if (nowMs - nextScanMs < 0 || (nowMs - nextFullScanMs < 0 && !directoryChanged()))
        {
            return 0;
        }
        final int workCount = scan(nowMs);
        nextScanMs = nowMs + context.scanIntervalMs();
        if (!unsettledSinceMs.isEmpty())
        {
            // A client file seen before its client published it: its creation's event is spent, so look again
            // soon rather than at the next full scan, backing off to the full scan's second for a file that
            // is never published.
            unsettledRescanMs = 0 == unsettledRescanMs ?
                context.scanIntervalMs() : Math.min(FULL_SCAN_INTERVAL_MS, 2 * unsettledRescanMs);
            nextFullScanMs = nowMs + unsettledRescanMs;
        }
        else
        {
            unsettledRescanMs = 0;
            nextFullScanMs = nowMs + FULL_SCAN_INTERVAL_MS;
        }
        return workCount;
    }

    private boolean directoryChanged()
    {
        if (null != watching)
        {
            if (!directoryEvent)
            {
                return false;
            }
            directoryEvent = false;
            return true;
        }
        try
        {
            if (null == watcher)
            {
                watcher = files.directory().getFileSystem().newWatchService();
                files.directory().register(watcher, StandardWatchEventKinds.ENTRY_CREATE);
                return true;
            }
            final WatchKey key = watcher.poll();
            if (null == key)
            {
                return false;
            }
            key.pollEvents();
            key.reset();
            return true;
        }
        catch (final IOException ex)
        {
            return true;
        }
    }

    private int scan(final long nowMs)
    {
        int attachedNow = 0;
        presentFiles.clear();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(files.directory(),
            ClientFileDescriptor.FILE_PREFIX + "*"))
        {
            for (final Path file : entries)
            {
                final String name = file.getFileName().toString();
                presentFiles.add(name);
                if (!knownFiles.contains(name))
                {
                    if (tryAttach(file))
                    {
                        knownFiles.add(name);
                        unsettledSinceMs.remove(name);
                        attachedNow++;
                    }
                    else if (deleteIfAbandoned(file, name, nowMs))
                    {
                        presentFiles.remove(name);
                    }
                }
            }
            // Forget rejected files their clients have deleted, so the set stays as small as the directory.
            knownFiles.retainAll(presentFiles);
            unsettledSinceMs.keySet().retainAll(presentFiles);
            closeGone();
        }
        catch (final IOException ex)
        {
            errorHandler.onError(ex);
        }
        return attachedNow;
    }

    /**
     * Closes the descriptors held open of client files no longer in the directory: their clients let go of them.
     */
    private void closeGone()
    {
        heldOpen.entrySet().removeIf((entry) ->
        {
            if (presentFiles.contains(entry.getKey()))
            {
                return false;
            }
            closeQuietly(entry.getValue());
            return true;
        });
    }

    private static void closeQuietly(final FileChannel channel)
    {
        try
        {
            channel.close();
        }
        catch (final IOException ignore)
        {
            // Nothing else to release.
        }
    }

    /**
     * Deletes a client file that has stayed unpublished for {@link #ABANDONED_FILE_MS} with nobody holding its lock:
     * its client died between creating it and publishing it, and nothing else would ever remove it.
     *
     * @return true when the file was deleted.
     */
    private boolean deleteIfAbandoned(final Path file, final String name, final long nowMs)
    {
        final Long since = unsettledSinceMs.putIfAbsent(name, nowMs);
        if (null == since || nowMs - since < ABANDONED_FILE_MS)
        {
            return false;
        }
        final FileChannel channel = heldOpen.get(name);
        try
        {
            if (null == channel || !ClientSession.isLockFree(channel))
            {
                return false;
            }
            Files.deleteIfExists(file);
            // Nobody holds its lock: this descriptor is closed without releasing anybody's.
            heldOpen.remove(name);
            closeQuietly(channel);
            unsettledSinceMs.remove(name);
            return true;
        }
        catch (final IOException ex)
        {
            return false;
        }
    }

    /**
     * Attaches a client file, or rejects it.
     *
     * @return true when the file is settled (attached or rejected); false to look again later.
     */
    private boolean tryAttach(final Path file)
    {
        final String name = file.getFileName().toString();
        FileChannel channel = heldOpen.remove(name);
        MappedByteBuffer mapped = null;
        try
        {
            if (null == channel)
            {
                channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
            }
            final long size = channel.size();
            if (size < ClientFileDescriptor.HEADER_LENGTH)
            {
                heldOpen.put(name, channel);
                return false;
            }
            mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, size);
            final UnsafeBuffer header = new UnsafeBuffer(mapped);
            final int version = header.getIntAcquire(ClientFileDescriptor.VERSION_OFFSET);
            if (0 == version)
            {
                IoUtil.unmap(mapped);
                heldOpen.put(name, channel);
                return false;
            }
            final int reason = check(header, version, size);
            if (0 != reason)
            {
                reject(header, reason, mapped);
                heldOpen.put(name, channel);
                return true;
            }
            final ClientSession free = freeSession();
            if (null == free)
            {
                reject(header, ClientFileDescriptor.REJECT_TOO_MANY_CLIENTS, mapped);
                heldOpen.put(name, channel);
                return true;
            }
            free.attach(file, channel, mapped, context.requestRingCapacity(), context.responseRingCapacity(),
                header.getLong(ClientFileDescriptor.PID_OFFSET));
            active[activeCount++] = free.index;
            reapSequence[free.index] = -1;
            attached++;
            counters.increment(CountersDescriptor.WIRE_CLIENTS_ATTACHED);
            counters.set(CountersDescriptor.WIRE_CLIENTS, attached);
            return true;
        }
        catch (final IOException | RuntimeException ex)
        {
            if (null != mapped)
            {
                IoUtil.unmap(mapped);
            }
            if (null != channel)
            {
                heldOpen.put(name, channel);
            }
            if (Files.exists(file))
            {
                errorHandler.onError(ex);
            }
            return true;
        }
    }

    private ClientSession freeSession()
    {
        for (final ClientSession session : sessions)
        {
            if (ClientSession.FREE == session.state())
            {
                return session;
            }
        }
        return null;
    }

    private static void reject(final UnsafeBuffer header, final int reason, final MappedByteBuffer mapped)
    {
        header.putInt(ClientFileDescriptor.REJECT_REASON_OFFSET, reason);
        header.putIntRelease(ClientFileDescriptor.ATTACH_STATE_OFFSET, ClientFileDescriptor.ATTACH_REJECTED);
        IoUtil.unmap(mapped);
    }

    private int check(final UnsafeBuffer header, final int version, final long size)
    {
        if (header.getLong(ClientFileDescriptor.MAGIC_OFFSET) != ClientFileDescriptor.MAGIC ||
            !WireVersion.isCompatible(version))
        {
            return ClientFileDescriptor.REJECT_BAD_HEADER;
        }
        if (header.getLong(ClientFileDescriptor.INCARNATION_OFFSET) != context.incarnation())
        {
            return ClientFileDescriptor.REJECT_WRONG_INCARNATION;
        }
        final int requestCapacity = header.getInt(ClientFileDescriptor.REQUEST_CAPACITY_OFFSET);
        final int responseCapacity = header.getInt(ClientFileDescriptor.RESPONSE_CAPACITY_OFFSET);
        if (requestCapacity != context.requestRingCapacity() || responseCapacity != context.responseRingCapacity() ||
            size < ClientFileDescriptor.fileLength(requestCapacity, responseCapacity))
        {
            return ClientFileDescriptor.REJECT_BAD_RINGS;
        }
        return 0;
    }

    private int checkLiveness(final long nowMs)
    {
        if (nowMs - nextLivenessMs < 0)
        {
            return 0;
        }
        nextLivenessMs = nowMs + context.livenessIntervalMs();
        int workCount = 0;
        for (int u = 0; u < activeCount; u++)
        {
            final ClientSession session = sessions[active[u]];
            if (ClientSession.ATTACHED != session.state())
            {
                continue;
            }
            if (session.isClosingRequested())
            {
                closeSession(session, false);
                workCount++;
            }
            else if (session.isProcessGone())
            {
                closeSession(session, true);
                workCount++;
            }
        }
        return workCount;
    }

    private int sweepLeases(final long nowNs, final long nowMs)
    {
        if (nowMs - nextSweepMs >= 0 && pipeline.tryPublishSweep(nowNs))
        {
            nextSweepMs = nowMs + context.sweepIntervalMs();
            return 1;
        }
        return 0;
    }

    /**
     * For each closing session: publish its REAP once, then free it when the pipeline has passed every
     * event that names it.
     */
    private int finishDetaches()
    {
        int workCount = 0;
        for (int u = activeCount - 1; u >= 0; u--)
        {
            final ClientSession session = sessions[active[u]];
            if (ClientSession.CLOSING != session.state())
            {
                continue;
            }
            final int index = session.index;
            if (reapSequence[index] < 0)
            {
                final long sequence = pipeline.tryClaim();
                if (sequence < 0)
                {
                    return workCount;
                }
                final StoreCommand command = pipeline.event(sequence).reset();
                command.type = RequestType.REAP;
                command.session = session.sessionId();
                command.flags = session.dead ? RequestFlags.REAPED : 0;
                command.timestampNs = nanoClock.nanoTime();
                pipeline.publish(sequence);
                reapSequence[index] = sequence;
                workCount++;
            }
            else if (pipeline.processedSequence() >= Math.max(reapSequence[index], session.lastSequence))
            {
                final String name = session.file.getFileName().toString();
                session.free();
                removeActive(index);
                knownFiles.remove(name);
                attached--;
                counters.increment(CountersDescriptor.WIRE_CLIENTS_DETACHED);
                counters.set(CountersDescriptor.WIRE_CLIENTS, attached);
                workCount++;
            }
        }
        return workCount;
    }

    private void removeActive(final int index)
    {
        for (int i = 0; i < activeCount; i++)
        {
            if (active[i] == index)
            {
                active[i] = active[--activeCount];
                return;
            }
        }
    }
}
