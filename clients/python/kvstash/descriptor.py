"""Byte layouts of the kvstash shared-memory files and records (docs/PROTOCOL.md).

Every constant here is taken from docs/PROTOCOL.md; section numbers are given beside each group. All
multi-byte fields are little-endian. Offsets are byte offsets from the start of the file, or relative to
the section/record named in the group's comment.
"""

import struct

MASK64 = 0xFFFFFFFFFFFFFFFF
MASK32 = 0xFFFFFFFF

VERSION = 0x00030100                         # 3.1.0: what this client writes into its client file
MAJOR_VERSION = 3                            # 3: slot offsets are relative to the pool's data region (§3.2)
MINOR_VERSION = 1                            # 1: FLAG_NO_REPLY, FEATURE_POOL_ON_DEMAND and the pool counters
NO_REPLY_MINOR = 1                           # the first minor of major 3 whose server takes FLAG_NO_REPLY


def major(version: int) -> int:
    """Major number of a packed 0x00MMmmpp version (§2.1)."""
    return (version >> 16) & 0xFF


def minor(version: int) -> int:
    """Minor number of a packed 0x00MMmmpp version (§2.1)."""
    return (version >> 8) & 0xFF


def pad8(n: int) -> int:
    """``n`` rounded up to a multiple of 8."""
    return (n + 7) & ~7


# --- §2 control file --------------------------------------------------------------------------------
CONTROL_FILE_NAME = "control"
CONTROL_MAGIC = 0x004C54435453564B          # b"KVSTCTL\0"
CONTROL_MIN_LENGTH = 768

CTL_MAGIC_OFFSET = 0
CTL_VERSION_OFFSET = 8                       # i32, release, written last
CTL_HEADER_LENGTH_OFFSET = 12
CTL_PID_OFFSET = 16
CTL_INCARNATION_OFFSET = 24
CTL_START_TIME_OFFSET = 32
CTL_HEARTBEAT_OFFSET = 40                    # i64 epoch ms, release
CTL_STATE_OFFSET = 48                        # i32 1 RUNNING, 2 CLOSED
CTL_CONFIG_OFFSET_OFFSET = 64
CTL_CONFIG_LENGTH_OFFSET = 68
CTL_COUNTERS_OFFSET_OFFSET = 72
CTL_COUNTERS_LENGTH_OFFSET = 76
CTL_ERROR_LOG_OFFSET_OFFSET = 80
CTL_ERROR_LOG_LENGTH_OFFSET = 84
CTL_LABELS_OFFSET_OFFSET = 88                # §2.3: the counters' names, one record per counter id
CTL_LABELS_LENGTH_OFFSET = 92
CTL_ASLEEP_OFFSET = 128                      # i32 1 while the server sleeps on its doorbell (§2.6), from minor 4

STATE_RUNNING = 1
STATE_CLOSED = 2

# §2.2 config section, offsets relative to the section (file offset = Config Offset + these)
CFG_POOL_FILE_NAME_LENGTH = 0                # i32
CFG_POOL_FILE_NAME = 4                       # up to 124 ASCII bytes
CFG_POOL_FILE_NAME_MAX = 124
CFG_POOL_DATA_BYTES = 128                    # i64
CFG_DATA_OFFSET = 136
CFG_SLOT_TABLE_OFFSET = 144
CFG_SLOT_TABLE_LENGTH = 152
CFG_SEGMENT_BYTES = 160
CFG_ALIGNMENT = 168                          # i32
CFG_CHUNK_TOKENS = 172                       # i32
CFG_LEASE_NS = 176                           # i64
CFG_MAX_CHUNKS = 184                         # i32
CFG_MAX_INLINE_BYTES = 188                   # i32
CFG_REQUEST_RING_CAPACITY = 192              # i32
CFG_RESPONSE_RING_CAPACITY = 196             # i32
CFG_MAX_CLIENTS = 200                        # i32
CFG_HEARTBEAT_INTERVAL_MS = 204              # i32
CFG_HEARTBEAT_TIMEOUT_MS = 208               # i32
CFG_FEATURES = 212                           # i32, from minor version 1 (0 before)
FEATURE_SECOND_TIER = 1                      # the server runs a second tier: LOOKUP may carry L2_WAIT / L2_POLL
FEATURE_COMPLETED_TICKET = 2                 # the server keeps the highest completed tier ticket in counter 348
FEATURE_DOORBELL = 4                         # the server sleeps when idle: ring its doorbell (§2.6)
FEATURE_POOL_ON_DEMAND = 8                   # the pool is committed as it grows: touch only its committed prefix
DOORBELL_FILE_NAME = "doorbell"              # §2.6: the server's Unix stream socket in its directory
COUNTER_L2_COMPLETED_TICKET = 348            # gauge l2_completed_ticket: a waiting LOOKUP watches it
COUNTER_POOL_BYTES_COMMITTED = 329           # gauge pool_bytes_committed: the pool's committed prefix

# --- §3 pool file -------------------------------------------------------------------------------------
POOL_MAGIC = 0x4C4F4F505453564B             # b"KVSTPOOL"
POOL_HEADER_LENGTH = 4096
POOL_MAGIC_OFFSET = 0
POOL_VERSION_OFFSET = 8
POOL_INCARNATION_OFFSET = 16
POOL_DATA_BYTES_OFFSET = 24
POOL_DATA_OFFSET_OFFSET = 32
POOL_SLOT_TABLE_OFFSET_OFFSET = 40
POOL_SLOT_TABLE_LENGTH_OFFSET = 48
POOL_SEGMENT_BYTES_OFFSET = 56
POOL_ALIGNMENT_OFFSET = 64

