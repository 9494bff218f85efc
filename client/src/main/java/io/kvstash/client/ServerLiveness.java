package io.kvstash.client;

import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.ControlFileFlyweight;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Judges whether the server a client connected to still serves it, from the words the server writes: the
 * running state and heartbeat of its control file, the attach state of this client's file, and the server's
 * process. Owns the last heartbeat seen and when (on this client's monotonic clock) it last changed, and the
 * reason given when the server is lost: {@link KvStashException.Reason#DETACHED},
 * {@link KvStashException.Reason#SERVER_RESTARTED} or {@link KvStashException.Reason#SERVER_GONE}.
 * <p>
 * Single-threaded: owned by one client, used on the client's thread.
 */
final class ServerLiveness
{
    private final ControlFileFlyweight control;
    private final Path directory;
    private final long incarnation;
    private final long serverPid;
    private final long heartbeatTimeoutNs;
    private final long heartbeatTimeoutMs;
    private UnsafeBuffer clientHeader;
    private long lastHeartbeat;
    private long lastHeartbeatChangeNs;

    /**
     * Watches a server by its mapped control file.
     *
     * @param control            the server's control file, mapped.
     * @param directory          the server's directory (for a restart's new control file).
     * @param incarnation        incarnation of the server connected to.
     * @param serverPid          process id of that server.
     * @param heartbeatTimeoutMs heartbeat age after which the server counts as gone.
     */
    ServerLiveness(
        final ControlFileFlyweight control,
        final Path directory,
        final long incarnation,
        final long serverPid,
        final long heartbeatTimeoutMs)
    {
        this.control = control;
        this.directory = directory;
        this.incarnation = incarnation;
        this.serverPid = serverPid;
        this.heartbeatTimeoutMs = heartbeatTimeoutMs;
        this.heartbeatTimeoutNs = TimeUnit.MILLISECONDS.toNanos(heartbeatTimeoutMs);
    }

    /**
     * Watches the attach state of this client's file from now on: {@link #checkServer()} reports a detach. Called
     * once the client file exists, before the first {@link #checkServer()}.
     *
     * @param clientHeader header of this client's file.
     */
    void clientHeader(final UnsafeBuffer clientHeader)
    {
        this.clientHeader = clientHeader;
    }

    /**
     * See {@link KvStashClient#alive()}.
     *
     * @return true when alive.
     */
    boolean alive()
    {
        if (ControlFileDescriptor.STATE_RUNNING != control.stateAcquire())
        {
            return false;
        }
        final long heartbeat = control.heartbeatMsAcquire();
        final long nowNs = System.nanoTime();
        if (heartbeat != lastHeartbeat)
        {
            lastHeartbeat = heartbeat;
            lastHeartbeatChangeNs = nowNs;
        }
        else if (nowNs - lastHeartbeatChangeNs > heartbeatTimeoutNs)
        {
            return false;
        }
        return serverProcessAlive();
    }

    /**
     * The first liveness check, with no heartbeat seen before. It only seeds what {@link #alive()} judges by:
     * a heartbeat within the timeout of this machine's wall clock (either way) counts as seen changing that
     * long ago; any other (a server whose wall clock stands apart from this one's, or a dead server) counts as
     * stale, and is watched for up to three heartbeat intervals while the server's process lives, so that it
     * is fresh only if it moves.
     *
     * @param heartbeatIntervalMs the server's heartbeat interval.
     * @return true when alive.
     */
    boolean aliveAtConnect(final long heartbeatIntervalMs)
    {
        final long heartbeat = control.heartbeatMsAcquire();
        final long ageMs = System.currentTimeMillis() - heartbeat;
        final boolean nearThisClock = Math.abs(ageMs) <= heartbeatTimeoutMs;
        lastHeartbeat = heartbeat;
        lastHeartbeatChangeNs = System.nanoTime() -
            TimeUnit.MILLISECONDS.toNanos(nearThisClock ? Math.max(0, ageMs) : heartbeatTimeoutMs + 1);
        final long deadlineNs =
            System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(3 * Math.max(1, heartbeatIntervalMs));
        while (!nearThisClock && System.nanoTime() - deadlineNs < 0 && serverProcessAlive() &&
            control.heartbeatMsAcquire() == heartbeat)
        {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
        return alive();
    }

    /**
     * Raises the right exception when the server no longer serves this client: it detached the client,
     * restarted (a newer control file on the directory) or is simply gone. Returns when it is alive.
     *
     * @throws KvStashException DETACHED, SERVER_RESTARTED or SERVER_GONE.
     */
    void checkServer()
    {
        if (ClientFileDescriptor.ATTACH_DETACHED == clientHeader.getIntAcquire(ClientFileDescriptor.ATTACH_STATE_OFFSET))
        {
            throw new KvStashException(KvStashException.Reason.DETACHED, "the server detached this client");
        }
        if (alive())
        {
            return;
        }
        final long current = currentIncarnation(directory);
        if (0 != current && current != incarnation)
        {
            throw new KvStashException(KvStashException.Reason.SERVER_RESTARTED, "the server restarted (incarnation " +
                Long.toHexString(incarnation) + " -> " + Long.toHexString(current) + "): reconnect");
        }
        throw new KvStashException(KvStashException.Reason.SERVER_GONE, "the server (pid " + serverPid + ") is gone");
    }

    /**
     * See {@link KvStashClient#currentIncarnation(Path)}.
     *
     * @param directory server directory.
     * @return incarnation, or 0 when no control file is readable.
     */
    static long currentIncarnation(final Path directory)
    {
        return ControlFileFlyweight.readIncarnation(directory.resolve(ControlFileDescriptor.FILE_NAME));
    }

    private boolean serverProcessAlive()
    {
        return ProcessHandle.of(serverPid).map(ProcessHandle::isAlive).orElse(false);
    }
}
