"""Bulk tensor stores and retrieves (``TensorTransfer``): PREPARE, the copies, COMMIT or ABORT, over key ranges
cut to the server's limit. They use the client through ``kvstash.seam.TensorClient`` only."""

import time
from typing import Callable, Iterable, List, Optional, Tuple

from .hashing import Salt
from .keyrange import Keys, Tokens
from .response import Response, Transfer
from .seam import TensorClient
from .types import Status, StatusCode
class TensorTransfer:
    """Outcome of a bulk tensor store or retrieve.

    ``status``: OK, or the status of the request that failed (NO_SPACE, MISS, UNKNOWN_TRANSFER, ...).
    ``done``: range indices moved and good (stored and committed; read and verified). ``failed``: range
    indices whose slot failed its fencing check (a store's reservation ended; a retrieve's slot was
    reclaimed): never committed or trusted, recompute them. ``present``: range indices a store skipped
    because they were already stored. ``missing``: range indices a prefix retrieve did not read because the
    readable prefix ended before them (a chunk absent or not readable), from there to the end of the range;
    recompute them (every index when its status is MISS; always empty without ``prefix``). ``prepare``: the
    (first) PREPARE response; ``transfer_id`` its transfer; ``parts``: one TensorTransfer per request when a
    range over the server's limit was split.
    """

    __slots__ = ("status", "prepare", "done", "failed", "present", "missing", "bytes", "seconds", "message",
                 "parts")

    def __init__(self, status: StatusCode, prepare: Optional[Response] = None, done: Iterable[int] = (),
                 failed: Iterable[int] = (), present: Iterable[int] = (), nbytes: int = 0, seconds: float = 0.0,
                 message: str = "", missing: Iterable[int] = ()) -> None:
        self.status = status
        self.prepare = prepare
        self.done = list(done)
        self.failed = list(failed)
        self.present = list(present)
        self.missing = list(missing)
        self.bytes = nbytes
        self.seconds = seconds
        self.message = message
        self.parts = [self]

    @property
    def ok(self) -> bool:
        """Every chunk of the range is stored (or was already) / was read intact (none missing)."""
        return self.status == Status.OK and not self.failed and not self.missing

    @property
    def status_name(self) -> str:
        """The status's name, or its number where this client does not know the code."""
        return self.status.name if isinstance(self.status, Status) else str(self.status)

    @property
    def transfer_id(self) -> int:
        """The transfer of the (first) PREPARE, or 0."""
        return self.prepare.transfer_id if self.prepare is not None else 0

    @property
    def gbps(self) -> float:
        """GB/s of the chunks moved."""
        return self.bytes / self.seconds / 1e9 if self.seconds else 0.0

    def __repr__(self) -> str:
        status = self.status_name
        return "TensorTransfer(%s done=%d failed=%s present=%d%s bytes=%d %.3f s%s)" % (
            status, len(self.done), self.failed, len(self.present), _missing_repr(self.missing), self.bytes,
            self.seconds, (" %r" % self.message) if self.message else "")


def _missing_repr(missing: List[int]) -> str:
    """`` missing=...`` for a repr: nothing when none, the indices when few, else the first and the count."""
    if not missing:
        return ""
    if len(missing) <= 8:
        return " missing=%s" % missing
    return " missing=%d (%d..%d)" % (len(missing), missing[0], missing[-1])


def store(client: TensorClient, instance: int, write: Callable[[Response, int], List[StatusCode]],
          keys: Optional[Keys] = None, tokens: Optional[Tokens] = None, from_chunk: int = 0, to_chunk: int = -1,
          salt: Salt = None) -> TensorTransfer:
    """PREPARE_STORE, ``write(prepare, first) -> [Status per slot]``, then COMMIT_STORE when every slot was
    written under its reservation, else ABORT_STORE; a failure of ``write`` aborts and re-raises. A range
    over the server's limit goes as several stores (``first`` = the piece's first range index), stopping at
    the first that fails (later chunks would be unreachable behind it), reported together."""
    parts = client.range_pieces(keys, tokens, from_chunk, to_chunk)
    results: List[Tuple[int, TensorTransfer]] = []
    for first, part_keys, part_tokens, part_from, part_to in parts:
        result = _store_piece(client, instance, _piece_writer(write, first), part_keys, part_tokens, part_from,
                              part_to, salt)
        results.append((first, result))
        if result.status != Status.OK or result.failed:
            break
    return _merged(results)


