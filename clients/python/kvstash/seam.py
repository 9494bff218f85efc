"""The seam between the client and the tensor code: what ``kvstash.tensors`` uses of a ``Client``, and nothing
else. ``Client`` has all of it (these are its public methods and properties); the tensor modules type against
this protocol, so that they import nothing of the client and the client imports them only when a tensor call
runs."""

import mmap
from typing import List, Optional, Protocol, Union

from .hashing import Salt
from .keyrange import Keys, Piece, Tokens
from .response import Response, Transfer
from .types import Layout


class TensorClient(Protocol):
    """The part of ``kvstash.Client`` the tensor calls use (see the methods of the same names there)."""

    @property
    def chunk_tokens(self) -> int:
        """Tokens per chunk of the server."""

    @property
    def lease_ns(self) -> int:
        """The server's lease: a store's reservation ends no earlier than this long after its PREPARE_STORE."""

    @property
    def pool_buffer(self) -> Union[mmap.mmap, memoryview, None]:
        """The pool's data region (slot entries' offsets index it), or None for a copy-transport client."""

    def layout_of(self, response: Response) -> Layout:
        """The layout registered for the instance of ``response``."""

    def is_still_reserved(self, response: Response, i: int) -> bool:
        """Fencing before a write (§3.3)."""

    def is_still_readable(self, response: Response, i: int) -> bool:
        """Fencing after a read (§3.3)."""

    def range_chunks(self, keys: Optional[Keys] = None, tokens: Optional[Tokens] = None, from_chunk: int = 0,
                     to_chunk: int = -1) -> int:
        """The number of chunks of a key range."""

    def range_pieces(self, keys: Optional[Keys] = None, tokens: Optional[Tokens] = None, from_chunk: int = 0,
                     to_chunk: int = -1) -> List[Piece]:
        """The key range cut into requests the server takes."""

    def prepare_store(self, instance: int, keys: Optional[Keys] = None, *, tokens: Optional[Tokens] = None,
                      from_chunk: int = 0, to_chunk: int = -1, salt: Salt = None) -> Response:
        """PREPARE_STORE."""

    def commit_store(self, instance: int, transfer: Response) -> Response:
        """COMMIT_STORE."""

    def abort_store(self, instance: int, transfer: Response) -> Response:
        """ABORT_STORE."""

    def prepare_retrieve(self, instance: int, keys: Optional[Keys] = None, *, tokens: Optional[Tokens] = None,
                         from_chunk: int = 0, to_chunk: int = -1, salt: Salt = None,
                         lookup: Optional[Transfer] = None, prefix: bool = False) -> Response:
        """PREPARE_RETRIEVE."""

    def commit_retrieve(self, instance: int, transfer: Response, *, reply: bool = True) -> Optional[Response]:
        """COMMIT_RETRIEVE; without ``reply``, sent with NO_REPLY and not waited for (None)."""
