"""Per-client tensor state (``PoolTensors``): the pool as one uint8 tensor, its CUDA registration, copy streams
and staging buffers, and the fenced copies of chunks between tensors (or paged caches) and slots.

The pool mapping itself is the pinned staging buffer of a GPU worker: ``pin()`` registers its data region with
CUDA once (``cudaHostRegister``), so a copy between GPU memory and a slot runs at the PCIe limit with no second host
copy, and ``release()`` unregisters it. Bulk calls move a batch of chunks with non-blocking copies on a stream of
their own and synchronise once. The fencing rules of docs/PROTOCOL.md §3.3 hold as for the byte calls: a slot is
checked RESERVED (same generation) before anything is copied into it, and READABLE (same generation) after its
bytes have arrived; a chunk that fails either check is reported, never committed or trusted. On a GPU the paged
gather and scatter run on the device into a staging buffer (two by default, so the gather of one group of chunks
overlaps the PCIe copy of the previous group); on the CPU they write the slots directly.

It uses the client through ``kvstash.seam.TensorClient`` only.
"""

import time
from typing import Any, Dict, List, NamedTuple, Optional, Protocol, Set, Tuple

from .errors import CudaUnavailableError
from .paged import PagedKV
from .response import Response
from .seam import TensorClient
from .torch_dtypes import torch_dtype, torch_module
from .types import Layout, Status, StatusCode

STAGING_BYTES_DEFAULT = 256 << 20       # one GPU staging buffer of the paged path (chunks are grouped to fit)
STAGING_BUFFERS_DEFAULT = 2             # gather of group g+1 overlaps the copy of group g
LEASE_MARGIN_FRACTION = 0.1             # do not start writing with less than this part of the lease left
CUDA_HOST_REGISTER_PORTABLE = 1         # pinned for every CUDA context of the process, not just one device

class PinInfo(NamedTuple):
    """What pin_pool() registered: the bytes of the pool mapping and the seconds it took."""

    bytes: int
    seconds: float

    @property
    def gib_per_s(self) -> float:
        """GiB registered per second."""
        return self.bytes / (1 << 30) / self.seconds if self.seconds else 0.0

    @property
    def s_per_gib(self) -> float:
        """Seconds per GiB registered."""
        return self.seconds / (self.bytes / (1 << 30)) if self.bytes else 0.0


class Chunks(Protocol):
    """Chunk tensors by range index: ``chunks[k]`` is chunk ``k`` (a list of tensors, a batched tensor, ...)."""

    def __getitem__(self, k: int) -> Any:
        """Chunk ``k``."""



