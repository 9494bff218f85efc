package io.kvstash.wire.file;

import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;

/**
 * The counters section of the control file ({@link ControlFileDescriptor#COUNTERS_OFFSET}): one table of every
 * counter's id, name, kind (gauge or total) and meaning, which the server's writers, {@code kvstash stat}, the
 * Prometheus endpoint and the clients read (Aeron's {@code SystemCounterDescriptor}). Each counter is a 64-bit
 * value at {@code 8 * id} in the section; its one writer thread stores it with release semantics, readers load it
 * with acquire. Regions start on 128-byte boundaries so writers on different threads never share a cache line.
 * <pre>
 *  id   region (writer)                 counters
 *  0    BOOK (reserve stage)            gauges and outcomes of the chunk book
 *  32   DATA (commit stage)             copy-transport bytes
 *  48   WIRE (receiver agent)           records, malformed records, clients, dead clients, blocking-wait sleeps
 *  64   REQUESTS (publish stage)        responses by request type x status
 *  320  ERRORS (any thread, atomic add) unexpected errors; 321: responses to unknown types (publish);
 *                                       322: failures of requests that asked for no answer (publish)
 *  328  POOL (the pool's preparer)      pool bytes configured and committed; 330: regions the store committed
 *                                       itself, the preparer behind (reserve stage)
 *  336  L2 (the second tier's thread)   tier state, writes, fetches, corrupt values, timeouts, errors;
 *       347: notices the publish stage dropped for the tier (publish)
 * </pre>
 * Ids and names are a contract with the control file's readers (PROTOCOL section 2.3): the server writes every name
 * into the file's labels section ({@link CounterLabelsFlyweight}), which {@code kvstash stat} and the Python client
 * read; a row is never renumbered or renamed.
 */
