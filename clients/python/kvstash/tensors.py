"""KV tensors into and out of the pool: CUDA pinning, slot tensors, bulk and paged store/retrieve.

torch is optional: importing ``kvstash`` never imports it; the first call that needs it does, and says
how to install it when it is missing (``pip install 'kvstash[torch]'``).

The pool mapping itself is the pinned staging buffer of a GPU worker: ``pin_pool()`` registers its data
region with CUDA once (``cudaHostRegister``), so a copy between GPU memory and a slot runs at the PCIe
limit with no second host copy, and ``close()`` unregisters it. Bulk calls move a batch of chunks with
non-blocking copies on a stream of their own and synchronise once before they commit or verify. The
fencing rules of docs/PROTOCOL.md §3.3 hold as for the byte calls: a slot is checked RESERVED (same
generation) before anything is copied into it, and READABLE (same generation) after its bytes have
arrived; a chunk that fails either check is reported, never committed or trusted.

Paged engine caches (per layer ``[2, num_blocks, block_size, heads, head_size]``,
``[num_blocks, 2, block_size, heads, head_size]`` or MLA ``[num_blocks, block_size, head_size]``) are
described by a ``PagedKV``; a chunk of C tokens is C / block_size blocks of every layer, gathered into
the chunk layout ``[2, L, C, H]`` (``[L, C, H]`` for MLA) on store and scattered back on retrieve. On a
GPU the gather and scatter run on the device into a staging buffer (two by default, so the gather of
one group of chunks overlaps the PCIe copy of the previous group); on the CPU they write the slots
directly.
"""

import time
from collections import namedtuple

from .client import pieces, range_chunks
from .errors import CudaUnavailableError
from .types import Dtype, Layout, Status

STAGING_BYTES_DEFAULT = 256 << 20       # one GPU staging buffer of the paged path (chunks are grouped to fit)
STAGING_BUFFERS_DEFAULT = 2             # gather of group g+1 overlaps the copy of group g
LEASE_MARGIN_FRACTION = 0.1             # do not start writing with less than this part of the lease left
CUDA_HOST_REGISTER_PORTABLE = 1         # pinned for every CUDA context of the process, not just one device

_TORCH_DTYPE_NAMES = {Dtype.FLOAT32: "float32", Dtype.FLOAT16: "float16", Dtype.BFLOAT16: "bfloat16",
                      Dtype.FLOAT8_E4M3FN: "float8_e4m3fn", Dtype.FLOAT8_E5M2: "float8_e5m2",
                      Dtype.INT8: "int8", Dtype.UINT8: "uint8"}

_torch = None


def torch_module():
    """The torch module, imported on first use; ImportError with the install line when it is missing."""
    global _torch
    if _torch is None:
        try:
            import torch
        except ImportError as ex:
            raise ImportError("kvstash tensor calls need torch: pip install 'kvstash[torch]' "
                              "(or pip install torch)") from ex
        _torch = torch
    return _torch


def torch_dtype(dtype):
    """The torch dtype of a kvstash dtype (a Dtype, its wire code or its name)."""
    return getattr(torch_module(), _TORCH_DTYPE_NAMES[Dtype.of(dtype)])


def kvstash_dtype(dtype):
    """The kvstash Dtype of a torch dtype; ValueError for a dtype the wire has no code for."""
    torch = torch_module()
    for code, name in _TORCH_DTYPE_NAMES.items():
        if getattr(torch, name, None) == dtype:
            return code
    raise ValueError("torch dtype %s has no kvstash dtype (supported: %s)"
                     % (dtype, ", ".join(_TORCH_DTYPE_NAMES.values())))


PinInfo = namedtuple("PinInfo", "bytes seconds")
PinInfo.__doc__ = """What pin_pool() registered: the bytes of the pool mapping and the seconds it took."""
PinInfo.gib_per_s = property(lambda self: self.bytes / (1 << 30) / self.seconds if self.seconds else 0.0)
PinInfo.s_per_gib = property(lambda self: self.seconds / (self.bytes / (1 << 30)) if self.bytes else 0.0)


