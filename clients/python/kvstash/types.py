"""Request types, status codes, dtypes and the layout of an instance (docs/PROTOCOL.md §6.1, §6.3, §6.9, §7.2)."""

import enum
from collections import namedtuple


class RequestType(enum.IntEnum):
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


class Status(enum.IntEnum):
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


class Dtype(enum.IntEnum):
    """Element type of a layout (§6.3); the value is the wire code."""
    FLOAT32 = 1
    FLOAT16 = 2
    BFLOAT16 = 3
    FLOAT8_E4M3FN = 4
    FLOAT8_E5M2 = 5
    INT8 = 6
    UINT8 = 7

    @property
    def item_bytes(self):
        return _ITEM_BYTES[self]

    @property
    def numpy_dtype(self):
        """numpy dtype string of a view of this type; bfloat16 and fp8 have no numpy type: raw uint16/uint8."""
        return _NUMPY[self]

    @classmethod
    def of(cls, value):
        """A Dtype from a Dtype, a wire code, or a name such as "bfloat16" / "float8_e4m3fn"."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls[value.upper()]
        return cls(value)


_ITEM_BYTES = {Dtype.FLOAT32: 4, Dtype.FLOAT16: 2, Dtype.BFLOAT16: 2, Dtype.FLOAT8_E4M3FN: 1,
               Dtype.FLOAT8_E5M2: 1, Dtype.INT8: 1, Dtype.UINT8: 1}
_NUMPY = {Dtype.FLOAT32: "<f4", Dtype.FLOAT16: "<f2", Dtype.BFLOAT16: "<u2", Dtype.FLOAT8_E4M3FN: "u1",
          Dtype.FLOAT8_E5M2: "u1", Dtype.INT8: "i1", Dtype.UINT8: "u1"}


class Layout(namedtuple("Layout", "model world_size rank layers hidden dtype mla")):
    """A worker's KV layout (SPEC §1): chunk shape [2, L, C, H], or [L, C, H] when mla."""

    def __new__(cls, model, world_size=1, rank=0, layers=1, hidden=1, dtype=Dtype.FLOAT16, mla=False):
        return super().__new__(cls, model, int(world_size), int(rank), int(layers), int(hidden),
                               Dtype.of(dtype), bool(mla))

    def shape(self, chunk_tokens):
        """Chunk tensor shape for a server with ``chunk_tokens`` tokens per chunk (§7.2)."""
        if self.mla:
            return (self.layers, chunk_tokens, self.hidden)
        return (2, self.layers, chunk_tokens, self.hidden)

    def chunk_bytes(self, chunk_tokens):
        n = self.dtype.item_bytes
        for d in self.shape(chunk_tokens):
            n *= d
        return n


SlotEntry = namedtuple("SlotEntry", "range_index generation offset")
SlotEntry.__doc__ = """One slot of a PREPARE/DATA answer (§6.8): range index, generation (u32), pool FILE offset."""

RegisterInfo = namedtuple("RegisterInfo",
                          "incarnation pool_data_bytes lease_ns chunk_tokens pool_file_name")
RegisterInfo.__doc__ = """The Extra of an OK REGISTER answer (§6.8)."""