public final class CountersDescriptor
{
    /** Gauge: readable chunks. */
    public static final int READABLE_CHUNKS = 0;
    /** Gauge: reserved chunks (slots being written). */
    public static final int RESERVED_CHUNKS = 1;
    /** Gauge: readable chunks with at least one pin. */
    public static final int PINNED_CHUNKS = 2;
    /** Gauge: free slots. */
    public static final int FREE_SLOTS = 3;
    /** Gauge: slots in the pool at the current slot size. */
    public static final int SLOT_CAPACITY = 4;
    /** Gauge: pending transfers (stores in flight, pinned lookups, retrieves). */
    public static final int PENDING_TRANSFERS = 5;
    /** Gauge: registered instances. */
    public static final int INSTANCES = 6;
    /** Chunks counted as hits by LOOKUP and LOOKUP_ALL_RANKS (once per request, whatever its world size). */
    public static final int LOOKUP_HIT_CHUNKS = 7;
    /** Chunks of LOOKUP and LOOKUP_ALL_RANKS ranges that were not hits. */
    public static final int LOOKUP_MISS_CHUNKS = 8;
    /** Chunks pinned by successful PREPARE_RETRIEVE. */
    public static final int RETRIEVE_HIT_CHUNKS = 9;
    /**
     * PREPARE_RETRIEVE by keys answered without its whole range: MISS, or OK with
     * {@link io.kvstash.wire.RequestFlags#PREFIX} and fewer chunks than the range.
     */
    public static final int RETRIEVE_MISSES = 10;
    /** Chunks made readable by COMMIT_STORE. */
    public static final int STORED_CHUNKS = 11;
    /** Chunks released by COMMIT_RETRIEVE. */
    public static final int RETRIEVED_CHUNKS = 12;
    /** Readable chunks evicted to make room for a reservation. */
    public static final int EVICTIONS = 13;
    /** Bytes made readable by COMMIT_STORE. */
    public static final int BYTES_IN = 14;
    /** Bytes handed out by COMMIT_RETRIEVE. */
    public static final int BYTES_OUT = 15;
    /** Transfers reclaimed after their lease. */
    public static final int RECLAIMED_LEASES = 16;
    /** Reserved chunks freed by ABORT_STORE, UNREGISTER, lease expiry or forced CLEAR. */
    public static final int ABORTED_CHUNKS = 17;
    /** PREPARE_STORE answered NO_SPACE. */
    public static final int NO_SPACE = 18;
    /** UNREGISTER of an unknown instance. */
    public static final int UNREGISTER_UNKNOWN = 19;
    /** PREPARE_STORE with nothing to reserve (early return). */
    public static final int EMPTY_PREPARES = 20;
    /** Instances reclaimed because their process died. */
    public static final int DEAD_CLIENTS = 21;
    /** Readable chunks removed by CLEAR. */
    public static final int CLEARED_CHUNKS = 22;
    /** Chunks COMMIT_STORE made readable cold: at the evict-first end, by {@code slru-admit}'s admission. */
    public static final int COLD_CHUNKS = 23;
    /** Copy transport: bytes written into slots through messages. */
    public static final int COPY_BYTES_IN = 32;
    /** Copy transport: bytes read from slots through messages. */
    public static final int COPY_BYTES_OUT = 33;
    /** Records read from client rings. */
    public static final int WIRE_RECORDS = 48;
    /** Records that could not be decoded (answered MALFORMED when their correlation id was readable). */
    public static final int WIRE_MALFORMED = 49;
    /** Clients attached. */
    public static final int WIRE_CLIENTS_ATTACHED = 50;
    /** Clients detached (closed or dead). */
    public static final int WIRE_CLIENTS_DETACHED = 51;
    /** Gauge: clients currently attached. */
    public static final int WIRE_CLIENTS = 52;
    /** Responses dropped because a client's response ring was gone or corrupt. */
    public static final int WIRE_RESPONSES_DROPPED = 53;
    /** Requests deferred (once each) because a client's response ring lacked room (back pressure). */
    public static final int WIRE_BACK_PRESSURE = 54;
    /** Sleeps of the receiver's thread on the doorbell (until its next timer at most, unless a doorbell ends it). */
    public static final int WIRE_SLEEPS = 55;
    /** Sleeps of the blocking wait that a client's doorbell ended (a request published while the server slept). */
    public static final int WIRE_DOORBELL_WAKEUPS = 56;
    /** First id of the responses table: {@code REQUESTS_BASE + type * Status.COUNT + status}. */
    public static final int REQUESTS_BASE = 64;
    /** Unexpected errors (exceptions) anywhere in the server. */
    public static final int ERRORS = 320;
    /** Responses to requests of a type the server does not know (publish stage). */
    public static final int REQUESTS_INVALID_TYPE = 321;
    /**
     * Requests with {@link io.kvstash.wire.RequestFlags#NO_REPLY} that failed (UNKNOWN_TRANSFER, UNKNOWN_INSTANCE,
     * ...): their status was not written to anyone (the responses table counts them by type and status as well).
     */
    public static final int NO_REPLY_FAILURES = 322;

    /** Gauge: the second tier's state (0 off, 1 connecting, 2 up, 3 down: retrying on its own). */
    public static final int L2_STATE = 336;
    /** Chunks the second tier wrote to the cluster. */
    public static final int L2_WRITES = 337;
    /** Chunks the second tier did not write: already in the cluster, or evicted before it could read them. */
    public static final int L2_WRITE_SKIPS = 338;
    /** Chunks the second tier failed to write (cluster error, timeout, tier down). */
    public static final int L2_WRITE_ERRORS = 339;
    /** Chunks fetched from the cluster into the pool (read-through). */
    public static final int L2_FETCH_HITS = 340;
    /** Read-through fetches that found no value in the cluster. */
    public static final int L2_FETCH_MISSES = 341;
    /** Cluster values rejected by the header checks (corrupt, truncated, other layout or key): misses. */
    public static final int L2_CORRUPT_VALUES = 342;
    /** Cluster calls that ran past the tier's timeout. */
    public static final int L2_TIMEOUTS = 343;
    /** Cluster errors other than timeouts (connection refused, cluster down, ...). */
    public static final int L2_ERRORS = 344;
    /** Bytes of chunks written to the cluster. */
    public static final int L2_BYTES_WRITTEN = 345;
    /** Bytes of chunks fetched from the cluster into the pool. */
    public static final int L2_BYTES_FETCHED = 346;
    /** Notices for the second tier the publish stage dropped because the tier's queue was full. */
    public static final int L2_NOTICES_DROPPED = 347;
    /** Gauge: the highest read-through ticket that is over (a waiting worker watches it). */
    public static final int L2_COMPLETED_TICKET = 348;

