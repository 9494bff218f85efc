"""Request types, status codes, dtypes and the layout of an instance (docs/PROTOCOL.md §6.1, §6.3, §6.9, §7.2)."""

import enum
from collections import namedtuple
from typing import Any, Dict, NamedTuple, Tuple, Union


class _Named(enum.IntEnum):
    """An IntEnum that prints as its name (Python 3.11 prints an IntEnum member as its number)."""

    def __str__(self) -> str:
        return self.name


class RequestType(_Named):
    """Request type codes (§6.1); SWEEP and REAP are server-internal and never sent by a client."""
    PING = 0
    REGISTER = 1
    UNREGISTER = 2
    LOOKUP = 3
    LOOKUP_ALL_RANKS = 4
    RELEASE = 5
    PREPARE_STORE = 6
    COMMIT_STORE = 7
    ABORT_STORE = 8
    PREPARE_RETRIEVE = 9
    COMMIT_RETRIEVE = 10
    CLEAR = 11
    STATS = 12
    WRITE_DATA = 13
    READ_DATA = 14
    SWEEP = 15
    REAP = 16


class Status(_Named):
    """Status of a response (§6.9). Expected outcomes are statuses, never exceptions."""
    OK = 0
    MISS = 1
    NO_SPACE = 2
    UNKNOWN_TRANSFER = 3
    UNKNOWN_INSTANCE = 4
    LAYOUT_MISMATCH = 5
    INVALID_LAYOUT = 6
    INVALID_REQUEST = 7
    UNKNOWN_TYPE = 8
    MALFORMED = 9
    BUSY = 10
    SERVER_ERROR = 11


class Dtype(_Named):
    """Element type of a layout (§6.3); the value is the wire code."""
    FLOAT32 = 1
    FLOAT16 = 2
    BFLOAT16 = 3
    FLOAT8_E4M3FN = 4
    FLOAT8_E5M2 = 5
    INT8 = 6
    UINT8 = 7

    @property
    def item_bytes(self) -> int:
        """Bytes per element."""
        return _ITEM_BYTES[self]

    @property
    def numpy_dtype(self) -> str:
        """numpy dtype string of a view of this type; bfloat16 and fp8 have no numpy type: raw uint16/uint8."""
        return _NUMPY[self]

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def of(cls, value: Union["Dtype", int, str]) -> "Dtype":
        """A Dtype from a Dtype, a wire code, or a name such as "bfloat16" / "float8_e4m3fn"; ValueError
        naming the value and the accepted names otherwise."""
        if isinstance(value, cls):
            return value
        try:
            if isinstance(value, str):
                return cls[value.upper()]
            return cls(value)
        except (KeyError, ValueError):
            raise ValueError("unknown dtype %r: one of %s (or their wire codes %d-%d)"
                             % (value, ", ".join(d.name.lower() for d in cls), min(cls), max(cls))) from None


#: A response's status: a ``Status``, or the bare code of a status this client does not know.
StatusCode = Union[Status, int]

_ITEM_BYTES: Dict[Dtype, int] = {Dtype.FLOAT32: 4, Dtype.FLOAT16: 2, Dtype.BFLOAT16: 2, Dtype.FLOAT8_E4M3FN: 1,
                                 Dtype.FLOAT8_E5M2: 1, Dtype.INT8: 1, Dtype.UINT8: 1}
_NUMPY: Dict[Dtype, str] = {Dtype.FLOAT32: "<f4", Dtype.FLOAT16: "<f2", Dtype.BFLOAT16: "<u2",
                            Dtype.FLOAT8_E4M3FN: "u1", Dtype.FLOAT8_E5M2: "u1", Dtype.INT8: "i1", Dtype.UINT8: "u1"}


class Layout(namedtuple("Layout", "model world_size rank layers hidden dtype mla")):
    """A worker's KV layout (docs/PROTOCOL.md §7.2): chunk shape [2, L, C, H], or [L, C, H] when mla."""

    model: str
    world_size: int
    rank: int
    layers: int
    hidden: int
    dtype: Dtype
    mla: bool

    def __new__(cls, model: str, world_size: Any = 1, rank: Any = 0, layers: Any = 1, hidden: Any = 1,
                dtype: Union[Dtype, int, str] = Dtype.FLOAT16, mla: bool = False) -> "Layout":
        numbers: Dict[str, int] = {}
        for name, value in (("world_size", world_size), ("rank", rank), ("layers", layers), ("hidden", hidden)):
            try:
                numbers[name] = int(value)
            except (TypeError, ValueError):
                raise ValueError("Layout %s must be an integer, not %r" % (name, value)) from None
        return super().__new__(cls, model, numbers["world_size"], numbers["rank"], numbers["layers"],
                               numbers["hidden"], Dtype.of(dtype), bool(mla))

    def _replace(self, **fields: Any) -> "Layout":
        """A copy with ``fields`` changed, checked and converted like a new Layout (a dtype name works)."""
        values = self._asdict()
        values.update(fields)
        return Layout(**values)

    def shape(self, chunk_tokens: int) -> Tuple[int, ...]:
        """Chunk tensor shape for a server with ``chunk_tokens`` tokens per chunk (§7.2)."""
        if self.mla:
            return (self.layers, chunk_tokens, self.hidden)
        return (2, self.layers, chunk_tokens, self.hidden)

    def chunk_bytes(self, chunk_tokens: int) -> int:
        """Bytes of a chunk of ``chunk_tokens`` tokens."""
        n = self.dtype.item_bytes
        for d in self.shape(chunk_tokens):
            n *= d
        return n


class SlotEntry(NamedTuple):
    """One slot of a PREPARE/DATA answer (§6.8): range index, generation (u32), pool FILE offset."""

    range_index: int
    generation: int
    offset: int


class RegisterInfo(NamedTuple):
    """The Extra of an OK REGISTER answer (§6.8)."""

    incarnation: int
    pool_data_bytes: int
    lease_ns: int
    chunk_tokens: int
    pool_file_name: str
