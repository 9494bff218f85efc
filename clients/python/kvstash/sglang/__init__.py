"""SGLang integration: ``KvStashHiCacheStorage``, a HiCache L3 storage backend (SGLang loads it with
``"module_path": "kvstash.sglang", "class_name": "KvStashHiCacheStorage"``; how to turn it on, its options and what
a key means: the module documentation of ``kvstash.sglang.backend``).

Needs SGLang and torch (``pip install 'kvstash[sglang]'``); the rest of the package does not.
"""

from .backend import KvStashHiCacheStorage
from .pages import page_key

__all__ = ["KvStashHiCacheStorage", "page_key"]
