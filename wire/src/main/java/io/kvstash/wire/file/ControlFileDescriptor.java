package io.kvstash.wire.file;

import io.kvstash.wire.WireVersion;

/**
 * Byte layout of the server's control file ({@code <dir>/control}), little-endian. The server creates it
 * at start (a new inode every start, never truncated while mapped), holds an exclusive {@code fcntl} lock
 * on it while alive, and writes the version last. Clients read the configuration, watch the heartbeat and
 * incarnation; {@code kvstash stat} and {@code kvstash errors} read the counters, their labels and the error log
 * without the server's help (also the file of a dead server, or one a server of another minor version wrote).
 * <pre>
 * Header (HEADER_LENGTH = 256)
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                    Magic "KVSTCTL\0" (i64)                    |  0
 *  |  Version 0x00MMmmpp (i32, last)   |  Header Length (i32)      |  8
 *  |                    Server PID (i64)                           |  16
 *  |                    Incarnation (i64)                          |  24
 *  |                    Start Time, epoch ms (i64)                 |  32
 *  |              Heartbeat, epoch ms (i64, release)               |  40
 *  |  State (i32: 1 RUNNING, 2 CLOSED) |  reserved                 |  48
 *  |  Config Offset (i32)              |  Config Length (i32)      |  64
 *  |  Counters Offset (i32)            |  Counters Length (i32)    |  72
 *  |  Error Log Offset (i32)           |  Error Log Length (i32)   |  80
 *  |  Labels Offset (i32)              |  Labels Length (i32)      |  88
 *  |  Asleep (i32: 1 while the server's thread sleeps on its doorbell, full fence) | 128
 *  +---------------------------------------------------------------+
 * Config (at CONFIG_OFFSET, CONFIG_LENGTH bytes)
 *  |  Pool File Name Length (i32) | Pool File Name (ASCII, 124)   |  0
 *  |                    Pool Data Bytes (i64)                      |  128
 *  |                    Data Offset in pool file (i64)             |  136
 *  |                    Slot Table Offset (i64)                    |  144
 *  |                    Slot Table Length (i64)                    |  152
 *  |                    Mapping Segment Bytes (i64)                |  160
 *  |  Alignment (i32)                  |  Chunk Tokens (i32)       |  168
 *  |                    Lease (ns, i64)                            |  176
 *  |  Max Chunks Per Request (i32)     |  Max Inline Bytes (i32)   |  184
 *  |  Request Ring Capacity (i32)      |  Response Ring Capacity   |  192
 *  |  Max Clients (i32)                |  Heartbeat Interval (ms)  |  200
 *  |  Heartbeat Timeout (ms, i32)      |  Features (i32)           |  208
 *  |  Eviction Policy (i32)            |                              216
 * Counters (at COUNTERS_OFFSET: CountersDescriptor's table, 8 bytes per id)
 * Labels (after the counters' section: one COUNTER_LABEL_LENGTH record per counter id, in id order)
 *  |  Label Length (i32, 0: no counter) |  Label (UTF-8, COUNTER_LABEL_MAX_LENGTH, zero-filled)  |  64 * id
 * Error log (after the labels' section: Agrona DistinctErrorLog layout, ERROR_LOG_LENGTH bytes)
 * </pre>
 */
public final class ControlFileDescriptor
{
    /** File name inside the directory. */
    public static final String FILE_NAME = "control";
    /**
     * Name prefix of the control file of a server that did not shut down cleanly, which the next server keeps as
     * {@code dead-control-<incarnation hex>} for its error log.
     */
    public static final String DEAD_CONTROL_PREFIX = "dead-control-";
    /** Magic. */
    public static final long MAGIC = 0x004C54435453564BL;
    /** Version written last into the header: the contract's one {@link WireVersion}. */
    public static final int VERSION = WireVersion.CURRENT;
    /** State: serving. */
    public static final int STATE_RUNNING = 1;
    /** State: shut down cleanly. */
    public static final int STATE_CLOSED = 2;

