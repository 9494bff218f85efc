"""Single-producer single-consumer rings of a client file (docs/PROTOCOL.md §5).

Memory ordering: why plain Python stores and loads are enough here, and where they are not.

* Every shared word (record Length, ring Tail and Head, and elsewhere the attach state, closing flag,
  version, heartbeat, slot words and counters) is read and written through a ``memoryview.cast('i')`` or
  ``cast('q')`` view of the mapping. CPython stores or loads a single item of such a view with one
  fixed-size ``memcpy`` of 4 or 8 bytes, which the C compiler emits as one ``mov``. Every such word sits
  at an offset that is a multiple of its size in a page-aligned mapping, so the access is aligned and
  therefore single-copy atomic on x86-64: the other process never sees half a word (rule S1).
* CPython executes each statement's memory accesses before the next statement's; the C compiler can not
  move a store across the opaque calls between two bytecodes. So the stores are issued in program order.
* x86-64 is TSO: stores become visible in program order and loads are not reordered with older loads,
  so an in-order plain store is a release store and a plain load an acquire load (P1, P2, P3, C1, C2, F1,
  F2). The only reordering x86 allows (a later load passing an earlier store to another address) is
  never relied on by the rings. The doorbell of a sleeping server (``Client._ring``, PROTOCOL.md §2.6) is the one
  place that must stop it: it takes and releases a lock, whose locked instructions are full fences.
* ARM64 (and POWER) reorder plain accesses: the Length/Tail/Head/version/closing stores would need
  ``stlr`` (or ``dmb ish`` before them), the Length/Head/attach-state/slot-word loads ``ldar`` (or ``dmb
  ishld`` after them). CPython can emit neither, so this pure-Python client is correct on x86-64 only;
  on ARM the shared-word accessors need a small native helper. ``kvstash.client`` refuses to run on a
  machine other than x86-64 unless KVSTASH_ALLOW_WEAK_MEMORY=1 is set.
"""

from typing import Optional, Tuple, Union

from .descriptor import PADDING_TYPE, RING_HEADER_LENGTH, RING_HEAD_OFFSET, RING_TAIL_OFFSET

#: Bytes-like data a ring copies in.
Buffer = Union[bytes, bytearray, memoryview]


class RingCorrupt(Exception):
    """A record with an impossible length was found; the ring is unusable for good."""


class Ring:
    """One ring inside a mapped client file: ``base`` is the ring's file offset."""

    __slots__ = ("capacity", "mask", "max_payload", "_positions", "_records", "_words", "_zeros",
                 "_position", "_cached_head")

    def __init__(self, file_view: memoryview, base: int, capacity: int) -> None:
        if capacity < 1024 or capacity & (capacity - 1):
            raise ValueError("ring capacity must be a power of two >= 1024: %d" % capacity)
        self.capacity = capacity
        self.mask = capacity - 1
        self.max_payload = capacity // 2 - 8
        # i64 view of the 128-byte ring header: [0] = Tail, [8] = Head (byte offset 64).
        self._positions = file_view[base:base + RING_HEADER_LENGTH].cast("q")
        self._records = file_view[base + RING_HEADER_LENGTH:base + RING_HEADER_LENGTH + capacity]
        # i32 view of the record area: the Length word of a record at index i is _words[i >> 2].
        self._words = self._records.cast("i")
        self._zeros = memoryview(b"")             # the consumer's: a capacity of zeros to clear records with
        self._position = 0
        self._cached_head = 0

    def start_as_producer(self) -> None:
        """Takes up publishing where the Tail stands."""
        self._position = self._positions[RING_TAIL_OFFSET >> 3]
        self._cached_head = self._positions[RING_HEAD_OFFSET >> 3]

    def start_as_consumer(self) -> None:
        """Takes up consuming where the Head stands."""
        self._position = self._positions[RING_HEAD_OFFSET >> 3]
        self._zeros = memoryview(bytes(self.capacity))

    # -- producer (§5.2) -----------------------------------------------------------------------------
    def offer(self, msg_type: int, part1: Buffer, part2: Optional[Buffer] = None) -> bool:
        """Publishes one record whose payload is ``part1`` followed by ``part2`` (both bytes-like, part2
        optional). Returns False when the ring has no room (consume responses and try again)."""
        size = len(part1) + (len(part2) if part2 is not None else 0)
        if size > self.max_payload:
            raise ValueError("payload of %d bytes exceeds the ring's limit %d" % (size, self.max_payload))
        length = 8 + size
        aligned = (length + 7) & ~7
        tail = self._position
        index = tail & self.mask
        to_end = self.capacity - index
        padding = to_end if aligned > to_end else 0
        required = padding + aligned
        if required > self.capacity - (tail - self._cached_head):
            self._cached_head = self._positions[RING_HEAD_OFFSET >> 3]      # acquire (x86: plain load)
            if required > self.capacity - (tail - self._cached_head):
                return False
        words = self._words
        if padding:
            words[(index >> 2) + 1] = PADDING_TYPE
            words[index >> 2] = padding                                      # release: padding published
            tail += padding
            index = 0
        words[(index >> 2) + 1] = msg_type
        records = self._records
        start = index + 8
        end = start + len(part1)
        records[start:end] = part1                                           # plain stores (memcpy)
        if part2 is not None:
            records[end:end + len(part2)] = part2
        words[index >> 2] = length                                           # release: record published
        tail += aligned
        self._position = tail
        self._positions[RING_TAIL_OFFSET >> 3] = tail                        # release: informational tail
        return True

    # -- consumer (§5.3) -----------------------------------------------------------------------------
    def poll(self) -> Optional[Tuple[int, bytes]]:
        """Takes the next record: (type, payload bytes), or None when the ring is empty."""
        words = self._words
        records = self._records
        while True:
            head = self._position
            index = head & self.mask
            length = words[index >> 2]                                       # acquire (x86: plain load)
            if length == 0:
                return None
            if length < 8 or length > self.capacity - index:
                raise RingCorrupt("record length %d at ring index %d" % (length, index))
            msg_type = words[(index >> 2) + 1]
            payload = records[index + 8:index + length].tobytes()            # copy out before releasing
            aligned = (length + 7) & ~7
            records[index:index + aligned] = self._zeros[:aligned]           # zero it all, Length included
            head += aligned
            self._position = head
            self._positions[RING_HEAD_OFFSET >> 3] = head                    # release
            if msg_type != PADDING_TYPE:
                return msg_type, payload

    def release(self) -> None:
        """Drops the views so that the mapping can be closed."""
        for view in (self._words, self._records, self._positions):
            view.release()
