"""SGLang HiCache L3 storage backend on kvstash: ``kvstash.sglang.KvStashHiCacheStorage``.

Turned on with (SGLang 0.5.23; kvstash installed in SGLang's environment with ``pip install
'./clients/python[sglang]'``, or ``clients/python`` on ``PYTHONPATH``; a kvstash server running on the same
host, e.g. ``./kvstash serve --dir /dev/shm/kvstash-$USER``)::

    python -m sglang.launch_server --model-path MODEL --page-size 64 \\
        --enable-hierarchical-cache --hicache-storage-backend dynamic \\
        --hicache-storage-backend-extra-config '{"backend_name":"kvstash","module_path":"kvstash.sglang",
            "class_name":"KvStashHiCacheStorage","interface_v1":1,"dir":"/dev/shm/kvstash-USER"}'

``"interface_v1": 1`` is SGLang's own switch for the zero-copy path (``batch_get_v1``/``batch_set_v1``:
pages are copied straight between SGLang's host memory pool and the kvstash pool, one copy each way);
without it SGLang uses the older ``batch_get``/``batch_set`` with one extra copy per page on its side.
Both paths write the same bytes, so engines with and without it share pages.

Options in the same JSON object: ``dir`` (the server's directory; default ``/dev/shm/kvstash-$USER``),
``timeout_s`` (5: bound of every wait for the server), ``reconnect_s`` (1: how long a lost server is left
alone before the next attempt), ``model`` (the namespace's model name; default SGLang's model name),
``page_bytes`` (only for use without a host pool: the bytes of one page), ``log_interval_s`` (60: the
backend's counters, ``stats``, logged at INFO under ``kvstash.sglang`` this often while it is used; 0: never).

How it works:
- **Keys.** SGLang names each page by a string (its prefix-chained page hash). A page's kvstash key is the
  first 16 bytes of SHA-256 of that string (UTF-8), so any string works and keys spread evenly.
- **Namespace.** kvstash's namespace is (model, world size, rank). The model part is SGLang's model name
  plus the page format (host pool layout, dtype, page size, page bytes) and the pipeline / context-parallel
  stage; world size and rank are the tensor-parallel size and rank, or 1 and 0 for MLA models, whose KV is
  the same on every rank (SGLang lets only one rank write it). Engines whose pages have other bytes thus
  never read each other's pages, and the server never sees two layouts for one namespace.
- **One page = one kvstash chunk.** The server's ``--chunk-tokens`` is fixed per server while SGLang's
  page size is the engine's, so the registered layout is not a KV shape but a byte container: dtype
  ``uint8``, 1 layer, hidden = ceil(page bytes / (2 x chunk tokens)), i.e. ``Layout.chunk_bytes(chunk_tokens)``
  is the page's bytes rounded up to a multiple of 2 x chunk tokens (less than 2 x chunk tokens wasted per
  page). A chunk holds the page's bytes in the order of SGLang's flat data page (``get_data_page``), the
  order the generic path hands over. Start the server with ``--chunk-tokens`` equal to the page size when
  nothing else shares it; any value works.
- **Calls.** ``batch_exists``/``exists``: LOOKUP (the leading readable pages). ``batch_get(_v1)``/``get``:
  PREPARE_RETRIEVE (all or nothing; on MISS a pinned LOOKUP takes the readable prefix instead), copy each
  slot out, check the slot is still readable under its generation (fencing), COMMIT_RETRIEVE; a page that
  fails the check is a miss. ``batch_set(_v1)``/``set``: PREPARE_STORE (pages already stored are skipped and
  count as stored), fenced copy into each reserved slot, COMMIT_STORE; NO_SPACE or an ended lease is False.
- **Failures.** A MISS, an evicted or fenced page, NO_SPACE, a timeout, a server that is gone or restarted:
  misses, 0 and False, never an exception into SGLang. Every wait is bounded by ``timeout_s`` (and a
  caller waits for another thread's call at most that long); a lost server is tried again every
  ``reconnect_s`` and the backend re-registers by itself when it is back.
- **Threads.** SGLang calls the backend from its prefetch and backup threads; one kvstash client is
  shared under a lock (a client is not thread-safe).
"""