class TensorTransfer:
    """Outcome of a bulk tensor store or retrieve.

    ``status``: OK, or the status of the request that failed (NO_SPACE, MISS, UNKNOWN_TRANSFER, ...).
    ``done``: range indices moved and good (stored and committed; read and verified). ``failed``: range
    indices whose slot failed its fencing check (a store's reservation ended; a retrieve's slot was
    reclaimed): never committed or trusted, recompute them. ``present``: range indices a store skipped
    because they were already stored. ``missing``: range indices a prefix retrieve did not read because the
    readable prefix ended before them (a chunk absent or not readable), from there to the end of the range;
    recompute them (every index when its status is MISS; always empty without ``prefix``). ``prepare``: the
    (first) PREPARE response; ``transfer_id`` its transfer; ``parts``: one TensorTransfer per request when a
    range over the server's limit was split.
    """

    __slots__ = ("status", "prepare", "done", "failed", "present", "missing", "bytes", "seconds", "message",
                 "parts")

    def __init__(self, status, prepare=None, done=(), failed=(), present=(), nbytes=0, seconds=0.0, message="",
                 missing=()):
        self.status = status
        self.prepare = prepare
        self.done = list(done)
        self.failed = list(failed)
        self.present = list(present)
        self.missing = list(missing)
        self.bytes = nbytes
        self.seconds = seconds
        self.message = message
        self.parts = [self]

    @property
    def ok(self):
        """Every chunk of the range is stored (or was already) / was read intact (none missing)."""
        return self.status == Status.OK and not self.failed and not self.missing

    @property
    def transfer_id(self):
        return self.prepare.transfer_id if self.prepare is not None else 0

    @property
    def gbps(self):
        return self.bytes / self.seconds / 1e9 if self.seconds else 0.0

    def __repr__(self):
        status = self.status.name if isinstance(self.status, Status) else self.status
        return "TensorTransfer(%s done=%d failed=%s present=%d%s bytes=%d %.3f s%s)" % (
            status, len(self.done), self.failed, len(self.present), _missing_repr(self.missing), self.bytes,
            self.seconds, (" %r" % self.message) if self.message else "")


def _missing_repr(missing):
    """`` missing=...`` for a repr: nothing when none, the indices when few, else the first and the count."""
    if not missing:
        return ""
    if len(missing) <= 8:
        return " missing=%s" % missing
    return " missing=%d (%d..%d)" % (len(missing), missing[0], missing[-1])


