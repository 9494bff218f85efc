"""Connection-level failures. Everything a request can answer is a Status, never an exception."""

import enum


class Reason(enum.Enum):
    SERVER_GONE = "server gone"
    SERVER_RESTARTED = "server restarted"
    DETACHED = "detached"
    REJECTED = "rejected"
    TIMEOUT = "timeout"
    BAD_FILES = "bad files"
    CLOSED = "closed"


class KvStashError(Exception):
    """A connection-level failure; ``reason`` says which. The connection is unusable afterwards
    (except TIMEOUT, after which the client may keep waiting or close)."""

    reason = None

    def __init__(self, message):
        super().__init__("%s: %s" % (self.reason.value, message))


class ServerGoneError(KvStashError):
    """No live server: control file missing, state CLOSED, heartbeat stale or pid gone, same incarnation."""
    reason = Reason.SERVER_GONE


class ServerRestartedError(KvStashError):
    """The server of this connection died and a new incarnation runs: reconnect from scratch."""
    reason = Reason.SERVER_RESTARTED


class DetachedError(KvStashError):
    """The server ended this client's session (attach state DETACHED)."""
    reason = Reason.DETACHED


class RejectedError(KvStashError):
    """The server refused the client file (attach state REJECTED); ``reject_reason`` is the code."""
    reason = Reason.REJECTED

    def __init__(self, message, reject_reason=0):
        super().__init__(message)
        self.reject_reason = reject_reason


class KvStashTimeoutError(KvStashError, TimeoutError):
    """No answer within the client's timeout while the server looked alive."""
    reason = Reason.TIMEOUT


class BadFilesError(KvStashError):
    """A file is not what the protocol says (bad magic, unknown major version, corrupt ring)."""
    reason = Reason.BAD_FILES


class ClosedError(KvStashError):
    """The client was closed, or broke earlier with another connection error."""
    reason = Reason.CLOSED
