"""Chunks in and out of slots (docs/PROTOCOL.md §3.3): fenced copies into the mapped pool, views of slots, and the
copy transport's WRITE_DATA / READ_DATA messages when the pool is not mapped. The layer of ``Client`` above
``transport``."""

import mmap
from types import ModuleType
from typing import Any, List, Optional, Tuple, Union

from . import descriptor as d
from .response import Response
from .ring import Buffer
from .transport import Transport
from .types import Layout, RequestType, SlotEntry, Status, StatusCode

READ_WINDOW_DEFAULT = 8                 # READ_DATA requests in flight during a copy-transport read
_TOUCH_STEP_BYTES = 1 << 20             # on-demand pool: touched past a slot that reaches untouched pages

_STRUCT_FORMATS = {"<f4": "f", "<f2": "e", "<u2": "H", "u1": "B", "i1": "b"}


def _numpy() -> Optional[ModuleType]:
    """numpy, imported on first use (``import kvstash`` does not import it), or None when it is not installed."""
    try:
        import numpy
    except ImportError:                     # pragma: no cover - depends on the machine
        return None
    module: ModuleType = numpy
    return module


class Slots(Transport):
    """Slot views, fencing checks and chunk copies."""

    @property
    def pool_buffer(self) -> Union[mmap.mmap, memoryview, None]:
        """The pool's data region, a writable buffer that slot entries' offsets index (§3.2), or None for a
        copy-transport client. For code that moves slots itself (kvstash's tensor calls); what it makes over the
        buffer must be dropped before ``close()`` (the mapping goes with the last view of it)."""
        return self._pool_view

    def layout_of(self, response: Response) -> Layout:
        """The ``Layout`` this client registered for the instance of ``response``; KeyError if it did not."""
        layout = self._layouts.get(response.instance_id & d.MASK64)
        if layout is None:
            raise KeyError("instance %d was not registered by this client" % response.instance_id)
        return layout

    def _mapped_pool(self) -> memoryview:
        if self._pool_view is None:
            raise RuntimeError("copy-transport client: the pool is not mapped (use write_chunk/read_chunk)")
        return self._pool_view

    def _slot_word(self, entry: SlotEntry) -> int:
        """Acquire load of the slot word of a slot entry (§3.3): word offset // alignment, whatever the slot
        size."""
        assert self._slot_words is not None
        word: int = self._slot_words[entry.offset // self.alignment]
        return word

    def is_still_reserved(self, response: Response, i: int) -> bool:
        """Fencing before a write (§3.3): slot ``i`` of a PREPARE_STORE answer is RESERVED under its
        generation. A copy-transport client always gets True (the server checks)."""
        if self._pool is None:
            return True
        entry = response.slots[i]
        word = self._slot_word(entry)
        return word & 0xFF == d.SLOT_RESERVED and word >> 32 == entry.generation

    def is_still_readable(self, response: Response, i: int) -> bool:
        """Fencing after a read (§3.3): slot ``i`` of a PREPARE_RETRIEVE answer is READABLE under its
        generation, so the bytes just read are good."""
        if self._pool is None:
            return True
        entry = response.slots[i]
        word = self._slot_word(entry)
        return word & 0xFF == d.SLOT_READABLE and word >> 32 == entry.generation

    def slot_view(self, response: Response, i: int, shaped: bool = False) -> memoryview:
        """A memoryview of the chunk of slot ``i`` straight in the mapped pool (``Chunk Bytes`` bytes).
        With ``shaped`` it is cast to the instance layout's shape and format (bfloat16 and fp8 as raw
        'H'/'B'). Release the view (or drop it) before ``close()``."""
        pool = self._mapped_pool()
        entry = response.slots[i]
        if entry.offset + response.chunk_bytes > self._touched_bytes:
            self._touch_committed(entry.offset + response.chunk_bytes + _TOUCH_STEP_BYTES)
        view = pool[entry.offset:entry.offset + response.chunk_bytes]
        if not shaped:
            return view
        layout = self.layout_of(response)
        shaped_view: memoryview = view.cast(_STRUCT_FORMATS[layout.dtype.numpy_dtype],  # type: ignore[call-overload]
                                            layout.shape(self.chunk_tokens))
        return shaped_view

    def slot_array(self, response: Response, i: int) -> Any:
        """A numpy.ndarray view of slot ``i`` with the layout's shape and dtype (requires numpy)."""
        np = _numpy()
        if np is None:
            raise ImportError("numpy is not installed: use slot_view()")
        layout = self.layout_of(response)
        return np.frombuffer(self.slot_view(response, i), dtype=layout.dtype.numpy_dtype).reshape(
            layout.shape(self.chunk_tokens))

    def slot(self, response: Response, i: int) -> Any:
        """Slot ``i`` as a numpy.ndarray view when numpy is importable, else as a flat memoryview."""
        return self.slot_array(response, i) if _numpy() is not None else self.slot_view(response, i)

    def write_chunk(self, response: Response, i: int, data: Buffer) -> StatusCode:
        """Writes chunk ``data`` (bytes-like, at most ``Chunk Bytes``) for slot ``i`` of a PREPARE_STORE
        answer: fenced copy into the pool, or WRITE_DATA messages with the copy transport.
        Returns Status.OK, or UNKNOWN_TRANSFER when the reservation has ended (nothing written)."""
        view = data if isinstance(data, memoryview) and data.format == "B" else memoryview(data).cast("B")
        if len(view) > response.chunk_bytes:
            raise ValueError("%d bytes for a %d-byte chunk" % (len(view), response.chunk_bytes))
        if self._pool is None:
            return self._write_copy(response, i, view)
        if not self.is_still_reserved(response, i):
            return Status.UNKNOWN_TRANSFER
        offset = response.slots[i].offset
        if offset + len(view) > self._touched_bytes:
            self._touch_committed(offset + len(view) + _TOUCH_STEP_BYTES)
        self._mapped_pool()[offset:offset + len(view)] = view
        return Status.OK

    def read_chunk_into(self, response: Response, i: int, out: Buffer) -> StatusCode:
        """Reads the chunk of slot ``i`` of a PREPARE_RETRIEVE answer into ``out`` (writable, at least
        ``Chunk Bytes``), then checks the slot word. Returns Status.OK when the bytes are good, else
        UNKNOWN_TRANSFER (treat the chunk as a miss) or the failing READ_DATA's status."""
        target = memoryview(out).cast("B")
        n = response.chunk_bytes
        if self._pool is None:
            return self._read_copy(response, i, target[:n])
        offset = response.slots[i].offset
        target[:n] = self._mapped_pool()[offset:offset + n]
        return Status.OK if self.is_still_readable(response, i) else Status.UNKNOWN_TRANSFER

    def read_chunk(self, response: Response, i: int) -> Optional[bytearray]:
        """The chunk of slot ``i`` as a bytearray, or None when it could not be read intact."""
        out = bytearray(response.chunk_bytes)
        return out if self.read_chunk_into(response, i, out) == Status.OK else None

    # ---------------------------------------------------------------------------------------- copy transport
    def _write_copy(self, response: Response, i: int, data: memoryview) -> StatusCode:
        step = self.max_inline_bytes
        pending = []
        status: StatusCode = Status.OK
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

    def _read_copy(self, response: Response, i: int, out: memoryview, window: int = READ_WINDOW_DEFAULT) -> StatusCode:
        step = self.max_inline_bytes
        offsets = list(range(0, len(out), step))
        in_flight: List[Tuple[int, int, int]] = []
        status: StatusCode = Status.OK
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
