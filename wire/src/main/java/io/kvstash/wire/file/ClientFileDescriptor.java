package io.kvstash.wire.file;

import io.kvstash.wire.WireVersion;
import io.kvstash.wire.ring.RingDescriptor;
import org.agrona.concurrent.AtomicBuffer;

/**
 * Byte layout of a client file ({@code <dir>/client-<pid>-<nonce hex>}), little-endian: a header, the
 * request ring (client produces, server consumes), the response ring (server produces, client consumes).
 * The client creates the file (0600), writes the header with the version last, and holds an exclusive
 * {@code fcntl} lock on it for its whole life: the server takes the lock only when the client's process is
 * gone, which is how a killed worker is detected. The server discovers the file, checks it and answers in
 * the attach fields; it deletes the file when the client is gone. Neither side ever truncates it.
 * <pre>
 * Header (HEADER_LENGTH = 256)
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                    Magic "KVSTCLNT" (i64)                     |  0
 *  |  Version 0x00MMmmpp (i32, last)   |  Header Length (i32)      |  8
 *  |                    Client PID (i64)                           |  16
 *  |               Server Incarnation targeted (i64)               |  24
 *  |  Request Ring Capacity (i32)      |  Response Ring Capacity   |  32
 *  |  Flags (i32; bit 0 copy transport)|  reserved                 |  40
 *  +-------------------------------- server writes ----------------+
 *  |  Attach State (i32, release)      |  Reject Reason (i32)      |  64
 *  |                    Session Id (i64)                           |  72
 *  +-------------------------------- client writes ----------------+
 *  |  Closing (i32, 1 = orderly close) |  reserved                 |  128
 *  +---------------------------------------------------------------+
 *  |  Request ring (RingDescriptor, 128 + request capacity)        |  256
 *  |  Response ring (RingDescriptor, 128 + response capacity)     |
 *  +---------------------------------------------------------------+
 * </pre>
 */
public final class ClientFileDescriptor
{
    /** File name prefix. */
    public static final String FILE_PREFIX = "client-";
    /** Magic. */
    public static final long MAGIC = 0x544E4C435453564BL;
    /** Version written last into the header: the contract's one {@link WireVersion}. */
    public static final int VERSION = WireVersion.CURRENT;

    /** Offset of the magic. */
    public static final int MAGIC_OFFSET = 0;
    /** Offset of the version. */
    public static final int VERSION_OFFSET = 8;
    /** Offset of the header length. */
    public static final int HEADER_LENGTH_OFFSET = 12;
    /** Offset of the client pid. */
    public static final int PID_OFFSET = 16;
    /** Offset of the targeted server incarnation. */
    public static final int INCARNATION_OFFSET = 24;
    /** Offset of the request ring capacity. */
    public static final int REQUEST_CAPACITY_OFFSET = 32;
    /** Offset of the response ring capacity. */
    public static final int RESPONSE_CAPACITY_OFFSET = 36;
    /** Offset of the flags. */
    public static final int FLAGS_OFFSET = 40;
    /** Offset of the attach state (server). */
    public static final int ATTACH_STATE_OFFSET = 64;
    /** Offset of the reject reason (server). */
    public static final int REJECT_REASON_OFFSET = 68;
    /** Offset of the session id (server). */
    public static final int SESSION_ID_OFFSET = 72;
    /** Offset of the closing flag (client). */
    public static final int CLOSING_OFFSET = 128;
    /** Header length. */
    public static final int HEADER_LENGTH = 256;
    /** Offset of the request ring. */
    public static final int REQUEST_RING_OFFSET = HEADER_LENGTH;

    /** Flag: the client uses the copy transport. */
    public static final int FLAG_COPY_TRANSPORT = 1;

    /** Attach state: not yet seen by the server. */
    public static final int ATTACH_PENDING = 0;
    /** Attach state: attached, rings live. */
    public static final int ATTACH_ATTACHED = 1;
    /** Attach state: refused (see the reason). */
    public static final int ATTACH_REJECTED = 2;
    /** Attach state: detached by the server. */
    public static final int ATTACH_DETACHED = 3;

    /** Reject reason: version or header not understood. */
    public static final int REJECT_BAD_HEADER = 1;
    /** Reject reason: the file targets another server incarnation. */
    public static final int REJECT_WRONG_INCARNATION = 2;
    /** Reject reason: the server has no free client slot. */
    public static final int REJECT_TOO_MANY_CLIENTS = 3;
    /** Reject reason: ring capacities differ from the server's. */
    public static final int REJECT_BAD_RINGS = 4;

    private ClientFileDescriptor()
    {
    }

    /**
     * Offset of the response ring.
     *
     * @param requestCapacity request ring capacity.
     * @return offset.
     */
    public static int responseRingOffset(final int requestCapacity)
    {
        return REQUEST_RING_OFFSET + RingDescriptor.totalLength(requestCapacity);
    }

    /**
     * Total file length.
     *
     * @param requestCapacity  request ring capacity.
     * @param responseCapacity response ring capacity.
     * @return bytes.
     */
    public static int fileLength(final int requestCapacity, final int responseCapacity)
    {
        return responseRingOffset(requestCapacity) + RingDescriptor.totalLength(responseCapacity);
    }

    /**
     * Client file name.
     *
     * @param pid   client pid.
     * @param nonce random value.
     * @return file name.
     */
    public static String fileName(final long pid, final long nonce)
    {
        return FILE_PREFIX + pid + "-" + Long.toHexString(nonce);
    }

    /**
     * Writes a new client file's header and publishes it: magic, header length, the client's pid, the incarnation
     * of the server it connects to, ring capacities and flags, then the version last with a release store, after
     * which the server may attach the file. The one writer of client headers in Java (the client, the test kit's raw
     * client, the tests' fake clients); the rings need no setup (a new file reads 0).
     *
     * @param header           the file's first {@link #HEADER_LENGTH} bytes, mapped.
     * @param pid              the client's process id.
     * @param incarnation      the server's incarnation, from its control file.
     * @param requestCapacity  request ring capacity.
     * @param responseCapacity response ring capacity.
     * @param flags            {@code FLAG_*} bits.
     */
    public static void writeHeader(
        final AtomicBuffer header,
        final long pid,
        final long incarnation,
        final int requestCapacity,
        final int responseCapacity,
        final int flags)
    {
        header.putLong(MAGIC_OFFSET, MAGIC);
        header.putInt(HEADER_LENGTH_OFFSET, HEADER_LENGTH);
        header.putLong(PID_OFFSET, pid);
        header.putLong(INCARNATION_OFFSET, incarnation);
        header.putInt(REQUEST_CAPACITY_OFFSET, requestCapacity);
        header.putInt(RESPONSE_CAPACITY_OFFSET, responseCapacity);
        header.putInt(FLAGS_OFFSET, flags);
        header.putIntRelease(VERSION_OFFSET, VERSION);
    }
}