    /** Gauge: bytes of the pool's data region, as configured ({@code --pool-size}). */
    public static final int POOL_BYTES_CONFIGURED = 328;
    /**
     * Gauge: bytes of the data region, from its start, whose pages are committed (allocated in the file system and
     * touched by the server); the rest of the file is still sparse. Only grows.
     */
    public static final int POOL_BYTES_COMMITTED = 329;
    /**
     * Regions a PREPARE_STORE needed before the on-demand pool's preparer had committed them: the reserve stage
     * committed the region itself (the request waited for it), or, the file system refusing, evicted instead.
     */
    public static final int POOL_COMMIT_MISSES = 330;

    /** Number of counter ids. */
    public static final int COUNT = 352;
    /** Bytes a counters buffer needs. */
    public static final int LENGTH = COUNT * Long.BYTES;

    /** Whether a counter is a gauge (a current value, up and down) or a total (only grows). */
    private static final boolean GAUGE = true;
    private static final boolean TOTAL = false;

    private static final String[] NAMES = new String[COUNT];
    private static final Counter[] COUNTERS = new Counter[COUNT];

    static
    {
        for (final Counter counter : Counter.values())
        {
            COUNTERS[counter.id()] = counter;
            NAMES[counter.id()] = counter.counterName();
        }
        for (int type = 0; type < RequestType.COUNT; type++)
        {
            for (int status = 0; status < Status.COUNT; status++)
            {
                NAMES[requestId(type, status)] =
                    "requests." + RequestType.name(type).toLowerCase() + "." + Status.name(status).toLowerCase();
            }
        }
    }