class PagedKV:
    """An engine's paged KV cache: one tensor per layer, every layer the same shape, dtype and device.

    ``kind`` is ``"kv_blocks"`` (``[2, num_blocks, block_size, heads, head_size]``, vLLM FlashAttention),
    ``"blocks_kv"`` (``[num_blocks, 2, block_size, heads, head_size]``), ``"blocks_heads"``
    (``[num_blocks, heads, block_size, 2 * head_size]``, K in the first half of the last dimension and V in
    the second: vLLM 0.33's FlashAttention, Triton and FlexAttention backends), ``"mla"``
    (``[num_blocks, block_size, head_size]``) or ``"auto"`` (read off the shape; ambiguous shapes are
    refused). The tensors may be strided views (the engine's own); they are indexed, never copied whole.
    """

    KINDS = ("kv_blocks", "blocks_kv", "blocks_heads", "mla")

    def __init__(self, kv_caches, kind="auto"):
        torch = torch_module()
        caches = list(kv_caches.values()) if isinstance(kv_caches, dict) else list(kv_caches)
        if not caches:
            raise ValueError("PagedKV needs at least one layer")
        first = caches[0]
        for layer, t in enumerate(caches):
            if not isinstance(t, torch.Tensor):
                raise TypeError("layer %d is a %s, not a torch.Tensor" % (layer, type(t).__name__))
            if t.shape != first.shape or t.dtype != first.dtype or t.device != first.device:
                raise ValueError("layer %d is %s %s on %s; layer 0 is %s %s on %s"
                                 % (layer, tuple(t.shape), t.dtype, t.device, tuple(first.shape), first.dtype,
                                    first.device))
        shape = tuple(first.shape)
        if kind == "auto":
            kind = _detect_kind(shape)
        if kind not in self.KINDS:
            raise ValueError("paged layout %r is not one of %s" % (kind, ", ".join(self.KINDS)))
        expected_dims = {"mla": 3, "blocks_heads": 4}.get(kind, 5)
        if len(shape) != expected_dims:
            raise ValueError("a %s cache has %d dimensions, these have shape %s" % (kind, expected_dims, shape))
        if kind == "kv_blocks" and shape[0] != 2 or kind == "blocks_kv" and shape[1] != 2:
            raise ValueError("a %s cache has K and V (2) in dimension %d, this one has shape %s"
                             % (kind, 0 if kind == "kv_blocks" else 1, shape))
        self.kind = kind
        self.caches = caches
        # Blocks move as raw integers of the same width: bit-exact for every dtype, and index kernels
        # exist for them on every device (torch has no CPU index_copy_ for float8).
        raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[first.element_size()]
        self._raw_dtype = raw
        self._raw = [t.view(raw) for t in caches]
        self.layers = len(caches)
        self.dtype = first.dtype
        self.device = first.device
        self.mla = kind == "mla"
        if kind == "kv_blocks":
            self.num_blocks, self.block_size = shape[1], shape[2]
            self.hidden = shape[3] * shape[4]
        elif kind == "blocks_kv":
            self.num_blocks, self.block_size = shape[0], shape[2]
            self.hidden = shape[3] * shape[4]
        elif kind == "blocks_heads":
            if shape[3] % 2:
                raise ValueError("a blocks_heads cache has K and V side by side in its last dimension, which "
                                 "must be even: shape %s" % (shape,))
            self.num_blocks, self.block_size = shape[0], shape[2]
            self.heads, self.head_size = shape[1], shape[3] // 2
            self.hidden = self.heads * self.head_size
        else:
            self.num_blocks, self.block_size, self.hidden = shape
        self._block_dim = 1 if kind == "kv_blocks" else 0

    def layout(self, model, world_size=1, rank=0):
        """The kvstash ``Layout`` whose chunks these caches fill (register it before storing)."""
        return Layout(model, world_size=world_size, rank=rank, layers=self.layers, hidden=self.hidden,
                      dtype=kvstash_dtype(self.dtype), mla=self.mla)

    def blocks_per_chunk(self, chunk_tokens):
        if chunk_tokens % self.block_size:
            raise ValueError("a chunk of %d tokens is not a whole number of %d-token blocks"
                             % (chunk_tokens, self.block_size))
        return chunk_tokens // self.block_size

    def check_layout(self, layout, chunk_tokens):
        """ValueError unless these caches fill chunks of ``layout`` (layers, hidden, dtype, MLA)."""
        mine = (self.layers, self.hidden, kvstash_dtype(self.dtype), self.mla)
        theirs = (layout.layers, layout.hidden, layout.dtype, layout.mla)
        if mine != theirs:
            raise ValueError("paged caches of %d layers, hidden %d, %s, mla=%s do not fill chunks of the "
                             "registered layout (%d layers, hidden %d, %s, mla=%s)"
                             % (mine[0], mine[1], mine[2].name.lower(), mine[3], theirs[0], theirs[1],
                                theirs[2].name.lower(), theirs[3]))
        self.blocks_per_chunk(chunk_tokens)

    def gather(self, ids, out):
        """Copies the blocks ``ids`` (int64 tensor on this device, ``G * n`` ids, chunk after chunk) into
        ``out`` (``[G, 2, L, C, H]`` or ``[G, L, C, H]``, any device-local tensor with contiguous chunks),
        on the current stream: two kernels per layer."""
        g = out.shape[0]
        n = ids.numel() // g
        bs, h = self.block_size, self.hidden
        out = out.view(self._raw_dtype)
        for layer, cache in enumerate(self._raw):
            picked = cache.index_select(self._block_dim, ids)
            if self.kind == "kv_blocks":        # [2, G*n, bs, h, d] -> [G, 2, n, bs, H]
                src = picked.view(2, g, n, bs, h).permute(1, 0, 2, 3, 4)
                out[:, :, layer].view(g, 2, n, bs, h).copy_(src)
            elif self.kind == "blocks_kv":      # [G*n, 2, bs, h, d] -> [G, 2, n, bs, H]
                src = picked.view(g, n, 2, bs, h).permute(0, 2, 1, 3, 4)
                out[:, :, layer].view(g, 2, n, bs, h).copy_(src)
            elif self.kind == "blocks_heads":   # [G*n, heads, bs, 2d] -> [G, 2, n, bs, heads, d]
                heads, d = self.heads, self.head_size
                src = picked.view(g, n, heads, bs, 2, d).permute(0, 4, 1, 3, 2, 5)
                out[:, :, layer].view(g, 2, n, bs, heads, d).copy_(src)
            else:                               # [G*n, bs, D] -> [G, n, bs, D]
                out[:, layer].view(g, n, bs, h).copy_(picked.view(g, n, bs, h))

    def scatter(self, ids, src, keep=None):
        """The inverse of ``gather``: writes chunks ``src`` into the blocks ``ids`` of every layer; with
        ``keep`` (positions among the ``G * n`` blocks of ``src``) only those blocks, into ``ids``."""
        g = src.shape[0]
        n = self._blocks_in(src)
        bs = self.block_size
        src = src.view(self._raw_dtype)
        for layer, cache in enumerate(self._raw):
            if self.kind == "kv_blocks":        # [G, 2, C, H] -> [2, G*n, bs, h, d]
                part = src[:, :, layer].reshape(g, 2, n, bs, -1).permute(1, 0, 2, 3, 4)
                part = part.reshape((2, g * n) + tuple(cache.shape[2:]))
            elif self.kind == "blocks_kv":      # [G, 2, C, H] -> [G*n, 2, bs, h, d]
                part = src[:, :, layer].reshape(g, 2, n, bs, -1).permute(0, 2, 1, 3, 4)
                part = part.reshape((g * n,) + tuple(cache.shape[1:]))
            elif self.kind == "blocks_heads":   # [G, 2, C, H] -> [G*n, heads, bs, 2d]
                part = src[:, :, layer].reshape(g, 2, n, bs, self.heads, self.head_size).permute(0, 2, 4, 3, 1, 5)
                part = part.reshape((g * n,) + tuple(cache.shape[1:]))
            else:                               # [G, C, D] -> [G*n, bs, D]
                part = src[:, layer].reshape((g * n,) + tuple(cache.shape[1:]))
            if keep is not None:
                part = part.index_select(self._block_dim, keep)
            cache.index_copy_(self._block_dim, ids, part)

    def _blocks_in(self, chunks):
        """Blocks per chunk of a ``[G, 2, L, C, H]`` / ``[G, L, C, H]`` tensor."""
        return chunks.shape[3 if not self.mla else 2] // self.block_size


