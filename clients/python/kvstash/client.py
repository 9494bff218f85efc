"""The kvstash worker client: connection, requests, slots and liveness (docs/PROTOCOL.md §2 to §7).

One ``Client`` per process and thread: it is not thread-safe and must not be shared across ``fork()``
(the client file's lock belongs to the process that took it). See ``ring.py`` for why the plain aligned
loads and stores used for shared words are release/acquire accesses on x86-64, and what ARM would need.
"""

import contextlib
import fcntl
import mmap
import os
import platform
import pwd
import secrets
import socket
import stat
import struct
import sys
import tempfile
import threading
import time

from . import descriptor as d
from .errors import (BadFilesError, ClosedError, DetachedError, KvStashTimeoutError, RejectedError,
                     ServerGoneError, ServerRestartedError)
from .hashing import _tokens_le, chunk_hashes, salt_value
from .ring import Ring, RingCorrupt
from .types import Layout, RegisterInfo, RequestType, SlotEntry, Status

try:                                    # optional: slots as numpy.ndarray views
    import numpy as _np
except ImportError:                     # pragma: no cover - depends on the machine
    _np = None

TIMEOUT_DEFAULT_S = 10.0
LIVENESS_CHECK_INTERVAL_S = 0.1         # §2.5: check the server while waiting, every 100 ms
READ_WINDOW_DEFAULT = 8                 # READ_DATA requests in flight during a copy-transport read
YIELD_PHASE_S = 0.0002                  # waiting for a response: poll + sched_yield this long, then sleep
SLEEP_MIN_S = 0.00005
SLEEP_MAX_S = 0.0002

_LITTLE_X86 = platform.machine().lower() in ("x86_64", "amd64") and sys.byteorder == "little"
_REGISTER_EXTRA = struct.Struct("<qqqii")


def default_directory():
    """The server's default ``--dir`` (§1.1): /dev/shm/kvstash-<user>, or <tmp>/kvstash-<user>."""
    user = pwd.getpwuid(os.getuid()).pw_name
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return os.path.join(base, "kvstash-" + user)


def connect(directory=None, timeout=TIMEOUT_DEFAULT_S, copy_transport=False, pretouch=True, cuda=False):
    """Connects to the server of ``directory`` (default: ``default_directory()``).

    ``timeout`` (seconds) bounds the attach handshake and every wait for a response. With
    ``copy_transport=True`` the pool is not mapped and chunk bytes travel in WRITE_DATA / READ_DATA
    messages. ``pretouch`` maps the pool with MAP_POPULATE so that no page fault lands on a chunk copy
    (the first write to each page of an unpopulated mapping faults: a cold 32 MiB store runs at ~1.5 GB/s
    instead of ~20). ``cuda=True`` registers the pool mapping with CUDA at once (``Client.pin_pool()``;
    needs torch with CUDA). Raises a ``KvStashError`` subclass when no live server accepts the client.
    """
    return Client(directory, timeout, copy_transport, pretouch, cuda)


def _wall_ms():
    return time.time_ns() // 1_000_000


