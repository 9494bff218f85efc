"""Failures the client raises. Everything a request can answer is a Status, never an exception."""

import enum
from typing import FrozenSet, Optional


class Reason(enum.Enum):
    SERVER_GONE = "server gone"
    SERVER_RESTARTED = "server restarted"
    DETACHED = "detached"
    REJECTED = "rejected"
    TIMEOUT = "timeout"
    BAD_FILES = "bad files"
    CLOSED = "closed"
    CUDA_UNAVAILABLE = "cuda unavailable"


#: The reasons after which the connection still works: the caller may go on using it.
CONNECTION_KEPT: FrozenSet[Reason] = frozenset((Reason.TIMEOUT, Reason.CUDA_UNAVAILABLE))


class KvStashError(Exception):
    """A failure of the client; ``reason`` says which. After most the connection is unusable; after TIMEOUT the
    client may keep waiting or close, and after CUDA_UNAVAILABLE it works as before (``connection_lost`` tells)."""

    reason: Optional[Reason] = None

    def __init__(self, message: str) -> None:
        super().__init__("%s: %s" % (self.reason.value if self.reason is not None else "error", message))

    @property
    def connection_lost(self) -> bool:
        """Whether the connection is unusable after this error (every reason but TIMEOUT and CUDA_UNAVAILABLE)."""
        return self.reason not in CONNECTION_KEPT


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

    def __init__(self, message: str, reject_reason: int = 0) -> None:
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


class CudaUnavailableError(KvStashError, RuntimeError):
    """pin_pool() on a process where torch sees no CUDA device, or CUDA refused the registration. The connection
    is not affected: the tensor paths go on through pageable memory."""
    reason = Reason.CUDA_UNAVAILABLE