def _detect_kind(shape):
    if len(shape) == 3:
        return "mla"
    if len(shape) == 4:
        return "blocks_heads"
    if len(shape) == 5:
        if shape[0] == 2 and shape[1] != 2:
            return "kv_blocks"
        if shape[1] == 2 and shape[0] != 2:
            return "blocks_kv"
        raise ValueError("cannot tell the paged layout of shape %s: pass kind='kv_blocks' or 'blocks_kv'"
                         % (shape,))
    raise ValueError("a paged KV cache has 5 or 4 dimensions (3 for MLA), not shape %s" % (shape,))


class PoolTensors:
    """Per-client tensor state: the pool as one uint8 tensor, the CUDA registration, streams and
    staging buffers. Owned by one Client (same thread rules); ``release()`` runs before the pool is
    unmapped."""

    def __init__(self, client):
        torch = torch_module()
        if client._pool is None:
            raise RuntimeError("a copy-transport client has no pool mapping: tensor calls need the "
                               "shared-memory transport (connect without copy_transport)")
        self.client = client
        self.pool = torch.frombuffer(client._pool_view, dtype=torch.uint8)   # the data region (§3.2)
        self.pin_info = None
        self._registered_ptr = 0
        self._streams = {}
        self._staging = {}

    # ------------------------------------------------------------------------------------- pinning
    def pin(self):
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

    def unpin(self):
        if self._registered_ptr:
            torch = torch_module()
            torch.cuda.synchronize()            # no copy may still be in flight into the mapping
            torch.cuda.cudart().cudaHostUnregister(self._registered_ptr)
            self._registered_ptr = 0
            self.pin_info = None

    def release(self):
        """Unregisters the pool from CUDA and drops every tensor over it (before the unmap)."""
        try:
            self.unpin()
        finally:
            self._staging.clear()
            self._streams.clear()
            self.pool = None

    # ------------------------------------------------------------------------------------- slots
    def slot_tensor(self, response, i):
        client = self.client
        entry = response.slots[i]
        layout = client._layout_of(response)
        flat = self.pool[entry.offset:entry.offset + response.chunk_bytes]
        return flat.view(torch_dtype(layout.dtype)).view(layout.shape(client.chunk_tokens))

    def stream(self, device):
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = torch_module().cuda.Stream(device)
        return stream

    def staging(self, device, dtype, shape, chunk_bytes, staging_bytes, buffers):
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
    def write(self, response, tensors):
        """Fenced copies of ``tensors[range index]`` into the reserved slots of a PREPARE_STORE answer,
        one synchronisation at the end. Returns a Status per slot entry."""
        client = self.client
        statuses = self._lease_check(response)
        if statuses is not None:
            return statuses
        shape = client._layout_of(response).shape(client.chunk_tokens)
        dtype = torch_dtype(client._layout_of(response).dtype)
        statuses = []
        devices = set()
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

    def read(self, response, out):
        """Copies the slots of a PREPARE_RETRIEVE answer into ``out[range index]``, one synchronisation,
        then the fencing check per slot. Returns a Status per slot entry (UNKNOWN_TRANSFER: recompute)."""
        client = self.client
        shape = client._layout_of(response).shape(client.chunk_tokens)
        dtype = torch_dtype(client._layout_of(response).dtype)
        targets = [_as_chunk(out[entry.range_index], dtype, shape, "output", entry.range_index, writable=True)
                   for entry in response.slots]
        devices = set()
        try:
            for i, dst in enumerate(targets):
                self._copy(dst, self.slot_tensor(response, i), devices)
        finally:
            self._finish(devices)
        return [Status.OK if client.is_still_readable(response, i) else Status.UNKNOWN_TRANSFER
                for i in range(len(response.slots))]

    # ------------------------------------------------------------------------------------- paged
    def write_paged(self, response, paged, block_ids, staging_bytes, buffers):
        """Gathers the blocks of each reserved chunk into its slot (fenced), one synchronisation."""
        client = self.client
        layout = client._layout_of(response)
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

    def _write_paged_cuda(self, response, paged, live, ids, n, layout, staging_bytes, buffers):
        torch = torch_module()
        shape = layout.shape(self.client.chunk_tokens)
        bufs = self.staging(paged.device, paged.dtype, shape, response.chunk_bytes, staging_bytes, buffers)
        per = bufs[0].shape[0]
        gather_stream = torch.cuda.current_stream(paged.device)     # after the engine's own work
        copy_stream = self.stream(paged.device)
        freed = [None] * len(bufs)
        try:
            self._gather_and_copy(response, paged, live, ids, n, bufs, per, gather_stream, copy_stream, freed)
        finally:
            copy_stream.synchronize()       # no copy in flight once this returns or raises (then: abort)

    def _gather_and_copy(self, response, paged, live, ids, n, bufs, per, gather_stream, copy_stream, freed):
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

    def read_paged(self, response, paged, block_ids, staging_bytes, buffers):
        """Copies each slot of a PREPARE_RETRIEVE answer into its blocks, one synchronisation, then the
        fencing check per slot. The blocks of a chunk that fails the check hold undefined data."""
        client = self.client
        layout = client._layout_of(response)
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

    def _read_paged_cuda(self, response, paged, every, flat, n, layout, staging_bytes, buffers):
        torch = torch_module()
        shape = layout.shape(self.client.chunk_tokens)
        bufs = self.staging(paged.device, paged.dtype, shape, response.chunk_bytes, staging_bytes, buffers)
        per = bufs[0].shape[0]
        plan = self._scatter_plan(paged, flat, n, per)
        scatter_stream = torch.cuda.current_stream(paged.device)
        copy_stream = self.stream(paged.device)
        copy_stream.wait_stream(scatter_stream)         # staging buffers free of earlier work
        freed = [None] * len(bufs)
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
            if plan[g] is not None:
                paged.scatter(plan[g][0], buf[:len(group)], plan[g][1])
            done = torch.cuda.Event()
            done.record(scatter_stream)
            freed[g % len(bufs)] = done
        copy_stream.synchronize()
        scatter_stream.synchronize()

    # ------------------------------------------------------------------------------------- helpers
    def _lease_check(self, response):
        """A Status per slot when too little of the store's lease is left to start writing, else None."""
        deadline = getattr(response, "deadline_ns", 0)
        if deadline:
            margin = int(self.client.lease_ns * LEASE_MARGIN_FRACTION)
            if time.monotonic_ns() > deadline - margin:
                return [Status.UNKNOWN_TRANSFER] * len(response.slots)
        return None

    def _recheck_reserved(self, response, statuses):
        """After the copies: a slot whose reservation ended meanwhile is reported (its bytes may be torn)."""
        return [Status.UNKNOWN_TRANSFER if s == Status.OK and not self.client.is_still_reserved(response, i)
                else s for i, s in enumerate(statuses)]

    def _block_ids(self, paged, block_ids, range_indices, n):
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

    def _device_ids(self, paged, flat):
        torch = torch_module()
        if any(b < 0 for b in flat):
            raise ValueError("a store needs every block of its chunks: block id %d" % min(flat))
        return torch.tensor(flat, dtype=torch.int64).to(paged.device)

    def _scatter_plan(self, paged, flat, n, per):
        """Per group of ``per`` chunks: (device ids of the blocks to write, device positions of those blocks
        in the group's chunks or None when every block is written), or None when the group writes nothing."""
        torch = torch_module()
        plan = []
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

    def _copy(self, dst, src, devices):
        """``dst.copy_(src)``: non-blocking on the copy stream of the GPU side, plain between CPU tensors."""
        gpu = src if src.is_cuda else dst if dst.is_cuda else None
        if gpu is None:
            dst.copy_(src)
            return
        torch = torch_module()
        with torch.cuda.stream(self._enter(gpu.device, devices)):
            dst.copy_(src, non_blocking=True)

    def _enter(self, device, devices):
        torch = torch_module()
        stream = self.stream(device)
        if device not in devices:
            stream.wait_stream(torch.cuda.current_stream(device))     # sources finished by the caller
            devices.add(device)
        return stream

    def _finish(self, devices):
        for device in devices:
            self.stream(device).synchronize()


