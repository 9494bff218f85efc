"""The files of a connection (docs/PROTOCOL.md §1, §2, §4): the server's control file and pool, this client's file
and its attach handshake, the doorbell, and their release.

This is the bottom layer of ``Client`` (``connection`` < ``liveness`` < ``transport`` < ``slots`` < ``requests``):
it holds every mapping and the server's configuration that the layers above read.
"""

import fcntl
import mmap
import os
import pwd
import secrets
import socket
import stat
import struct
import tempfile
import threading
import time
from typing import Any, Dict, Optional

from . import descriptor as d
from .errors import BadFilesError, DetachedError, KvStashTimeoutError, RejectedError, ServerGoneError, \
    ServerRestartedError
from .ring import Ring
from .types import Layout

TIMEOUT_DEFAULT_S = 10.0


_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)   # populate page tables, reading (Linux)
_FAULT_AROUND_BYTES = 64 * 1024                                    # what one read fault maps of a cached file

def default_directory() -> str:
    """The server's default ``--dir`` (§1.1): /dev/shm/kvstash-<user>, or <tmp>/kvstash-<user>."""
    user = pwd.getpwuid(os.getuid()).pw_name
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return os.path.join(base, "kvstash-" + user)


def read_counter_labels(section: memoryview, count: int) -> Dict[int, str]:
    """{counter id: name} of the labels section (§2.3) of a control file, for ids below ``count``: every record
    whose length is 1..COUNTER_LABEL_MAX_LENGTH; unused ids (length 0) and damaged records are left out."""
    labels = {}
    for counter_id in range(min(count, len(section) // d.COUNTER_LABEL_LENGTH)):
        record = counter_id * d.COUNTER_LABEL_LENGTH
        length = struct.unpack_from("<i", section, record + d.COUNTER_LABEL_LENGTH_OFFSET)[0]
        if 0 < length <= d.COUNTER_LABEL_MAX_LENGTH:
            start = record + d.COUNTER_LABEL_OFFSET
            labels[counter_id] = bytes(section[start:start + length]).decode("utf-8", "replace")
    return labels


def _signed64(value: int) -> int:
    value &= d.MASK64
    return value - (1 << 64) if value >> 63 else value


class Connection:
    """The mappings and configuration of one connection; the layers of ``Client`` build on it."""

    # the caller's settings
    directory: str
    timeout: float
    copy_transport: bool
    pretouch: bool
    # the server's configuration (§2.2), read from its control file
    server_pid: int
    incarnation: int
    pool_file_name: str
    pool_data_bytes: int
    data_offset: int
    slot_table_offset: int
    slot_table_length: int
    segment_bytes: int
    alignment: int
    chunk_tokens: int
    lease_ns: int
    max_chunks: int
    max_inline_bytes: int
    request_capacity: int
    response_capacity: int
    max_clients: int
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int
    second_tier: bool
    no_reply: bool                              # the server takes FLAG_NO_REPLY (its minor is 1 or more, §6.2)
    _ticket_gauge: bool
    _offers_doorbell: bool
    pool_on_demand: bool                        # §2.2 FEATURE_POOL_ON_DEMAND: touch only the committed prefix
    # this connection
    session_id: int
    client_file: Optional[str]
    _closed: bool
    _control: Optional[mmap.mmap]
    _control_view: memoryview
    _ctl_i32: memoryview
    _ctl_i64: memoryview
    _counters: memoryview
    _counter_labels: Dict[int, str]             # {counter id: name} from the control file's labels (§2.3)
    _pool: Optional[mmap.mmap]
    _pool_view: Optional[memoryview]
    _slot_words: Optional[memoryview]
    _touched_bytes: int                         # bytes of the data region touched (all unless on demand)
    _file: Optional[mmap.mmap]
    _file_view: memoryview
    _file_fd: Optional[int]
    _header_i32: memoryview
    _header_i64: memoryview
    _request: Ring
    _response: Ring
    _doorbell: Optional[socket.socket] = None     # the server's doorbell connection (§2.6), or None
    _fence: threading.Lock
    _layouts: Dict[int, Layout]
    _tensors: Any                           # the tensor state (kvstash.pool_tensors.PoolTensors), made on first use

    def _init_connection(self, directory: Optional[str], timeout: float, copy_transport: bool,
                         pretouch: bool) -> None:
        self.directory = os.path.abspath(directory or default_directory())
        self.timeout = float(timeout)
        self.copy_transport = bool(copy_transport)
        self.pretouch = bool(pretouch)
        self._closed = False
        self._control = self._pool = self._file = None
        self._pool_view = self._slot_words = None
        self._touched_bytes = 0
        self._file_fd = None
        self._doorbell = None
        self._fence = threading.Lock()
        self._layouts = {}
        self._tensors = None
        self._counter_labels = {}
        self.client_file = None

    def alive(self) -> bool:
        """Whether the server looks alive (§2.5); the liveness layer answers."""
        raise NotImplementedError

    # ---------------------------------------------------------------------------------------- control file
    def _check_directory(self) -> None:
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

    def _open_control(self) -> None:
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
        labels = self._ctl_i32[d.CTL_LABELS_OFFSET_OFFSET >> 2]
        labels_length = self._ctl_i32[d.CTL_LABELS_LENGTH_OFFSET >> 2]
        if cfg + 512 > size or counters + counters_length > size or counters_length % 8 or labels < 0 or \
                labels_length < 0 or labels + labels_length > size:
            raise BadFilesError("%s: sections past the end of the file" % path)
        self._read_config(path, view, cfg, version)
        # §2.1: minors only add; from 3.1 on a COMMIT_RETRIEVE or RELEASE may go without an answer.
        self.no_reply = d.minor(version) >= d.NO_REPLY_MINOR
        self._counters = view[counters:counters + counters_length].cast("q")
        # Read once: the server writes them before its version and never again.
        with view[labels:labels + labels_length] as section:
            self._counter_labels = read_counter_labels(section, len(self._counters))
        if not self._alive_at_connect():
            raise ServerGoneError("the server on %s is not alive (state, heartbeat or pid)" % self.directory)

    def _alive_at_connect(self) -> bool:
        """The first liveness check (§2.5); the liveness layer answers."""
        raise NotImplementedError

    def _read_config(self, path: str, view: memoryview, cfg: int, version: int) -> None:
        """The configuration section (§2.2) at ``cfg`` of the control file."""
        name_length = struct.unpack_from("<i", view, cfg + d.CFG_POOL_FILE_NAME_LENGTH)[0]
        if not 0 < name_length <= d.CFG_POOL_FILE_NAME_MAX:
            raise BadFilesError("%s: pool file name length %d" % (path, name_length))
        self.pool_file_name = bytes(view[cfg + d.CFG_POOL_FILE_NAME:
                                         cfg + d.CFG_POOL_FILE_NAME + name_length]).decode("ascii")

        def q(rel: int) -> int:
            value: int = struct.unpack_from("<q", view, cfg + rel)[0]
            return value

        def i(rel: int) -> int:
            value: int = struct.unpack_from("<i", view, cfg + rel)[0]
            return value

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
        # §2.2 Features: a second tier that answers LOOKUPs waiting for it.
        self.second_tier = bool(i(d.CFG_FEATURES) & d.FEATURE_SECOND_TIER)
        # ... and keeps its highest completed ticket in a counter, which a waiting LOOKUP watches.
        self._ticket_gauge = self.second_tier and bool(i(d.CFG_FEATURES) & d.FEATURE_COMPLETED_TICKET)
        # §2.6: a server that sleeps when idle, woken by its doorbell.
        self._offers_doorbell = bool(i(d.CFG_FEATURES) & d.FEATURE_DOORBELL)
        # A pool committed as the store grows: past its committed prefix the file is sparse, and touching a page
        # there would allocate it (a full tmpfs then raises SIGBUS in this process).
        self.pool_on_demand = bool(i(d.CFG_FEATURES) & d.FEATURE_POOL_ON_DEMAND)

    # ---------------------------------------------------------------------------------------- pool
    def _open_pool(self) -> None:
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
            if self.pretouch and not self.pool_on_demand:
                flags |= getattr(mmap, "MAP_POPULATE", 0)      # page tables filled in the kernel, once
            self._pool = mmap.mmap(fd, size, flags, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)        # the mapping keeps the file; nothing is locked on the pool
        view = memoryview(self._pool)
        self._pool_view = view[self.data_offset:self.data_offset + self.pool_data_bytes]  # slot offsets: §3.2
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
        if self.pool_on_demand and self.pretouch:
            self._touched_bytes = 0
            self._touch_committed(self.pool_data_bytes)
        else:
            self._touched_bytes = self.pool_data_bytes       # all of it, or none wanted: never touched again

    def _touch_committed(self, end: int) -> None:
        """Maps the pool's committed prefix not mapped yet, up to ``end`` (§2.2 FEATURE_POOL_ON_DEMAND): pages the
        server already allocated, so nothing is allocated here. At connect the whole prefix; then, when a slot
        reaches past what was touched, a step past the slot's end, so the faults spread over the stores instead of
        landing on one store in a region."""
        committed = min(end, self.pool_data_bytes, self._counters[d.COUNTER_POOL_BYTES_COMMITTED])   # acquire
        if committed <= self._touched_bytes or self._pool is None:
            return
        start = (self.data_offset + self._touched_bytes) // mmap.PAGESIZE * mmap.PAGESIZE
        try:
            self._pool.madvise(_MADV_POPULATE_READ, start, self.data_offset + committed - start)   # Linux 5.14 on
        except (OSError, ValueError, AttributeError):
            view = self._pool_view
            assert view is not None
            sink = 0
            for offset in range(self._touched_bytes, committed, _FAULT_AROUND_BYTES):
                sink ^= view[offset]                                            # a read fault maps 64 KiB
        self._touched_bytes = committed

    # ---------------------------------------------------------------------------------------- client file
    def _create_client_file(self) -> None:
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
        h32 = self._header_i32 = view[:d.CLIENT_HEADER_LENGTH].cast("i")
        h64 = self._header_i64 = view[:d.CLIENT_HEADER_LENGTH].cast("q")
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

    def _attach_state(self) -> int:
        """The client file's Attach State (§4.2): an acquire load."""
        state: int = self._header_i32[d.CLI_ATTACH_STATE_OFFSET >> 2]
        return state

    def _await_attach(self) -> None:
        deadline = time.monotonic() + self.timeout
        pause = 0.0005
        while True:
            state = self._attach_state()
            if state == d.ATTACH_ATTACHED:
                self.session_id = self._header_i64[d.CLI_SESSION_ID_OFFSET >> 3] & d.MASK64
                return
            if state == d.ATTACH_REJECTED:
                reason = self._attach_reject_reason()
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

    def _attach_reject_reason(self) -> int:
        reason: int = self._header_i32[d.CLI_REJECT_REASON_OFFSET >> 2]
        return reason

    # ---------------------------------------------------------------------------------------- doorbell
    def _connect_doorbell(self) -> None:
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

    def _ring(self) -> None:
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

    def _close_doorbell(self) -> None:
        if self._doorbell is not None:
            self._doorbell.close()
            self._doorbell = None

    # ---------------------------------------------------------------------------------------- release
    def _release(self, delete_file: bool) -> None:
        """Lets go of everything: the doorbell, the tensor state, the lock, the rings, the views, the mappings;
        deletes the client file when ``delete_file`` (no server to reap it)."""
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
        for name in ("_request", "_response"):
            ring = getattr(self, name, None)
            if ring is not None:
                ring.release()
            setattr(self, name, None)
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
