"""Engines' paged KV caches (``PagedKV``): their layouts, and the gather and scatter of a chunk's blocks.

A chunk of C tokens is C / block_size blocks of every layer, gathered into the chunk layout ``[2, L, C, H]``
(``[L, C, H]`` for MLA) on store and scattered back on retrieve; the tensors are indexed, never copied whole.
"""

from typing import Any, Dict, Optional, Sequence, Tuple, Union

from .torch_dtypes import kvstash_dtype, torch_module
from .types import Layout

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

    def __init__(self, kv_caches: Union[Dict[Any, Any], Sequence[Any]], kind: str = "auto") -> None:
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

    def layout(self, model: str, world_size: int = 1, rank: int = 0) -> Layout:
        """The kvstash ``Layout`` whose chunks these caches fill (register it before storing)."""
        return Layout(model, world_size=world_size, rank=rank, layers=self.layers, hidden=self.hidden,
                      dtype=kvstash_dtype(self.dtype), mla=self.mla)

    def blocks_per_chunk(self, chunk_tokens: int) -> int:
        """Blocks per chunk of ``chunk_tokens`` tokens; ValueError unless a whole number."""
        if chunk_tokens % self.block_size:
            raise ValueError("a chunk of %d tokens is not a whole number of %d-token blocks"
                             % (chunk_tokens, self.block_size))
        return chunk_tokens // self.block_size

    def check_layout(self, layout: Layout, chunk_tokens: int) -> None:
        """ValueError unless these caches fill chunks of ``layout`` (layers, hidden, dtype, MLA)."""
        mine = (self.layers, self.hidden, kvstash_dtype(self.dtype), self.mla)
        theirs = (layout.layers, layout.hidden, layout.dtype, layout.mla)
        if mine != theirs:
            raise ValueError("paged caches of %d layers, hidden %d, %s, mla=%s do not fill chunks of the "
                             "registered layout (%d layers, hidden %d, %s, mla=%s)"
                             % (mine[0], mine[1], mine[2].name.lower(), mine[3], theirs[0], theirs[1],
                                theirs[2].name.lower(), theirs[3]))
        self.blocks_per_chunk(chunk_tokens)

    def gather(self, ids: Any, out: Any) -> None:
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

    def scatter(self, ids: Any, src: Any, keep: Optional[Any] = None) -> None:
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

    def _blocks_in(self, chunks: Any) -> int:
        """Blocks per chunk of a ``[G, 2, L, C, H]`` / ``[G, L, C, H]`` tensor."""
        return chunks.shape[3 if not self.mla else 2] // self.block_size


def _detect_kind(shape: Tuple[int, ...]) -> str:
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