def _as_chunk(t, dtype, shape, what, index, writable=False):
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


def _cuda_error(cudart, err):
    try:
        return cudart.cudaGetErrorString(err)
    except Exception:           # pragma: no cover - older bindings
        return "CUDA error"


# ----------------------------------------------------------------------------------------- bulk calls
def staging_options(staging_bytes, staging_buffers):
    return (STAGING_BYTES_DEFAULT if staging_bytes is None else int(staging_bytes),
            STAGING_BUFFERS_DEFAULT if staging_buffers is None else max(1, int(staging_buffers)))


def state(client):
    """The client's PoolTensors, made on first use."""
    if client._tensors is None:
        client.check_connection()
        client._tensors = PoolTensors(client)
    return client._tensors


def blocks_from(block_ids, first, paged, chunk_tokens):
    """The block ids of a key range's chunks from range index ``first`` on (a piece of a split range)."""
    return block_ids if first == 0 else block_ids[first * paged.blocks_per_chunk(chunk_tokens):]


def store(client, instance, write, keys=None, tokens=None, from_chunk=0, to_chunk=-1, salt=None):
    """PREPARE_STORE, ``write(prepare, first) -> [Status per slot]``, then COMMIT_STORE when every slot was
    written under its reservation, else ABORT_STORE; a failure of ``write`` aborts and re-raises. A range
    over the server's limit goes as several stores (``first`` = the piece's first range index), stopping at
    the first that fails (later chunks would be unreachable behind it), reported together."""
    parts = pieces(client, keys, tokens, from_chunk, to_chunk)
    results = []
    for first, part_keys, part_tokens, part_from, part_to in parts:
        result = _store_piece(client, instance, lambda p, f=first: write(p, f), part_keys, part_tokens, part_from,
                              part_to, salt)
        results.append((first, result))
        if result.status != Status.OK or result.failed:
            break
    return _merged(results)