    /**
     * The named counters, one row each: id, name (as {@code kvstash stat}, the counters file's readers and the
     * Prometheus endpoint print it), whether it is a gauge, and what it counts. The responses table
     * ({@link CountersDescriptor#requestId(int, int)}) is not listed: its names are derived from request type and
     * status.
     * Ids and names are a contract with the counters file's readers; a row is never renumbered or renamed.
     */
    public enum Counter
    {
        /** Readable chunks. */
        READABLE_CHUNKS(CountersDescriptor.READABLE_CHUNKS, "readable_chunks", GAUGE,
            "Readable chunks."),
        /** Reserved chunks (being written). */
        RESERVED_CHUNKS(CountersDescriptor.RESERVED_CHUNKS, "reserved_chunks", GAUGE,
            "Reserved chunks (being written)."),
        /** Readable chunks with at least one pin. */
        PINNED_CHUNKS(CountersDescriptor.PINNED_CHUNKS, "pinned_chunks", GAUGE,
            "Readable chunks with at least one pin."),
        /** Free slots. */
        FREE_SLOTS(CountersDescriptor.FREE_SLOTS, "free_slots", GAUGE,
            "Free slots."),
        /** Slots in the pool at the current slot size. */
        SLOT_CAPACITY(CountersDescriptor.SLOT_CAPACITY, "slot_capacity", GAUGE,
            "Slots in the pool at the current slot size."),
        /** Pending transfers (stores, pinned lookups, retrieves). */
        PENDING_TRANSFERS(CountersDescriptor.PENDING_TRANSFERS, "pending_transfers", GAUGE,
            "Pending transfers (stores, pinned lookups, retrieves)."),
        /** Registered instances. */
        INSTANCES(CountersDescriptor.INSTANCES, "instances", GAUGE,
            "Registered instances."),
        /** Chunks counted as hits by LOOKUP and LOOKUP_ALL_RANKS. */
        LOOKUP_HIT_CHUNKS(CountersDescriptor.LOOKUP_HIT_CHUNKS, "lookup_hit_chunks", TOTAL,
            "Chunks counted as hits by LOOKUP and LOOKUP_ALL_RANKS."),
        /** Chunks of LOOKUP and LOOKUP_ALL_RANKS ranges that were not hits. */
        LOOKUP_MISS_CHUNKS(CountersDescriptor.LOOKUP_MISS_CHUNKS, "lookup_miss_chunks", TOTAL,
            "Chunks of LOOKUP and LOOKUP_ALL_RANKS ranges that were not hits."),
        /** Chunks handed out by successful PREPARE_RETRIEVE. */
        RETRIEVE_HIT_CHUNKS(CountersDescriptor.RETRIEVE_HIT_CHUNKS, "retrieve_hit_chunks", TOTAL,
            "Chunks handed out by successful PREPARE_RETRIEVE."),
        /** PREPARE_RETRIEVE answered without its whole range: MISS, or a PREFIX answer short of it. */
        RETRIEVE_MISSES(CountersDescriptor.RETRIEVE_MISSES, "retrieve_misses", TOTAL,
            "PREPARE_RETRIEVE answered without its whole range: MISS, or a PREFIX answer short of it."),
        /** Chunks made readable by COMMIT_STORE. */
        STORED_CHUNKS(CountersDescriptor.STORED_CHUNKS, "stored_chunks", TOTAL,
            "Chunks made readable by COMMIT_STORE."),
        /** Chunks released by COMMIT_RETRIEVE. */
        RETRIEVED_CHUNKS(CountersDescriptor.RETRIEVED_CHUNKS, "retrieved_chunks", TOTAL,
            "Chunks released by COMMIT_RETRIEVE."),
        /** Readable chunks evicted to make room for a reservation. */
        EVICTIONS(CountersDescriptor.EVICTIONS, "evictions", TOTAL,
            "Readable chunks evicted to make room for a reservation."),
        /** Bytes made readable by COMMIT_STORE. */
        BYTES_IN(CountersDescriptor.BYTES_IN, "bytes_in", TOTAL,
            "Bytes made readable by COMMIT_STORE."),
        /** Bytes handed out by COMMIT_RETRIEVE. */
        BYTES_OUT(CountersDescriptor.BYTES_OUT, "bytes_out", TOTAL,
            "Bytes handed out by COMMIT_RETRIEVE."),
        /** Transfers reclaimed after their lease. */
        RECLAIMED_LEASES(CountersDescriptor.RECLAIMED_LEASES, "reclaimed_leases", TOTAL,
            "Transfers reclaimed after their lease."),
        /** Reserved chunks freed without being published. */
        ABORTED_CHUNKS(CountersDescriptor.ABORTED_CHUNKS, "aborted_chunks", TOTAL,
            "Reserved chunks freed without being published."),
        /** PREPARE_STORE answered NO_SPACE. */
        NO_SPACE(CountersDescriptor.NO_SPACE, "no_space", TOTAL,
            "PREPARE_STORE answered NO_SPACE."),
        /** UNREGISTER of an unknown instance. */
        UNREGISTER_UNKNOWN(CountersDescriptor.UNREGISTER_UNKNOWN, "unregister_unknown", TOTAL,
            "UNREGISTER of an unknown instance."),
        /** PREPARE_STORE with nothing to reserve (early return). */
        EMPTY_PREPARES(CountersDescriptor.EMPTY_PREPARES, "empty_prepares", TOTAL,
            "PREPARE_STORE with nothing to reserve (early return)."),
        /** Client sessions reaped because their process died. */
        DEAD_CLIENTS(CountersDescriptor.DEAD_CLIENTS, "dead_clients", TOTAL,
            "Client sessions reaped because their process died."),
        /** Readable chunks removed by CLEAR. */
        CLEARED_CHUNKS(CountersDescriptor.CLEARED_CHUNKS, "cleared_chunks", TOTAL,
            "Readable chunks removed by CLEAR."),
        /** Chunks COMMIT_STORE made readable cold (slru-admit's admission). */
        COLD_CHUNKS(CountersDescriptor.COLD_CHUNKS, "cold_chunks", TOTAL,
            "Chunks COMMIT_STORE made readable cold, at the evict-first end (slru-admit's admission)."),
        /** Bytes written into slots by WRITE_DATA (copy transport). */
        COPY_BYTES_IN(CountersDescriptor.COPY_BYTES_IN, "copy_bytes_in", TOTAL,
            "Bytes written into slots by WRITE_DATA (copy transport)."),
        /** Bytes read from slots by READ_DATA (copy transport). */
        COPY_BYTES_OUT(CountersDescriptor.COPY_BYTES_OUT, "copy_bytes_out", TOTAL,
            "Bytes read from slots by READ_DATA (copy transport)."),
        /** Records read from request rings. */
        WIRE_RECORDS(CountersDescriptor.WIRE_RECORDS, "wire_records", TOTAL,
            "Records read from request rings."),
        /** Records that failed decoding. */
        WIRE_MALFORMED(CountersDescriptor.WIRE_MALFORMED, "wire_malformed", TOTAL,
            "Records that failed decoding."),
        /** Client files attached. */
        WIRE_CLIENTS_ATTACHED(CountersDescriptor.WIRE_CLIENTS_ATTACHED, "clients_attached", TOTAL,
            "Client files attached."),
        /** Client sessions freed (closed, dead, or corrupt ring). */
        WIRE_CLIENTS_DETACHED(CountersDescriptor.WIRE_CLIENTS_DETACHED, "clients_detached", TOTAL,
            "Client sessions freed (closed, dead, or corrupt ring)."),
        /** Attached client sessions. */
        WIRE_CLIENTS(CountersDescriptor.WIRE_CLIENTS, "clients", GAUGE,
            "Attached client sessions."),
        /** Responses that could not be written. */
        WIRE_RESPONSES_DROPPED(CountersDescriptor.WIRE_RESPONSES_DROPPED, "responses_dropped", TOTAL,
            "Responses that could not be written."),
        /** Requests deferred because the response ring lacked room. */
        WIRE_BACK_PRESSURE(CountersDescriptor.WIRE_BACK_PRESSURE, "back_pressure", TOTAL,
            "Requests deferred because the response ring lacked room."),
        /** Sleeps of the blocking wait. */
        WIRE_SLEEPS(CountersDescriptor.WIRE_SLEEPS, "sleeps", TOTAL,
            "Sleeps of the server's thread on its doorbell when idle, until its next timer (100 ms) at most each."),
        /** Sleeps a doorbell ended. */
        WIRE_DOORBELL_WAKEUPS(CountersDescriptor.WIRE_DOORBELL_WAKEUPS, "doorbell_wakeups", TOTAL,
            "Sleeps ended by a client's doorbell (a request published while the server slept)."),
        /** Second tier state. */
        L2_STATE(CountersDescriptor.L2_STATE, "l2_state", GAUGE,
            "Second tier state: 0 off, 1 connecting, 2 up, 3 down (retrying on its own)."),
        /** Chunks written to the cluster. */
        L2_WRITES(CountersDescriptor.L2_WRITES, "l2_writes", TOTAL,
            "Chunks the second tier wrote to the cluster."),
        /** Chunks not written. */
        L2_WRITE_SKIPS(CountersDescriptor.L2_WRITE_SKIPS, "l2_write_skips", TOTAL,
            "Chunks not written: already in the cluster, or evicted before the tier read them."),
        /** Chunks that failed to be written. */
        L2_WRITE_ERRORS(CountersDescriptor.L2_WRITE_ERRORS, "l2_write_errors", TOTAL,
            "Chunks the second tier failed to write (cluster error, timeout, tier down)."),
        /** Chunks fetched into the pool. */
        L2_FETCH_HITS(CountersDescriptor.L2_FETCH_HITS, "l2_fetch_hits", TOTAL,
            "Chunks fetched from the cluster into the pool (read-through)."),
        /** Fetches that found nothing. */
        L2_FETCH_MISSES(CountersDescriptor.L2_FETCH_MISSES, "l2_fetch_misses", TOTAL,
            "Read-through fetches that found no value in the cluster."),
        /** Values rejected by the header checks. */
        L2_CORRUPT_VALUES(CountersDescriptor.L2_CORRUPT_VALUES, "l2_corrupt_values", TOTAL,
            "Cluster values rejected by the header checks (corrupt, truncated, other layout or key)."),
        /** Calls past the timeout. */
        L2_TIMEOUTS(CountersDescriptor.L2_TIMEOUTS, "l2_timeouts", TOTAL,
            "Cluster calls that ran past the tier's timeout."),
        /** Other cluster errors. */
        L2_ERRORS(CountersDescriptor.L2_ERRORS, "l2_errors", TOTAL,
            "Cluster errors other than timeouts (connection refused, cluster down)."),
        /** Bytes written to the cluster. */
        L2_BYTES_WRITTEN(CountersDescriptor.L2_BYTES_WRITTEN, "l2_bytes_written", TOTAL,
            "Bytes of chunks written to the cluster."),
        /** Bytes fetched from the cluster. */
        L2_BYTES_FETCHED(CountersDescriptor.L2_BYTES_FETCHED, "l2_bytes_fetched", TOTAL,
            "Bytes of chunks fetched from the cluster into the pool."),
        /** Notices dropped for a full tier queue. */
        L2_NOTICES_DROPPED(CountersDescriptor.L2_NOTICES_DROPPED, "l2_notices_dropped", TOTAL,
            "Notices for the second tier dropped because its queue was full."),
        /** Highest read-through ticket over. */
        L2_COMPLETED_TICKET(CountersDescriptor.L2_COMPLETED_TICKET, "l2_completed_ticket", GAUGE,
            "The highest read-through ticket that is over (a worker waiting for a read-through watches it)."),
        /** Unexpected errors (see kvstash errors). */
        ERRORS(CountersDescriptor.ERRORS, "errors", TOTAL,
            "Unexpected errors (see kvstash errors)."),
        /** Responses to requests of an unknown type. */
        REQUESTS_INVALID_TYPE(CountersDescriptor.REQUESTS_INVALID_TYPE, "requests.invalid_type", TOTAL,
            "Responses to requests of an unknown type."),
        /** Failed requests that asked for no answer. */
        NO_REPLY_FAILURES(CountersDescriptor.NO_REPLY_FAILURES, "no_reply_failures", TOTAL,
            "Requests sent with NO_REPLY (COMMIT_RETRIEVE, RELEASE) that failed: answered to no one."),
        /** The pool's configured size. */
        POOL_BYTES_CONFIGURED(CountersDescriptor.POOL_BYTES_CONFIGURED, "pool_bytes_configured", GAUGE,
            "Bytes of the pool's data region as configured (--pool-size)."),
        /** The pool's committed bytes. */
        POOL_BYTES_COMMITTED(CountersDescriptor.POOL_BYTES_COMMITTED, "pool_bytes_committed", GAUGE,
            "Bytes of the pool, from its start, whose pages are committed (allocated and touched by the server)."),
        /** Regions committed on the request path. */
        POOL_COMMIT_MISSES(CountersDescriptor.POOL_COMMIT_MISSES, "pool_commit_misses", TOTAL,
            "Regions a store needed before the preparer committed them: committed on the request path (it waited).");

