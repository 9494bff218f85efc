"""One response record of the server (docs/PROTOCOL.md §6.8), decoded."""

import struct
from typing import List, Optional, Tuple, Union

from . import descriptor as d
from .errors import BadFilesError
from .types import RegisterInfo, RequestType, SlotEntry, Status

#: The Extra of an OK REGISTER answer: incarnation, pool bytes, lease (ns), chunk tokens, name length; then the name.
REGISTER_EXTRA = struct.Struct("<qqqii")


class Response:
    """One response record (§6.8). ``status`` is a ``Status``; on an error status ``message`` says why."""

    __slots__ = ("correlation_id", "status", "request_type", "transfer_id", "hit_chunks", "slots",
                 "count", "chunk_bytes", "slot_bytes", "slot_capacity", "extra", "instance_id", "deadline_ns")

    correlation_id: int
    status: Union[Status, int]
    request_type: Union[RequestType, int]
    transfer_id: int
    hit_chunks: int
    slots: List[SlotEntry]
    count: int
    chunk_bytes: int
    slot_bytes: int
    slot_capacity: int
    extra: bytes
    instance_id: int
    deadline_ns: int

    def __init__(self, payload: bytes, instance_id: int = 0) -> None:
        if len(payload) < d.RESPONSE_HEADER_LENGTH:
            raise BadFilesError("response payload of %d bytes" % len(payload))
        (self.correlation_id, status, request_type, self.transfer_id, self.hit_chunks, slot_count,
         self.count, self.chunk_bytes, self.slot_bytes, self.slot_capacity,
         extra_length) = d.RESPONSE_HEADER.unpack_from(payload, 0)
        try:
            self.status = Status(status)
        except ValueError:
            self.status = status
        try:
            self.request_type = RequestType(request_type)
        except ValueError:
            self.request_type = request_type
        end = d.RESPONSE_HEADER_LENGTH + d.SLOT_ENTRY_LENGTH * slot_count
        if slot_count < 0 or extra_length < 0 or end + extra_length > len(payload):
            raise BadFilesError("response fields run past its payload")
        self.slots = [SlotEntry(r, g & d.MASK32, o)
                      for r, g, o in d.SLOT_ENTRY.iter_unpack(payload[d.RESPONSE_HEADER_LENGTH:end])]
        self.extra = payload[end:end + extra_length]
        self.instance_id = instance_id
        self.deadline_ns = 0

    @property
    def ok(self) -> bool:
        """Whether the status is OK."""
        return self.status == Status.OK

    @property
    def status_name(self) -> str:
        """The status's name, or its number where this client does not know the code."""
        return self.status.name if isinstance(self.status, Status) else str(self.status)

    @property
    def message(self) -> str:
        """The reason of an error status (a constant English sentence; show it, do not parse it)."""
        return "" if self.ok else self.extra.decode("utf-8", "replace")

    @property
    def register_info(self) -> Optional[RegisterInfo]:
        """The pool, lease, chunk tokens and incarnation of an OK REGISTER answer, or None."""
        if self.request_type != RequestType.REGISTER or not self.ok or len(self.extra) < 32:
            return None
        inc, pool_bytes, lease_ns, chunk_tokens, name_length = REGISTER_EXTRA.unpack_from(self.extra, 0)
        name = self.extra[32:32 + name_length].decode("ascii")
        return RegisterInfo(inc & d.MASK64, pool_bytes, lease_ns, chunk_tokens, name)

    @property
    def tier_tickets(self) -> Optional[Tuple[int, int]]:
        """(ticket, completed) of an OK LOOKUP answered with the second tier's tickets (it carried L2_WAIT or
        L2_POLL to a server with a tier, §6.8): the read-through it started (0 for none) and the highest ticket
        over when it was answered. None for any other answer."""
        if self.request_type != RequestType.LOOKUP or not self.ok or len(self.extra) < d.LOOKUP_TIER_EXTRA_LENGTH:
            return None
        ticket, completed = d.LOOKUP_TIER_EXTRA.unpack_from(self.extra, 0)
        return ticket, completed

    @property
    def counters(self) -> Optional[List[int]]:
        """The counters of an OK STATS answer, in counter-id order (§2.3), or None."""
        if self.request_type != RequestType.STATS or not self.ok:
            return None
        return list(struct.unpack_from("<%dq" % (len(self.extra) // 8), self.extra, 0))

    def __repr__(self) -> str:
        status = self.status_name
        rtype = self.request_type.name if isinstance(self.request_type, RequestType) else self.request_type
        text = "Response(%s %s corr=%d transfer=%#x hits=%d slots=%d count=%d chunk=%d slot=%d" % (
            rtype, status, self.correlation_id, self.transfer_id, self.hit_chunks, len(self.slots),
            self.count, self.chunk_bytes, self.slot_bytes)
        if not self.ok:
            text += " %r" % self.message
        return text + ")"


#: A transfer: its id, or the Response that carries it.
Transfer = Union[Response, int]


def transfer_id_of(transfer: Transfer) -> int:
    """The transfer id of a Response, or the id itself."""
    return transfer.transfer_id if isinstance(transfer, Response) else int(transfer)