    /** Offset of the magic. */
    public static final int MAGIC_OFFSET = 0;
    /** Offset of the version. */
    public static final int VERSION_OFFSET = 8;
    /** Offset of the header length. */
    public static final int HEADER_LENGTH_OFFSET = 12;
    /** Offset of the server pid. */
    public static final int PID_OFFSET = 16;
    /** Offset of the incarnation. */
    public static final int INCARNATION_OFFSET = 24;
    /** Offset of the start time. */
    public static final int START_TIME_OFFSET = 32;
    /** Offset of the heartbeat. */
    public static final int HEARTBEAT_OFFSET = 40;
    /** Offset of the state. */
    public static final int STATE_OFFSET = 48;
    /** Offset of the config offset and length. */
    public static final int CONFIG_SECTION_OFFSET = 64;
    /** Offset of the counters offset and length. */
    public static final int COUNTERS_SECTION_OFFSET = 72;
    /** Offset of the error log offset and length. */
    public static final int ERROR_LOG_SECTION_OFFSET = 80;
    /** Offset of the labels offset and length. */
    public static final int LABELS_SECTION_OFFSET = 88;
    /**
     * Offset of the Asleep word (i32), on a cache-line pair of its own: 1 from just before the server's thread takes
     * its last look at the rings and sleeps on the doorbell ({@link #FEATURE_DOORBELL}) until it wakes, 0 otherwise
     * (stored with a full fence when raised). A client that reads 1 after publishing a request rings the doorbell.
     * 0 from a server without the feature (the word was reserved).
     */
    public static final int ASLEEP_OFFSET = 128;
    /** Header length. */
    public static final int HEADER_LENGTH = 256;

    /** Config offset in the file. */
    public static final int CONFIG_OFFSET = HEADER_LENGTH;
    /** Config length. */
    public static final int CONFIG_LENGTH = 512;
    /** Config: pool file name length. */
    public static final int POOL_NAME_LENGTH_OFFSET = 0;
    /** Config: pool file name bytes. */
    public static final int POOL_NAME_OFFSET = 4;
    /** Longest pool file name. */
    public static final int POOL_NAME_MAX_LENGTH = 124;
    /** Config: pool data bytes. */
    public static final int POOL_SIZE_OFFSET = 128;
    /** Config: data offset in the pool file. */
    public static final int DATA_OFFSET_OFFSET = 136;
    /** Config: slot table offset in the pool file. */
    public static final int SLOT_TABLE_OFFSET_OFFSET = 144;
    /** Config: slot table length. */
    public static final int SLOT_TABLE_LENGTH_OFFSET = 152;
    /** Config: mapping segment bytes. */
    public static final int SEGMENT_BYTES_OFFSET = 160;
    /** Config: alignment. */
    public static final int ALIGNMENT_OFFSET = 168;
    /** Config: chunk tokens. */
    public static final int CHUNK_TOKENS_OFFSET = 172;
    /** Config: lease in ns. */
    public static final int LEASE_NS_OFFSET = 176;
    /** Config: max chunks per request. */
    public static final int MAX_CHUNKS_OFFSET = 184;
    /** Config: max inline bytes. */
    public static final int MAX_INLINE_OFFSET = 188;
    /** Config: request ring capacity. */
    public static final int REQUEST_RING_CAPACITY_OFFSET = 192;
    /** Config: response ring capacity. */
    public static final int RESPONSE_RING_CAPACITY_OFFSET = 196;
    /** Config: max clients. */
    public static final int MAX_CLIENTS_OFFSET = 200;
    /** Config: heartbeat interval in ms. */
    public static final int HEARTBEAT_INTERVAL_OFFSET = 204;
    /** Config: heartbeat timeout in ms, after which clients consider the server dead. */
    public static final int HEARTBEAT_TIMEOUT_OFFSET = 208;
    /**
     * Offset in the config of the Features word (i32): bits the server sets for what it offers beyond the
     * major version's baseline. 0 from a server older than minor version 1 (the word was reserved).
     */
    public static final int FEATURES_OFFSET = 212;
    /**
     * Offset in the config of the eviction policy (i32): the policy's journal code plus one (1 {@code lru},
     * 2 {@code chain}, 3 {@code slru}, 4 {@code slru-admit}), for {@code kvstash stat}. 0 from a server that does
     * not write it (the word was reserved).
     */
    public static final int EVICTION_POLICY_OFFSET = 216;
    /**
     * Feature bit: the server runs a second tier, and a LOOKUP may carry {@link io.kvstash.wire.RequestFlags#L2_WAIT}
     * or {@link io.kvstash.wire.RequestFlags#L2_POLL} (the answer then carries the tier's ticket).
     */
    public static final int FEATURE_SECOND_TIER = 1;
    /**
     * Feature bit: the server keeps the highest ticket whose read-through is over in the counter
     * {@code l2_completed_ticket} ({@link CountersDescriptor#L2_COMPLETED_TICKET}), so a waiting worker watches that counter instead of asking again with
     * {@link io.kvstash.wire.RequestFlags#L2_POLL}.
     */
    public static final int FEATURE_COMPLETED_TICKET = 2;
    /**
     * Feature bit: the server's thread sleeps when idle (its blocking wait) and listens on the doorbell, the Unix
     * stream socket {@link #DOORBELL_FILE_NAME} in its directory: a client connects once, and after publishing a
     * request writes one byte on its connection when it reads {@link #ASLEEP_OFFSET} as 1, which wakes the server
     * at once. A client that does not ring is still answered, within the server's park period (a millisecond).
     */
    public static final int FEATURE_DOORBELL = 4;
    /**
     * Feature bit (minor version 1 on): the server commits the pool's memory as the store grows
     * ({@code serve --prepare-pool on-demand}). Past the committed prefix the pool file is sparse: a client must not
     * touch the whole mapping (on tmpfs that would allocate every page, and a page a full file system cannot back
     * raises SIGBUS in the process that touches it). It touches at most the committed prefix, the counter
     * {@code pool_bytes_committed} ({@link CountersDescriptor#POOL_BYTES_COMMITTED}); every slot it is given lies
     * in it.
     */
    public static final int FEATURE_POOL_ON_DEMAND = 8;
    /** Name of the doorbell socket in the server's directory (see {@link #FEATURE_DOORBELL}). */
    public static final String DOORBELL_FILE_NAME = "doorbell";
    /** Counters offset in the file. */
    public static final int COUNTERS_OFFSET = CONFIG_OFFSET + CONFIG_LENGTH;
    /**
     * Bytes of one counter's label record in the labels section: the stride from one id to the next (a cache line).
     * The server writes a label for every id {@link CountersDescriptor#name(int)} names, at start, before the version.
     */
    public static final int COUNTER_LABEL_LENGTH = 64;
    /** Offset in a label record of its length (i32): the label's bytes, 0 for an id without a counter. */
    public static final int COUNTER_LABEL_LENGTH_OFFSET = 0;
    /** Offset in a label record of the label's UTF-8 bytes, zero-filled after them. */
    public static final int COUNTER_LABEL_OFFSET = 4;
    /** Longest label in bytes. */
    public static final int COUNTER_LABEL_MAX_LENGTH = COUNTER_LABEL_LENGTH - COUNTER_LABEL_OFFSET;
    /** Default error log length. */
    public static final int ERROR_LOG_LENGTH_DEFAULT = 1 << 20;

