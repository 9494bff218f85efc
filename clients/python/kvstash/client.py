"""The kvstash worker client (docs/PROTOCOL.md §2 to §7): ``connect()`` and ``Client``.

``Client`` is built in layers, each a module of one job, each on the one before: ``connection`` (the files, the
attach handshake, the doorbell, release), ``liveness`` (heartbeat, incarnation, session), ``transport`` (rings,
send, wait, time bounds), ``slots`` (slot views, fenced chunk copies, the copy transport) and ``requests`` (one
method per request type). This module adds connecting, closing and the tensor calls, which load
``kvstash.tensors`` (and torch) on first use.

One ``Client`` per process and thread: it is not thread-safe and must not be shared across ``fork()``
(the client file's lock belongs to the process that took it). See ``ring.py`` for why the plain aligned
loads and stores used for shared words are release/acquire accesses on x86-64, and what ARM would need.
"""

import os
import platform
import sys
from types import TracebackType
from typing import TYPE_CHECKING, Any, List, Literal, Optional, Sequence, Type

from . import descriptor as d
from .connection import TIMEOUT_DEFAULT_S, default_directory
from .hashing import Salt
from .keyrange import Keys, RangeLimits, Tokens, pieces, range_chunks
from .requests import Requests
from .response import Response, Transfer
from .types import StatusCode

if TYPE_CHECKING:                       # types only: importing kvstash imports neither torch nor the tensor code
    from .paged import PagedKV
    from .pool_tensors import PinInfo, PoolTensors
    from .transfers import TensorTransfer

__all__ = ["Client", "Response", "connect", "default_directory", "pieces", "range_chunks", "RangeLimits",
           "TIMEOUT_DEFAULT_S"]

_LITTLE_X86 = platform.machine().lower() in ("x86_64", "amd64") and sys.byteorder == "little"


def connect(directory: Optional[str] = None, timeout: float = TIMEOUT_DEFAULT_S, copy_transport: bool = False,
            pretouch: bool = True, cuda: bool = False) -> "Client":
    """Connects to the server of ``directory`` (default: ``default_directory()``).

    ``timeout`` (seconds) bounds the attach handshake and every wait for a response. With
    ``copy_transport=True`` the pool is not mapped and chunk bytes travel in WRITE_DATA / READ_DATA
    messages. ``pretouch`` maps the pool with MAP_POPULATE so that no page fault lands on a chunk copy
    (the first write to each page of an unpopulated mapping faults: a cold 32 MiB store runs at ~1.5 GB/s
    instead of ~20). ``cuda=True`` registers the pool mapping with CUDA at once (``Client.pin_pool()``;
    needs torch with CUDA). Raises a ``KvStashError`` subclass when no live server accepts the client.
    """
    return Client(directory, timeout, copy_transport, pretouch, cuda)


