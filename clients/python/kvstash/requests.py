"""The request methods of ``Client`` (docs/PROTOCOL.md §6, §7): one per request type, key ranges cut to the
server's limit, the LOOKUP that waits for the second tier, and the control file's counters. The top layer of
``Client``, above ``slots``."""

import os
import time
from typing import Any, Callable, Dict, List, Literal, Optional, overload

from . import descriptor as d
from .hashing import Salt, salt_value
from .keyrange import Keys, Piece, Tokens, key_range, pieces, range_chunks
from .response import Response, Transfer, transfer_id_of
from .ring import Buffer
from .slots import Slots
from .transport import SLEEP_MAX_S, SLEEP_MIN_S
from .types import Layout, RequestType


class Requests(Slots):
    """One method per request type."""

    # ---------------------------------------------------------------------------------------- key ranges
    def range_chunks(self, keys: Optional[Keys] = None, tokens: Optional[Tokens] = None, from_chunk: int = 0,
                     to_chunk: int = -1) -> int:
        """The number of chunks of a key range (§6.4), as the server will count it."""
        return range_chunks(self, keys, tokens, from_chunk, to_chunk)

    def range_pieces(self, keys: Optional[Keys] = None, tokens: Optional[Tokens] = None, from_chunk: int = 0,
                     to_chunk: int = -1) -> List[Piece]:
        """The key range cut into requests this server takes: ``[(first range index, keys, tokens, from, to)]``
        (one piece when it fits one request; see ``kvstash.keyrange.pieces``)."""
        return pieces(self, keys, tokens, from_chunk, to_chunk)

    # ---------------------------------------------------------------------------------------- requests
    def ping(self) -> Response:
        """PING: an OK answer from a live server."""
        return self._call(RequestType.PING)

    def register(self, instance: int, layout: Optional[Layout] = None, **fields: Any) -> Response:
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

    def unregister(self, instance: int) -> Response:
        """UNREGISTER ``instance``."""
        return self._call(RequestType.UNREGISTER, instance)

    def lookup(self, instance: int, keys: Optional[Keys] = None, *, tokens: Optional[Tokens] = None,
               from_chunk: int = 0, to_chunk: int = -1, salt: Salt = None, pin: bool = False,
               wait_tier_s: Optional[float] = None, quiet: bool = False) -> Response:
        """LOOKUP: Hit Chunks = readable prefix; with ``pin`` a transfer id pins it (0 when no hit). A range
        over the server's Max Chunks Per Request goes as several LOOKUPs (not with ``pin``: one transfer
        pins at most that many chunks), counted together up to the first miss. With ``quiet`` (QUIET) the
        answer is the same but the keys do not count as referenced again in the server's eviction policy: for
        asking again about a request already asked about.

        ``wait_tier_s`` (seconds) waits, up to that bound, for the second tier's read-through the LOOKUP starts
        when its hit prefix stops short (§11): the LOOKUP goes with L2_WAIT; then, after short pauses, the
        client reads the server's completed ticket from the control file (or, from a server without that
        counter, asks the LOOKUP again with L2_POLL) until the read-through is over, every chunk hits, or the
        bound is spent; the last answer is returned (asked once more, with L2_POLL, after watching the counter).
        With ``pin`` only that answer's lease is held (a first answer that must wait is released, the polls pin
        nothing, one last LOOKUP pins). Without a tier on the server (``second_tier``), or with None, it is the
        plain LOOKUP."""
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

    def _lookup_waiting(self, instance: int, parts: List[Piece], salt: int, pin: bool, deadline: float,
                        quiet: bool) -> Response:
        """The pieces of a LOOKUP waiting for the tier, each up to the shared deadline, to the first miss."""
        hits = 0
        response: Optional[Response] = None
        for _, piece_keys, piece_tokens, piece_from, piece_to in parts:
            mode, body = key_range(piece_keys, piece_tokens, piece_from, piece_to)
            count = range_chunks(self, piece_keys, piece_tokens, piece_from, piece_to)
            response = self._lookup_piece_waiting(instance, salt, pin, mode, body, count, deadline, quiet)
            if not response.ok:
                return response
            hits += response.hit_chunks
            if response.hit_chunks < count:
                break
        assert response is not None, "a key range has at least one piece"
        response.hit_chunks = hits
        return response

    def _lookup_piece_waiting(self, instance: int, salt: int, pin: bool, mode: int, body: bytes, count: int,
                              deadline: float, quiet: bool) -> Response:
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

    def _in_pieces(self, parts: List[Piece], ask: Callable[[int, bytes], Response]) -> Response:
        """Asks each piece in turn while every chunk before it hit; one Response with the total hits."""
        hits = 0
        response: Optional[Response] = None
        for _, piece_keys, piece_tokens, piece_from, piece_to in parts:
            response = ask(*key_range(piece_keys, piece_tokens, piece_from, piece_to))
            if not response.ok:
                return response
            hits += response.hit_chunks
            if response.hit_chunks < range_chunks(self, piece_keys, piece_tokens, piece_from, piece_to):
                break
        assert response is not None, "a key range has at least one piece"
        response.hit_chunks = hits
        return response

    def lookup_all_ranks(self, model: str, world_size: int, keys: Optional[Keys] = None, *,
                         tokens: Optional[Tokens] = None, from_chunk: int = 0, to_chunk: int = -1, salt: Salt = None,
                         quiet: bool = False) -> Response:
        """LOOKUP_ALL_RANKS: the prefix readable for every rank of ``world_size``; pins nothing. ``quiet`` as for
        ``lookup``: asked again, the keys do not count as referenced again (for each rank)."""
        m = model.encode("utf-8")
        prefix = d.ALL_RANKS_HEADER.pack(world_size, len(m)) + m + bytes(d.pad8(len(m)) - len(m))
        flags = d.FLAG_QUIET if quiet else 0
        return self._in_pieces(pieces(self, keys, tokens, from_chunk, to_chunk), lambda mode, keys_body: self._call(
            RequestType.LOOKUP_ALL_RANKS, 0, salt=salt_value(salt), flags=flags, key_mode=mode,
            body=prefix + keys_body))

    @overload
    def release(self, instance: int, transfer: Transfer, *, reply: Literal[True] = ...) -> Response: ...

    @overload
    def release(self, instance: int, transfer: Transfer, *, reply: bool = ...) -> Optional[Response]: ...

    def release(self, instance: int, transfer: Transfer, *, reply: bool = True) -> Optional[Response]:
        """RELEASE the pins of a LOOKUP's transfer. With ``reply=False`` it goes without an answer, as
        ``commit_retrieve(..., reply=False)`` does, and returns None."""
        return self._unanswered_or(RequestType.RELEASE, instance, transfer, reply)

    def prepare_store(self, instance: int, keys: Optional[Keys] = None, *, tokens: Optional[Tokens] = None,
                      from_chunk: int = 0, to_chunk: int = -1, salt: Salt = None) -> Response:
        """PREPARE_STORE: transfer id and one slot per reserved chunk; transfer id 0 = nothing to store."""
        mode, body = key_range(keys, tokens, from_chunk, to_chunk)
        sent_ns = time.monotonic_ns()
        response = self._call(RequestType.PREPARE_STORE, instance, salt=salt_value(salt), key_mode=mode, body=body)
        if response.transfer_id:
            response.deadline_ns = sent_ns + self.lease_ns      # the reservation ends no earlier (§3.3)
        return response

    def commit_store(self, instance: int, transfer: Transfer) -> Response:
        """COMMIT_STORE: the written chunks become readable."""
        return self._call(RequestType.COMMIT_STORE, instance, transfer_id_of(transfer))

    def abort_store(self, instance: int, transfer: Transfer) -> Response:
        """ABORT_STORE: the reserved slots are freed, nothing is published."""
        return self._call(RequestType.ABORT_STORE, instance, transfer_id_of(transfer))

    def prepare_retrieve(self, instance: int, keys: Optional[Keys] = None, *, tokens: Optional[Tokens] = None,
                         from_chunk: int = 0, to_chunk: int = -1, salt: Salt = None,
                         lookup: Optional[Transfer] = None, prefix: bool = False) -> Response:
        """PREPARE_RETRIEVE by keys (all or nothing: MISS pins nothing), or with ``lookup`` = a pinned
        LOOKUP's transfer id (or its Response) to take over its pins under a new transfer id.

        With ``prefix`` (PREFIX, by keys or tokens only) the readable leading chunks of the range are pinned
        instead: chunk 0 up to the first chunk that is absent or not readable, one slot each (range indices
        0..k-1; ``len(response.slots)`` may be less than the range). MISS, pinning nothing, only when chunk 0 is
        not readable."""
        if lookup is not None:
            if prefix:
                raise ValueError("prefix retrieves a key range; a lookup's transfer is taken over whole")
            return self._call(RequestType.PREPARE_RETRIEVE, instance, transfer_id_of(lookup),
                              flags=d.FLAG_FROM_LOOKUP)
        mode, body = key_range(keys, tokens, from_chunk, to_chunk)
        return self._call(RequestType.PREPARE_RETRIEVE, instance, salt=salt_value(salt),
                          flags=d.FLAG_PREFIX if prefix else 0, key_mode=mode, body=body)

    @overload
    def commit_retrieve(self, instance: int, transfer: Transfer, *, reply: Literal[True] = ...) -> Response: ...

    @overload
    def commit_retrieve(self, instance: int, transfer: Transfer, *, reply: bool = ...) -> Optional[Response]: ...

    def commit_retrieve(self, instance: int, transfer: Transfer, *, reply: bool = True) -> Optional[Response]:
        """COMMIT_RETRIEVE: the pins of the retrieve are let go. Returns the answer (OK, UNKNOWN_TRANSFER, ...).

        With ``reply=False`` the request goes with NO_REPLY (§6.2) and the call returns None as soon as it is in the
        request ring: the server releases the pins when it gets to it and answers nothing (a failure is counted in
        its ``no_reply_failures``), so the retrieve waits for one answer, its PREPARE_RETRIEVE's. Send it only after
        every chunk was copied out and checked (``read_chunk``, ``is_still_readable``). A server older than 3.1
        (``no_reply`` False) does not take the flag: the commit is then answered and awaited as before."""
        return self._unanswered_or(RequestType.COMMIT_RETRIEVE, instance, transfer, reply)

    def _unanswered_or(self, msg_type: int, instance: int, transfer: Transfer, reply: bool) -> Optional[Response]:
        """The request answered (``reply``), or sent with NO_REPLY and not waited for (None)."""
        if reply:
            return self._call(msg_type, instance, transfer_id_of(transfer))
        if self.no_reply:
            self._send(msg_type, instance, transfer_id_of(transfer), flags=d.FLAG_NO_REPLY)
        else:
            self._call(msg_type, instance, transfer_id_of(transfer))
        return None

    def clear(self, force: bool = False) -> Response:
        """CLEAR the store (``force``: also what is pinned or being written)."""
        return self._call(RequestType.CLEAR, flags=d.FLAG_FORCE if force else 0)

    def stats(self) -> Response:
        """STATS: ``response.counters`` holds every counter, in id order."""
        return self._call(RequestType.STATS)

    def write_data(self, instance: int, transfer: Transfer, slot_index: int, offset: int, data: Buffer) -> Response:
        """One WRITE_DATA message (copy transport): ``data`` (<= max_inline_bytes) at ``offset`` of the
        chunk of entry ``slot_index`` of the store's slot list."""
        body = d.DATA_BODY.pack(slot_index, len(data), offset)
        return self._call(RequestType.WRITE_DATA, instance, transfer_id_of(transfer), body=body, data=data)

    def read_data(self, instance: int, transfer: Transfer, slot_index: int, offset: int, length: int) -> Response:
        """One READ_DATA message (copy transport): the bytes come back in ``response.extra``."""
        body = d.DATA_BODY.pack(slot_index, length, offset)
        return self._call(RequestType.READ_DATA, instance, transfer_id_of(transfer), body=body)

    # ---------------------------------------------------------------------------------------- counters
    def counter(self, counter_id: int) -> int:
        """One counter straight from the control file (§2.3), without asking the server."""
        value: int = self._counters[counter_id]                            # aligned 8-byte load
        return value

    def counters(self) -> Dict[str, int]:
        """Every named counter from the control file: {name: value}, request counters included, by the names the
        server wrote into the file's labels section (§2.3), read once at connect."""
        return {name: self._counters[cid] for cid, name in self._counter_labels.items()}
