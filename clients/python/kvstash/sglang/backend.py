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

Options in the same JSON object, checked when SGLang builds the backend (a wrong type or value stops the engine
with one line naming the option; an unknown one is a warning listing the known ones):

- ``dir``: the server's directory (default ``/dev/shm/kvstash-$USER``).
- ``checkpoint``: the identity of the served weights, for when kvstash cannot read them (see *A key means one
  thing*): any string that names exactly these weights, e.g. ``"org/model@<commit>"``. Engines that give the
  same string share pages whatever their files; never give one string to two different sets of weights.
- ``timeout_s`` (5): bound of every call, all its waits for the server together.
- ``reconnect_s`` (1): how long a lost server is left alone before the next attempt.
- ``page_bytes``: only for use without a host pool: the bytes of one page.
- ``log_interval_s`` (60): the backend's counters, ``stats``, logged at INFO under ``kvstash.sglang`` this often
  while it is used; 0: never.

SGLang's own keys (``backend_name``, ``module_path``, ``class_name``, ``interface_v1``, ``tp_lcm_size``, the
``prefetch_*`` keys) pass silently. The ``model`` option of earlier versions is gone: a namespace is no longer
named by the operator (it is an unknown option now, and warns).

A key means one thing (the rule this backend enforces: SGLang must never be handed KV computed by other weights
or laid out otherwise):