        private final int id;
        private final String counterName;
        private final boolean gauge;
        private final String description;

        Counter(final int id, final String counterName, final boolean gauge, final String description)
        {
            this.id = id;
            this.counterName = counterName;
            this.gauge = gauge;
            this.description = description;
        }

        /**
         * Counter id: the counter's index in the counters buffer.
         *
         * @return id.
         */
        public int id()
        {
            return id;
        }

        /**
         * Name of the counter as its readers print it.
         *
         * @return name.
         */
        public String counterName()
        {
            return counterName;
        }

        /**
         * Whether the counter is a gauge, a current value that goes up and down; otherwise it only grows.
         *
         * @return true for a gauge.
         */
        public boolean isGauge()
        {
            return gauge;
        }

        /**
         * What the counter counts, one sentence.
         *
         * @return description.
         */
        public String description()
        {
            return description;
        }
    }

    /**
     * Counter id of the responses table.
     *
     * @param type   request type.
     * @param status status.
     * @return the counter id.
     */
    public static int requestId(final int type, final int status)
    {
        return REQUESTS_BASE + type * Status.COUNT + status;
    }

    /**
     * What a counter counts, one sentence; null for an unused id and for the responses table (whose meaning is in
     * its name: request type and status).
     *
     * @param id counter id.
     * @return description or null.
     */
    public static String description(final int id)
    {
        final Counter counter = counter(id);
        return null == counter ? null : counter.description();
    }

    /**
     * The row of a named counter.
     *
     * @param id counter id.
     * @return its row, or null for an unused id and for the responses table.
     */
    public static Counter counter(final int id)
    {
        return id >= 0 && id < COUNT ? COUNTERS[id] : null;
    }

    /**
     * Whether a counter is a gauge, a current value that goes up and down; every other counter only grows.
     *
     * @param id counter id.
     * @return true for the chunk book's gauges and the attached clients.
     */
    public static boolean isGauge(final int id)
    {
        final Counter counter = counter(id);
        return null != counter && counter.isGauge();
    }

    /**
     * Name of a counter id, null for an unused id.
     *
     * @param id counter id.
     * @return name or null.
     */
    public static String name(final int id)
    {
        return id >= 0 && id < COUNT ? NAMES[id] : null;
    }

    private CountersDescriptor()
    {
    }
}