def _piece_writer(write: Callable[[Response, int], List[StatusCode]],
                  first: int) -> Callable[[Response], List[StatusCode]]:
    """``write`` for the piece whose first range index is ``first``."""
    return lambda prepare: write(prepare, first)


def _store_piece(client: TensorClient, instance: int, write: Callable[[Response], List[StatusCode]],
                 keys: Optional[Keys], tokens: Optional[Tokens], from_chunk: int, to_chunk: int,
                 salt: Salt) -> TensorTransfer:
    start = time.perf_counter()
    prepare = client.prepare_store(instance, keys, tokens=tokens, from_chunk=from_chunk, to_chunk=to_chunk,
                                   salt=salt)
    if not prepare.ok:
        return TensorTransfer(prepare.status, prepare, message=prepare.message,
                              seconds=time.perf_counter() - start)
    reserved = {entry.range_index for entry in prepare.slots}
    present = [r for r in range(client.range_chunks(keys, tokens, from_chunk, to_chunk)) if r not in reserved]
    if not prepare.transfer_id:                                     # every chunk already stored
        return TensorTransfer(Status.OK, prepare, present=present, seconds=time.perf_counter() - start)
    try:
        statuses = write(prepare)
    except BaseException:
        client.abort_store(instance, prepare)
        raise
    written = [prepare.slots[i].range_index for i, s in enumerate(statuses) if s == Status.OK]
    fenced = [prepare.slots[i].range_index for i, s in enumerate(statuses) if s != Status.OK]
    if fenced:                              # the reservation ended: nothing of it may be published
        client.abort_store(instance, prepare)
        return TensorTransfer(Status.UNKNOWN_TRANSFER, prepare, failed=sorted(written + fenced), present=present,
                              seconds=time.perf_counter() - start,
                              message="the store's reservation ended before its chunks were written")
    commit = client.commit_store(instance, prepare)
    seconds = time.perf_counter() - start
    if not commit.ok:
        return TensorTransfer(commit.status, prepare, failed=written, present=present, seconds=seconds,
                              message=commit.message)
    return TensorTransfer(Status.OK, prepare, done=written, present=present,
                          nbytes=len(written) * prepare.chunk_bytes, seconds=seconds)


