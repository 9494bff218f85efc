"""Requests out and responses in over the client file's rings (docs/PROTOCOL.md §5, §7.6): publishing, waiting
with liveness checks, the stash of responses that arrived for other requests, and time bounds. The layer of
``Client`` above ``liveness``."""

import contextlib
import os
import time
from typing import Dict, Iterator, Optional, TypeVar, Union

from . import descriptor as d
from .errors import BadFilesError, KvStashTimeoutError
from .liveness import Liveness
from .response import Response
from .ring import Buffer, RingCorrupt
from .types import RequestType

LIVENESS_CHECK_INTERVAL_S = 0.1         # §2.5: check the server while waiting, every 100 ms
YIELD_PHASE_S = 0.0002                  # waiting for a response: poll + sched_yield this long, then sleep
SLEEP_MIN_S = 0.00005
SLEEP_MAX_S = 0.0002

_Self = TypeVar("_Self", bound="Transport")


class Transport(Liveness):
    """Publishes requests and waits for their responses."""

    deadline: Optional[float] = None        # time.monotonic() past which no wait goes on (see bounded())
    _stash: Dict[int, Response]
    _next_correlation: int

    def _init_transport(self) -> None:
        self._stash = {}
        self._next_correlation = 1

    def _send(self, msg_type: int, instance: int = 0, transfer: int = 0, salt: int = 0, flags: int = 0,
              key_mode: int = 0, body: bytes = b"", data: Optional[Buffer] = None) -> int:
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

    def _drain(self) -> int:
        """Moves every arrived response into the stash; returns how many."""
        n = 0
        while True:
            record = self._poll_record()
            if record is None:
                return n
            self._stash[record.correlation_id] = record
            n += 1

    def _poll_record(self) -> Optional[Response]:
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

    def _await(self, correlation: int, instance: int = 0) -> Response:
        """Waits for the response of ``correlation`` (§2.5: liveness checked every 100 ms)."""
        response = self._stash.pop(correlation, None)
        if response is None:
            response = self._wait_for(correlation)
        response.instance_id = instance
        return response

    def _wait_for(self, correlation: int) -> Response:
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

    def _deadline_from(self, start: float) -> float:
        """When a wait that starts at ``start`` gives up: ``timeout`` later, or at ``deadline`` if that is sooner."""
        end = start + self.timeout
        return end if self.deadline is None else min(end, self.deadline)

    @contextlib.contextmanager
    def bounded(self: _Self, seconds: float) -> Iterator[_Self]:
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

    def _call(self, msg_type: int, instance: int = 0, transfer: int = 0, salt: int = 0, flags: int = 0,
              key_mode: int = 0, body: bytes = b"", data: Optional[Buffer] = None) -> Response:
        """Sends one request and waits for its response: every request method goes through here."""
        correlation = self._send(msg_type, instance, transfer, salt, flags, key_mode, body, data)
        return self._await(correlation, instance)

    def send(self, msg_type: Union[RequestType, int], instance: int = 0, transfer: int = 0, salt: int = 0,
             flags: int = 0, key_mode: int = 0, body: bytes = b"", data: Optional[Buffer] = None) -> int:
        """Low level: publishes a raw request (payload = 40-byte header + body + data) and returns its
        correlation id without waiting. Pair with ``receive``."""
        return self._send(int(msg_type), instance, transfer, salt, flags, key_mode, body, data)

    def receive(self, correlation: int, instance: int = 0) -> Response:
        """Low level: waits for the response of a ``send``."""
        return self._await(correlation, instance)

    def send_raw(self, msg_type: int, payload: Buffer) -> None:
        """Test hook: publishes a record with an arbitrary payload (no header added); no correlation."""
        while not self._request.offer(msg_type, payload):
            self._drain()
            self.check_connection()
        self._ring()
