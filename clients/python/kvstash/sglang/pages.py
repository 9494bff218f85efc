"""Page helpers of the SGLang backend: a page's kvstash key, the namespace fields of a host pool's page format, and
the checks that a page tensor or a run of host indices is what the backend may copy (module documentation of
``kvstash.sglang.backend``)."""

import hashlib
import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

logger = logging.getLogger("kvstash.sglang")

POOL_ATTRIBUTES = ("layout", "page_size", "head_num", "head_dim", "v_head_dim", "layer_num", "target_layer_num",
                   "start_layer", "end_layer", "kv_lora_rank", "qk_rope_head_dim", "kv_cache_dim", "head_group_num",
                   "storage_format_tag", "dcp_size", "dcp_rank", "dtype")


def page_key(key: str) -> Tuple[int, int]:
    """The 128-bit kvstash key (hi, lo) of SGLang's page key string: SHA-256 of its UTF-8 bytes, first 16."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:16], "big")


def pool_fields(pool: Any, page: torch.Tensor, shape: Optional[Sequence[int]]) -> Dict[str, Any]:
    """Namespace fields of a host pool's page format: its class and every attribute of it that shapes a page."""
    fields: Dict[str, Any] = {"pool": type(pool).__name__, "shape": "x".join(str(d) for d in shape) if shape else None,
                              "flat_elements": page.numel()}
    for name in POOL_ATTRIBUTES:
        try:
            value = getattr(pool, name, None)
        except Exception:                   # a property that needs state the pool has not got
            continue
        if isinstance(value, torch.dtype):
            value = dtype_name(value)
        if isinstance(value, (bool, int, str)):
            fields["pool_" + name] = value
    return fields


def page_bytes_of(value: Any, page_bytes: int) -> Optional[torch.Tensor]:
    """A page tensor (any dtype, any device) as flat uint8 bytes, or None when it is not one page of
    ``page_bytes``."""
    if not isinstance(value, torch.Tensor):
        return None
    if value.numel() * value.element_size() != page_bytes:
        logger.warning("kvstash: a page of %d bytes, expected %d; not stored", value.numel() * value.element_size(),
                       page_bytes)
        return None
    return value.reshape(-1).contiguous().view(torch.uint8)


def host_pages(keys: Sequence[str], host_indices: Any, page_size: int) -> Optional[List[int]]:
    """The first host index of each key's page, or None when ``host_indices`` are not ``len(keys)`` whole,
    page-aligned pages of ``page_size`` tokens: SGLang's pool takes a page by its first index, and from another
    place than the one meant when the indices are not that (a page copied there would be a wrong page)."""
    ps = page_size
    if ps <= 0 or not isinstance(host_indices, torch.Tensor) or host_indices.numel() != len(keys) * ps:
        logger.error("kvstash: %s host indices for %d pages of %d tokens; answering False",
                     getattr(host_indices, "shape", "?"), len(keys), ps)
        return None
    pages = host_indices.reshape(len(keys), ps).to("cpu", torch.int64)
    starts = pages[:, 0]
    if bool((starts % ps != 0).any()) or not torch.equal(pages - starts[:, None],
                                                           torch.arange(ps).expand(len(keys), ps)):
        logger.error("kvstash: host indices that are not whole page-aligned pages; answering False")
        return None
    return [int(s) for s in starts.tolist()]


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