def retrieve(client: TensorClient, instance: int, read: Callable[[Response, int], List[StatusCode]],
             keys: Optional[Keys] = None, tokens: Optional[Tokens] = None, from_chunk: int = 0, to_chunk: int = -1,
             salt: Salt = None, lookup: Optional[Transfer] = None, prefix: bool = False,
             reply: bool = False) -> TensorTransfer:
    """PREPARE_RETRIEVE (by keys, tokens or a pinned lookup), ``read(prepare, first) -> [Status per slot]``,
    COMMIT_RETRIEVE. All or nothing: MISS reads nothing and leaves no pin, also when a range over the
    server's limit goes as several retrieves (every piece is prepared, and pinned, before any is read).

    ``read`` has copied every chunk and checked its slot word when it returns, so the COMMIT_RETRIEVE goes
    without an answer (NO_REPLY, on a server that takes it): the call waits for one answer per piece, its
    PREPARE_RETRIEVE's. With ``reply`` it waits for the commit's answer too, and a failed commit
    (UNKNOWN_TRANSFER: the lease ran out while the chunks were read) is the result's status; the chunks'
    own checks decide ``done`` and ``failed`` either way.

    With ``prefix`` (keys or tokens only) the readable leading chunks are read instead: each piece is prepared
    with PREFIX in turn; a piece answered with fewer slots than its chunks, or a MISS on a piece after the
    first, ends the prefix there (later pieces are not prepared), and the range indices from there on are the
    result's ``missing``. A MISS on the first piece is the MISS of the whole call (no pin left held)."""
    if prefix and lookup is not None:
        raise ValueError("prefix retrieves a key range; a lookup's transfer is taken over whole")
    start = time.perf_counter()
    parts = [(0, None, None, 0, -1)] if lookup is not None else client.range_pieces(keys, tokens, from_chunk, to_chunk)
    total = client.range_chunks(keys, tokens, from_chunk, to_chunk) if prefix else 0
    prepared: List[Tuple[int, Response]] = []
    end = None                                                      # where the readable prefix ended
    for first, part_keys, part_tokens, part_from, part_to in parts:
        prepare = client.prepare_retrieve(instance, part_keys, tokens=part_tokens, from_chunk=part_from,
                                          to_chunk=part_to, salt=salt, lookup=lookup, prefix=prefix)
        if prefix and prepare.status == Status.MISS and prepared:
            end = first                                             # the prefix ended with the piece before
            break
        if not prepare.ok:
            for _, held in prepared:                                # no pin is left held
                client.commit_retrieve(instance, held, reply=False)
            missing = range(total) if prefix and prepare.status == Status.MISS else ()
            return TensorTransfer(prepare.status, prepare, message=prepare.message, missing=missing,
                                  seconds=time.perf_counter() - start)
        prepared.append((first, prepare))
        if prefix and len(prepare.slots) < client.range_chunks(part_keys, part_tokens, part_from, part_to):
            end = first + len(prepare.slots)
            break
    results: List[Tuple[int, TensorTransfer]] = []
    for first, prepare in prepared:
        piece_start = time.perf_counter()
        statuses = None
        try:
            statuses = read(prepare, first)
        finally:
            # After the read and its checks: a commit without an answer is safe (the bytes are already judged).
            commit = client.commit_retrieve(instance, prepare, reply=reply and statuses is not None)
            if statuses is None:                                    # read raised: release the rest as well
                for _, held in prepared[len(results) + 1:]:
                    client.commit_retrieve(instance, held, reply=False)
        good = [prepare.slots[i].range_index for i, s in enumerate(statuses) if s == Status.OK]
        bad = [prepare.slots[i].range_index for i, s in enumerate(statuses) if s != Status.OK]
        status = commit.status if commit is not None and not commit.ok else Status.OK
        results.append((first, TensorTransfer(status, prepare, done=good, failed=bad,
                                              nbytes=len(good) * prepare.chunk_bytes,
                                              seconds=time.perf_counter() - piece_start,
                                              message=commit.message if commit is not None else "")))
    merged = _merged(results)
    merged.seconds = time.perf_counter() - start
    if end is not None:
        merged.missing = list(range(end, total))
    return merged


def _merged(results: List[Tuple[int, TensorTransfer]]) -> TensorTransfer:
    """One TensorTransfer of the pieces ``[(first range index, TensorTransfer)]``: range indices of the whole
    range, the first failed status, every piece in ``parts``."""
    if len(results) == 1:
        results[0][1].parts = [results[0][1]]
        return results[0][1]
    status: StatusCode = Status.OK
    message = ""
    for _, r in results:
        if r.status != Status.OK:
            status, message = r.status, r.message
            break
    merged = TensorTransfer(status, results[0][1].prepare,
                            done=[first + i for first, r in results for i in r.done],
                            failed=[first + i for first, r in results for i in r.failed],
                            present=[first + i for first, r in results for i in r.present],
                            nbytes=sum(r.bytes for _, r in results), seconds=sum(r.seconds for _, r in results),
                            message=message)
    merged.parts = [r for _, r in results]
    return merged
