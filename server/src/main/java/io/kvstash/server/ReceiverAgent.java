package io.kvstash.server;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.Pipeline;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.pipeline.latency.LoadWeightedSampler;
import io.kvstash.pipeline.latency.TypeSampler;
import io.kvstash.server.codec.RequestDecoder;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.WireVersion;
import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.ring.RingConsumer;
import org.agrona.ErrorHandler;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.NanoClock;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * The receiver and conductor of the server: polls every client's request ring, decodes records in place
 * and publishes them into the pipeline; on timers it attaches new clients, checks client liveness, reaps
 * dead or closed clients, beats the server heartbeat and publishes lease sweeps. Latency intervals are closed
 * on a thread of their own ({@link LatencyLogAgent}), not here.
 * A slow client (its response ring lacks room) or a full pipeline only stops reading that client or this
 * duty cycle; nobody ever waits for a client.
 * <p>
 * Owner: the receiver thread.
 */
final class ReceiverAgent implements Agent
{
    /** Records read from one client per duty cycle at most, so one busy client cannot starve the others. */
    static final int MAX_RECORDS_PER_CLIENT = 64;
    /** Duty cycles between two readings of the clock for the timers and the coarse stamps. */
    static final int CYCLES_PER_CLOCK_READ = 16;
    /** A full scan of the directory for new client files runs this often even when no file event arrived. */
    static final long FULL_SCAN_INTERVAL_MS = 1000;
    /**
     * A client file still unpublished after this long with its lock free is a dead client's leftover and is deleted
     * (a live client locks its file right after creating it, before it writes anything).
     */
    static final long ABANDONED_FILE_MS = 2000;
    /** Requests read by a duty cycle from which the next cycle reads the clock, however few cycles ago. */
    static final int REQUESTS_PER_CLOCK_READ = 32;
    /**
     * Requests of a type per one timed end to end while the duty cycles read few requests; busier cycles time
     * fewer, down to one in {@link LoadWeightedSampler#MAX_WEIGHT}. Timing every request would put a clock read
     * on the path of a request with one in flight, and the percentiles of one in eight are those of all.
     */
    static final int RECEIVER_MIN_WEIGHT = ServerContext.LATENCY_SAMPLE_MIN_WEIGHT;

    private final ServerContext context;
    private final ServerFiles files;
    private final Pipeline pipeline;
    private final ClientSession[] sessions;
    private final RequestDecoder decoder;
    private final StoreCounters counters;
    private final ErrorHandler errorHandler;
    private final EpochClock epochClock;
    private final NanoClock nanoClock;
    private final Set<String> knownFiles = new HashSet<>();
    private final Set<String> presentFiles = new HashSet<>();
    /**
     * Client files the last scan left neither attached nor rejected (not yet published), by name: when a scan first
     * found each (server clock, ms).
     */
    private final Map<String, Long> unsettledSinceMs = new HashMap<>();
    private final long[] reapSequence;
    // Indices of the sessions that are not FREE, dense: the duty cycle visits these, not every slot.
    private final int[] used;
    private final boolean latencyEnabled;
    private final TypeSampler sampler = new TypeSampler(RECEIVER_MIN_WEIGHT, LoadWeightedSampler.MAX_WEIGHT);
    private int usedCount;
    private long nextScanMs;
    // The directory is listed (which allocates) only when inotify reports a new entry, again soon while a listed
    // file is not yet published, and once a second as a safety net; polling an empty WatchService allocates nothing.
    private long nextFullScanMs;
    /** Delay of the next rescan while unsettled files remain: doubles from the scan interval, 0 when none. */
    private long unsettledRescanMs;
    private java.nio.file.WatchService watcher;
    private long nextLivenessMs;
    private long nextHeartbeatMs;
    private long nextSweepMs;
    private int roundRobin;
    private int attached;
    // The last reading of the monotonic clock, the cycles since it was taken, and the requests the last
    // cycle read (see doWork and stamp).
    private long clockNs;
    private int cyclesSinceClockRead;
    private int lastWork;