- **A page's key** is SGLang's page hash (the prefix-chained hash of the page's token ids, seeded by SGLang with
  the request's LoRA id and cache salt); its kvstash key is the first 16 bytes of SHA-256 of that string (UTF-8).
- **The namespace** (the model name the backend REGISTERs; the server keeps namespaces apart) is built by
  ``kvstash.identity.namespace("sglang", checkpoint, **fields)`` from everything that gives a page's bytes their
  meaning, and from nothing else. Not SGLang's served model name: a fine-tune or a new revision served under an
  old name gets its own pages, and one checkpoint served under two names shares them.

  * *checkpoint*: ``kvstash.identity.checkpoint_of(model_path, revision, override=checkpoint)``: a digest of
    the checkpoint's ``config.json`` (and quantization configs) and of every weight file's content, found from
    SGLang's ``--model-path`` and ``--revision`` (a directory, or a hub id in the local hub cache); the
    ``checkpoint`` option instead when given.
  * *how the weights are run*: SGLang's ``--dtype``, ``--kv-cache-dtype``, ``--quantization``,
    ``--modelopt-quant``, ``--load-format``, ``--json-model-override-args``, the content of
    ``--quantization-param-path`` (fp8 KV scales), ``--lora-paths``, and the weight version (``weight_version``,
    followed at every call: ``/update_weights_*`` with a new ``weight_version`` moves the engine to new pages).
  * *the page format*: the host pool's class, layout, dtype, page size, page bytes and page shape, head count,
    head dims, layer count and layer range (a pipeline stage's layers), MLA's latent dims, SGLang's storage
    format tag; with speculative decoding whose draft layers live in the host pool, the draft checkpoint
    (``--speculative-draft-model-path``/``-revision``) and algorithm too.
  * *the slice*: world size and rank are the tensor-parallel (attention) size and rank, or 1 and 0 for MLA
    models, whose KV is the same on every rank (SGLang lets only one rank write it); the pipeline stage, the
    context-parallel rank and the decode-context-parallel shard when there are several.

  Engines that agree on all of it share pages, whatever name, path or host; engines that differ in any of it
  never read each other's pages, and the server never sees two layouts for one namespace.
- **Weights that cannot be identified share nothing.** When no checkpoint files are found (a model from object
  storage, a path that is gone, ``--load-format dummy``) and no ``checkpoint`` option is given, the backend logs
  one warning and takes a namespace of this engine's own: a digest of the host, its PID namespace and the
  parent of the scheduler process (SGLang's launcher, or its data-parallel controller) with that process's
  start time. Every scheduler process of one engine has that parent, so an engine's ranks still share (MLA
  ranks read what rank 0 wrote); no other engine, and no later start of the same one, ever matches.
- **Clear.** ``clear()`` (SGLang's ``/clear_hicache_storage``) cannot delete this engine's pages from a server
  other engines share; the engine moves to a namespace of its own instead (as above, counted per clear), so
  for it every page is gone. Weights updated in place without a new ``weight_version``
  (``/update_weights_from_disk``, ``_from_tensor``, ``_from_distributed``) are invisible to a storage backend:
  call ``/clear_hicache_storage`` after such an update, or give it a ``weight_version``.

How it works:
- **One page = one kvstash chunk.** The server's ``--chunk-tokens`` is fixed per server while SGLang's
  page size is the engine's, so the registered layout is not a KV shape but a byte container: dtype
  ``uint8``, 1 layer, hidden = ceil(page bytes / (2 x chunk tokens)), i.e. ``Layout.chunk_bytes(chunk_tokens)``
  is the page's bytes rounded up to a multiple of 2 x chunk tokens (less than 2 x chunk tokens wasted per
  page). A chunk holds the page's bytes in the order of SGLang's flat data page (``get_data_page``), the
  order the generic path hands over. Start the server with ``--chunk-tokens`` equal to the page size when
  nothing else shares it; any value works.
- **Calls.** ``batch_exists``/``exists``: LOOKUP (the leading readable pages). ``batch_get(_v1)``/``get``:
  the leading readable pages of each batch are pinned in one request (the leading-prefix PREPARE_RETRIEVE),
  copied out one by one, each checked still readable under its generation after the copy (fencing), then
  COMMIT_RETRIEVE. The answer's True (or non-None) pages are always a leading run: the first page that is
  missing or fails its check ends it, and no later page is copied or reported, so SGLang (which keeps only the
  leading run anyway) never holds a page after a gap. ``batch_set(_v1)``/``set``: PREPARE_STORE (pages already
  stored are skipped and count as stored), a fenced copy into each reserved slot that starts only while more
  than half the lease is left, COMMIT_STORE; NO_SPACE or an ended lease is False.
- **Host pages.** ``batch_get_v1``/``batch_set_v1`` accept host indices of whole, page-aligned pages only
  (``len(keys)`` pages of SGLang's page size, each a contiguous run starting at a multiple of it); anything
  else is answered False without a copy, since SGLang's pool would take a page at another place than the one
  meant. The zero-copy path is used only when the host pool's page view is its memory (checked once);
  otherwise pages go through SGLang's flat pages (``set_from_flat_data_page``).
- **Failures.** A MISS, an evicted or fenced page, NO_SPACE, a timeout, a server that is gone or restarted:
  misses, 0 and False, never an exception into SGLang. A call, lock wait and reconnection included, ends within
  ``timeout_s``; a lost server is tried again every ``reconnect_s`` and the backend re-registers by itself when
  it is back. An error that leaves the connection working and the server answering (``KvStashError.connection_lost``
  False, but not a timeout) is a miss for that call only: the connection stays.
- **Threads.** SGLang calls the backend from its prefetch and backup threads; one kvstash client is
  shared under a lock (a client is not thread-safe).
"""

import logging
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from sglang.srt.mem_cache.hicache_storage import HiCacheStorage, HiCacheStorageConfig, HiCacheStorageExtraInfo

import kvstash
from kvstash import KvStashError, Status
from kvstash.identity import namespace
from kvstash.options import Option, parse_options
from kvstash.reconnect import Reconnecting, Refused

from .naming import EngineIdentity, new_instance, slice_of
from .pages import dtype_name, host_pages, itemsize, numel, page_bytes_of, page_key, pool_fields

logger = logging.getLogger("kvstash.sglang")

#: Copies page i between a kvstash slot (uint8 bytes over the mapped pool) and SGLang: ``copy(i, slot)``.
PageCopy = Callable[[int, torch.Tensor], None]

WHERE = "kvstash.sglang (--hicache-storage-backend-extra-config)"
OPTIONS = (
    Option("dir", "str", None, "the kvstash server's directory (default /dev/shm/kvstash-$USER)"),
    Option("checkpoint", "str", None, "the identity of the served weights, when kvstash cannot read their files"),
    Option("timeout_s", "float", 5.0, "bound of every call", minimum=0.01, maximum=3600),
    Option("reconnect_s", "float", 1.0, "how long a lost server is left alone", minimum=0, maximum=3600),
    Option("page_bytes", "int", None, "the bytes of one page, without a host pool", minimum=1),
    Option("log_interval_s", "float", 60.0, "how often the counters are logged; 0: never", minimum=0),
)
# Keys of the same JSON object that SGLang itself reads (some are popped before the backend sees them).
SGLANG_KEYS = ("backend_name", "module_path", "class_name", "interface_v1", "tp_lcm_size", "prefetch_threshold",
               "prefetch_timeout_base", "prefetch_timeout_per_ki_token", "hicache_storage_pass_prefix_keys")
LEASE_WRITE_SHARE = 0.5                 # a page copy into a reserved slot starts only while this much lease is left


class KvStashHiCacheStorage(HiCacheStorage):
    """SGLang HiCache storage backend on kvstash (see the module documentation)."""

    def __init__(self, storage_config: Optional[HiCacheStorageConfig] = None,
                 kwargs: Optional[Dict[str, Any]] = None) -> None:
        extra = dict((storage_config.extra_config if storage_config is not None else None) or {})
        options = parse_options(WHERE, extra, OPTIONS, logger, passthrough=SGLANG_KEYS)
        self.directory = options["dir"] or kvstash.default_directory()
        self.timeout_s = float(options["timeout_s"])
        self.reconnect_s = float(options["reconnect_s"])
        self.log_interval_s = float(options["log_interval_s"])
        self._next_log = time.monotonic() + self.log_interval_s
        self.world_size, self.rank, self._stage = slice_of(storage_config)
        self._engine = EngineIdentity(options["checkpoint"])
        self._pool_fields: Optional[Dict[str, Any]] = None      # the host pool's page format (namespace fields)
        self._epoch = 0                     # clear() moves the engine to a namespace of its own: how many times
        self.mem_pool_host: Any = None
        self._page_bytes: Optional[int] = None
        self._page_dtype = torch.uint8
        # The shape of get_data_page(i, flat=False) when that is the pool's memory (zero copy), else None.
        self._page_shape: Optional[Tuple[int, ...]] = None
        self._view_dtype = torch.uint8
        self._page_size = 0                 # SGLang's page size in host token indices (0: no host pool)
        self.model_name: Optional[str] = None
        self.checkpoint: Optional[str] = None   # how the namespace's checkpoint part was found (for logs and tests)
        self._instance = new_instance()
        self._lock = threading.Lock()
        self._deadline = 0.0                # when the call holding the lock must be over
        self._connection = Reconnecting(self.directory, self.timeout_s, self.reconnect_s, logger,
                                        "HiCache L3 misses", self._register)
        self._closed = False
        self.stats = {"exists_queries": 0, "exists_hits": 0, "get_pages": 0, "get_hits": 0, "get_fenced": 0,
                      "set_pages": 0, "set_stored": 0, "set_present": 0, "set_failed": 0, "set_late": 0,
                      "unavailable": 0, "refused": 0, "errors": 0}
        if options["page_bytes"]:
            self._set_format({"pool": "none"}, torch.uint8, options["page_bytes"])

    # ------------------------------------------------------------------------------------------ setup
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """SGLang hands over its host pool right after construction: the page format comes from it."""
        super().register_mem_pool_host(mem_pool_host)
        try:
            page = mem_pool_host.get_dummy_flat_data_page()
        except Exception:                   # a pool without flat pages: nothing to store, misses only
            logger.exception("kvstash: SGLang's %s has no flat data page; HiCache L3 stays empty",
                             type(mem_pool_host).__name__)
            return
        page_bytes = page.numel() * page.element_size()
        shape, view_shape, dtype = None, None, page.dtype
        try:
            view = mem_pool_host.get_data_page(0, flat=False)
            again = mem_pool_host.get_data_page(0, flat=False)
            view_shape = tuple(view.shape)
            # Zero copy writes through the view: it must be the pool's memory, not a copy (two copies alive at
            # once never share an address).
            if numel(view.shape) * view.element_size() == page_bytes and view.data_ptr() == again.data_ptr():
                shape, dtype = view_shape, view.dtype
            del view, again
        except Exception:                   # a layout without page views: the flat pages only
            pass
        self._page_shape = shape
        self._view_dtype = dtype
        self._page_size = int(getattr(mem_pool_host, "page_size", 0) or 0)
        fields = pool_fields(mem_pool_host, page, view_shape)
        layers, targets = getattr(mem_pool_host, "layer_num", None), getattr(mem_pool_host, "target_layer_num", None)
        if isinstance(layers, int) and isinstance(targets, int) and layers > targets:
            fields.update(self._engine.draft_fields())      # draft layers in the page: the draft's weights too
        self._set_format(fields, page.dtype, page_bytes)

    def _set_format(self, fields: Dict[str, Any], dtype: torch.dtype, page_bytes: int) -> None:
        with self._lock:
            self._page_bytes = int(page_bytes)
            self._page_dtype = dtype
            self._pool_fields = dict(fields, page_bytes=self._page_bytes, dtype=dtype_name(dtype))
            self._rename()

    def _rename(self) -> None:
        """The namespace from what is known now; a new one is registered on the next connection (lock held)."""
        checkpoint, source = self._engine.checkpoint(self._epoch)
        fields = dict(self._engine.fields(), **(self._pool_fields or {}))      # called once the format is known
        fields.update(world_size=self.world_size, rank=self.rank, stage=self._stage)
        name = namespace("sglang", checkpoint, **fields)
        if name != self.model_name:
            if self.model_name is not None:
                logger.warning("kvstash: HiCache L3 moves to namespace %s (%s): pages of %s are not read again",
                               name, source, self.model_name)
                # The server keeps an instance's layout until its connection ends (REGISTER of another layout is
                # LAYOUT_MISMATCH): the new namespace gets a new instance on a new connection.
                self._instance = new_instance()
            else:
                logger.info("kvstash: HiCache L3 namespace %s (checkpoint: %s)", name, source)
            self.model_name = name
            self.checkpoint = source
            self._connection.retry_now()

    def layout(self, chunk_tokens: int) -> kvstash.Layout:
        """The kvstash layout registered for pages of this backend on a server of ``chunk_tokens``."""
        assert self._page_bytes is not None and self.model_name is not None     # registered only once known
        hidden = -(-self._page_bytes // (2 * chunk_tokens))
        return kvstash.Layout(self.model_name, world_size=self.world_size, rank=self.rank, layers=1,
                              hidden=hidden, dtype="uint8")

    def _register(self, client: kvstash.Client) -> None:
        with client.bounded(self._deadline - time.monotonic()):     # the connection took part of the call already
            r = client.register(self._instance, self.layout(client.chunk_tokens))
        if not r.ok:
            self.stats["refused"] += 1
            raise Refused("REGISTER %s: %s %s" % (self.model_name, r.status_name, r.message))

    # ------------------------------------------------------------------------------------------ plumbing
    def _client(self) -> Optional[kvstash.Client]:
        """The connected client, or None (no page format yet, or no server). Call with the lock held."""
        if self._page_bytes is None or self._closed:
            return None
        if self._engine.weights_moved():
            self._rename()
        now = time.monotonic()
        if self.log_interval_s > 0 and now >= self._next_log:
            self._next_log = now + self.log_interval_s
            logger.info("kvstash: %s", " ".join("%s=%d" % kv for kv in self.stats.items()))
        return self._connection.get(bound_s=self._deadline - now)     # a new one within what is left of the call

    def _failed(self, ex: Exception) -> None:
        if isinstance(ex, KvStashError):
            self._connection.failed(ex)
        else:
            self.stats["errors"] += 1
            logger.exception("kvstash: unexpected error; answering a miss")

    def _groups(self, client: kvstash.Client, n: int) -> List[Tuple[int, int]]:
        step = max(1, client.max_chunks)
        return [(start, min(n, start + step)) for start in range(0, n, step)]

    def _slot_bytes(self, client: kvstash.Client, response: Any, i: int) -> torch.Tensor:
        """The first page bytes of slot ``i`` as a uint8 tensor over the mapped pool (zero copy)."""
        return torch.frombuffer(client.slot_view(response, i), dtype=torch.uint8)[:self._page_bytes]

    def _typed(self, slot: torch.Tensor) -> torch.Tensor:
        return slot.view(self._view_dtype).view(self._page_shape)

    # ------------------------------------------------------------------------------------------ core
    def _guarded(self, keys: List[str], failed: Callable[[], Any], stat: str, amount: int,
                 work: Callable[[kvstash.Client], Any]) -> Any:
        """``work(client)`` under the backend's lock, ``amount`` counted into ``stats[stat]``, all of it within
        ``timeout_s`` of the call; ``failed()`` instead when there are no keys, the lock is not had in time, the
        server is unavailable or anything raises (counted, logged by ``_failed``): SGLang never sees an
        exception."""
        if not keys:
            return failed()
        deadline = time.monotonic() + self.timeout_s
        if not self._lock.acquire(timeout=self.timeout_s):
            logger.warning("kvstash: another call held the backend for over %.1f s; answering a miss",
                           self.timeout_s)
            return failed()
        try:
            self._deadline = deadline
            client = self._client()
            if client is None:
                self.stats["unavailable"] += 1
                return failed()
            self.stats[stat] += amount
            with client.bounded(deadline - time.monotonic()):
                return work(client)
        except Exception as ex:
            self._failed(ex)
            return failed()
        finally:
            self._lock.release()

    def _exists(self, keys: List[str]) -> int:
        def work(client: kvstash.Client) -> Any:
            hits = 0
            for start, end in self._groups(client, len(keys)):
                r = client.lookup(self._instance, [page_key(k) for k in keys[start:end]])
                hits += r.hit_chunks if r.ok else 0
                if not r.ok or r.hit_chunks < end - start:
                    break
            self.stats["exists_hits"] += hits
            return hits
        return self._guarded(keys, lambda: 0, "exists_queries", 1, work)

    def _retrieve(self, keys: List[str], sink: PageCopy) -> List[bool]:
        """Reads the leading readable pages of ``keys``; ``sink(i, slot)`` copies page i out of its slot (a uint8
        tensor). The answer's True entries are exactly the leading run of pages read intact."""
        def work(client: kvstash.Client) -> Any:
            ok = [False] * len(keys)
            for start, end in self._groups(client, len(keys)):
                if self._retrieve_group(client, keys[start:end], start, sink, ok) < end - start:
                    break
            self.stats["get_hits"] += sum(ok)
            return ok
        return self._guarded(keys, lambda: [False] * len(keys), "get_pages", len(keys), work)

    def _prepare_leading(self, client: kvstash.Client, hashed: List[Tuple[int, int]]) -> Any:
        """A PREPARE_RETRIEVE answer pinning the leading readable pages of ``hashed`` (range indices 0..k-1: the
        server's leading-prefix retrieve), or None when the first is not readable."""
        r = client.prepare_retrieve(self._instance, hashed, prefix=True)
        return r if r.ok and r.transfer_id else None

    def _retrieve_group(self, client: kvstash.Client, keys: List[str], base: int, sink: PageCopy,
                        ok: List[bool]) -> int:
        """Pages ``base..`` of the call: copies the leading readable ones out and marks ``ok`` for the leading run
        read intact; returns its length. A page after one that is missing or fails its check is neither copied
        nor marked."""
        r = self._prepare_leading(client, [page_key(k) for k in keys])
        if r is None:
            return 0
        good = 0
        try:
            for i, entry in sorted(enumerate(r.slots), key=lambda e: e[1].range_index):
                if entry.range_index != good:       # a gap: nothing after it is this call's to hand over
                    break
                slot = self._slot_bytes(client, r, i)
                try:
                    sink(base + good, slot)
                finally:
                    del slot
                if not client.is_still_readable(r, i):      # fencing: the slot was reclaimed while it was read
                    self.stats["get_fenced"] += 1
                    break
                ok[base + good] = True
                good += 1
        finally:
            # Releases the pins, unanswered: the pages were copied and checked, so its status would change nothing.
            client.commit_retrieve(self._instance, r, reply=False)
        return good

    def _store(self, keys: List[str], source: PageCopy) -> List[bool]:
        """Stores the pages of ``keys``; ``source(i, slot)`` copies page i into its slot (a uint8 tensor)."""
        def work(client: kvstash.Client) -> Any:
            ok = [False] * len(keys)
            for start, end in self._groups(client, len(keys)):
                self._store_group(client, keys[start:end], start, source, ok)
            self.stats["set_failed"] += ok.count(False)
            return ok

        def failed() -> List[bool]:
            self.stats["set_failed"] += len(keys)
            return [False] * len(keys)
        return self._guarded(keys, failed, "set_pages", len(keys), work)

    def _store_group(self, client: kvstash.Client, keys: List[str], base: int, source: PageCopy,
                     ok: List[bool]) -> None:
        p = client.prepare_store(self._instance, [page_key(k) for k in keys])
        if not p.ok:
            if p.status not in (Status.NO_SPACE, Status.BUSY):
                logger.warning("kvstash: PREPARE_STORE %s %s", p.status_name, p.message)
            return
        reserved = {entry.range_index for entry in p.slots}
        if not p.transfer_id:                                # every page already there
            reserved = set()
        # The slot check cannot stop a lease from ending during a copy (docs/PROTOCOL.md §3.3): a late copy would
        # write into a slot another store was given. A copy starts only while this much of the lease is left.
        last_start_ns = getattr(p, "deadline_ns", None)
        if last_start_ns is not None:
            last_start_ns -= int(client.lease_ns * LEASE_WRITE_SHARE)
        written = True
        try:
            for i, entry in enumerate(p.slots):
                if last_start_ns is not None and time.monotonic_ns() > last_start_ns:
                    self.stats["set_late"] += 1
                    written = False
                    break
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


    # ------------------------------------------------------------------------------------------ HiCacheStorage
    def exists(self, key: str) -> bool:
        return self._exists([key]) == 1

    def batch_exists(self, keys: List[str], extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
        return self._exists(list(keys))

    def get(self, key: str, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> Optional[torch.Tensor]:
        return self.batch_get([key], [target_location] if target_location is not None else None)[0]

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> List[Optional[torch.Tensor]]:
        """Pages into ``target_locations`` (one tensor of page bytes per key, e.g. SGLang's dummy flat pages), or
        into new tensors; None for a page not read. The non-None pages are a leading run."""
        keys = list(keys)
        if self._page_bytes is None or target_locations is not None and len(target_locations) != len(keys):
            return [None] * len(keys)
        page_bytes = self._page_bytes
        outs = []
        for i in range(len(keys)):
            target = target_locations[i] if target_locations is not None else None
            if target is None:
                target = torch.empty(page_bytes // itemsize(self._page_dtype), dtype=self._page_dtype)
            outs.append(target)

        def sink(i: int, slot: torch.Tensor) -> None:
            out = outs[i]
            if out.numel() * out.element_size() != page_bytes:
                raise ValueError("target of %d bytes for a %d-byte page" % (out.numel() * out.element_size(),
                                                                           page_bytes))
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
        pages = [page_bytes_of(v, self._page_bytes) for v in values]
        if any(p is None for p in pages):
            return False
        return all(self._store(keys, lambda i, slot: slot.copy_(pages[i])))

    def batch_get_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Each page from its kvstash slot into SGLang's host pool (straight into the page when the pool's page
        view is its memory). The True pages are a leading run."""
        pool = self.mem_pool_host
        if self._page_shape is not None:
            def sink(start: int, slot: torch.Tensor) -> None:
                pool.get_data_page(start, flat=False).copy_(self._typed(slot))
        else:
            def sink(start: int, slot: torch.Tensor) -> None:
                pool.set_from_flat_data_page(start, slot.view(self._page_dtype))
        return self._host_transfer(keys, host_indices, self._retrieve, sink)

    def batch_set_v1(self, keys: List[str], host_indices: torch.Tensor,
                     extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
        """Each page from SGLang's host pool straight into its reserved kvstash slot."""
        pool = self.mem_pool_host
        if self._page_shape is not None:
            def source(start: int, slot: torch.Tensor) -> None:
                self._typed(slot).copy_(pool.get_data_page(start, flat=False))
        else:
            def source(start: int, slot: torch.Tensor) -> None:
                slot.copy_(pool.get_data_page(start, flat=True).reshape(-1).contiguous().view(torch.uint8))
        return self._host_transfer(keys, host_indices, self._store, source)

    def _host_transfer(self, keys: List[str], host_indices: torch.Tensor,
                       transfer: Callable[[List[str], PageCopy], List[bool]], copy: PageCopy) -> List[bool]:
        """``transfer`` (``_retrieve`` or ``_store``) of the pages of ``keys`` at ``host_indices`` in the host pool,
        ``copy(first host index of the page, slot)`` moving each; all False when the indices are not whole pages."""
        keys = list(keys)
        if not keys:
            return []
        starts = host_pages(keys, host_indices, self._page_size) if self.mem_pool_host is not None else None
        if starts is None:
            return [False] * len(keys)
        return transfer(keys, lambda i, slot: copy(starts[i], slot))

    def clear(self) -> None:
        """SGLang's ``/clear_hicache_storage``: this engine's pages are gone for it. The server is shared by other
        engines, so nothing is deleted there; the engine moves to a namespace of its own (module documentation),
        where it finds none of its earlier pages and no other engine's."""
        if not self._lock.acquire(timeout=self.timeout_s):
            logger.warning("kvstash: clear waited over %.1f s for the backend; not cleared", self.timeout_s)
            return
        try:
            self._epoch += 1
            if self._pool_fields is not None:
                self._rename()
        finally:
            self._lock.release()

    def get_stats(self) -> None:
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
                    with client.bounded(self.timeout_s):
                        client.unregister(self._instance)
                except Exception:
                    pass
            self._connection.close()
        finally:
            self._lock.release()