    private ControlFileDescriptor()
    {
    }

    /**
     * Length of the counters section for a counters length, rounded to two cache lines.
     *
     * @param countersLength bytes of the counters.
     * @return section length.
     */
    public static int countersSectionLength(final int countersLength)
    {
        return (countersLength + 127) & ~127;
    }

    /**
     * Bytes the labels use for a counters length: one {@link #COUNTER_LABEL_LENGTH} record per counter id.
     *
     * @param countersLength bytes of the counters.
     * @return labels length.
     */
    public static int labelsLength(final int countersLength)
    {
        return countersLength / Long.BYTES * COUNTER_LABEL_LENGTH;
    }

    /**
     * Offset of the labels section in the file: after the counters' section.
     *
     * @param countersLength bytes of the counters.
     * @return bytes from the start of the file.
     */
    public static int labelsOffset(final int countersLength)
    {
        return COUNTERS_OFFSET + countersSectionLength(countersLength);
    }

    /**
     * Offset of the error log in the file: after the labels' section, rounded to two cache lines.
     *
     * @param countersLength bytes of the counters.
     * @return bytes from the start of the file.
     */
    public static int errorLogOffset(final int countersLength)
    {
        return labelsOffset(countersLength) + ((labelsLength(countersLength) + 127) & ~127);
    }

    /**
     * Total file length.
     *
     * @param countersLength bytes of the counters.
     * @param errorLogLength bytes of the error log.
     * @return bytes.
     */
    public static int fileLength(final int countersLength, final int errorLogLength)
    {
        return errorLogOffset(countersLength) + errorLogLength;
    }
}