class PoolTensors:
    """Per-client tensor state: the pool as one uint8 tensor, the CUDA registration, streams and
    staging buffers. Owned by one Client (same thread rules); ``release()`` runs before the pool is
    unmapped."""

    def __init__(self, client: TensorClient) -> None:
        torch = torch_module()
        if client.pool_buffer is None:
            raise RuntimeError("a copy-transport client has no pool mapping: tensor calls need the "
                               "shared-memory transport (connect without copy_transport)")
        self.client = client
        self.pool = torch.frombuffer(client.pool_buffer, dtype=torch.uint8)
        self.pin_info: Optional[PinInfo] = None
        self._registered_ptr = 0
        self._streams: Dict[Any, Any] = {}
        self._staging: Dict[Tuple[Any, ...], List[Any]] = {}

    # ------------------------------------------------------------------------------------- pinning
    def pin(self) -> "PinInfo":
        """Registers the pool mapping with CUDA once (see ``Client.pin_pool``); returns its ``PinInfo``."""
        torch = torch_module()
        if self.pin_info is not None:
            return self.pin_info
        if not torch.cuda.is_available():
            raise CudaUnavailableError("pin_pool: torch %s sees no CUDA device (torch.cuda.is_available() is "
                                       "False); the pool stays unpinned" % torch.__version__)
        cudart = torch.cuda.cudart()
        ptr, size = self.pool.data_ptr(), self.pool.numel()
        start = time.perf_counter()
        err = cudart.cudaHostRegister(ptr, size, CUDA_HOST_REGISTER_PORTABLE)
        seconds = time.perf_counter() - start
        if int(err) != 0:
            raise CudaUnavailableError("pin_pool: cudaHostRegister of %d bytes failed: %s (error %d)"
                                       % (size, _cuda_error(cudart, err), int(err)))
        self._registered_ptr = ptr
        self.pin_info = PinInfo(size, seconds)
        return self.pin_info

    def unpin(self) -> None:
        """Unregisters the pool from CUDA, after every copy in flight is over."""
        if self._registered_ptr:
            torch = torch_module()
            torch.cuda.synchronize()            # no copy may still be in flight into the mapping
            torch.cuda.cudart().cudaHostUnregister(self._registered_ptr)
            self._registered_ptr = 0
            self.pin_info = None

    def release(self) -> None:
        """Unregisters the pool from CUDA and drops every tensor over it (before the unmap)."""
        try:
            self.unpin()
        finally:
            self._staging.clear()
            self._streams.clear()
            self.pool = None

    # ------------------------------------------------------------------------------------- slots
    def slot_tensor(self, response: Response, i: int) -> Any:
        """A tensor over slot ``i`` with the layout's shape and torch dtype (see ``Client.slot_tensor``)."""
        client = self.client
        entry = response.slots[i]
        layout = client.layout_of(response)
        flat = self.pool[entry.offset:entry.offset + response.chunk_bytes]
        return flat.view(torch_dtype(layout.dtype)).view(layout.shape(client.chunk_tokens))

    def stream(self, device: Any) -> Any:
        """This client's copy stream on CUDA ``device``, made on first use."""
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = torch_module().cuda.Stream(device)
        return stream

    def staging(self, device: Any, dtype: Any, shape: Tuple[int, ...], chunk_bytes: int, staging_bytes: int,
                buffers: int) -> List[Any]:
        """``buffers`` staging buffers of as many chunks as fit ``staging_bytes`` on ``device`` (one set per device)."""
        per = max(1, staging_bytes // chunk_bytes)
        key = (device, dtype, shape, per, buffers)
        bufs = self._staging.get(key)
        if bufs is None:
            torch = torch_module()
            for k in [k for k in self._staging if k[0] == device]:     # one set per device at a time
                del self._staging[k]
            bufs = self._staging[key] = [torch.empty((per,) + shape, dtype=dtype, device=device)
                                         for _ in range(buffers)]
        return bufs

    # ------------------------------------------------------------------------------------- contiguous
    def write(self, response: Response, tensors: "Chunks") -> List[StatusCode]:
        """Fenced copies of ``tensors[range index]`` into the reserved slots of a PREPARE_STORE answer,
        one synchronisation at the end. Returns a Status per slot entry."""
        client = self.client
        statuses = self._lease_check(response)
        if statuses is not None:
            return statuses
        shape = client.layout_of(response).shape(client.chunk_tokens)
        dtype = torch_dtype(client.layout_of(response).dtype)
        statuses = []
        devices: Set[Any] = set()
        try:
            for i, entry in enumerate(response.slots):
                src = _as_chunk(tensors[entry.range_index], dtype, shape, "source", entry.range_index)
                if not client.is_still_reserved(response, i):
                    statuses.append(Status.UNKNOWN_TRANSFER)
                    continue
                self._copy(self.slot_tensor(response, i), src, devices)
                statuses.append(Status.OK)
        finally:
            self._finish(devices)           # no copy in flight once this returns or raises (then: abort)
        return self._recheck_reserved(response, statuses)

    def read(self, response: Response, out: "Chunks") -> List[StatusCode]:
        """Copies the slots of a PREPARE_RETRIEVE answer into ``out[range index]``, one synchronisation,
        then the fencing check per slot. Returns a Status per slot entry (UNKNOWN_TRANSFER: recompute)."""
        client = self.client
        shape = client.layout_of(response).shape(client.chunk_tokens)
        dtype = torch_dtype(client.layout_of(response).dtype)
        targets = [_as_chunk(out[entry.range_index], dtype, shape, "output", entry.range_index, writable=True)
                   for entry in response.slots]
        devices: Set[Any] = set()
        try:
            for i, dst in enumerate(targets):
                self._copy(dst, self.slot_tensor(response, i), devices)
        finally:
            self._finish(devices)
        return [Status.OK if client.is_still_readable(response, i) else Status.UNKNOWN_TRANSFER
                for i in range(len(response.slots))]

    # ------------------------------------------------------------------------------------- paged
    def write_paged(self, response: Response, paged: PagedKV, block_ids: Any, staging_bytes: int,
                    buffers: int) -> List[StatusCode]:
        """Gathers the blocks of each reserved chunk into its slot (fenced), one synchronisation."""
        client = self.client
        layout = client.layout_of(response)
        paged.check_layout(layout, client.chunk_tokens)
        statuses = self._lease_check(response)
        if statuses is not None:
            return statuses
        n = paged.blocks_per_chunk(client.chunk_tokens)
        live = [i for i in range(len(response.slots)) if client.is_still_reserved(response, i)]
        ids = self._device_ids(paged, self._block_ids(paged, block_ids,
                                                      [response.slots[i].range_index for i in live], n))
        if paged.device.type == "cuda":
            self._write_paged_cuda(response, paged, live, ids, n, layout, staging_bytes, buffers)
        else:
            for k, i in enumerate(live):
                paged.gather(ids[k * n:(k + 1) * n], self.slot_tensor(response, i).unsqueeze(0))
        statuses = [Status.UNKNOWN_TRANSFER] * len(response.slots)
        for i in live:
            statuses[i] = Status.OK
        return self._recheck_reserved(response, statuses)

    def _write_paged_cuda(self, response: Response, paged: PagedKV, live: List[int], ids: Any, n: int, layout: Layout,
                          staging_bytes: int, buffers: int) -> None:
        torch = torch_module()
        shape = layout.shape(self.client.chunk_tokens)
        bufs = self.staging(paged.device, paged.dtype, shape, response.chunk_bytes, staging_bytes, buffers)
        per = bufs[0].shape[0]
        gather_stream = torch.cuda.current_stream(paged.device)     # after the engine's own work
        copy_stream = self.stream(paged.device)
        freed: List[Any] = [None] * len(bufs)
        try:
            self._gather_and_copy(response, paged, live, ids, n, bufs, per, gather_stream, copy_stream, freed)
        finally:
            copy_stream.synchronize()       # no copy in flight once this returns or raises (then: abort)

    def _gather_and_copy(self, response: Response, paged: PagedKV, live: List[int], ids: Any, n: int, bufs: List[Any],
                         per: int, gather_stream: Any, copy_stream: Any, freed: List[Any]) -> None:
        torch = torch_module()
        for g, first in enumerate(range(0, len(live), per)):
            group = live[first:first + per]
            buf = bufs[g % len(bufs)]
            if freed[g % len(bufs)] is not None:
                gather_stream.wait_event(freed[g % len(bufs)])
            paged.gather(ids[first * n:(first + len(group)) * n], buf[:len(group)])
            ready = torch.cuda.Event()
            ready.record(gather_stream)
            copy_stream.wait_event(ready)
            with torch.cuda.stream(copy_stream):
                for j, i in enumerate(group):
                    self.slot_tensor(response, i).copy_(buf[j], non_blocking=True)
                done = torch.cuda.Event()
                done.record(copy_stream)
            freed[g % len(bufs)] = done

    def read_paged(self, response: Response, paged: PagedKV, block_ids: Any, staging_bytes: int,
                   buffers: int) -> List[StatusCode]:
        """Copies each slot of a PREPARE_RETRIEVE answer into its blocks, one synchronisation, then the
        fencing check per slot. The blocks of a chunk that fails the check hold undefined data."""
        client = self.client
        layout = client.layout_of(response)
        paged.check_layout(layout, client.chunk_tokens)
        n = paged.blocks_per_chunk(client.chunk_tokens)
        every = list(range(len(response.slots)))
        flat = self._block_ids(paged, block_ids, [entry.range_index for entry in response.slots], n)
        if paged.device.type == "cuda":
            self._read_paged_cuda(response, paged, every, flat, n, layout, staging_bytes, buffers)
        else:
            for i, step in enumerate(self._scatter_plan(paged, flat, n, 1)):
                if step is not None:
                    paged.scatter(step[0], self.slot_tensor(response, i).unsqueeze(0), step[1])
        return [Status.OK if client.is_still_readable(response, i) else Status.UNKNOWN_TRANSFER for i in every]

    def _read_paged_cuda(self, response: Response, paged: PagedKV, every: List[int], flat: List[int], n: int,
                         layout: Layout, staging_bytes: int, buffers: int) -> None:
        torch = torch_module()
        shape = layout.shape(self.client.chunk_tokens)
        bufs = self.staging(paged.device, paged.dtype, shape, response.chunk_bytes, staging_bytes, buffers)
        per = bufs[0].shape[0]
        plan = self._scatter_plan(paged, flat, n, per)
        scatter_stream = torch.cuda.current_stream(paged.device)
        copy_stream = self.stream(paged.device)
        copy_stream.wait_stream(scatter_stream)         # staging buffers free of earlier work
        freed: List[Any] = [None] * len(bufs)
        for g, first in enumerate(range(0, len(every), per)):
            group = every[first:first + per]
            buf = bufs[g % len(bufs)]
            with torch.cuda.stream(copy_stream):
                if freed[g % len(bufs)] is not None:
                    copy_stream.wait_event(freed[g % len(bufs)])
                for j, i in enumerate(group):
                    buf[j].copy_(self.slot_tensor(response, i), non_blocking=True)
                ready = torch.cuda.Event()
                ready.record(copy_stream)
            scatter_stream.wait_event(ready)
            step = plan[g]
            if step is not None:
                paged.scatter(step[0], buf[:len(group)], step[1])
            done = torch.cuda.Event()
            done.record(scatter_stream)
            freed[g % len(bufs)] = done
        copy_stream.synchronize()
        scatter_stream.synchronize()

    # ------------------------------------------------------------------------------------- helpers
    def _lease_check(self, response: Response) -> Optional[List[StatusCode]]:
        """A Status per slot when too little of the store's lease is left to start writing, else None."""
        deadline = getattr(response, "deadline_ns", 0)
        if deadline:
            margin = int(self.client.lease_ns * LEASE_MARGIN_FRACTION)
            if time.monotonic_ns() > deadline - margin:
                return [Status.UNKNOWN_TRANSFER] * len(response.slots)
        return None

    def _recheck_reserved(self, response: Response, statuses: List[StatusCode]) -> List[StatusCode]:
        """After the copies: a slot whose reservation ended meanwhile is reported (its bytes may be torn)."""
        return [Status.UNKNOWN_TRANSFER if s == Status.OK and not self.client.is_still_reserved(response, i)
                else s for i, s in enumerate(statuses)]

    def _block_ids(self, paged: PagedKV, block_ids: Any, range_indices: List[int], n: int) -> List[int]:
        """The block ids of the chunks ``range_indices``, chunk after chunk, as a list of ints.
        ``block_ids``: the blocks of the key range, chunk 0 of the range first (n per chunk), as a
        sequence of ints or a 1-D integer tensor; -1 (retrieve only) leaves a block of the chunk unwritten."""
        torch = torch_module()
        table = block_ids.reshape(-1).tolist() if isinstance(block_ids, torch.Tensor) else list(block_ids)
        needed = (max(range_indices) + 1) * n if range_indices else 0
        if len(table) < needed:
            raise ValueError("%d block ids for chunk %d of the range: %d blocks of %d tokens per chunk"
                             % (len(table), max(range_indices), n, paged.block_size))
        flat = [int(b) for r in range_indices for b in table[r * n:(r + 1) * n]]
        for b in flat:
            if b >= paged.num_blocks:
                raise ValueError("block id %d of a cache of %d blocks" % (b, paged.num_blocks))
        return flat

    def _device_ids(self, paged: PagedKV, flat: List[int]) -> Any:
        torch = torch_module()
        if any(b < 0 for b in flat):
            raise ValueError("a store needs every block of its chunks: block id %d" % min(flat))
        return torch.tensor(flat, dtype=torch.int64).to(paged.device)

    def _scatter_plan(self, paged: PagedKV, flat: List[int], n: int, per: int) -> List[Optional[Tuple[Any, Any]]]:
        """Per group of ``per`` chunks: (device ids of the blocks to write, device positions of those blocks
        in the group's chunks or None when every block is written), or None when the group writes nothing."""
        torch = torch_module()
        plan: List[Optional[Tuple[Any, Any]]] = []
        for first in range(0, len(flat), per * n):
            part = flat[first:first + per * n]
            keep = [p for p, b in enumerate(part) if b >= 0]
            if not keep:
                plan.append(None)
            elif len(keep) == len(part):
                plan.append((torch.tensor(part, dtype=torch.int64).to(paged.device), None))
            else:
                plan.append((torch.tensor([part[p] for p in keep], dtype=torch.int64).to(paged.device),
                             torch.tensor(keep, dtype=torch.int64).to(paged.device)))
        return plan

    def _copy(self, dst: Any, src: Any, devices: Set[Any]) -> None:
        """``dst.copy_(src)``: non-blocking on the copy stream of the GPU side, plain between CPU tensors."""
        gpu = src if src.is_cuda else dst if dst.is_cuda else None
        if gpu is None:
            dst.copy_(src)
            return
        torch = torch_module()
        with torch.cuda.stream(self._enter(gpu.device, devices)):
            dst.copy_(src, non_blocking=True)

    def _enter(self, device: Any, devices: Set[Any]) -> Any:
        torch = torch_module()
        stream = self.stream(device)
        if device not in devices:
            stream.wait_stream(torch.cuda.current_stream(device))     # sources finished by the caller
            devices.add(device)
        return stream

    def _finish(self, devices: Set[Any]) -> None:
        for device in devices:
            self.stream(device).synchronize()


def _as_chunk(t: Any, dtype: Any, shape: Tuple[int, ...], what: str, index: int, writable: bool = False) -> Any:
    torch = torch_module()
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s of chunk %d is a %s, not a torch.Tensor" % (what, index, type(t).__name__))
    if t.dtype != dtype:
        raise TypeError("%s of chunk %d is %s; the registered layout is %s" % (what, index, t.dtype, dtype))
    count = 1
    for d in shape:
        count *= d
    if t.numel() != count:
        raise ValueError("%s of chunk %d has %d elements; a chunk %s has %d" % (what, index, t.numel(),
                                                                               list(shape), count))
    if t.shape == shape:
        return t
    if writable and not t.is_contiguous():
        raise ValueError("%s of chunk %d is not contiguous and not of the chunk shape %s"
                         % (what, index, list(shape)))
    return t.reshape(shape) if not writable else t.view(shape)


def _cuda_error(cudart: Any, err: Any) -> str:
    try:
        return cudart.cudaGetErrorString(err)
    except Exception:           # pragma: no cover - older bindings
        return "CUDA error"


def staging_options(staging_bytes: Optional[int], staging_buffers: Optional[int]) -> Tuple[int, int]:
    """(bytes per staging buffer, staging buffers) of the paged calls' options, defaults filled in."""
    return (STAGING_BYTES_DEFAULT if staging_bytes is None else int(staging_bytes),
            STAGING_BUFFERS_DEFAULT if staging_buffers is None else max(1, int(staging_buffers)))


def blocks_from(block_ids: Any, first: int, paged: PagedKV, chunk_tokens: int) -> Any:
    """The block ids of a key range's chunks from range index ``first`` on (a piece of a split range)."""
    return block_ids if first == 0 else block_ids[first * paged.blocks_per_chunk(chunk_tokens):]