class Client(Requests):
    """A connected worker client. Use ``connect()``; close with ``close()`` or a ``with`` block."""

    def __init__(self, directory: Optional[str] = None, timeout: float = TIMEOUT_DEFAULT_S,
                 copy_transport: bool = False, pretouch: bool = True, cuda: bool = False) -> None:
        if not _LITTLE_X86 and os.environ.get("KVSTASH_ALLOW_WEAK_MEMORY") != "1":
            raise RuntimeError("the pure-Python kvstash client is correct on x86-64 only (see ring.py); "
                               "set KVSTASH_ALLOW_WEAK_MEMORY=1 to run it anyway")
        self._init_connection(directory, timeout, copy_transport, pretouch)
        self._init_transport()
        try:
            self._open_control()
            if not self.copy_transport:
                self._open_pool()
            self._create_client_file()
            self._await_attach()
            self._connect_doorbell()
            if cuda:
                self.pin_pool()
        except BaseException:
            self._release(delete_file=True)
            raise

    # ---------------------------------------------------------------------------------------- tensors
    def _tensor_state(self) -> "PoolTensors":
        """The client's PoolTensors (torch over the pool mapping), made on first use."""
        if self._tensors is None:
            self.check_connection()
            from .pool_tensors import PoolTensors
            self._tensors = PoolTensors(self)
        tensors: PoolTensors = self._tensors
        return tensors

    def pin_pool(self) -> "PinInfo":
        """Registers the pool's data region with CUDA (``cudaHostRegister``) once, so copies between GPU
        memory and slots run at the PCIe limit; ``close()`` unregisters it. Returns a ``PinInfo``
        (``bytes``, ``seconds``). Raises ``CudaUnavailableError`` without CUDA, ImportError without torch."""
        return self._tensor_state().pin()

    @property
    def pin_info(self) -> Optional["PinInfo"]:
        """The ``PinInfo`` of ``pin_pool()``, or None while the pool is not registered with CUDA."""
        return self._tensors.pin_info if self._tensors is not None else None

    def slot_tensor(self, response: Response, i: int) -> Any:
        """A CPU ``torch.Tensor`` over slot ``i`` of a PREPARE answer, zero copy, with the layout's shape
        (``[2, L, C, H]`` or ``[L, C, H]``) and real torch dtype. Drop it before ``close()``."""
        return self._tensor_state().slot_tensor(response, i)

    def write_tensors(self, response: Response, tensors: Sequence[Any]) -> List[StatusCode]:
        """Copies ``tensors[range index]`` (chunk-shaped or flat, the layout's dtype, any device) into each
        reserved slot of a PREPARE_STORE answer, fenced, non-blocking on a CUDA stream, one
        synchronisation. Returns a Status per slot entry (UNKNOWN_TRANSFER: reservation ended, not written)."""
        return self._tensor_state().write(response, tensors)

    def read_tensors(self, response: Response, out: Sequence[Any]) -> List[StatusCode]:
        """Copies each slot of a PREPARE_RETRIEVE answer into ``out[range index]``, one synchronisation,
        then checks each slot (§3.3). Returns a Status per slot entry (UNKNOWN_TRANSFER: recompute it)."""
        return self._tensor_state().read(response, out)

    def store_tensors(self, instance: int, tensors: Sequence[Any], keys: Optional[Keys] = None, *,
                      tokens: Optional[Tokens] = None, from_chunk: int = 0, to_chunk: int = -1,
                      salt: Salt = None) -> "TensorTransfer":
        """PREPARE_STORE + ``write_tensors`` + COMMIT_STORE (ABORT_STORE when a reservation ended).
        ``tensors[k]`` is chunk ``k`` of the key range. Returns a ``TensorTransfer``."""
        from . import transfers
        state = self._tensor_state()
        return transfers.store(self, instance, lambda p, first: state.write(p, _Offset(tensors, first)), keys,
                               tokens, from_chunk, to_chunk, salt)

    def retrieve_tensors(self, instance: int, out: Sequence[Any], keys: Optional[Keys] = None, *,
                         tokens: Optional[Tokens] = None, from_chunk: int = 0, to_chunk: int = -1,
                         salt: Salt = None, lookup: Optional[Transfer] = None,
                         prefix: bool = False, reply: bool = False) -> "TensorTransfer":
        """PREPARE_RETRIEVE (keys, tokens, or ``lookup`` = a pinned LOOKUP) + ``read_tensors`` +
        COMMIT_RETRIEVE. ``out[k]`` receives chunk ``k`` of the range. Returns a ``TensorTransfer``. With
        ``prefix`` (keys or tokens only) the readable leading chunks are read and the rest are listed in its
        ``missing`` (their ``out`` entries are not written). The commit goes without an answer once the chunks
        are read and checked (one round trip); ``reply`` waits for it and reports a failed commit's status."""
        from . import transfers
        state = self._tensor_state()
        return transfers.retrieve(self, instance, lambda p, first: state.read(p, _Offset(out, first)), keys,
                                  tokens, from_chunk, to_chunk, salt, lookup, prefix, reply)

    def write_paged(self, response: Response, paged: "PagedKV", block_ids: Any, *,
                    staging_bytes: Optional[int] = None, staging_buffers: Optional[int] = None) -> List[StatusCode]:
        """Gathers chunk ``k`` of a PREPARE_STORE's range from blocks ``block_ids[k*n:(k+1)*n]`` of every
        layer of ``paged`` (a ``PagedKV``; n = chunk tokens / block size) into its slot. Statuses as
        ``write_tensors``."""
        from .pool_tensors import staging_options
        return self._tensor_state().write_paged(response, paged, block_ids,
                                                *staging_options(staging_bytes, staging_buffers))

    def read_paged(self, response: Response, paged: "PagedKV", block_ids: Any, *,
                   staging_bytes: Optional[int] = None, staging_buffers: Optional[int] = None) -> List[StatusCode]:
        """Scatters each slot of a PREPARE_RETRIEVE answer into blocks ``block_ids[k*n:(k+1)*n]`` of every
        layer. Statuses as ``read_tensors``; the blocks of a failed chunk hold undefined data."""
        from .pool_tensors import staging_options
        return self._tensor_state().read_paged(response, paged, block_ids,
                                               *staging_options(staging_bytes, staging_buffers))

    def store_paged(self, instance: int, paged: "PagedKV", block_ids: Any, keys: Optional[Keys] = None, *,
                    tokens: Optional[Tokens] = None, from_chunk: int = 0, to_chunk: int = -1, salt: Salt = None,
                    staging_bytes: Optional[int] = None, staging_buffers: Optional[int] = None) -> "TensorTransfer":
        """PREPARE_STORE + ``write_paged`` + COMMIT_STORE. Returns a ``TensorTransfer``."""
        from . import transfers
        from .pool_tensors import blocks_from, staging_options
        state, options = self._tensor_state(), staging_options(staging_bytes, staging_buffers)

        def write(prepare: Response, first: int) -> List[StatusCode]:
            return state.write_paged(prepare, paged, blocks_from(block_ids, first, paged, self.chunk_tokens),
                                     *options)
        return transfers.store(self, instance, write, keys, tokens, from_chunk, to_chunk, salt)

    def retrieve_paged(self, instance: int, paged: "PagedKV", block_ids: Any, keys: Optional[Keys] = None, *,
                       tokens: Optional[Tokens] = None, from_chunk: int = 0, to_chunk: int = -1,
                       salt: Salt = None, lookup: Optional[Transfer] = None, staging_bytes: Optional[int] = None,
                       staging_buffers: Optional[int] = None, prefix: bool = False,
                       reply: bool = False) -> "TensorTransfer":
        """PREPARE_RETRIEVE + ``read_paged`` + COMMIT_RETRIEVE. Returns a ``TensorTransfer``. With ``prefix``
        (keys or tokens only) the readable leading chunks are read; the rest are in its ``missing``, and no
        block of theirs is written. The commit goes without an answer, as for ``retrieve_tensors``; ``reply``
        waits for it."""
        from . import transfers
        from .pool_tensors import blocks_from, staging_options
        state, options = self._tensor_state(), staging_options(staging_bytes, staging_buffers)

        def read(prepare: Response, first: int) -> List[StatusCode]:
            return state.read_paged(prepare, paged, blocks_from(block_ids, first, paged, self.chunk_tokens),
                                    *options)
        return transfers.retrieve(self, instance, read, keys, tokens, from_chunk, to_chunk, salt, lookup, prefix,
                                  reply)

    # ---------------------------------------------------------------------------------------- close
    def close(self) -> None:
        """Orderly close (§4.4): Closing = 1, unlock, close, unmap; the server reaps the session and
        deletes the client file. If the server is not alive, the client deletes its own file."""
        if self._closed:
            return
        self._closed = True
        alive = False
        header = getattr(self, "_header_i32", None)
        if header is not None:
            header[d.CLI_CLOSING_OFFSET >> 2] = 1                               # release
            try:
                alive = self.alive() and self._broken is None
            except Exception:
                alive = False
        self._release(delete_file=not alive)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> Literal[False]:
        self.close()
        return False

    def __del__(self) -> None:
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass


class _Offset:
    """``seq[first + k]`` as item ``k``: the chunks of one piece of a split range."""
    __slots__ = ("seq", "first")

    def __init__(self, seq: Sequence[Any], first: int) -> None:
        self.seq, self.first = seq, first

    def __getitem__(self, k: int) -> Any:
        return self.seq[self.first + k]