def _store_piece(client, instance, write, keys, tokens, from_chunk, to_chunk, salt):
    start = time.perf_counter()
    prepare = client.prepare_store(instance, keys, tokens=tokens, from_chunk=from_chunk, to_chunk=to_chunk,
                                   salt=salt)
    if not prepare.ok:
        return TensorTransfer(prepare.status, prepare, message=prepare.message,
                              seconds=time.perf_counter() - start)
    reserved = {entry.range_index for entry in prepare.slots}
    present = [r for r in range(range_chunks(client, keys, tokens, from_chunk, to_chunk)) if r not in reserved]
    if not prepare.transfer_id:                                     # every chunk already stored
        return TensorTransfer(Status.OK, prepare, present=present, seconds=time.perf_counter() - start)
    try:
        statuses = write(prepare)
    except BaseException:
        client.abort_store(instance, prepare)
        raise
    written = [prepare.slots[i].range_index for i, s in enumerate(statuses) if s == Status.OK]
    fenced = [prepare.slots[i].range_index for i, s in enumerate(statuses) if s != Status.OK]
    if fenced:                              # the reservation ended: nothing of it may be published
        client.abort_store(instance, prepare)
        return TensorTransfer(Status.UNKNOWN_TRANSFER, prepare, failed=sorted(written + fenced), present=present,
                              seconds=time.perf_counter() - start,
                              message="the store's reservation ended before its chunks were written")
    commit = client.commit_store(instance, prepare)
    seconds = time.perf_counter() - start
    if not commit.ok:
        return TensorTransfer(commit.status, prepare, failed=written, present=present, seconds=seconds,
                              message=commit.message)
    return TensorTransfer(Status.OK, prepare, done=written, present=present,
                          nbytes=len(written) * prepare.chunk_bytes, seconds=seconds)