import hashlib
import logging
import secrets
import threading
import time
from typing import Any, List, Optional

import torch
from sglang.srt.mem_cache.hicache_storage import HiCacheStorage, HiCacheStorageConfig, HiCacheStorageExtraInfo

import kvstash
from kvstash import KvStashError, Status
from kvstash.reconnect import Reconnecting, Refused

logger = logging.getLogger("kvstash.sglang")

TIMEOUT_DEFAULT_S = 5.0
RECONNECT_DEFAULT_S = 1.0
LOG_INTERVAL_DEFAULT_S = 60.0
MODEL_NAME_MAX = 255                    # bytes of a kvstash model name (REGISTER)

__all__ = ["KvStashHiCacheStorage", "page_key"]


def page_key(key: str) -> tuple:
    """The 128-bit kvstash key (hi, lo) of SGLang's page key string: SHA-256 of its UTF-8 bytes, first 16."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:16], "big")


class KvStashHiCacheStorage(HiCacheStorage):
    """SGLang HiCache storage backend on kvstash (see the module documentation)."""

    def __init__(self, storage_config: Optional[HiCacheStorageConfig] = None, kwargs: Optional[dict] = None):
        extra = dict((storage_config.extra_config if storage_config is not None else None) or {})
        self.directory = extra.get("dir") or kvstash.default_directory()
        self.timeout_s = float(extra.get("timeout_s", TIMEOUT_DEFAULT_S))
        self.reconnect_s = float(extra.get("reconnect_s", RECONNECT_DEFAULT_S))
        self.log_interval_s = float(extra.get("log_interval_s", LOG_INTERVAL_DEFAULT_S))
        self._next_log = time.monotonic() + self.log_interval_s
        model = extra.get("model") or (storage_config.model_name if storage_config is not None else None) or "sglang"
        self._model_base = str(model)
        self._stage = ""
        if storage_config is not None:
            mla = bool(storage_config.is_mla_model)
            self.world_size = 1 if mla else int(storage_config.tp_size)
            self.rank = 0 if mla else int(storage_config.tp_rank)
            if storage_config.pp_size > 1:
                self._stage += ":pp%d/%d" % (storage_config.pp_rank, storage_config.pp_size)
            if getattr(storage_config, "attn_cp_size", 1) > 1:
                self._stage += ":cp%d/%d" % (storage_config.attn_cp_rank, storage_config.attn_cp_size)
            if getattr(storage_config, "dcp_size", 1) > 1:
                self._stage += ":dcp%d/%d" % (storage_config.dcp_rank, storage_config.dcp_size)
        else:
            self.world_size, self.rank = 1, 0
        self.mem_pool_host = None
        self._page_bytes = int(extra["page_bytes"]) if extra.get("page_bytes") else None
        self._page_dtype = torch.uint8
        self._page_shape = None             # shape and dtype of get_data_page(i, flat=False), for zero copy
        self._view_dtype = torch.uint8
        self._format = "flat"
        self.model_name = None
        self._instance = secrets.randbits(62) | 1
        self._lock = threading.Lock()
        self._connection = Reconnecting(self.directory, self.timeout_s, self.reconnect_s, logger,
                                        "HiCache L3 misses", self._register)
        self._closed = False
        self.stats = {"exists_queries": 0, "exists_hits": 0, "get_pages": 0, "get_hits": 0, "get_fenced": 0,
                      "set_pages": 0, "set_stored": 0, "set_present": 0, "set_failed": 0, "unavailable": 0,
                      "errors": 0}
        if self._page_bytes:
            self._set_format("flat", torch.uint8, self._page_bytes)

    # ------------------------------------------------------------------------------------------ setup
    def register_mem_pool_host(self, mem_pool_host):
        """SGLang hands over its host pool right after construction: the page format comes from it."""
        super().register_mem_pool_host(mem_pool_host)
        try:
            page = mem_pool_host.get_dummy_flat_data_page()
        except Exception:                   # a pool without flat pages: nothing to store, misses only
            logger.exception("kvstash: SGLang's %s has no flat data page; HiCache L3 stays empty",
                             type(mem_pool_host).__name__)
            return
        page_bytes = page.numel() * page.element_size()
        try:
            view = mem_pool_host.get_data_page(0, flat=False)
            shape, dtype = tuple(view.shape), view.dtype
            if _numel(shape) * view.element_size() != page_bytes:
                shape = None
        except Exception:                   # a layout without page views: the generic path only
            shape, dtype = None, page.dtype
        self._page_shape = shape
        self._view_dtype = dtype
        tag = "%s:%s:p%d" % (getattr(mem_pool_host, "layout", "?"), str(page.dtype).replace("torch.", ""),
                             getattr(mem_pool_host, "page_size", 0))
        self._set_format(tag, page.dtype, page_bytes)

    def _set_format(self, format_tag, dtype, page_bytes):
        with self._lock:
            self._page_bytes = int(page_bytes)
            self._page_dtype = dtype
            self._format = format_tag
            name = "%s|sglang:%s:%dB%s" % (self._model_base, format_tag, self._page_bytes, self._stage)
            if len(name.encode("utf-8")) > MODEL_NAME_MAX:
                base = hashlib.sha256(self._model_base.encode("utf-8")).hexdigest()[:32]
                name = "%s|sglang:%s:%dB%s" % (base, format_tag, self._page_bytes, self._stage)
            self.model_name = name
            self._connection.retry_now()        # a new layout: register it on the next connection

    def layout(self, chunk_tokens: int) -> kvstash.Layout:
        """The kvstash layout registered for pages of this backend on a server of ``chunk_tokens``."""
        hidden = -(-self._page_bytes // (2 * chunk_tokens))
        return kvstash.Layout(self.model_name, world_size=self.world_size, rank=self.rank, layers=1,
                              hidden=hidden, dtype="uint8")

    def _register(self, client):
        r = client.register(self._instance, self.layout(client.chunk_tokens))
        if not r.ok:
            raise Refused("REGISTER %s: %s %s" % (self.model_name, r.status.name, r.message))

    # ------------------------------------------------------------------------------------------ plumbing
    def _client(self):
        """The connected client, or None (no page format yet, or no server). Call with the lock held."""
        if self._page_bytes is None or self._closed:
            return None
        now = time.monotonic()
        if self.log_interval_s > 0 and now >= self._next_log:
            self._next_log = now + self.log_interval_s
            logger.info("kvstash: %s", " ".join("%s=%d" % kv for kv in self.stats.items()))
        return self._connection.get()

    def _locked(self):
        if self._lock.acquire(timeout=self.timeout_s):
            return True
        logger.warning("kvstash: another call held the backend for over %.1f s; answering a miss", self.timeout_s)
        return False

    def _failed(self, ex):
        if isinstance(ex, KvStashError):
            self._connection.lost(ex)
        else:
            self.stats["errors"] += 1
            logger.exception("kvstash: unexpected error; answering a miss")

    def _groups(self, client, n):
        step = max(1, client.max_chunks)
        return [(start, min(n, start + step)) for start in range(0, n, step)]

    def _slot_bytes(self, client, response, i):
        """The first page bytes of slot ``i`` as a uint8 tensor over the mapped pool (zero copy)."""
        return torch.frombuffer(client.slot_view(response, i), dtype=torch.uint8)[:self._page_bytes]

    def _typed(self, slot):
        return slot.view(self._view_dtype).view(self._page_shape)

    # ------------------------------------------------------------------------------------------ core
    def _guarded(self, keys, failed, stat, amount, work):
        """``work(client)`` under the backend's lock, ``amount`` counted into ``stats[stat]``; ``failed()`` instead when there are
        no keys, the lock is not had in time, the server is unavailable or anything raises (counted, logged by
        ``_failed``): SGLang never sees an exception."""
        if not keys or not self._locked():
            return failed()
        try:
            client = self._client()
            if client is None:
                self.stats["unavailable"] += 1
                return failed()
            self.stats[stat] += amount
            return work(client)
        except Exception as ex:
            self._failed(ex)
            return failed()
        finally:
            self._lock.release()

    def _exists(self, keys: List[str]) -> int:
        def work(client):
            r = client.lookup(self._instance, [page_key(k) for k in keys])     # split by the client if long
            hits = r.hit_chunks if r.ok else 0
            self.stats["exists_hits"] += hits
            return hits
        return self._guarded(keys, lambda: 0, "exists_queries", 1, work)

    def _retrieve(self, keys: List[str], sink) -> List[bool]:
        """Reads the pages of ``keys``; ``sink(i, slot)`` copies page i out of its slot (a uint8 tensor)."""
        def work(client):
            ok = [False] * len(keys)
            for start, end in self._groups(client, len(keys)):
                if self._retrieve_group(client, keys[start:end], start, sink, ok) < end - start:
                    break
            self.stats["get_hits"] += sum(ok)
            return ok
        return self._guarded(keys, lambda: [False] * len(keys), "get_pages", len(keys), work)

    def _retrieve_group(self, client, keys, base, sink, ok) -> int:
        hashed = [page_key(k) for k in keys]
        r = client.prepare_retrieve(self._instance, hashed)
        if r.status == Status.MISS:                 # all or nothing: take the readable prefix instead
            # QUIET: batch_exists asked about these pages before the get; they count as referenced once.
            hit = client.lookup(self._instance, hashed, pin=True, quiet=True)
            if not hit.ok or hit.hit_chunks == 0 or not hit.transfer_id:
                return 0
            r = client.prepare_retrieve(self._instance, lookup=hit)
        if not r.ok or not r.transfer_id:
            return 0
        good = 0
        try:
            for i, entry in enumerate(r.slots):
                slot = self._slot_bytes(client, r, i)
                try:
                    sink(base + entry.range_index, slot)
                finally:
                    del slot
                if client.is_still_readable(r, i):          # fencing: the bytes read are the page's
                    ok[base + entry.range_index] = True
                    good += 1
                else:
                    self.stats["get_fenced"] += 1
        finally:
            client.commit_retrieve(self._instance, r)       # releases the pins; UNKNOWN_TRANSFER: checks decide
        return good

    def _store(self, keys: List[str], source) -> List[bool]:
        """Stores the pages of ``keys``; ``source(i, slot)`` copies page i into its slot (a uint8 tensor)."""
        def work(client):
            ok = [False] * len(keys)
            for start, end in self._groups(client, len(keys)):
                self._store_group(client, keys[start:end], start, source, ok)
            self.stats["set_failed"] += ok.count(False)
            return ok

        def failed():
            self.stats["set_failed"] += len(keys)
            return [False] * len(keys)
        return self._guarded(keys, failed, "set_pages", len(keys), work)

    def _store_group(self, client, keys, base, source, ok):
        p = client.prepare_store(self._instance, [page_key(k) for k in keys])
        if not p.ok:
            if p.status not in (Status.NO_SPACE, Status.BUSY):
                logger.warning("kvstash: PREPARE_STORE %s %s", p.status.name, p.message)
            return
        reserved = {entry.range_index for entry in p.slots}
        if not p.transfer_id:                                # every page already there
            reserved = set()
        written = True
        try:
            for i, entry in enumerate(p.slots):
                if not client.is_still_reserved(p, i):          # fencing: the lease ended, write nothing
                    written = False
                    break
                slot = self._slot_bytes(client, p, i)
                try:
                    source(base + entry.range_index, slot)
                finally:
                    del slot
        except Exception:
            client.abort_store(self._instance, p)
            raise
        committed = False
        if p.transfer_id:
            if written:
                committed = client.commit_store(self._instance, p).ok
            else:
                client.abort_store(self._instance, p)
        present = 0
        for k in range(len(keys)):
            if k in reserved:
                ok[base + k] = committed
            else:
                ok[base + k] = True
                present += 1
        self.stats["set_present"] += present
        if committed:
            self.stats["set_stored"] += len(reserved)

    # ------------------------------------------------------------------------------------------ page copies
    def _check_value(self, value) -> Optional[torch.Tensor]:
        """A page tensor (any dtype, any device) as flat uint8 bytes, or None when it is not one page."""
        if not isinstance(value, torch.Tensor):
            return None
        if value.numel() * value.element_size() != self._page_bytes:
            logger.warning("kvstash: a page of %d bytes, expected %d; not stored",
                           value.numel() * value.element_size(), self._page_bytes)
            return None
        return value.reshape(-1).contiguous().view(torch.uint8)

    def _page_view(self, host_index: int) -> torch.Tensor:
        return self.mem_pool_host.get_data_page(host_index, flat=False)

    def _host_starts(self, keys, host_indices) -> List[int]:
        per = len(host_indices) // len(keys)
        return [int(host_indices[i * per]) for i in range(len(keys))]

    # ------------------------------------------------------------------------------------------ HiCacheStorage
    def exists(self, key: str) -> bool:
        return self._exists([key]) == 1

    def batch_exists(self, keys: List[str], extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
        return self._exists(list(keys))

    def get(self, key: str, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None):
        return self.batch_get([key], [target_location] if target_location is not None else None)[0]

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> List[Optional[torch.Tensor]]:
        keys = list(keys)
        if self._page_bytes is None:
            return [None] * len(keys)
        outs = []
        for i in range(len(keys)):
            target = target_locations[i] if target_locations is not None else None
            if target is None:
                target = torch.empty(self._page_bytes // _itemsize(self._page_dtype), dtype=self._page_dtype)
            outs.append(target)

        def sink(i, slot):
            out = outs[i]
            if out.numel() * out.element_size() != self._page_bytes:
                raise ValueError("target of %d bytes for a %d-byte page" % (out.numel() * out.element_size(),
                                                                           self._page_bytes))
            if out.is_contiguous():
                out.view(-1).view(torch.uint8).copy_(slot)
            else:
                out.copy_(slot.view(out.dtype).view(out.shape))

        ok = self._retrieve(keys, sink)
        return [outs[i] if ok[i] else None for i in range(len(keys))]

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        return self.batch_set([key], [value])

    def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        keys = list(keys)
        if values is None or len(values) != len(keys) or self._page_bytes is None:
            return False
        pages = [self._check_value(v) for v in values]
        if any(p is None for p in pages):
            return False
        return all(self._store(keys, lambda i, slot: slot.copy_(pages[i])))

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Zero copy: each page straight from its kvstash slot into SGLang's host pool."""
        keys = list(keys)
        if not keys:
            return []
        if self.mem_pool_host is None or self._page_shape is None:
            return [False] * len(keys)
        starts = self._host_starts(keys, host_indices)

        def sink(i, slot):
            self._page_view(starts[i]).copy_(self._typed(slot))

        return self._retrieve(keys, sink)

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Zero copy: each page straight from SGLang's host pool into its reserved kvstash slot."""
        keys = list(keys)
        if not keys:
            return []
        if self.mem_pool_host is None or self._page_shape is None:
            return [False] * len(keys)
        starts = self._host_starts(keys, host_indices)

        def source(i, slot):
            self._typed(slot).copy_(self._page_view(starts[i]))

        return self._store(keys, source)

    def clear(self) -> None:
        """Nothing: the kvstash server is shared by other engines; ``kvstash`` has its own admin CLEAR."""

    def get_stats(self):
        return None

    def close(self) -> None:
        """Unregisters and disconnects (SGLang calls it when it detaches the backend)."""
        if not self._lock.acquire(timeout=self.timeout_s):
            return
        try:
            self._closed = True
            client = self._connection.client
            if client is not None:
                try:
                    client.unregister(self._instance)
                except Exception:
                    pass
            self._connection.close()
        finally:
            self._lock.release()


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _itemsize(dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