def _pid_exists(pid):
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Response:
    """One response record (§6.8). ``status`` is a ``Status``; on an error status ``message`` says why."""

    __slots__ = ("correlation_id", "status", "request_type", "transfer_id", "hit_chunks", "slots",
                 "count", "chunk_bytes", "slot_bytes", "slot_capacity", "extra", "instance_id", "deadline_ns")

    def __init__(self, payload, instance_id=0):
        if len(payload) < d.RESPONSE_HEADER_LENGTH:
            raise BadFilesError("response payload of %d bytes" % len(payload))
        (self.correlation_id, status, request_type, self.transfer_id, self.hit_chunks, slot_count,
         self.count, self.chunk_bytes, self.slot_bytes, self.slot_capacity,
         extra_length) = d.RESPONSE_HEADER.unpack_from(payload, 0)
        try:
            self.status = Status(status)
        except ValueError:
            self.status = status
        try:
            self.request_type = RequestType(request_type)
        except ValueError:
            self.request_type = request_type
        end = d.RESPONSE_HEADER_LENGTH + d.SLOT_ENTRY_LENGTH * slot_count
        if slot_count < 0 or extra_length < 0 or end + extra_length > len(payload):
            raise BadFilesError("response fields run past its payload")
        self.slots = [SlotEntry(r, g & d.MASK32, o)
                      for r, g, o in d.SLOT_ENTRY.iter_unpack(payload[d.RESPONSE_HEADER_LENGTH:end])]
        self.extra = payload[end:end + extra_length]
        self.instance_id = instance_id
        self.deadline_ns = 0

    @property
    def ok(self):
        return self.status == Status.OK

    @property
    def message(self):
        """The reason of an error status (a constant English sentence; show it, do not parse it)."""
        return "" if self.ok else self.extra.decode("utf-8", "replace")

    @property
    def register_info(self):
        """The pool, lease, chunk tokens and incarnation of an OK REGISTER answer, or None."""
        if self.request_type != RequestType.REGISTER or not self.ok or len(self.extra) < 32:
            return None
        inc, pool_bytes, lease_ns, chunk_tokens, name_length = _REGISTER_EXTRA.unpack_from(self.extra, 0)
        name = self.extra[32:32 + name_length].decode("ascii")
        return RegisterInfo(inc & d.MASK64, pool_bytes, lease_ns, chunk_tokens, name)

    @property
    def tier_tickets(self):
        """(ticket, completed) of an OK LOOKUP answered with the second tier's tickets (it carried L2_WAIT or
        L2_POLL to a server with a tier, §6.8): the read-through it started (0 for none) and the highest ticket
        over when it was answered. None for any other answer."""
        if self.request_type != RequestType.LOOKUP or not self.ok or len(self.extra) < d.LOOKUP_TIER_EXTRA_LENGTH:
            return None
        return d.LOOKUP_TIER_EXTRA.unpack_from(self.extra, 0)

    @property
    def counters(self):
        """The 352 counters of an OK STATS answer, in counter-id order (§2.3), or None."""
        if self.request_type != RequestType.STATS or not self.ok:
            return None
        return list(struct.unpack_from("<%dq" % (len(self.extra) // 8), self.extra, 0))

    def __repr__(self):
        status = self.status.name if isinstance(self.status, Status) else self.status
        rtype = self.request_type.name if isinstance(self.request_type, RequestType) else self.request_type
        text = "Response(%s %s corr=%d transfer=%#x hits=%d slots=%d count=%d chunk=%d slot=%d" % (
            rtype, status, self.correlation_id, self.transfer_id, self.hit_chunks, len(self.slots),
            self.count, self.chunk_bytes, self.slot_bytes)
        if not self.ok:
            text += " %r" % self.message
        return text + ")"


class Client:
    """A connected worker client. Use ``connect()``; close with ``close()`` or a ``with`` block."""

    deadline = None                         # time.monotonic() past which no wait goes on (see bounded())
    _doorbell = None                        # the server's doorbell connection (§2.6), or None

    def __init__(self, directory=None, timeout=TIMEOUT_DEFAULT_S, copy_transport=False, pretouch=True,
                 cuda=False):
        if not _LITTLE_X86 and os.environ.get("KVSTASH_ALLOW_WEAK_MEMORY") != "1":
            raise RuntimeError("the pure-Python kvstash client is correct on x86-64 only (see ring.py); "
                               "set KVSTASH_ALLOW_WEAK_MEMORY=1 to run it anyway")
        self.directory = os.path.abspath(directory or default_directory())
        self.timeout = float(timeout)
        self.copy_transport = bool(copy_transport)
        self.pretouch = bool(pretouch)
        self._closed = False
        self._broken = None
        self._control = self._control_fd = None
        self._pool = self._pool_view = self._slot_words = None
        self._file = self._file_view = self._file_fd = None
        self._request = self._response = None
        self._header_i32 = self._header_i64 = None
        self._doorbell = None
        self._fence = threading.Lock()
        self._stash = {}
        self._next_correlation = 1
        self._layouts = {}
        self._tensors = None
        self.client_file = None
        try:
            self._open_control()
            if not self.copy_transport:
                self._open_pool()
            self._create_client_file()
            self._await_attach()
            self._connect_doorbell()
            if cuda:
                self.pin_pool()
        except BaseException:
            self._release(delete_file=True)
            raise

    # ---------------------------------------------------------------------------------------- connect
    def _check_directory(self):
        """The server's directory checks (§1.1), applied before trusting the directory."""
        try:
            st = os.lstat(self.directory)
        except FileNotFoundError:
            raise ServerGoneError("no kvstash directory %s" % self.directory) from None
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise BadFilesError("%s is a symbolic link or not a directory" % self.directory)
        if st.st_uid != os.getuid():
            raise BadFilesError("%s is owned by uid %d, not by this user" % (self.directory, st.st_uid))
        if st.st_mode & 0o022:
            raise BadFilesError("%s is writable by group or others" % self.directory)

    def _open_control(self):
        self._check_directory()
        path = os.path.join(self.directory, d.CONTROL_FILE_NAME)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise ServerGoneError("no server on %s (no control file)" % self.directory) from None
        try:
            size = os.fstat(fd).st_size
            if size < d.CONTROL_MIN_LENGTH:
                raise BadFilesError("%s is not a kvstash control file (%d bytes)" % (path, size))
            self._control = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        view = memoryview(self._control)
        self._control_view = view
        self._ctl_i32 = view[:d.CONTROL_MIN_LENGTH].cast("i")
        self._ctl_i64 = view[:d.CONTROL_MIN_LENGTH].cast("q")
        if self._ctl_i64[d.CTL_MAGIC_OFFSET >> 3] & d.MASK64 != d.CONTROL_MAGIC:
            raise BadFilesError("%s is not a kvstash control file (magic)" % path)
        version = self._ctl_i32[d.CTL_VERSION_OFFSET >> 2]                 # acquire
        if version == 0:
            raise ServerGoneError("the server on %s is still starting" % self.directory)
        if d.major(version) != d.MAJOR_VERSION:
            raise BadFilesError("control file major version %d, this client speaks %d"
                                % (d.major(version), d.MAJOR_VERSION))
        self.server_pid = self._ctl_i64[d.CTL_PID_OFFSET >> 3]
        self.incarnation = self._ctl_i64[d.CTL_INCARNATION_OFFSET >> 3] & d.MASK64
        cfg = self._ctl_i32[d.CTL_CONFIG_OFFSET_OFFSET >> 2]
        counters = self._ctl_i32[d.CTL_COUNTERS_OFFSET_OFFSET >> 2]
        counters_length = self._ctl_i32[d.CTL_COUNTERS_LENGTH_OFFSET >> 2]
        if cfg + 512 > size or counters + counters_length > size or counters_length % 8:
            raise BadFilesError("%s: sections past the end of the file" % path)
        name_length = struct.unpack_from("<i", view, cfg + d.CFG_POOL_FILE_NAME_LENGTH)[0]
        if not 0 < name_length <= d.CFG_POOL_FILE_NAME_MAX:
            raise BadFilesError("%s: pool file name length %d" % (path, name_length))
        self.pool_file_name = bytes(view[cfg + d.CFG_POOL_FILE_NAME:
                                         cfg + d.CFG_POOL_FILE_NAME + name_length]).decode("ascii")
        q = lambda rel: struct.unpack_from("<q", view, cfg + rel)[0]        # noqa: E731
        i = lambda rel: struct.unpack_from("<i", view, cfg + rel)[0]        # noqa: E731
        self.pool_data_bytes = q(d.CFG_POOL_DATA_BYTES)
        self.data_offset = q(d.CFG_DATA_OFFSET)
        self.slot_table_offset = q(d.CFG_SLOT_TABLE_OFFSET)
        self.slot_table_length = q(d.CFG_SLOT_TABLE_LENGTH)
        self.segment_bytes = q(d.CFG_SEGMENT_BYTES)
        self.alignment = i(d.CFG_ALIGNMENT)
        self.chunk_tokens = i(d.CFG_CHUNK_TOKENS)
        self.lease_ns = q(d.CFG_LEASE_NS)
        self.max_chunks = i(d.CFG_MAX_CHUNKS)
        self.max_inline_bytes = i(d.CFG_MAX_INLINE_BYTES)
        self.request_capacity = i(d.CFG_REQUEST_RING_CAPACITY)
        self.response_capacity = i(d.CFG_RESPONSE_RING_CAPACITY)
        self.max_clients = i(d.CFG_MAX_CLIENTS)
        self.heartbeat_interval_ms = i(d.CFG_HEARTBEAT_INTERVAL_MS)
        self.heartbeat_timeout_ms = i(d.CFG_HEARTBEAT_TIMEOUT_MS)
        # §2.2 Features (minor version 1 on): a second tier that answers LOOKUPs waiting for it.
        self.second_tier = d.minor(version) >= 1 and bool(i(d.CFG_FEATURES) & d.FEATURE_SECOND_TIER)
        # ... and keeps its highest completed ticket in a counter, which a waiting LOOKUP watches.
        self._ticket_gauge = self.second_tier and bool(i(d.CFG_FEATURES) & d.FEATURE_COMPLETED_TICKET)
        # §2.6 (minor version 4 on): a server that sleeps when idle, woken by its doorbell.
        self._offers_doorbell = d.minor(version) >= 4 and bool(i(d.CFG_FEATURES) & d.FEATURE_DOORBELL)
        self._counters = view[counters:counters + counters_length].cast("q")
        if not self._alive_at_connect():
            raise ServerGoneError("the server on %s is not alive (state, heartbeat or pid)" % self.directory)

    def _open_pool(self):
        path = os.path.join(self.directory, self.pool_file_name)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            raise ServerGoneError("pool file %s is gone" % path) from None
        try:
            size = os.fstat(fd).st_size
            if size < self.data_offset + self.pool_data_bytes or size < d.POOL_HEADER_LENGTH:
                raise BadFilesError("pool file %s is %d bytes, expected %d" %
                                    (path, size, self.data_offset + self.pool_data_bytes))
            flags = mmap.MAP_SHARED
            if self.pretouch:
                flags |= getattr(mmap, "MAP_POPULATE", 0)      # page tables filled in the kernel, once
            self._pool = mmap.mmap(fd, size, flags, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)        # the mapping keeps the file; nothing is locked on the pool
        view = memoryview(self._pool)
        self._pool_view = view
        header = view[:d.POOL_HEADER_LENGTH].cast("q")
        try:
            if header[d.POOL_MAGIC_OFFSET >> 3] & d.MASK64 != d.POOL_MAGIC:
                raise BadFilesError("%s is not a kvstash pool file (magic)" % path)
            version = view[:d.POOL_HEADER_LENGTH].cast("i")[d.POOL_VERSION_OFFSET >> 2]
            if version == 0 or d.major(version) != d.MAJOR_VERSION:
                raise BadFilesError("pool file version %#x not understood" % version)
            if header[d.POOL_INCARNATION_OFFSET >> 3] & d.MASK64 != self.incarnation:
                raise ServerRestartedError("pool file %s belongs to another incarnation" % path)
        finally:
            header.release()
        self._slot_words = view[self.slot_table_offset:
                                self.slot_table_offset + self.slot_table_length].cast("Q")

    def _create_client_file(self):
        req, resp = self.request_capacity, self.response_capacity
        length = d.client_file_length(req, resp)
        name = "%s%d-%x" % (d.CLIENT_FILE_PREFIX, os.getpid(), secrets.randbits(64))
        path = os.path.join(self.directory, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        self.client_file = path
        self._file_fd = fd
        os.fchmod(fd, 0o600)
        # §4.2 step 4: a POSIX record lock (not flock), whole file, held for the life of the client.
        # Python's mmap keeps its own dup() of the descriptor; POSIX locks fall when ANY descriptor of
        # the file is closed by this process, so the mapping is closed only after the lock is let go.
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, length)                                            # zero rings before anything
        self._file = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        view = memoryview(self._file)
        self._file_view = view
        self._header_i32 = view[:d.CLIENT_HEADER_LENGTH].cast("i")
        self._header_i64 = view[:d.CLIENT_HEADER_LENGTH].cast("q")
        h32, h64 = self._header_i32, self._header_i64
        h64[d.CLI_MAGIC_OFFSET >> 3] = d.CLIENT_MAGIC
        h32[d.CLI_HEADER_LENGTH_OFFSET >> 2] = d.CLIENT_HEADER_LENGTH
        h64[d.CLI_PID_OFFSET >> 3] = os.getpid()
        h64[d.CLI_INCARNATION_OFFSET >> 3] = _signed64(self.incarnation)
        h32[d.CLI_REQUEST_CAPACITY_OFFSET >> 2] = req
        h32[d.CLI_RESPONSE_CAPACITY_OFFSET >> 2] = resp
        h32[d.CLI_FLAGS_OFFSET >> 2] = d.CLIENT_FLAG_COPY_TRANSPORT if self.copy_transport else 0
        self._request = Ring(view, d.CLI_REQUEST_RING_OFFSET, req)
        self._response = Ring(view, d.response_ring_offset(req), resp)
        self._request.start_as_producer()
        self._response.start_as_consumer()
        h32[d.CLI_VERSION_OFFSET >> 2] = d.VERSION                         # release, LAST

    def _await_attach(self):
        deadline = time.monotonic() + self.timeout
        pause = 0.0005
        while True:
            state = self._header_i32[d.CLI_ATTACH_STATE_OFFSET >> 2]       # acquire
            if state == d.ATTACH_ATTACHED:
                self.session_id = self._header_i64[d.CLI_SESSION_ID_OFFSET >> 3] & d.MASK64
                return
            if state == d.ATTACH_REJECTED:
                reason = self._header_i32[d.CLI_REJECT_REASON_OFFSET >> 2]
                raise RejectedError("the server refused the client file: %s"
                                    % d.REJECT_REASONS.get(reason, reason), reason)
            if state == d.ATTACH_DETACHED:
                raise DetachedError("the server detached the client before it attached")
            if time.monotonic() > deadline:
                if self.alive():
                    raise KvStashTimeoutError("the server did not attach the client within %.1f s" % self.timeout)
                raise ServerGoneError("the server died while the client was attaching")
            time.sleep(pause)
            pause = min(pause * 2, 0.005)

    def _connect_doorbell(self):
        """§2.6: connects to the doorbell of a server in its blocking wait. Without one (no such server, a full
        backlog) requests are still answered, each within the server's park period."""
        if not self._offers_doorbell:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)             # connects at once or not at all: never waits for the server
            sock.connect(os.path.join(self.directory, d.DOORBELL_FILE_NAME))
        except OSError:
            sock.close()
            return
        self._doorbell = sock

    def _ring(self):
        """§2.6: after publishing a request, wakes the server if its Asleep word says it sleeps."""
        doorbell = self._doorbell
        if doorbell is None:
            return
        # The one place this client needs x86's StoreLoad fence (see ring.py): the request's Length store must be
        # visible before the Asleep word is read, or the server (which raises the word, then polls) and this client
        # could each miss the other. A lock's acquire and release are locked instructions: full fences.
        self._fence.acquire()
        self._fence.release()
        if self._ctl_i32[d.CTL_ASLEEP_OFFSET >> 2]:                        # acquire
            try:
                doorbell.send(b"\0", socket.MSG_NOSIGNAL)   # no SIGPIPE when the server is gone
            except BlockingIOError:
                pass                            # full: the server has bytes to wake on already
            except OSError:                     # the server is gone: its liveness says so to the caller
                self._close_doorbell()

    def _close_doorbell(self):
        if self._doorbell is not None:
            self._doorbell.close()
            self._doorbell = None

    # ---------------------------------------------------------------------------------------- liveness
    def alive(self):
        """Whether the server this client connected to looks alive (§2.5): RUNNING, a heartbeat that moved
        within the timeout (timed on this process's monotonic clock, so a step of either wall clock does not
        matter), pid."""
        if self._ctl_i32[d.CTL_STATE_OFFSET >> 2] != d.STATE_RUNNING:
            return False
        heartbeat = self._ctl_i64[d.CTL_HEARTBEAT_OFFSET >> 3]
        now_ns = time.monotonic_ns()
        if heartbeat != self._last_heartbeat:
            self._last_heartbeat = heartbeat
            self._last_heartbeat_change_ns = now_ns
        elif now_ns - self._last_heartbeat_change_ns > self.heartbeat_timeout_ms * 1_000_000:
            return False
        return _pid_exists(self.server_pid)

    def _alive_at_connect(self):
        """The first check, no heartbeat seen yet (§2.5). It only seeds what alive() judges by: a heartbeat
        within the timeout of this wall clock (either way) counts as seen changing that long ago; any other
        counts as stale and is watched for up to three heartbeat intervals while the server's process lives,
        so that it is fresh only if it moves."""
        heartbeat = self._ctl_i64[d.CTL_HEARTBEAT_OFFSET >> 3]
        age_ms = _wall_ms() - heartbeat
        near_this_clock = abs(age_ms) <= self.heartbeat_timeout_ms
        self._last_heartbeat = heartbeat
        self._last_heartbeat_change_ns = time.monotonic_ns() - 1_000_000 * (
            max(0, age_ms) if near_this_clock else self.heartbeat_timeout_ms + 1)
        deadline = time.monotonic() + 3 * max(1, self.heartbeat_interval_ms) / 1000.0
        while (not near_this_clock and time.monotonic() < deadline and _pid_exists(self.server_pid)
               and self._ctl_i64[d.CTL_HEARTBEAT_OFFSET >> 3] == heartbeat):
            time.sleep(0.001)
        return self.alive()

    def _current_incarnation(self):
        """Incarnation of the control file now at the path (a restarted server has a new one), or None."""
        try:
            fd = os.open(os.path.join(self.directory, d.CONTROL_FILE_NAME), os.O_RDONLY)
        except OSError:
            return None
        try:
            header = os.pread(fd, 32, 0)
        finally:
            os.close(fd)
        if len(header) < 32:
            return None
        magic, version, _, _, incarnation = struct.unpack_from("<QiiqQ", header, 0)
        if magic != d.CONTROL_MAGIC or version == 0:
            return None
        return incarnation

    def check_connection(self):
        """Raises the connection error if the session ended or the server is gone or restarted."""
        if self._broken is not None:
            raise type(self._broken)(str(self._broken).split(": ", 1)[-1])
        if self._closed:
            raise ClosedError("the client is closed")
        if self._header_i32[d.CLI_ATTACH_STATE_OFFSET >> 2] == d.ATTACH_DETACHED:
            self._fail(DetachedError("the server ended this client's session"))
        if self.alive():
            return
        current = self._current_incarnation()
        if current is not None and current != self.incarnation:
            self._fail(ServerRestartedError(
                "the server restarted (incarnation %x, was %x): reconnect" % (current, self.incarnation)))
        self._fail(ServerGoneError("the server on %s is gone" % self.directory))

    def _fail(self, error):
        self._broken = error
        raise error

    # ---------------------------------------------------------------------------------------- transport
    def _send(self, msg_type, instance=0, transfer=0, salt=0, flags=0, key_mode=0, body=b"", data=None):
        """Publishes one request and returns its correlation id; keeps consuming responses while the
        request ring is full (§7.6)."""
        if self._broken is not None or self._closed:
            self.check_connection()
        correlation = self._next_correlation
        self._next_correlation += 1
        part1 = d.REQUEST_HEADER.pack(correlation, instance & d.MASK64, transfer & d.MASK64,
                                      salt & d.MASK64, flags, key_mode) + body
        if self._request.offer(msg_type, part1, data):
            self._ring()
            return correlation
        start = time.monotonic()
        deadline = self._deadline_from(start)
        next_check = min(start + LIVENESS_CHECK_INTERVAL_S, deadline)
        while not self._request.offer(msg_type, part1, data):
            if not self._drain():
                os.sched_yield()
            now = time.monotonic()
            if now >= next_check:
                self.check_connection()
                next_check = min(now + LIVENESS_CHECK_INTERVAL_S, deadline)
                if now >= deadline:
                    raise KvStashTimeoutError("no room in the request ring within %.3f s" % (now - start))
        self._ring()
        return correlation

    def _drain(self):
        """Moves every arrived response into the stash; returns how many."""
        n = 0
        while True:
            record = self._poll_record()
            if record is None:
                return n
            self._stash[record.correlation_id] = record
            n += 1

    def _poll_record(self):
        try:
            record = self._response.poll()
        except RingCorrupt as ex:
            self._fail(BadFilesError("response ring corrupt: %s" % ex))
        if record is None:
            return None
        msg_type, payload = record
        if msg_type != d.RESPONSE_TYPE:
            self._fail(BadFilesError("response ring record of type %#x" % msg_type))
        return Response(payload)

    def _await(self, correlation, instance=0):
        """Waits for the response of ``correlation`` (§2.5: liveness checked every 100 ms)."""
        response = self._stash.pop(correlation, None)
        if response is None:
            response = self._wait_for(correlation)
        response.instance_id = instance
        return response

    def _wait_for(self, correlation):
        start = time.monotonic()
        deadline = self._deadline_from(start)
        next_check = min(start + LIVENESS_CHECK_INTERVAL_S, deadline)
        yield_until = start + YIELD_PHASE_S
        pause = SLEEP_MIN_S
        while True:
            response = self._poll_record()
            if response is not None:
                if response.correlation_id == correlation:
                    return response
                self._stash[response.correlation_id] = response
                continue
            now = time.monotonic()
            if now < yield_until:
                # Give the core to the server's threads between polls: on a machine with fewer cores
                # than busy threads a pure spin starves the very thread that would answer. Yielding only
                # helps briefly: sched_yield does not hand the core to another process's thread, so a client
                # that keeps yielding can hold it for a whole scheduler slice (milliseconds) while the answer
                # waits. Past the yield phase it sleeps, in steps short enough to stay near the answer.
                os.sched_yield()
            else:
                time.sleep(pause)
                pause = min(pause * 2, SLEEP_MAX_S)
            if now >= next_check:
                self.check_connection()
                next_check = min(now + LIVENESS_CHECK_INTERVAL_S, deadline)
                if now >= deadline:
                    raise KvStashTimeoutError("no response to request %d within %.3f s"
                                              % (correlation, now - start))

    def _deadline_from(self, start):
        """When a wait that starts at ``start`` gives up: ``timeout`` later, or at ``deadline`` if that is sooner."""
        end = start + self.timeout
        return end if self.deadline is None else min(end, self.deadline)

    @contextlib.contextmanager
    def bounded(self, seconds):
        """Within the block, every wait of this client (for ring room and for responses) ends at most ``seconds``
        from now, whatever ``timeout`` says; the block ends with the earlier bound restored. A wait past it raises
        KvStashTimeoutError. For callers that owe one bound to a whole sequence of calls (an engine's request)."""
        previous = self.deadline
        end = time.monotonic() + max(0.0, float(seconds))
        self.deadline = end if previous is None else min(previous, end)
        try:
            yield self
        finally:
            self.deadline = previous

    def _call(self, msg_type, instance=0, transfer=0, salt=0, flags=0, key_mode=0, body=b"", data=None):
        correlation = self._send(msg_type, instance, transfer, salt, flags, key_mode, body, data)
        return self._await(correlation, instance)

    def send(self, msg_type, instance=0, transfer=0, salt=0, flags=0, key_mode=0, body=b"", data=None):
        """Low level: publishes a raw request (payload = 40-byte header + body + data) and returns its
        correlation id without waiting. Pair with ``receive``."""
        return self._send(int(msg_type), instance, transfer, salt, flags, key_mode, body, data)

    def receive(self, correlation, instance=0):
        """Low level: waits for the response of a ``send``."""
        return self._await(correlation, instance)

    def send_raw(self, msg_type, payload):
        """Test hook: publishes a record with an arbitrary payload (no header added); no correlation."""
        while not self._request.offer(msg_type, payload):
            self._drain()
            self.check_connection()
        self._ring()

    # ---------------------------------------------------------------------------------------- keys
    def _key_range(self, keys, tokens, from_chunk, to_chunk):
        """(key mode, body) of a key range (§6.4): keys = [(hi, lo)], or tokens of the whole prompt."""
        if keys is not None and tokens is not None:
            raise ValueError("give keys or tokens, not both")
        if tokens is not None:
            data = _tokens_le(tokens)
            return d.KEY_MODE_TOKENS, d.KEYS_TOKENS_HEADER.pack(len(data) // 4, from_chunk, to_chunk, 0) + data
        if keys is None:
            return d.KEY_MODE_NONE, b""
        if isinstance(keys, (bytes, bytearray, memoryview)):          # already '<QQ' packed pairs
            return d.KEY_MODE_HASHES, d.KEYS_HASHES_HEADER.pack(len(keys) // 16, 0) + bytes(keys)
        flat = []
        for hi, lo in keys:
            flat.append(hi & d.MASK64)
            flat.append(lo & d.MASK64)
        return d.KEY_MODE_HASHES, d.KEYS_HASHES_HEADER.pack(len(flat) // 2, 0) + \
            struct.pack("<%dQ" % len(flat), *flat)

    # ---------------------------------------------------------------------------------------- requests
    def ping(self):
        return self._call(RequestType.PING)

    def register(self, instance, layout=None, **fields):
        """REGISTER ``instance`` with a ``Layout`` (or the Layout fields as keywords)."""
        if layout is None:
            layout = Layout(**fields)
        model = layout.model.encode("utf-8")
        body = d.REGISTER_BODY.pack(layout.world_size, layout.rank, layout.layers, layout.hidden,
                                    int(layout.dtype), 1 if layout.mla else 0, len(model), 0) + model
        response = self._call(RequestType.REGISTER, instance, body=body)
        if response.ok:
            self._layouts[instance & d.MASK64] = layout
        return response

    def unregister(self, instance):
        return self._call(RequestType.UNREGISTER, instance)

    def lookup(self, instance, keys=None, *, tokens=None, from_chunk=0, to_chunk=-1, salt=None, pin=False,
               wait_tier_s=None, quiet=False):
        """LOOKUP: Hit Chunks = readable prefix; with ``pin`` a transfer id pins it (0 when no hit). A range
        over the server's Max Chunks Per Request goes as several LOOKUPs (not with ``pin``: one transfer
        pins at most that many chunks), counted together up to the first miss. With ``quiet`` (QUIET) the
        answer is the same but the keys do not count as referenced again in the server's eviction policy: for
        asking again about a request already asked about.

        ``wait_tier_s`` (seconds) waits, up to that bound, for the second tier's read-through the LOOKUP starts
        when its hit prefix stops short (§11): the LOOKUP goes with L2_WAIT; then, after short pauses, the
        client reads the server's completed ticket from the control file (or, from a server without that
        counter, asks the LOOKUP again with L2_POLL) until the read-through is over, every chunk hits, or the
        bound is spent; the last answer is returned (asked once more, with L2_POLL, after watching the counter). With ``pin`` only that answer's lease is held (a first answer that must wait is
        released, the polls pin nothing, one last LOOKUP pins). Without a tier on the server (``second_tier``),
        or with None, it is the plain LOOKUP."""
        parts = pieces(self, keys, tokens, from_chunk, to_chunk)
        if len(parts) > 1 and pin:
            raise ValueError("a pinned LOOKUP covers at most %d chunks (the server's Max Chunks Per Request); "
                             "this range has %d" % (self.max_chunks, range_chunks(self, keys, tokens, from_chunk,
                                                                                 to_chunk)))
        if wait_tier_s is not None and self.second_tier:
            return self._lookup_waiting(instance, parts, salt_value(salt), pin,
                                        time.monotonic() + max(0.0, float(wait_tier_s)), quiet)
        flags = (d.FLAG_PIN if pin else 0) | (d.FLAG_QUIET if quiet else 0)
        return self._in_pieces(parts, lambda mode, body: self._call(
            RequestType.LOOKUP, instance, salt=salt_value(salt), flags=flags, key_mode=mode, body=body))

    def _lookup_waiting(self, instance, parts, salt, pin, deadline, quiet):
        """The pieces of a LOOKUP waiting for the tier, each up to the shared deadline, to the first miss."""
        hits, response = 0, None
        for _, piece_keys, piece_tokens, piece_from, piece_to in parts:
            mode, body = self._key_range(piece_keys, piece_tokens, piece_from, piece_to)
            count = range_chunks(self, piece_keys, piece_tokens, piece_from, piece_to)
            response = self._lookup_piece_waiting(instance, salt, pin, mode, body, count, deadline, quiet)
            if not response.ok:
                return response
            hits += response.hit_chunks
            if response.hit_chunks < count:
                break
        response.hit_chunks = hits
        return response

    def _lookup_piece_waiting(self, instance, salt, pin, mode, body, count, deadline, quiet):
        pin_flag = d.FLAG_PIN if pin else 0
        r = self._call(RequestType.LOOKUP, instance, salt=salt,
                       flags=pin_flag | d.FLAG_L2_WAIT | (d.FLAG_QUIET if quiet else 0), key_mode=mode, body=body)
        tickets = r.tier_tickets
        if (not r.ok or r.hit_chunks >= count or tickets is None or tickets[0] == 0 or tickets[1] >= tickets[0]
                or time.monotonic() >= deadline):
            return r
        ticket = tickets[0]
        if r.transfer_id:
            self.release(instance, r.transfer_id)       # the polls pin nothing; the last LOOKUP pins
        pause = 0.0
        while True:
            if pause == 0.0:
                os.sched_yield()
                pause = SLEEP_MIN_S
            else:
                time.sleep(pause)
                pause = min(pause * 2, SLEEP_MAX_S)
            if self._ticket_gauge:
                # A load from the control file: the server is not asked until the read-through is over.
                if self.counter(d.COUNTER_L2_COMPLETED_TICKET) >= ticket or time.monotonic() >= deadline:
                    return self._call(RequestType.LOOKUP, instance, salt=salt, flags=pin_flag | d.FLAG_L2_POLL,
                                      key_mode=mode, body=body)
                continue
            r = self._call(RequestType.LOOKUP, instance, salt=salt, flags=d.FLAG_L2_POLL, key_mode=mode, body=body)
            tickets = r.tier_tickets
            if (not r.ok or r.hit_chunks >= count or tickets is None or tickets[1] >= ticket
                    or time.monotonic() >= deadline):
                break
        if pin and r.ok:
            r = self._call(RequestType.LOOKUP, instance, salt=salt, flags=d.FLAG_PIN | d.FLAG_L2_POLL, key_mode=mode,
                           body=body)
        return r

    def _in_pieces(self, parts, ask):
        """Asks each piece in turn while every chunk before it hit; one Response with the total hits."""
        hits, response = 0, None
        for _, piece_keys, piece_tokens, piece_from, piece_to in parts:
            response = ask(*self._key_range(piece_keys, piece_tokens, piece_from, piece_to))
            if not response.ok:
                return response
            hits += response.hit_chunks
            if response.hit_chunks < range_chunks(self, piece_keys, piece_tokens, piece_from, piece_to):
                break
        response.hit_chunks = hits
        return response

    def lookup_all_ranks(self, model, world_size, keys=None, *, tokens=None, from_chunk=0, to_chunk=-1,
                         salt=None, quiet=False):
        """LOOKUP_ALL_RANKS: the prefix readable for every rank of ``world_size``; pins nothing. ``quiet`` as for
        ``lookup``: asked again, the keys do not count as referenced again (for each rank)."""
        m = model.encode("utf-8")
        prefix = d.ALL_RANKS_HEADER.pack(world_size, len(m)) + m + bytes(d.pad8(len(m)) - len(m))
        flags = d.FLAG_QUIET if quiet else 0
        return self._in_pieces(pieces(self, keys, tokens, from_chunk, to_chunk), lambda mode, keys_body: self._call(
            RequestType.LOOKUP_ALL_RANKS, 0, salt=salt_value(salt), flags=flags, key_mode=mode,
            body=prefix + keys_body))

    def release(self, instance, transfer):
        return self._call(RequestType.RELEASE, instance, _transfer_id(transfer))

    def prepare_store(self, instance, keys=None, *, tokens=None, from_chunk=0, to_chunk=-1, salt=None):
        """PREPARE_STORE: transfer id and one slot per reserved chunk; transfer id 0 = nothing to store."""
        mode, body = self._key_range(keys, tokens, from_chunk, to_chunk)
        sent_ns = time.monotonic_ns()
        response = self._call(RequestType.PREPARE_STORE, instance, salt=salt_value(salt), key_mode=mode, body=body)
        if response.transfer_id:
            response.deadline_ns = sent_ns + self.lease_ns      # the reservation ends no earlier (§3.3)
        return response

    def commit_store(self, instance, transfer):
        return self._call(RequestType.COMMIT_STORE, instance, _transfer_id(transfer))

    def abort_store(self, instance, transfer):
        return self._call(RequestType.ABORT_STORE, instance, _transfer_id(transfer))

    def prepare_retrieve(self, instance, keys=None, *, tokens=None, from_chunk=0, to_chunk=-1, salt=None,
                         lookup=None, prefix=False):
        """PREPARE_RETRIEVE by keys (all or nothing: MISS pins nothing), or with ``lookup`` = a pinned
        LOOKUP's transfer id (or its Response) to take over its pins under a new transfer id.

        With ``prefix`` (PREFIX, by keys or tokens only) the readable leading chunks of the range are pinned
        instead: chunk 0 up to the first chunk that is absent or not readable, one slot each (range indices
        0..k-1; ``len(response.slots)`` may be less than the range). MISS, pinning nothing, only when chunk 0 is
        not readable."""
        if lookup is not None:
            if prefix:
                raise ValueError("prefix retrieves a key range; a lookup's transfer is taken over whole")
            return self._call(RequestType.PREPARE_RETRIEVE, instance, _transfer_id(lookup),
                              flags=d.FLAG_FROM_LOOKUP)
        mode, body = self._key_range(keys, tokens, from_chunk, to_chunk)
        return self._call(RequestType.PREPARE_RETRIEVE, instance, salt=salt_value(salt),
                          flags=d.FLAG_PREFIX if prefix else 0, key_mode=mode, body=body)

    def commit_retrieve(self, instance, transfer):
        return self._call(RequestType.COMMIT_RETRIEVE, instance, _transfer_id(transfer))

    def clear(self, force=False):
        return self._call(RequestType.CLEAR, flags=d.FLAG_FORCE if force else 0)

    def stats(self):
        """STATS: ``response.counters`` holds every counter, in id order."""
        return self._call(RequestType.STATS)

    def write_data(self, instance, transfer, slot_index, offset, data):
        """One WRITE_DATA message (copy transport): ``data`` (<= max_inline_bytes) at ``offset`` of the
        chunk of entry ``slot_index`` of the store's slot list."""
        body = d.DATA_BODY.pack(slot_index, len(data), offset)
        return self._call(RequestType.WRITE_DATA, instance, _transfer_id(transfer), body=body, data=data)

    def read_data(self, instance, transfer, slot_index, offset, length):
        """One READ_DATA message (copy transport): the bytes come back in ``response.extra``."""
        body = d.DATA_BODY.pack(slot_index, length, offset)
        return self._call(RequestType.READ_DATA, instance, _transfer_id(transfer), body=body)

    # ---------------------------------------------------------------------------------------- counters
    def counter(self, counter_id):
        """One counter straight from the control file (§2.3), without asking the server."""
        return self._counters[counter_id]                                   # aligned 8-byte load

    def counters(self):
        """Every named counter from the control file: {name: value}, request counters included."""
        return {name: self._counters[cid] for cid, name in d.counter_names(len(self._counters)).items()}

    # ---------------------------------------------------------------------------------------- slots
    def _entry(self, response, i):
        if self._pool is None:
            raise RuntimeError("copy-transport client: the pool is not mapped (use write_chunk/read_chunk)")
        return response.slots[i]

    def _slot_word(self, response, entry):
        """Acquire load of the slot word of a slot entry (§3.3): word (offset - data offset) // alignment,
        whatever the slot size."""
        return self._slot_words[(entry.offset - self.data_offset) // self.alignment]

    def is_still_reserved(self, response, i):
        """Fencing before a write (§3.3): slot ``i`` of a PREPARE_STORE answer is RESERVED under its
        generation. A copy-transport client always gets True (the server checks)."""
        if self._pool is None:
            return True
        entry = response.slots[i]
        word = self._slot_word(response, entry)
        return word & 0xFF == d.SLOT_RESERVED and word >> 32 == entry.generation

    def is_still_readable(self, response, i):
        """Fencing after a read (§3.3): slot ``i`` of a PREPARE_RETRIEVE answer is READABLE under its
        generation, so the bytes just read are good."""
        if self._pool is None:
            return True
        entry = response.slots[i]
        word = self._slot_word(response, entry)
        return word & 0xFF == d.SLOT_READABLE and word >> 32 == entry.generation

    def slot_view(self, response, i, shaped=False):
        """A memoryview of the chunk of slot ``i`` straight in the mapped pool (``Chunk Bytes`` bytes).
        With ``shaped`` it is cast to the instance layout's shape and format (bfloat16 and fp8 as raw
        'H'/'B'). Release the view (or drop it) before ``close()``."""
        entry = self._entry(response, i)
        view = self._pool_view[entry.offset:entry.offset + response.chunk_bytes]
        if not shaped:
            return view
        layout = self._layout_of(response)
        fmt = {"<f4": "f", "<f2": "e", "<u2": "H", "u1": "B", "i1": "b"}[layout.dtype.numpy_dtype]
        return view.cast(fmt, layout.shape(self.chunk_tokens))

    def slot_array(self, response, i):
        """A numpy.ndarray view of slot ``i`` with the layout's shape and dtype (requires numpy)."""
        if _np is None:
            raise ImportError("numpy is not installed: use slot_view()")
        layout = self._layout_of(response)
        return _np.frombuffer(self.slot_view(response, i), dtype=layout.dtype.numpy_dtype).reshape(
            layout.shape(self.chunk_tokens))

    def slot(self, response, i):
        """Slot ``i`` as a numpy.ndarray view when numpy is importable, else as a flat memoryview."""
        return self.slot_array(response, i) if _np is not None else self.slot_view(response, i)

    def _layout_of(self, response):
        layout = self._layouts.get(response.instance_id & d.MASK64)
        if layout is None:
            raise KeyError("instance %d was not registered by this client" % response.instance_id)
        return layout

    def write_chunk(self, response, i, data):
        """Writes chunk ``data`` (bytes-like, at most ``Chunk Bytes``) for slot ``i`` of a PREPARE_STORE
        answer: fenced copy into the pool, or WRITE_DATA messages with the copy transport.
        Returns Status.OK, or UNKNOWN_TRANSFER when the reservation has ended (nothing written)."""
        data = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" \
            else data
        if len(data) > response.chunk_bytes:
            raise ValueError("%d bytes for a %d-byte chunk" % (len(data), response.chunk_bytes))
        if self._pool is None:
            return self._write_copy(response, i, data)
        if not self.is_still_reserved(response, i):
            return Status.UNKNOWN_TRANSFER
        offset = response.slots[i].offset
        self._pool_view[offset:offset + len(data)] = data
        return Status.OK

    def read_chunk_into(self, response, i, out):
        """Reads the chunk of slot ``i`` of a PREPARE_RETRIEVE answer into ``out`` (writable, at least
        ``Chunk Bytes``), then checks the slot word. Returns Status.OK when the bytes are good, else
        UNKNOWN_TRANSFER (treat the chunk as a miss) or the failing READ_DATA's status."""
        out = memoryview(out).cast("B")
        n = response.chunk_bytes
        if self._pool is None:
            return self._read_copy(response, i, out[:n])
        offset = response.slots[i].offset
        out[:n] = self._pool_view[offset:offset + n]
        return Status.OK if self.is_still_readable(response, i) else Status.UNKNOWN_TRANSFER

    def read_chunk(self, response, i):
        """The chunk of slot ``i`` as a bytearray, or None when it could not be read intact."""
        out = bytearray(response.chunk_bytes)
        return out if self.read_chunk_into(response, i, out) == Status.OK else None

    def _write_copy(self, response, i, data):
        step = self.max_inline_bytes
        pending = []
        status = Status.OK
        for offset in range(0, len(data), step):
            piece = data[offset:offset + step]
            body = d.DATA_BODY.pack(i, len(piece), offset)
            pending.append(self._send(RequestType.WRITE_DATA, response.instance_id, response.transfer_id,
                                      body=body, data=piece))
        for correlation in pending:
            r = self._await(correlation, response.instance_id)
            if not r.ok and status == Status.OK:
                status = r.status
        return status

    def _read_copy(self, response, i, out, window=READ_WINDOW_DEFAULT):
        step = self.max_inline_bytes
        offsets = list(range(0, len(out), step))
        in_flight = []
        status = Status.OK
        k = 0
        while k < len(offsets) or in_flight:
            while k < len(offsets) and len(in_flight) < window:
                length = min(step, len(out) - offsets[k])
                body = d.DATA_BODY.pack(i, length, offsets[k])
                in_flight.append((self._send(RequestType.READ_DATA, response.instance_id, response.transfer_id,
                                             body=body), offsets[k], length))
                k += 1
            correlation, offset, length = in_flight.pop(0)
            r = self._await(correlation, response.instance_id)
            if r.ok and len(r.extra) == length:
                out[offset:offset + length] = r.extra
            elif status == Status.OK:
                status = r.status if not r.ok else Status.SERVER_ERROR
        return status

    # ---------------------------------------------------------------------------------------- tensors
    def pin_pool(self):
        """Registers the whole pool mapping with CUDA (``cudaHostRegister``) once, so copies between GPU
        memory and slots run at the PCIe limit; ``close()`` unregisters it. Returns a ``PinInfo``
        (``bytes``, ``seconds``). Raises ``CudaUnavailableError`` without CUDA, ImportError without torch."""
        from . import tensors
        return tensors.state(self).pin()

    @property
    def pin_info(self):
        """The ``PinInfo`` of ``pin_pool()``, or None while the pool is not registered with CUDA."""
        return self._tensors.pin_info if self._tensors is not None else None

    def slot_tensor(self, response, i):
        """A CPU ``torch.Tensor`` over slot ``i`` of a PREPARE answer, zero copy, with the layout's shape
        (``[2, L, C, H]`` or ``[L, C, H]``) and real torch dtype. Drop it before ``close()``."""
        from . import tensors
        return tensors.state(self).slot_tensor(response, i)

    def write_tensors(self, response, tensors):
        """Copies ``tensors[range index]`` (chunk-shaped or flat, the layout's dtype, any device) into each
        reserved slot of a PREPARE_STORE answer, fenced, non-blocking on a CUDA stream, one
        synchronisation. Returns a Status per slot entry (UNKNOWN_TRANSFER: reservation ended, not written)."""
        from . import tensors as t
        return t.state(self).write(response, tensors)

    def read_tensors(self, response, out):
        """Copies each slot of a PREPARE_RETRIEVE answer into ``out[range index]``, one synchronisation,
        then checks each slot (§3.3). Returns a Status per slot entry (UNKNOWN_TRANSFER: recompute it)."""
        from . import tensors
        return tensors.state(self).read(response, out)

    def store_tensors(self, instance, tensors, keys=None, *, tokens=None, from_chunk=0, to_chunk=-1, salt=None):
        """PREPARE_STORE + ``write_tensors`` + COMMIT_STORE (ABORT_STORE when a reservation ended).
        ``tensors[k]`` is chunk ``k`` of the key range. Returns a ``TensorTransfer``."""
        from . import tensors as t
        state = t.state(self)
        return t.store(self, instance, lambda p, first: state.write(p, _Offset(tensors, first)), keys, tokens,
                       from_chunk, to_chunk, salt)

    def retrieve_tensors(self, instance, out, keys=None, *, tokens=None, from_chunk=0, to_chunk=-1, salt=None,
                         lookup=None, prefix=False):
        """PREPARE_RETRIEVE (keys, tokens, or ``lookup`` = a pinned LOOKUP) + ``read_tensors`` +
        COMMIT_RETRIEVE. ``out[k]`` receives chunk ``k`` of the range. Returns a ``TensorTransfer``. With
        ``prefix`` (keys or tokens only) the readable leading chunks are read and the rest are listed in its
        ``missing`` (their ``out`` entries are not written)."""
        from . import tensors as t
        state = t.state(self)
        return t.retrieve(self, instance, lambda p, first: state.read(p, _Offset(out, first)), keys, tokens,
                          from_chunk, to_chunk, salt, lookup, prefix)

    def write_paged(self, response, paged, block_ids, *, staging_bytes=None, staging_buffers=None):
        """Gathers chunk ``k`` of a PREPARE_STORE's range from blocks ``block_ids[k*n:(k+1)*n]`` of every
        layer of ``paged`` (a ``PagedKV``; n = chunk tokens / block size) into its slot. Statuses as
        ``write_tensors``."""
        from . import tensors as t
        return t.state(self).write_paged(response, paged, block_ids, *t.staging_options(staging_bytes,
                                                                                      staging_buffers))

    def read_paged(self, response, paged, block_ids, *, staging_bytes=None, staging_buffers=None):
        """Scatters each slot of a PREPARE_RETRIEVE answer into blocks ``block_ids[k*n:(k+1)*n]`` of every
        layer. Statuses as ``read_tensors``; the blocks of a failed chunk hold undefined data."""
        from . import tensors as t
        return t.state(self).read_paged(response, paged, block_ids, *t.staging_options(staging_bytes,
                                                                                     staging_buffers))

    def store_paged(self, instance, paged, block_ids, keys=None, *, tokens=None, from_chunk=0, to_chunk=-1,
                    salt=None, staging_bytes=None, staging_buffers=None):
        """PREPARE_STORE + ``write_paged`` + COMMIT_STORE. Returns a ``TensorTransfer``."""
        from . import tensors as t
        state, options = t.state(self), t.staging_options(staging_bytes, staging_buffers)

        def write(prepare, first):
            return state.write_paged(prepare, paged, t.blocks_from(block_ids, first, paged, self.chunk_tokens),
                                     *options)
        return t.store(self, instance, write, keys, tokens, from_chunk, to_chunk, salt)

    def retrieve_paged(self, instance, paged, block_ids, keys=None, *, tokens=None, from_chunk=0, to_chunk=-1,
                       salt=None, lookup=None, staging_bytes=None, staging_buffers=None, prefix=False):
        """PREPARE_RETRIEVE + ``read_paged`` + COMMIT_RETRIEVE. Returns a ``TensorTransfer``. With ``prefix``
        (keys or tokens only) the readable leading chunks are read; the rest are in its ``missing``, and no
        block of theirs is written."""
        from . import tensors as t
        state, options = t.state(self), t.staging_options(staging_bytes, staging_buffers)

        def read(prepare, first):
            return state.read_paged(prepare, paged, t.blocks_from(block_ids, first, paged, self.chunk_tokens),
                                    *options)
        return t.retrieve(self, instance, read, keys, tokens, from_chunk, to_chunk, salt, lookup, prefix)

    # ---------------------------------------------------------------------------------------- close
    def close(self):
        """Orderly close (§4.4): Closing = 1, unlock, close, unmap; the server reaps the session and
        deletes the client file. If the server is not alive, the client deletes its own file."""
        if self._closed:
            return
        self._closed = True
        alive = False
        if self._header_i32 is not None:
            self._header_i32[d.CLI_CLOSING_OFFSET >> 2] = 1                   # release
            try:
                alive = self.alive() and self._broken is None
            except Exception:
                alive = False
        self._release(delete_file=not alive)

    def _release(self, delete_file):
        self._close_doorbell()
        if self._tensors is not None:
            tensors, self._tensors = self._tensors, None
            tensors.release()                   # CUDA unregistration before the unmap
        if self._file_fd is not None:
            try:
                fcntl.lockf(self._file_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._file_fd)
                self._file_fd = None
        for ring in (self._request, self._response):
            if ring is not None:
                ring.release()
        self._request = self._response = None
        for name in ("_header_i32", "_header_i64", "_file_view", "_slot_words", "_pool_view",
                     "_counters", "_ctl_i32", "_ctl_i64", "_control_view"):
            view = getattr(self, name, None)
            if view is not None:
                view.release()
            setattr(self, name, None)
        for name in ("_file", "_pool", "_control"):
            mapping = getattr(self, name, None)
            if mapping is not None:
                try:
                    mapping.close()
                except BufferError:
                    pass    # a slot view handed out is still alive: the mapping goes with the last view
            setattr(self, name, None)
        if delete_file and self.client_file is not None:
            try:
                os.unlink(self.client_file)
            except FileNotFoundError:
                pass
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass


class _Offset:
    """``seq[first + k]`` as item ``k``: the chunks of one piece of a split range."""
    __slots__ = ("seq", "first")

    def __init__(self, seq, first):
        self.seq, self.first = seq, first

    def __getitem__(self, k):
        return self.seq[self.first + k]


def range_chunks(client, keys, tokens, from_chunk, to_chunk):
    """The number of chunks of a key range (§6.4), as the server will count it."""
    if tokens is not None:
        end = len(tokens) // client.chunk_tokens if to_chunk < 0 else to_chunk
        return max(0, end - from_chunk)
    if keys is None:
        return 0
    if isinstance(keys, (bytes, bytearray, memoryview)):
        return len(keys) // 16
    return len(keys)


def pieces(client, keys, tokens, from_chunk, to_chunk):
    """The key range cut into requests the server takes: ``[(first range index, keys, tokens, from, to)]``.
    One piece when the range has at most Max Chunks Per Request chunks and its tokens fit a request;
    otherwise the client hashes the tokens itself (docs/PROTOCOL.md §8.1, as the server would) and cuts
    the hashes into pieces of at most that many chunks."""
    count = range_chunks(client, keys, tokens, from_chunk, to_chunk)
    limit = max(1, client.max_chunks)
    token_limit = (client.request_capacity // 2 - 64) // 4
    if count <= limit and (tokens is None or len(tokens) <= token_limit):
        return [(0, keys, tokens, from_chunk, to_chunk)]
    if tokens is not None:
        end = len(tokens) // client.chunk_tokens if to_chunk < 0 else to_chunk
        keys = chunk_hashes(tokens[:end * client.chunk_tokens], client.chunk_tokens)[from_chunk:end]
    elif isinstance(keys, (bytes, bytearray, memoryview)):
        raw = bytes(keys)
        keys = [(int.from_bytes(raw[i:i + 8], "little"), int.from_bytes(raw[i + 8:i + 16], "little"))
                for i in range(0, len(raw) - 15, 16)]
    keys = list(keys)
    return [(first, keys[first:first + limit], None, 0, -1) for first in range(0, len(keys), limit)]


def _transfer_id(transfer):
    return transfer.transfer_id if isinstance(transfer, Response) else int(transfer)


def _signed64(value):
    value &= d.MASK64
    return value - (1 << 64) if value >> 63 else value
