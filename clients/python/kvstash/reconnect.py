"""A kvstash client that outlives its server, for the engine integrations (vLLM connector, SGLang backend).

Every call on it is bounded by the client's timeout; a lost server is left alone for ``reconnect_s`` and then
tried again, so an engine asks at most that often while the server is away, and ``on_connect`` (a REGISTER)
runs on every new connection. An error that ends the connection (``KvStashError.connection_lost``) and a timeout
drop the client; one that leaves the connection working and the server answering (``CudaUnavailableError``) keeps it
in use. Not thread-safe (hold a lock around it where several threads use it).
"""

import logging
import time
from typing import Callable, Optional

from .client import Client, connect
from .errors import KvStashError, KvStashTimeoutError

REFUSED_RETRY_S = 30.0                  # the server refused what on_connect asked (a layout): asked again this rarely


class Refused(RuntimeError):
    """Raised by an ``on_connect`` callback when the server refuses it (a REGISTER's layout): not a lost
    server, so it is asked again only every ``REFUSED_RETRY_S`` and logged as an error."""


class Reconnecting:
    """Holds one connected client, or none while the server is unavailable (see the module doc).

    ``logger`` gets one line per new kind of failure (``meanwhile`` says what the engine does without the
    server, e.g. "recomputing until it is back") and one when the connection is back."""

    def __init__(self, directory: Optional[str], timeout_s: float, reconnect_s: float, logger: logging.Logger,
                 meanwhile: str, on_connect: Optional[Callable[[Client], object]] = None,
                 copy_transport: bool = False, refused_retry_s: float = REFUSED_RETRY_S) -> None:
        self.directory = directory
        self.timeout_s = timeout_s
        self.reconnect_s = reconnect_s
        self.logger = logger
        self.meanwhile = meanwhile
        self.on_connect = on_connect
        self.copy_transport = copy_transport
        self.refused_retry_s = refused_retry_s
        self.client: Optional[Client] = None
        self.next_try = 0.0
        self.failures = 0
        self.reconnects = 0
        self.last_error = ""

    def get(self, bound_s: Optional[float] = None) -> Optional[Client]:
        """The connected client, or None while the server is unavailable (not tried again before its time).
        ``bound_s``: at most this long for a new connection (what is left of a caller's own bound); none is tried
        when it is 0 or less."""
        if self.client is not None:
            return self.client
        if time.monotonic() < self.next_try:
            return None
        timeout = self.timeout_s if bound_s is None else min(self.timeout_s, bound_s)
        if timeout <= 0:
            return None
        client: Optional[Client] = None
        try:
            client = connect(self.directory, timeout=timeout, copy_transport=self.copy_transport)
            if self.on_connect is not None:
                self.on_connect(client)
            client.timeout = self.timeout_s         # the bound was this attempt's; later calls have their own
        except (KvStashError, OSError, RuntimeError, ValueError) as ex:
            if client is not None:
                close_quietly(client)
            self._failed(ex)
            return None
        if self.failures:
            self.reconnects += 1
            self.logger.info("kvstash: connected again to %s", self.directory)
        self.failures = 0
        self.last_error = ""
        self.client = client
        return client

    def failed(self, ex: KvStashError) -> None:
        """A call on the client raised the KvStashError ``ex``. One that ends the connection (``connection_lost``:
        the server gone, restarted, or this client detached) drops the client, and get() connects again after
        ``reconnect_s``. So does a timeout, though the client could go on: the call given up on may hold slots on
        the server (a reservation, pins) that nothing but the end of its lease or of the connection frees, and a
        server that does not answer is left alone as long either way. Any other error (``CudaUnavailableError``)
        keeps the connection in use; it is logged."""
        if ex.connection_lost or isinstance(ex, KvStashTimeoutError):
            if self.client is not None:
                close_quietly(self.client)
                self.client = None
            self._failed(ex)
        else:
            self.logger.warning("kvstash: %s: %s; the connection to %s is kept", type(ex).__name__, ex,
                                self.directory)

    def resting(self) -> bool:
        """Whether get() answers None now: the server is being left alone after a failure until ``reconnect_s``
        has passed."""
        return self.client is None and time.monotonic() < self.next_try

    def retry_now(self) -> None:
        """Drops the client and lets the next get() connect at once (e.g. to register a new layout)."""
        self.close()
        self.next_try = 0.0

    def close(self) -> None:
        """Closes the client, if one is held."""
        if self.client is not None:
            close_quietly(self.client)
            self.client = None

    def _failed(self, ex: BaseException) -> None:
        self.failures += 1
        text = "%s: %s" % (type(ex).__name__, ex)
        if isinstance(ex, Refused):
            self.next_try = time.monotonic() + max(self.reconnect_s, self.refused_retry_s)
            if text != self.last_error:
                self.logger.error("kvstash: %s refused this engine (%s); %s, asking again every %.0f s",
                                  self.directory, ex, self.meanwhile, max(self.reconnect_s, self.refused_retry_s))
        else:
            self.next_try = time.monotonic() + self.reconnect_s
            if text != self.last_error:
                self.logger.warning("kvstash: %s unavailable (%s); %s until it is back", self.directory, text,
                                    self.meanwhile)
        self.last_error = text


def close_quietly(client: Client) -> None:
    """Closes a client whose server may be gone: never raises into the engine."""
    try:
        client.close()
    except Exception:                       # the server is gone: closing must not raise into the engine
        pass
