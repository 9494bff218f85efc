"""Is the server alive, and is the session still this client's (docs/PROTOCOL.md §2.5): heartbeat, state, pid,
incarnation and attach state. The layer of ``Client`` above ``connection``."""

import os
import struct
import time
from typing import NoReturn, Optional

from . import descriptor as d
from .connection import Connection
from .errors import ClosedError, DetachedError, KvStashError, ServerGoneError, ServerRestartedError


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _pid_exists(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Liveness(Connection):
    """Judges the server by its control file; remembers the error that ended the connection."""

    _broken: Optional[KvStashError] = None     # the connection error that ended this connection, or None
    _last_heartbeat: int
    _last_heartbeat_change_ns: int

    def alive(self) -> bool:
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

    def _alive_at_connect(self) -> bool:
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

    def _current_incarnation(self) -> Optional[int]:
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
        return int(incarnation)

    def check_connection(self) -> None:
        """Raises the connection error if the session ended or the server is gone or restarted."""
        if self._broken is not None:
            raise type(self._broken)(str(self._broken).split(": ", 1)[-1])
        if self._closed:
            raise ClosedError("the client is closed")
        if self._attach_state() == d.ATTACH_DETACHED:
            self._fail(DetachedError("the server ended this client's session"))
        if self.alive():
            return
        current = self._current_incarnation()
        if current is not None and current != self.incarnation:
            self._fail(ServerRestartedError(
                "the server restarted (incarnation %x, was %x): reconnect" % (current, self.incarnation)))
        self._fail(ServerGoneError("the server on %s is gone" % self.directory))

    def _fail(self, error: KvStashError) -> NoReturn:
        self._broken = error
        raise error