def retrieve(client, instance, read, keys=None, tokens=None, from_chunk=0, to_chunk=-1, salt=None,
             lookup=None, prefix=False):
    """PREPARE_RETRIEVE (by keys, tokens or a pinned lookup), ``read(prepare, first) -> [Status per slot]``,
    COMMIT_RETRIEVE. All or nothing: MISS reads nothing and leaves no pin, also when a range over the
    server's limit goes as several retrieves (every piece is prepared, and pinned, before any is read).

    With ``prefix`` (keys or tokens only) the readable leading chunks are read instead: each piece is prepared
    with PREFIX in turn; a piece answered with fewer slots than its chunks, or a MISS on a piece after the
    first, ends the prefix there (later pieces are not prepared), and the range indices from there on are the
    result's ``missing``. A MISS on the first piece is the MISS of the whole call (no pin left held)."""
    if prefix and lookup is not None:
        raise ValueError("prefix retrieves a key range; a lookup's transfer is taken over whole")
    start = time.perf_counter()
    parts = [(0, None, None, 0, -1)] if lookup is not None else pieces(client, keys, tokens, from_chunk, to_chunk)
    total = range_chunks(client, keys, tokens, from_chunk, to_chunk) if prefix else 0
    prepared = []
    end = None                                                      # where the readable prefix ended
    for first, part_keys, part_tokens, part_from, part_to in parts:
        prepare = client.prepare_retrieve(instance, part_keys, tokens=part_tokens, from_chunk=part_from,
                                          to_chunk=part_to, salt=salt, lookup=lookup, prefix=prefix)
        if prefix and prepare.status == Status.MISS and prepared:
            end = first                                             # the prefix ended with the piece before
            break
        if not prepare.ok:
            for _, held in prepared:                                # no pin is left held
                client.commit_retrieve(instance, held)
            missing = range(total) if prefix and prepare.status == Status.MISS else ()
            return TensorTransfer(prepare.status, prepare, message=prepare.message, missing=missing,
                                  seconds=time.perf_counter() - start)
        prepared.append((first, prepare))
        if prefix and len(prepare.slots) < range_chunks(client, part_keys, part_tokens, part_from, part_to):
            end = first + len(prepare.slots)
            break
    results = []
    for first, prepare in prepared:
        piece_start = time.perf_counter()
        statuses = None
        try:
            statuses = read(prepare, first)
        finally:
            commit = client.commit_retrieve(instance, prepare)
            if statuses is None:                                    # read raised: release the rest as well
                for _, held in prepared[len(results) + 1:]:
                    client.commit_retrieve(instance, held)
        good = [prepare.slots[i].range_index for i, s in enumerate(statuses) if s == Status.OK]
        bad = [prepare.slots[i].range_index for i, s in enumerate(statuses) if s != Status.OK]
        results.append((first, TensorTransfer(Status.OK if commit.ok else commit.status, prepare, done=good,
                                              failed=bad, nbytes=len(good) * prepare.chunk_bytes,
                                              seconds=time.perf_counter() - piece_start, message=commit.message)))
    merged = _merged(results)
    merged.seconds = time.perf_counter() - start
    if end is not None:
        merged.missing = list(range(end, total))
    return merged


def _merged(results):
    """One TensorTransfer of the pieces ``[(first range index, TensorTransfer)]``: range indices of the whole
    range, the first failed status, every piece in ``parts``."""
    if len(results) == 1:
        results[0][1].parts = [results[0][1]]
        return results[0][1]
    status, message = Status.OK, ""
    for _, r in results:
        if r.status != Status.OK:
            status, message = r.status, r.message
            break
    merged = TensorTransfer(status, results[0][1].prepare,
                            done=[first + i for first, r in results for i in r.done],
                            failed=[first + i for first, r in results for i in r.failed],
                            present=[first + i for first, r in results for i in r.present],
                            nbytes=sum(r.bytes for _, r in results), seconds=sum(r.seconds for _, r in results),
                            message=message)
    merged.parts = [r for _, r in results]
    return merged
