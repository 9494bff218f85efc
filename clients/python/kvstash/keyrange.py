"""Key ranges (docs/PROTOCOL.md §6.4): their encoding in a request, their length, and their cut into requests."""

import struct
from typing import Any, List, Optional, Protocol, Sequence, Tuple, Union

from . import descriptor as d
from .hashing import _tokens_le, chunk_hashes

#: Chunk keys: ``[(hi, lo)]`` unsigned 64-bit pairs, or the same pairs already packed ``'<QQ'``.
Keys = Union[Sequence[Tuple[int, int]], bytes, bytearray, memoryview]
#: Prompt tokens: a sequence of ints, ``array('i')``, little-endian int32 bytes or a numpy array.
Tokens = Any
#: One request's part of a key range: (first range index, keys, tokens, from chunk, to chunk).
Piece = Tuple[int, Optional[Keys], Optional[Tokens], int, int]


class RangeLimits(Protocol):
    """What cutting a key range needs to know of the server: the client's configuration (a ``Client``)."""

    @property
    def chunk_tokens(self) -> int:
        """Tokens per chunk."""

    @property
    def max_chunks(self) -> int:
        """Max Chunks Per Request."""

    @property
    def request_capacity(self) -> int:
        """Bytes of the request ring."""


def key_range(keys: Optional[Keys], tokens: Optional[Tokens], from_chunk: int, to_chunk: int) -> Tuple[int, bytes]:
    """(key mode, body) of a key range (§6.4): keys = [(hi, lo)], or tokens of the whole prompt."""
    if keys is not None and tokens is not None:
        raise ValueError("give keys or tokens, not both")
    if tokens is not None:
        data = _tokens_le(tokens)
        return d.KEY_MODE_TOKENS, d.KEYS_TOKENS_HEADER.pack(len(data) // 4, from_chunk, to_chunk, 0) + data
    if keys is None:
        return d.KEY_MODE_NONE, b""
    if isinstance(keys, (bytes, bytearray, memoryview)):          # already '<QQ' packed pairs
        return d.KEY_MODE_HASHES, d.KEYS_HASHES_HEADER.pack(len(keys) // 16, 0) + bytes(keys)
    flat = []
    for hi, lo in keys:
        flat.append(hi & d.MASK64)
        flat.append(lo & d.MASK64)
    return d.KEY_MODE_HASHES, d.KEYS_HASHES_HEADER.pack(len(flat) // 2, 0) + struct.pack("<%dQ" % len(flat), *flat)


def range_chunks(client: RangeLimits, keys: Optional[Keys], tokens: Optional[Tokens], from_chunk: int,
                 to_chunk: int) -> int:
    """The number of chunks of a key range (§6.4), as the server will count it."""
    if tokens is not None:
        end = len(tokens) // client.chunk_tokens if to_chunk < 0 else to_chunk
        return max(0, end - from_chunk)
    if keys is None:
        return 0
    if isinstance(keys, (bytes, bytearray, memoryview)):
        return len(keys) // 16
    return len(keys)


def pieces(client: RangeLimits, keys: Optional[Keys], tokens: Optional[Tokens], from_chunk: int,
           to_chunk: int) -> List[Piece]:
    """The key range cut into requests the server takes: ``[(first range index, keys, tokens, from, to)]``.
    One piece when the range has at most Max Chunks Per Request chunks and its tokens fit a request;
    otherwise the client hashes the tokens itself (docs/PROTOCOL.md §8.1, as the server would) and cuts
    the hashes into pieces of at most that many chunks."""
    count = range_chunks(client, keys, tokens, from_chunk, to_chunk)
    limit = max(1, client.max_chunks)
    token_limit = (client.request_capacity // 2 - 64) // 4
    if count <= limit and (tokens is None or len(tokens) <= token_limit):
        return [(0, keys, tokens, from_chunk, to_chunk)]
    pairs: List[Tuple[int, int]]
    if tokens is not None:
        end = len(tokens) // client.chunk_tokens if to_chunk < 0 else to_chunk
        pairs = chunk_hashes(tokens[:end * client.chunk_tokens], client.chunk_tokens)[from_chunk:end]
    elif isinstance(keys, (bytes, bytearray, memoryview)):
        raw = bytes(keys)
        pairs = [(int.from_bytes(raw[i:i + 8], "little"), int.from_bytes(raw[i + 8:i + 16], "little"))
                 for i in range(0, len(raw) - 15, 16)]
    else:
        pairs = list(keys) if keys is not None else []
    return [(first, pairs[first:first + limit], None, 0, -1) for first in range(0, len(pairs), limit)]
