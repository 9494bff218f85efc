"""KV tensors into and out of the pool: CUDA pinning, slot tensors, bulk and paged store/retrieve.

torch is optional: importing ``kvstash`` never imports it; the first call that needs it does, and says
how to install it when it is missing (``pip install 'kvstash[torch]'``).

The tensor calls are ``Client`` methods (``pin_pool``, ``slot_tensor``, ``write_tensors``/``read_tensors``,
``store_tensors``/``retrieve_tensors`` and their ``_paged`` forms); this module gathers what they are made of:

- ``torch_dtypes``: torch on first use, and its dtypes against kvstash's;
- ``paged``: ``PagedKV``, an engine's paged KV cache (``[2, num_blocks, block_size, heads, head_size]``,
  ``[num_blocks, 2, block_size, heads, head_size]``, ``[num_blocks, heads, block_size, 2 * head_size]`` or MLA
  ``[num_blocks, block_size, head_size]``) and the gather/scatter of a chunk's blocks;
- ``pool_tensors``: ``PoolTensors``, the per-client state (the pool as a tensor, its CUDA registration,
  ``PinInfo``, streams, staging buffers) and the fenced copies;
- ``transfers``: ``TensorTransfer`` and the bulk store and retrieve over key ranges.

They use the client through ``kvstash.seam.TensorClient`` only, and the client imports them when a tensor call
first runs.
"""

from .paged import PagedKV
from .pool_tensors import (CUDA_HOST_REGISTER_PORTABLE, LEASE_MARGIN_FRACTION, STAGING_BUFFERS_DEFAULT,
                           STAGING_BYTES_DEFAULT, PinInfo, PoolTensors, blocks_from, staging_options)
from .torch_dtypes import kvstash_dtype, torch_dtype, torch_module
from .transfers import TensorTransfer, retrieve, store

__all__ = ["CUDA_HOST_REGISTER_PORTABLE", "LEASE_MARGIN_FRACTION", "PagedKV", "PinInfo", "PoolTensors",
           "STAGING_BUFFERS_DEFAULT", "STAGING_BYTES_DEFAULT", "TensorTransfer", "blocks_from", "kvstash_dtype",
           "retrieve", "staging_options", "store", "torch_dtype", "torch_module"]
