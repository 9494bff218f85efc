"""Chunk keys (docs/PROTOCOL.md §8): the prefix-chained chunk hash, salts and namespaces."""

import hashlib
import struct
import sys
from typing import Any, List, Optional, Tuple, Union

from .descriptor import MASK64

#: A cache salt: None, a string or bytes (hashed), or the 64-bit value itself.
Salt = Optional[Union[str, bytes, int]]


def _tokens_le(tokens: Any) -> bytes:
    """Little-endian int32 bytes of ``tokens`` (a sequence of ints, array('i'), bytes, or a numpy array)."""
    if isinstance(tokens, (bytes, bytearray, memoryview)):
        return bytes(tokens)
    tobytes = getattr(tokens, "astype", None)
    if tobytes is not None:                                   # numpy array
        data: bytes = tokens.astype("<i4", copy=False).tobytes()
        return data
    if hasattr(tokens, "typecode") and tokens.typecode == "i" and tokens.itemsize == 4 \
            and sys.byteorder == "little":
        array_bytes: bytes = tokens.tobytes()
        return array_bytes
    return struct.pack("<%di" % len(tokens), *tokens)


def chunk_hashes(tokens: Any, chunk_tokens: int) -> List[Tuple[int, int]]:
    """[(hi, lo)] of every full chunk of ``tokens`` (§8.1), unsigned 64-bit ints.

    ``h(i) = SHA-256(h(i-1) || tokens of chunk i as int32 LE)[0:16]``, h(-1) = 16 zero bytes;
    hi = digest bytes 0..7 big-endian, lo = bytes 8..15 big-endian. A trailing partial chunk has no hash.
    """
    if chunk_tokens <= 0:
        raise ValueError("chunk_tokens must be positive")
    data = _tokens_le(tokens)
    step = 4 * chunk_tokens
    prev = bytes(16)
    out = []
    for c in range(len(data) // step):
        prev = hashlib.sha256(prev + data[c * step:(c + 1) * step]).digest()[:16]
        out.append((int.from_bytes(prev[:8], "big"), int.from_bytes(prev[8:], "big")))
    return out


def salt_value(salt: Salt) -> int:
    """64-bit Salt field of a cache-salt string (§8.3); None or "" -> 0; an int is taken as is."""
    if salt is None:
        return 0
    if isinstance(salt, int):
        return salt & MASK64
    if isinstance(salt, str):
        salt = salt.encode("utf-8")
    if len(salt) == 0:
        return 0
    return int.from_bytes(hashlib.sha256(salt).digest()[:8], "big")


def namespace(model: Union[str, bytes], world_size: int, rank: int, salt: Salt = 0) -> int:
    """64-bit namespace of (model, world size, rank, salt) (§8.2); the server computes it, never sent."""
    m = model.encode("utf-8") if isinstance(model, str) else bytes(model)
    data = struct.pack("<H", len(m)) + m + struct.pack("<IIQ", world_size, rank, salt_value(salt))
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")