# §3.3 slot word = (generation << 32) | state
SLOT_FREE = 0
SLOT_RESERVED = 1
SLOT_READABLE = 2

# --- §4 client file -----------------------------------------------------------------------------------
CLIENT_FILE_PREFIX = "client-"
CLIENT_MAGIC = 0x544E4C435453564B           # b"KVSTCLNT"
CLIENT_HEADER_LENGTH = 256
CLI_MAGIC_OFFSET = 0
CLI_VERSION_OFFSET = 8                       # i32, release, written last
CLI_HEADER_LENGTH_OFFSET = 12
CLI_PID_OFFSET = 16
CLI_INCARNATION_OFFSET = 24
CLI_REQUEST_CAPACITY_OFFSET = 32
CLI_RESPONSE_CAPACITY_OFFSET = 36
CLI_FLAGS_OFFSET = 40
CLI_ATTACH_STATE_OFFSET = 64                 # i32, server writes, release
CLI_REJECT_REASON_OFFSET = 68
CLI_SESSION_ID_OFFSET = 72
CLI_CLOSING_OFFSET = 128                     # i32, client writes, release
CLI_REQUEST_RING_OFFSET = 256
CLIENT_FLAG_COPY_TRANSPORT = 1

ATTACH_PENDING = 0
ATTACH_ATTACHED = 1
ATTACH_REJECTED = 2
ATTACH_DETACHED = 3

REJECT_REASONS = {
    1: "BAD_HEADER (magic or major version not understood)",
    2: "WRONG_INCARNATION (the file targets another server incarnation)",
    3: "TOO_MANY_CLIENTS (no free session)",
    4: "BAD_RINGS (capacities differ from the server's, or file too short)",
}


def client_file_length(request_capacity: int, response_capacity: int) -> int:
    """Bytes of a client file with rings of these capacities (§4.1)."""
    return CLIENT_HEADER_LENGTH + 128 + request_capacity + 128 + response_capacity


def response_ring_offset(request_capacity: int) -> int:
    """File offset of the response ring, after the request ring of ``request_capacity`` bytes (§4.1)."""
    return CLI_REQUEST_RING_OFFSET + 128 + request_capacity


# --- §5 rings -----------------------------------------------------------------------------------------
RING_HEADER_LENGTH = 128
RING_TAIL_OFFSET = 0                         # i64, producer, release
RING_HEAD_OFFSET = 64                        # i64, consumer, release
RECORD_HEADER_LENGTH = 8
PADDING_TYPE = -1
RESPONSE_TYPE = 0x5250

# --- §6 records ---------------------------------------------------------------------------------------
REQUEST_HEADER = struct.Struct("<QQQQii")    # correlation, instance, transfer, salt, flags, key mode
REQUEST_HEADER_LENGTH = 40
RESPONSE_HEADER = struct.Struct("<QiiQiiqqqii")
RESPONSE_HEADER_LENGTH = 64
SLOT_ENTRY = struct.Struct("<iiq")           # range index, generation (u32), file offset
SLOT_ENTRY_LENGTH = 16
REGISTER_BODY = struct.Struct("<iiiiiiii")   # world, rank, layers, hidden, dtype, mla, model length, 0
DATA_BODY = struct.Struct("<iiq")            # slot index, length, offset in chunk
DATA_BODY_LENGTH = 16
KEYS_HASHES_HEADER = struct.Struct("<ii")    # chunk count, 0
KEYS_TOKENS_HEADER = struct.Struct("<iiii")  # token count, from chunk, to chunk (-1 all), 0
ALL_RANKS_HEADER = struct.Struct("<ii")      # world size, model length

FLAG_PIN = 1
FLAG_FORCE = 2
FLAG_FROM_LOOKUP = 4
FLAG_L2_WAIT = 16                            # LOOKUP only: wait for the read-through it starts
FLAG_L2_POLL = 32                            # LOOKUP only: asked again while waiting; starts no read-through
FLAG_QUIET = 64                              # COMMIT_RETRIEVE only: the read does not count as a use
FLAG_PREFIX = 128                            # PREPARE_RETRIEVE by keys only: pin the readable leading chunks
FLAG_NO_REPLY = 256                          # COMMIT_RETRIEVE and RELEASE only: no response is written (3.1 on)

# §6.8 Extra of a LOOKUP answered OK with L2_WAIT or L2_POLL by a server with a second tier
LOOKUP_TIER_EXTRA = struct.Struct("<qq")     # ticket started (0 none), highest ticket over
LOOKUP_TIER_TICKET = 0
LOOKUP_TIER_COMPLETED = 8
LOOKUP_TIER_EXTRA_LENGTH = 16

KEY_MODE_NONE = 0
KEY_MODE_HASHES = 1
KEY_MODE_TOKENS = 2

MAX_MODEL_LENGTH = 255
MAX_WORLD_SIZE = 4096

# --- §2.3 counter labels -----------------------------------------------------------------------------
# The counters' names are read from the control file's labels section (connection.read_counter_labels), never
# copied here: a client prints what the server that wrote the file counts.
COUNTER_LABEL_LENGTH = 64                    # bytes of one record: the stride from one id to the next
COUNTER_LABEL_LENGTH_OFFSET = 0              # i32: bytes of the label, 0 for an unused id
COUNTER_LABEL_OFFSET = 4                     # the label, UTF-8, zero-filled after it
COUNTER_LABEL_MAX_LENGTH = 60