    ReceiverAgent(
        final ServerContext context,
        final ServerFiles files,
        final Pipeline pipeline,
        final ClientSession[] sessions,
        final ErrorHandler errorHandler,
        final EpochClock epochClock,
        final NanoClock nanoClock)
    {
        this.context = context;
        this.files = files;
        this.pipeline = pipeline;
        this.sessions = sessions;
        this.counters = files.counters();
        this.errorHandler = errorHandler;
        this.epochClock = epochClock;
        this.nanoClock = nanoClock;
        this.latencyEnabled = context.latencyEnabled();
        this.decoder = new RequestDecoder(context.storeContext().chunkTokens(),
            context.storeContext().maxChunksPerRequest(), context.storeContext().maxInlineBytes());
        this.reapSequence = new long[sessions.length];
        this.used = new int[sessions.length];
        final long nowMs = readClock() / 1_000_000L;
        nextScanMs = nowMs;
        nextFullScanMs = nowMs;
        nextLivenessMs = nowMs;
        nextHeartbeatMs = nowMs;
        nextSweepMs = nowMs;
    }

    private boolean directoryChanged()
    {
        try
        {
            if (null == watcher)
            {
                watcher = files.directory().getFileSystem().newWatchService();
                files.directory().register(watcher, java.nio.file.StandardWatchEventKinds.ENTRY_CREATE);
                return true;
            }
            final java.nio.file.WatchKey key = watcher.poll();
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

    @Override
    public String roleName()
    {
        return "kvstash-receiver";
    }

    @Override
    public void onClose()
    {
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
    }

    /**
     * Reads the monotonic clock, which every timer runs on; the wall clock only gives the values written out
     * (the heartbeat, the latency log's timestamps), so a step of it (NTP, a resumed VM) cannot stop the
     * heartbeat, scans, liveness checks and sweeps for as long as it stepped back.
     */
    private long readClock()
    {
        final long now = nanoClock.nanoTime();
        clockNs = now;
        return now;
    }

    /**
     * Stamps a request. A clock read costs about 28 ns on this project's VM (kvm-clock), as much as a
     * hand-off between its two vCPUs, and a request with one in flight would pay it on its path; so most
     * requests take the duty cycle's last reading ({@link RequestEvent#STAMP_COARSE}), at most
     * {@link #CYCLES_PER_CLOCK_READ} cycles old: their leases start up to that much early (under a
     * millisecond with backoff's longest parks, a few microseconds when spinning). The events the stages
     * time, and the requests the sampler picks for the end-to-end latency (one in eight of each type, fewer when
     * the duty cycles read many), get a reading of their own.
     */
    private void stamp(final long sequence, final RequestEvent event)
    {
        final StoreCommand command = event.command;
        final int type = command.type;
        final int weight;
        if (pipeline.isStageTimed(sequence))
        {
            command.timestampNs = readClock();
        }
        else if (latencyEnabled && (weight = sampler.sample(type)) > 0)
        {
            command.timestampNs = readClock();
            event.stamp = RequestEvent.STAMP_SAMPLED;
            event.sampleWeight = weight;
        }
        else
        {
            command.timestampNs = clockNs;
            event.stamp = RequestEvent.STAMP_COARSE;
        }
    }

    @Override
    public int doWork()
    {
        // The clock is read every CYCLES_PER_CLOCK_READ-th cycle, and after a cycle that read many requests
        // (a long one); the timers run on those cycles (50 us apart at most when parked: they slip under 1 ms).
        final boolean clockDue =
            ++cyclesSinceClockRead >= CYCLES_PER_CLOCK_READ || lastWork >= REQUESTS_PER_CLOCK_READ;
        if (clockDue)
        {
            readClock();
            cyclesSinceClockRead = 0;
        }
        int work = pollClients();
        lastWork = work;
        if (work > 0)
        {
            sampler.onBatch(work);
        }
        if (!clockDue)
        {
            return work;
        }
        final long nowNs = clockNs;
        final long nowMs = nowNs / 1_000_000L;
        if (nowMs - nextHeartbeatMs >= 0)
        {
            files.heartbeat(epochClock.time());
            nextHeartbeatMs = nowMs + context.heartbeatIntervalMs();
        }
        if (nowMs - nextScanMs >= 0 && (nowMs - nextFullScanMs >= 0 || directoryChanged()))
        {
            work += scan(nowMs);
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
        }
        if (nowMs - nextLivenessMs >= 0)
        {
            work += checkLiveness();
            nextLivenessMs = nowMs + context.livenessIntervalMs();
        }
        if (nowMs - nextSweepMs >= 0 && pipeline.tryPublishSweep(nowNs))
        {
            nextSweepMs = nowMs + context.sweepIntervalMs();
            work++;
        }
        work += finishDetaches();
        return work;
    }

    private void addUsed(final int index)
    {
        used[usedCount++] = index;
    }

    private void removeUsed(final int index)
    {
        for (int i = 0; i < usedCount; i++)
        {
            if (used[i] == index)
            {
                used[i] = used[--usedCount];
                return;
            }
        }
    }

    private int pollClients()
    {
        int work = 0;
        final int n = usedCount;
        if (0 == n)
        {
            return 0;
        }
        int k = roundRobin >= n ? 0 : roundRobin;
        for (int visited = 0; visited < n; visited++)
        {
            final ClientSession session = sessions[used[k]];
            final int current = k;
            k = k + 1 == n ? 0 : k + 1;
            if (ClientSession.ATTACHED != session.state())
            {
                continue;
            }
            final int read = pollClient(session);
            if (read < 0)
            {
                roundRobin = current;
                return work;
            }
            work += read;
        }
        roundRobin = k;
        return work;
    }

    /**
     * Reads up to {@link #MAX_RECORDS_PER_CLIENT} records of one client.
     *
     * @return records read, or -1 when the pipeline is full (stop this duty cycle).
     */
    private int pollClient(final ClientSession session)
    {
        final RingConsumer ring = session.requests;
        // The records read in the last cycle are released (zeroed, head published) only now, after the pipeline
        // answered them in SHARED mode: zeroing the client's lines first would delay those answers.
        ring.release();
        int read = 0;
        while (read < MAX_RECORDS_PER_CLIENT)
        {
            if (!ring.next())
            {
                if (ring.isCorrupt())
                {
                    counters.increment(StoreCounters.WIRE_MALFORMED);
                    counters.addAtomic(StoreCounters.ERRORS, 1);
                    errorHandler.onError(new IllegalStateException("corrupt request ring of client " +
                        session.file.getFileName() + ": detaching it"));
                    session.beginClosing(false);
                }
                return read;
            }
            final int type = ring.type();
            final int offset = ring.payloadOffset();
            final int length = ring.payloadLength();
            counters.increment(StoreCounters.WIRE_RECORDS);
            if (length < 8)
            {
                counters.increment(StoreCounters.WIRE_MALFORMED);
                ring.take();
                read++;
                continue;
            }
            final long bound = decoder.peekResponseBound(type, ring.buffer(), offset, length, StoreCounters.LENGTH);
            if (!session.responses.hasFreeBytes(2 * bound + session.outstandingBytes()))
            {
                if (!session.backPressured)
                {
                    session.backPressured = true;
                    counters.increment(StoreCounters.WIRE_BACK_PRESSURE);
                }
                return read;
            }
            session.backPressured = false;
            final long sequence = pipeline.tryClaim();
            if (sequence < 0)
            {
                return -1;
            }
            final RequestEvent event = pipeline.event(sequence);
            final StoreCommand command = event.reset();
            try
            {
                decoder.decode(type, ring.buffer(), offset, length, event);
            }
            catch (final RuntimeException ex)
            {
                // A claimed sequence must always be published, or the pipeline would stall for everyone.
                event.rejectAtDecode(io.kvstash.wire.Status.MALFORMED, "record could not be decoded");
                counters.addAtomic(StoreCounters.ERRORS, 1);
                errorHandler.onError(ex);
            }
            if (0 != event.decodeStatus)
            {
                counters.increment(StoreCounters.WIRE_MALFORMED);
            }
            command.session = session.sessionId();
            stamp(sequence, event);
            event.clientIndex = session.index;
            event.clientSession = session.sessionId();
            event.producerTag = 2 * bound;
            session.admit(2 * bound);
            session.lastSequence = sequence;
            pipeline.publish(sequence);
            ring.take();
            read++;
        }
        return read;
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
        }
        catch (final IOException ex)
        {
            counters.addAtomic(StoreCounters.ERRORS, 1);
            errorHandler.onError(ex);
        }
        return attachedNow;
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
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            if (!ClientSession.isLockFree(channel))
            {
                return false;
            }
            Files.deleteIfExists(file);
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
        FileChannel channel = null;
        MappedByteBuffer mapped = null;
        try
        {
            channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
            final long size = channel.size();
            if (size < ClientFileDescriptor.HEADER_LENGTH)
            {
                channel.close();
                return false;
            }
            mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, size);
            final org.agrona.concurrent.UnsafeBuffer header = new org.agrona.concurrent.UnsafeBuffer(mapped);
            final int version = header.getIntAcquire(ClientFileDescriptor.VERSION_OFFSET);
            if (0 == version)
            {
                org.agrona.IoUtil.unmap(mapped);
                channel.close();
                return false;
            }
            final int reason = check(header, version, size);
            if (0 != reason)
            {
                header.putInt(ClientFileDescriptor.REJECT_REASON_OFFSET, reason);
                header.putIntRelease(ClientFileDescriptor.ATTACH_STATE_OFFSET, ClientFileDescriptor.ATTACH_REJECTED);
                org.agrona.IoUtil.unmap(mapped);
                channel.close();
                return true;
            }
            ClientSession free = null;
            for (final ClientSession session : sessions)
            {
                if (ClientSession.FREE == session.state())
                {
                    free = session;
                    break;
                }
            }
            if (null == free)
            {
                header.putInt(ClientFileDescriptor.REJECT_REASON_OFFSET, ClientFileDescriptor.REJECT_TOO_MANY_CLIENTS);
                header.putIntRelease(ClientFileDescriptor.ATTACH_STATE_OFFSET, ClientFileDescriptor.ATTACH_REJECTED);
                org.agrona.IoUtil.unmap(mapped);
                channel.close();
                return true;
            }
            free.attach(file, channel, mapped, context.requestRingCapacity(), context.responseRingCapacity(),
                header.getLong(ClientFileDescriptor.PID_OFFSET));
            addUsed(free.index);
            reapSequence[free.index] = -1;
            attached++;
            counters.increment(StoreCounters.WIRE_CLIENTS_ATTACHED);
            counters.set(StoreCounters.WIRE_CLIENTS, attached);
            return true;
        }
        catch (final IOException | RuntimeException ex)
        {
            if (null != mapped)
            {
                org.agrona.IoUtil.unmap(mapped);
            }
            try
            {
                if (null != channel)
                {
                    channel.close();
                }
            }
            catch (final IOException ignore)
            {
                // Nothing else to release.
            }
            if (Files.exists(file))
            {
                counters.addAtomic(StoreCounters.ERRORS, 1);
                errorHandler.onError(ex);
            }
            return true;
        }
    }

    private int check(final org.agrona.concurrent.UnsafeBuffer header, final int version, final long size)
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

    private int checkLiveness()
    {
        int work = 0;
        for (int u = 0; u < usedCount; u++)
        {
            final ClientSession session = sessions[used[u]];
            if (ClientSession.ATTACHED != session.state())
            {
                continue;
            }
            if (session.isClosingRequested())
            {
                session.beginClosing(false);
                work++;
            }
            else if (session.isProcessGone())
            {
                session.beginClosing(true);
                work++;
            }
        }
        return work;
    }

    /**
     * For each closing session: publish its REAP once, then free it when the pipeline has passed every
     * event that names it.
     */
    private int finishDetaches()
    {
        int work = 0;
        for (int u = usedCount - 1; u >= 0; u--)
        {
            final ClientSession session = sessions[used[u]];
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
                    return work;
                }
                final StoreCommand command = pipeline.event(sequence).reset();
                command.type = RequestType.REAP;
                command.session = session.sessionId();
                command.flags = session.dead ? RequestFlags.REAPED : 0;
                command.timestampNs = readClock();
                pipeline.publish(sequence);
                reapSequence[index] = sequence;
                work++;
            }
            else if (pipeline.processedSequence() >= Math.max(reapSequence[index], session.lastSequence))
            {
                final String name = session.file.getFileName().toString();
                session.free();
                removeUsed(index);
                knownFiles.remove(name);
                attached--;
                counters.increment(StoreCounters.WIRE_CLIENTS_DETACHED);
                counters.set(StoreCounters.WIRE_CLIENTS, attached);
                work++;
            }
        }
        return work;
    }

    /**
     * Whether every session is free (used at shutdown).
     *
     * @return true when no client is attached or closing.
     */
    boolean allDetached()
    {
        for (final ClientSession session : sessions)
        {
            if (ClientSession.FREE != session.state())
            {
                return false;
            }
        }
        return true;
    }
}
