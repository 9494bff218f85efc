"""KvStashConnector: vLLM's KV connector (v1) on the kvstash store.

Turned on with::

    vllm serve MODEL --kv-transfer-config '{"kv_connector":"KvStashConnector",
        "kv_connector_module_path":"kvstash.vllm","kv_role":"kv_both",
        "kv_load_failure_policy":"recompute","kv_connector_extra_config":{"dir":"/dev/shm/kvstash-USER"}}'

How it works:
- **Keys.** A kvstash chunk is ``chunk_tokens / block_size`` vLLM blocks. Its key is vLLM's own
  prefix-chained hash of the chunk's last block (``request.block_hashes``), folded to 128 bits, so it names
  the whole prefix up to the chunk's end, with the request's ``cache_salt``.
- **Namespace: what the bytes mean.** Each worker rank registers under a model name that is a digest of everything
  that gives its KV bytes their meaning: the checkpoint's identity (from its files: ``kvstash.identity``; never
  the served name), the model and KV dtypes, the attention backend, the paged layout and its per-layer shape,
  the layer names, the block size, quantization and config overrides, and the pipeline stage; the tensor-parallel
  size and rank are the layout's world size and rank. Engines that differ in any of them never see each other's
  chunks; engines that agree share whatever path or host their files are on. The workers tell the scheduler the
  name they registered through vLLM's handshake metadata (``get_handshake_metadata``), so the scheduler's lookups
  ask about the very namespace the workers load from. A checkpoint whose files cannot be found (and no
  ``checkpoint`` option) shares with nobody but this engine.
- **Scheduler.** ``get_num_new_matched_tokens`` asks kvstash (LOOKUP_ALL_RANKS: the prefix every
  tensor-parallel rank holds, from the first chunk the engine does not hold itself) and changes nothing;
  the hit is never the whole prompt (vLLM computes at least one token). ``build_connector_meta`` tells the
  workers which chunks to load into which blocks, and which complete chunks to save.
- **Only verified KV is stored.** A chunk is saved only once every block it depends on (every block of the
  request's prefix up to the chunk's end) holds KV the engine computed, or loaded and verified. Chunks computed in
  the step that loads blocks they depend on (the request's own load, or a block another request is loading and
  this one shares through vLLM's prefix cache) wait until vLLM has reported that step's load errors: the next step,
  or the one after under asynchronous scheduling (vLLM's default), where a step is scheduled before the report of
  the one before it arrives. A request that finished meanwhile keeps its blocks that long for the save
  (``request_finished`` answers True and the workers report it in ``get_finished``). A block reported as failed,
  and every block computed over it (a request sharing it may be scheduled before the report, or counted as done
  while another request is due to recompute it), is trusted again only once computed again over trusted KV.
  Chunks loaded are not stored again.
- **Workers.** ``start_load_kv`` retrieves the readable leading chunks of each load (the store's leading-prefix
  retrieve) and scatters them into the paged blocks (blocks the engine already holds are left alone);
  ``wait_for_save`` gathers complete chunks and stores them. Loads and saves are synchronous (layer-wise hooks are
  no-ops).
- **Failures.** A chunk missing, evicted or fenced between lookup and load, a timeout, or a server that is gone or
  restarted turns into ``get_block_ids_with_load_errors`` from the first chunk that did not arrive intact (vLLM
  recomputes those blocks with ``kv_load_failure_policy: recompute``); never an exception into the engine, never
  KV that was not verified. A lost server is retried every ``reconnect_s`` (lookups answer 0 meanwhile) and the
  connection comes back by itself.
- **One bound per request.** All the kvstash calls made for one request (the scheduler's lookups, then each
  worker's loads and saves) share one budget of ``timeout_s``: a server that stops answering costs a request at
  most that much in all, not that much per call. Workers report the time they spent per request back to the
  scheduler (``build_connector_worker_meta``).
- **Second tier.** On a server that runs one (``serve --l2``), a prefix found short on the host is looked up
  again for each rank, waiting up to ``tier_wait_ms`` for the tier's read-through (chunks another host stored
  come back in the same call). These LOOKUPs name each rank's instance: its id is derived from vLLM's
  ``engine_id`` (unique per engine by default), the pipeline stage and the rank, so the scheduler knows the ids
  its workers registered. ``get_num_new_matched_tokens`` runs in the scheduler's loop: the wait holds up the
  whole step, so keep the bound small.

Extra config (``kv_connector_extra_config``; every option is checked at start, a bad one stops the engine with a
line naming it, an unknown one is warned about): see ``OPTIONS``.
"""

import collections
import hashlib
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1, KVConnectorHandshakeMetadata,
                                                              KVConnectorMetadata, KVConnectorRole,
                                                              KVConnectorWorkerMetadata)

import kvstash
from kvstash import KvStashError, Status
from kvstash.identity import checkpoint_of, digest_of, namespace
from kvstash.options import Option, parse_options
from kvstash.reconnect import Reconnecting, Refused

logger = logging.getLogger("vllm.kvstash")        # under vLLM's logger: its handler and level apply

OPTIONS = (
    Option("dir", "str", None, "the server's directory (default /dev/shm/kvstash-$USER)"),
    Option("timeout_s", "float", 5.0, "the most all kvstash calls of one request may wait, in all", minimum=0.001),
    Option("reconnect_s", "float", 1.0, "how long a lost server is left alone before the next attempt", minimum=0),
    Option("store_decode", "bool", False, "store chunks completed by decode tokens too"),
    Option("log_interval_s", "float", 30.0, "the connector's counters are logged this often (0: never)", minimum=0),
    Option("cuda", "bool", True, "register the pool with CUDA when the caches are on a GPU"),
    Option("checkpoint", "str", None, "the checkpoint's identity, when it cannot be derived from its files"),
    Option("tier_wait_ms", "float", 5.0, "how long a lookup waits for the second tier (0: never)", minimum=0),
    Option("chunk_tokens", "int", 0, "the server's chunk tokens, if known in advance (0: ask the server)",
           minimum=0),
)


def instance_id(engine_id, pp_rank, tp_rank) -> int:
    """The kvstash instance of one worker rank of an engine: the same in the scheduler and the worker processes."""
    raw = hashlib.sha256(b"kvstash-vllm-instance\0%s\0%d\0%d" % (str(engine_id).encode(), pp_rank, tp_rank))
    return int.from_bytes(raw.digest()[:8], "little") & ((1 << 63) - 1) or 1


def chunk_key(block_hash) -> tuple:
    """The 128-bit kvstash key of a chunk whose last vLLM block has ``block_hash`` (bytes of any length, or
    an object with a stable ``bytes()``/``repr()``)."""
    raw = block_hash if isinstance(block_hash, (bytes, bytearray)) else repr(block_hash).encode()
    if len(raw) < 16:
        raw = hashlib.sha256(raw).digest()
    return int.from_bytes(raw[:8], "big"), int.from_bytes(raw[8:16], "big")


@dataclass
class LoadSpec:
    """Chunks ``keys`` (range order, the first being the request's chunk ``first_chunk``) into blocks
    ``block_ids`` (n per chunk; -1: leave the block alone); the request may wait ``budget_s`` more on kvstash."""
    req_id: str
    keys: list
    block_ids: list
    salt: Optional[str]
    first_chunk: int = 0
    budget_s: float = float("inf")


@dataclass
class SaveSpec:
    """Complete chunks ``keys`` (range order, the first being the request's chunk ``first_chunk``) from blocks
    ``block_ids`` (n per chunk); the request may wait ``budget_s`` more on kvstash."""
    req_id: str
    keys: list
    block_ids: list
    salt: Optional[str]
    first_chunk: int = 0
    budget_s: float = float("inf")


@dataclass
class KvStashConnectorMetadata(KVConnectorMetadata):
    """What the workers load and save in one step; ``finish``: requests whose blocks vLLM frees once every worker
    has run this step's saves (reported by ``get_finished``); ``server_lost``: the scheduler found the server gone
    or not answering and will not ask again for ``reconnect_s``, so the workers do not wait on it either in this
    step (their loads become load errors, their saves are skipped)."""
    loads: list = field(default_factory=list)
    saves: list = field(default_factory=list)
    finish: set = field(default_factory=set)
    server_lost: bool = False


@dataclass
class KvStashHandshake(KVConnectorHandshakeMetadata):
    """What a worker rank tells the scheduler once its caches are registered: the model name (namespace) it
    registered with kvstash."""
    model_name: str


@dataclass
class KvStashWorkerMetadata(KVConnectorWorkerMetadata):
    """Seconds a step's kvstash calls took per request on the workers (the slowest rank's, as ranks run at once)."""
    spent_s: dict = field(default_factory=dict)

    def aggregate(self, other):
        merged = dict(self.spent_s)
        for req_id, seconds in getattr(other, "spent_s", {}).items():
            merged[req_id] = max(merged.get(req_id, 0.0), seconds)
        return KvStashWorkerMetadata(merged)


@dataclass
class _Tracker:
    """The scheduler's view of one request."""
    request: Any
    block_ids: list
    saved_chunks: int = 0                   # chunks [0, saved_chunks) are stored, being stored or were loaded
    load: Optional[tuple] = None            # (first token, last token) to load, set by update_state_after_alloc
    hold_steps: int = 0                     # finished: steps its blocks may still be held for its last saves


class KvStashConnector(KVConnectorBase_V1):
    """vLLM KV connector on kvstash (see the module documentation)."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        transfer = self._kv_transfer_config
        options = parse_options("kv_connector_extra_config", transfer.kv_connector_extra_config, OPTIONS, logger)
        self._vllm_config = vllm_config
        self._directory = options["dir"] or kvstash.default_directory()
        self._timeout_s = options["timeout_s"]
        self._reconnect_s = options["reconnect_s"]
        self._store_decode = options["store_decode"]
        self._log_interval_s = options["log_interval_s"]
        self._pin = options["cuda"]
        self._checkpoint = options["checkpoint"]
        self._tier_wait_s = options["tier_wait_ms"] / 1000.0
        self._chunk_tokens = options["chunk_tokens"] or None       # learnt from the server otherwise
        self._engine_id = getattr(transfer, "engine_id", None)
        self._block_size = vllm_config.cache_config.block_size
        parallel = vllm_config.parallel_config
        self._tp_size = parallel.tensor_parallel_size
        self._pp_size = parallel.pipeline_parallel_size
        self._consumer_only = transfer.kv_role == "kv_consumer"
        self._producer_only = transfer.kv_role == "kv_producer"
        self.stats = {"lookups": 0, "hit_tokens": 0, "tier_chunks": 0, "loaded_chunks": 0, "loaded_bytes": 0,
                      "load_errors": 0, "stored_chunks": 0, "stored_bytes": 0, "store_errors": 0, "unavailable": 0,
                      "deferred_saves": 0, "out_of_budget": 0}
        self._last_log = time.monotonic()
        if role == KVConnectorRole.SCHEDULER:
            self._trackers = {}
            self._matched = {}
            self._asked = set()                 # requests asked about before: asked again, the server is told
            self._spent = {}                    # seconds kvstash calls took per request, scheduler and workers
            self._held = {}                     # finished requests whose blocks wait one step for their saves
            self._invalid = set()               # blocks reported as failed loads, until a step recomputes them
            lag = 2 if getattr(vllm_config.scheduler_config, "async_scheduling", False) else 1
            self._recent_loads = collections.deque(maxlen=lag)      # blocks loaded by steps not yet reported
            self._derived = collections.deque(maxlen=lag)           # what steps computed over those loads
            self._model_names = {}              # pipeline stage -> the model name its workers registered
            self._told_unnamed = False
            self._connection = Reconnecting(self._directory, self._timeout_s, self._reconnect_s, logger,
                                            "recomputing", copy_transport=True)
        else:
            self._paged = None
            self._kernel_ratio = 1
            self._instance = None
            self._model_name = None
            self._load_errors = set()           # for vLLM: taken by get_block_ids_with_load_errors
            self._step_errors = set()           # this step's: no save may read them
            self._step_spent = {}
            self._finished_sending = set()
            self._tp_rank, self._pp_rank = self._ranks(parallel)
            self._connection = Reconnecting(self._directory, self._timeout_s, self._reconnect_s, logger,
                                            "recomputing", self._register)

    # ------------------------------------------------------------------------------------------ naming
    @property
    def model_name(self) -> Optional[str]:
        """The model name (namespace) this worker rank registers: see the module documentation."""
        return self._model_name

    def _namespace(self, paged, layer_names) -> str:
        """The model name of this worker's KV: the checkpoint and everything that gives the bytes their meaning."""
        model = self._vllm_config.model_config
        ckpt = checkpoint_of(model.model, getattr(model, "revision", None), self._checkpoint,
                             hub_dirs=(getattr(self._vllm_config.load_config, "download_dir", None),))
        if ckpt is None:
            logger.warning("kvstash: the checkpoint %r has no files here to identify it by (config.json and "
                           "weights): this engine shares chunks with no other engine; set the option \"checkpoint\" "
                           "to share", model.model)
            digest = digest_of("private", self._engine_id if self._engine_id is not None else secrets.token_hex(16))
        else:
            logger.info("kvstash: checkpoint identity %s (%s)", ckpt.digest, ckpt.source)
            digest = ckpt.digest
        shape = list(paged.caches[0].shape)
        shape[1 if paged.kind == "kv_blocks" else 0] = "*"
        kv_dtype = self._vllm_config.cache_config.cache_dtype
        hf = getattr(model, "hf_config", None)
        arch = (getattr(hf, "architectures", None) or ["?"])[0]
        overrides = getattr(model, "hf_overrides", None)
        load_format = str(getattr(self._vllm_config.load_config, "load_format", ""))
        return namespace("vllm", digest, arch=arch, dtype=str(model.dtype).replace("torch.", ""),
                         kv_dtype=str(paged.dtype).replace("torch.", "") + ("" if kv_dtype == "auto" else
                                                                             "/" + str(kv_dtype)),
                         backend=self._backend_name(layer_names), kind=paged.kind,
                         page="x".join(str(d) for d in shape), layers=digest_of(*layer_names),
                         block=self._block_size, quantization=getattr(model, "quantization", None),
                         overrides=json.dumps(overrides, sort_keys=True, default=str) if overrides else None,
                         weights="dummy" if load_format == "dummy" else None,
                         stage="pp%d/%d" % (self._pp_rank, self._pp_size))

    def _backend_name(self, layer_names) -> str:
        """The attention backend of the engine's layers (vLLM's name for it), or ``unknown`` without a model."""
        context = getattr(self._vllm_config.compilation_config, "static_forward_context", None) or {}
        names = set()
        for layer in layer_names:
            backend = getattr(context.get(layer), "attn_backend", None)
            if backend is not None:
                names.add(backend.get_name())
        return "+".join(sorted(names)) if names else "unknown"

    def _chunk_tokens_of(self, client) -> int:
        if self._chunk_tokens is None:
            self._chunk_tokens = client.chunk_tokens
        if self._chunk_tokens % self._block_size:
            raise ValueError("kvstash chunks of %d tokens are not whole %d-token vLLM blocks: start the server "
                             "with --chunk-tokens a multiple of the block size" % (self._chunk_tokens,
                                                                                   self._block_size))
        return self._chunk_tokens

    def _keys(self, request, chunks: int, per: int) -> list:
        hashes = request.block_hashes
        return [chunk_key(hashes[(k + 1) * per - 1]) for k in range(chunks)]

    def _budget(self, req_id) -> float:
        return self._timeout_s - self._spent.get(req_id, 0.0)

    # ------------------------------------------------------------------------------------------ scheduler
    def set_xfer_handshake_metadata_pp_aware(self, metadata):
        """vLLM hands over what every worker rank told it after registering its caches: the model names."""
        by_stage = collections.defaultdict(set)
        for (pp, _), meta in (metadata or {}).items():
            if isinstance(meta, KvStashHandshake) and meta.model_name:
                by_stage[pp].add(meta.model_name)
        for pp, names in by_stage.items():
            if len(names) == 1:
                self._model_names[pp] = next(iter(names))
            else:
                self._model_names.pop(pp, None)
                logger.error("kvstash: the ranks of pipeline stage %d registered different models (%s): lookups "
                             "answer 0", pp, ", ".join(sorted(names)))

    def set_xfer_handshake_metadata(self, metadata):
        self.set_xfer_handshake_metadata_pp_aware({(0, tp): meta for tp, meta in (metadata or {}).items()})

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        if self._producer_only:
            return 0, False
        if len(self._model_names) < self._pp_size:
            if not self._told_unnamed:
                self._told_unnamed = True
                logger.warning("kvstash: the workers have not said which model they registered; no hits until "
                               "they do")
            return 0, False
        req_id = request.request_id
        budget = self._budget(req_id)
        if budget <= 0:
            self.stats["out_of_budget"] += 1
            return 0, False
        start = time.monotonic()
        try:
            return self._lookup(request, num_computed_tokens, budget)
        finally:
            self._spent[req_id] = self._spent.get(req_id, 0.0) + time.monotonic() - start

    def _lookup(self, request, num_computed_tokens, budget):
        client = self._connection.get(budget)
        if client is None:
            self.stats["unavailable"] += 1
            return 0, False
        try:
            chunk = self._chunk_tokens_of(client)
        except ValueError as ex:
            logger.error("kvstash: %s", ex)
            return 0, False
        per = chunk // self._block_size
        prompt = request.num_prompt_tokens
        usable = min(prompt // chunk, len(request.block_hashes) // per)
        first = num_computed_tokens // chunk                    # chunks before it are on the GPU already
        if usable <= first:
            return 0, False
        keys = self._keys(request, usable, per)[first:]
        hits = len(keys)
        # vLLM asks again at each step while a request waits (and after a preemption): asked again, the LOOKUP
        # goes QUIET, so the store's eviction policy counts one request's keys once, not once a step.
        again = request.request_id in self._asked
        self._asked.add(request.request_id)
        try:
            with client.bounded(budget):
                for pp in range(self._pp_size):
                    r = client.lookup_all_ranks(self._model_names[pp], self._tp_size, keys, salt=request.cache_salt,
                                                quiet=again)
                    hits = min(hits, r.hit_chunks if r.ok else 0)
                if hits < len(keys) and self._tier_wait_s > 0 and self._engine_id is not None and client.second_tier:
                    more = self._wait_for_tier(client, keys[hits:], request.cache_salt)
                    self.stats["tier_chunks"] += more
                    hits += more
        except KvStashError as ex:
            self._connection.lost(ex)
            self.stats["unavailable"] += 1
            return 0, False
        self.stats["lookups"] += 1
        # vLLM computes at least the last prompt token itself: a full hit stops a block short of it.
        limit = (prompt - 1) // self._block_size * self._block_size
        hit_tokens = min((first + hits) * chunk, limit)
        external = max(0, hit_tokens - num_computed_tokens)
        self._matched[request.request_id] = (num_computed_tokens, external)
        return external, False

    def _wait_for_tier(self, client, keys, salt) -> int:
        """Chunks of ``keys`` (those after the prefix every rank holds) that every rank's instance holds once the
        second tier's read-through is over, all ranks within one ``tier_wait_ms``; 0 for a rank not registered."""
        deadline = time.monotonic() + self._tier_wait_s
        more = len(keys)
        for pp in range(self._pp_size):
            for rank in range(self._tp_size):
                r = client.lookup(instance_id(self._engine_id, pp, rank), keys, salt=salt,
                                  wait_tier_s=max(0.0, deadline - time.monotonic()), quiet=True)
                more = min(more, r.hit_chunks if r.ok else 0)
                if more == 0:
                    return 0
        return more

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        block_ids = list(blocks.get_block_ids()[0]) if blocks is not None else []
        tracker = self._trackers.get(request.request_id)
        if tracker is None:
            tracker = self._trackers[request.request_id] = _Tracker(request, block_ids)
        else:
            tracker.request, tracker.block_ids = request, block_ids
        matched = self._matched.pop(request.request_id, None)
        if num_external_tokens > 0 and matched is not None:
            local = matched[0]
            tracker.load = (local, local + num_external_tokens)
            self.stats["hit_tokens"] += num_external_tokens

    def build_connector_meta(self, scheduler_output):
        meta = KvStashConnectorMetadata()
        chunk = self._chunk_tokens
        if chunk is None:                       # never connected: nothing was matched, nothing can be saved
            client = self._connection.get()
            if client is None:
                self._finish_held(meta)
                return meta
            chunk = self._chunk_tokens_of(client)
        per = chunk // self._block_size
        scheduled = scheduler_output.num_scheduled_tokens
        steps = []                              # (request id, tracker, tokens computed before and after the step)
        for new in scheduler_output.scheduled_new_reqs:
            tracker = self._trackers.get(new.req_id)
            if tracker is None:
                continue
            tracker.block_ids = list(new.block_ids[0])
            steps.append((new.req_id, tracker, new.num_computed_tokens,
                          new.num_computed_tokens + scheduled.get(new.req_id, 0)))
        cached = scheduler_output.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            tracker = self._trackers.get(req_id)
            if tracker is None:
                continue
            new_blocks = cached.new_block_ids[i]
            if req_id in cached.resumed_req_ids:
                tracker.block_ids = list(new_blocks[0]) if new_blocks is not None else []
            elif new_blocks is not None:
                tracker.block_ids.extend(new_blocks[0])
            steps.append((req_id, tracker, cached.num_computed_tokens[i],
                          cached.num_computed_tokens[i] + scheduled.get(req_id, 0)))
        loading = set()
        for req_id, tracker, _, _ in steps:
            if tracker.load is not None:
                loading.update(self._plan_load(meta, req_id, tracker, chunk, per))
        if self._invalid:
            self._invalid.difference_update(loading)        # loaded again: verified like any other load, below
            self._recompute(steps)
        self._recent_loads.append(loading)
        self._derived.append(self._computed_over(steps, set().union(*self._recent_loads)))
        meta.server_lost = self._connection.client is None and time.monotonic() < self._connection.next_try
        if not self._consumer_only:
            suspect = self._invalid.union(*self._recent_loads) if self._invalid or loading or \
                any(self._recent_loads) else None
            for req_id, tracker, _, after in steps:
                self._plan_save(meta, req_id, tracker, after, chunk, per, suspect)
            self._finish_held(meta, chunk, per, suspect)
        else:
            self._finish_held(meta)
        self._maybe_log()
        return meta

    def _recompute(self, steps):
        """What this step's forward does to the blocks that hold no KV to trust (``_invalid``): a block computed from
        a clean prefix is clean again; a block computed over one that is not is not clean either. vLLM lets a
        request that shares a failed block through its prefix cache count it as computed and go on, while another
        request is due to recompute it, so the second one can compute over wrong KV. The blocks are visited in
        position order, as attention reads them: a block another request recomputes in the same step is clean
        before a later block reads it. A request's prefix is clean when the block before the step's first one is
        (and that block itself, when the step starts within it): every block computed over an untrusted one is
        untrusted itself, here or, for loads not reported yet, when their report comes (``_computed_over``), so
        the last block before says what all before it hold, at no cost per block of context."""
        b = self._block_size
        by_block = collections.defaultdict(list)
        for _, tracker, before, after in steps:
            for j in range(before // b, min(-(-after // b), len(tracker.block_ids))):
                by_block[j].append((tracker, before))
        clean = {}
        for j in sorted(by_block):
            for tracker, before in by_block[j]:
                key = id(tracker)
                if key not in clean:
                    ids = tracker.block_ids
                    clean[key] = (j == 0 or ids[j - 1] not in self._invalid) and \
                        (before % b == 0 or ids[j] not in self._invalid)
                if clean[key]:
                    self._invalid.discard(tracker.block_ids[j])
                else:
                    self._invalid.add(tracker.block_ids[j])

    def _computed_over(self, steps, unreported):
        """(``unreported``, the blocks this step computes over one of them): loads whose outcome vLLM has not
        reported yet (this step's; under asynchronous scheduling the step before's too, whose report comes after
        this step was scheduled), and what this step's forward computes from them. Should one of those loads be
        reported failed, what was computed over it holds no KV to trust either (update_connector_output)."""
        derived = set()
        if unreported:
            b = self._block_size
            for _, tracker, before, after in steps:
                first, end = before // b, min(-(-after // b), len(tracker.block_ids))
                if end > first and not unreported.isdisjoint(tracker.block_ids[:first + (1 if before % b else 0)]):
                    derived.update(tracker.block_ids[first:end])
        return unreported, derived

    def _plan_load(self, meta, req_id, tracker, chunk, per) -> list:
        """The LoadSpec of a request's matched tokens; the blocks it writes. The chunks loaded count as stored."""
        request = tracker.request
        start, end = tracker.load
        tracker.load = None
        first, last = start // chunk, -(-end // chunk)
        keys = self._keys(request, last, per)[first:]
        block_ids = []
        for b in range(first * per, last * per):
            wanted = start // self._block_size <= b < -(-end // self._block_size) and b < len(tracker.block_ids)
            block_ids.append(tracker.block_ids[b] if wanted else -1)
        meta.loads.append(LoadSpec(req_id, keys, block_ids, request.cache_salt, first, self._budget(req_id)))
        tracker.saved_chunks = max(tracker.saved_chunks, last)     # a failed load winds it back (see below)
        return [b for b in block_ids if b >= 0]

    def _plan_save(self, meta, req_id, tracker, computed, chunk, per, suspect):
        """A SaveSpec of the request's complete chunks not saved yet, up to the first that depends on a block whose
        KV is not verified (``suspect``: loaded this step, or a failed load not recomputed yet)."""
        request = tracker.request
        limit = request.num_tokens if self._store_decode else request.num_prompt_tokens
        complete = min(min(computed, limit) // chunk, len(request.block_hashes) // per, len(tracker.block_ids) // per)
        if complete <= tracker.saved_chunks:
            return
        savable = complete
        if suspect:
            for i, b in enumerate(tracker.block_ids[:complete * per]):
                if b in suspect:
                    savable = i // per
                    self.stats["deferred_saves"] += 1
                    break
        if savable <= tracker.saved_chunks:
            return
        # A later step's range starts with the last chunk saved (present, so not written again): the store then
        # knows the chain the new chunks continue, as it does for a range starting at the prompt's start.
        start = max(0, tracker.saved_chunks - 1)
        keys = self._keys(request, savable, per)[start:]
        meta.saves.append(SaveSpec(req_id, keys, tracker.block_ids[start * per:savable * per], request.cache_salt,
                                   start, self._budget(req_id)))
        tracker.saved_chunks = savable

    def _finish_held(self, meta, chunk=None, per=None, suspect=None):
        """The last saves of requests that finished with chunks waiting for their verification; their blocks are
        freed once the workers have run them. A request whose chunks still wait for the report of a step's loads
        (under asynchronous scheduling a step's report comes one step later) is held one more step."""
        loads = set().union(*self._recent_loads)
        for req_id in list(self._held):
            tracker = self._held[req_id]
            if chunk is not None:
                blocks = tracker.block_ids[:len(tracker.block_ids) // per * per]
                if tracker.hold_steps > 0 and loads and not loads.isdisjoint(blocks):
                    tracker.hold_steps -= 1
                    continue
                self._plan_save(meta, req_id, tracker, tracker.request.num_computed_tokens, chunk, per, suspect)
            meta.finish.add(req_id)
            self._spent.pop(req_id, None)
            del self._held[req_id]

    def request_finished(self, request, block_ids):
        req_id = request.request_id
        tracker = self._trackers.pop(req_id, None)
        self._matched.pop(req_id, None)
        self._asked.discard(req_id)
        if tracker is not None and not self._consumer_only and self._chunk_tokens:
            tracker.request = request
            if block_ids is not None:
                tracker.block_ids = list(block_ids)
            per = self._chunk_tokens // self._block_size
            limit = request.num_tokens if self._store_decode else request.num_prompt_tokens
            complete = min(min(request.num_computed_tokens, limit) // self._chunk_tokens,
                           len(request.block_hashes) // per, len(tracker.block_ids) // per)
            if complete > tracker.saved_chunks:
                tracker.hold_steps = self._recent_loads.maxlen
                self._held[req_id] = tracker
                return True, None               # its blocks stay until the workers have saved them
        self._spent.pop(req_id, None)
        return False, None

    def update_connector_output(self, connector_output):
        invalid = connector_output.invalid_block_ids
        if invalid:
            self._invalid.update(invalid)
            for loads, derived in self._derived:
                if derived and not loads.isdisjoint(invalid):
                    self._invalid.update(derived)
            per = (self._chunk_tokens or self._block_size) // self._block_size
            for tracker in self._trackers.values():
                for i, b in enumerate(tracker.block_ids[:tracker.saved_chunks * per]):
                    if b in invalid:            # vLLM recomputes from there: so will the saves
                        tracker.saved_chunks = i // per
                        break
        worker = connector_output.kv_connector_worker_meta
        if isinstance(worker, KvStashWorkerMetadata):
            for req_id, seconds in worker.spent_s.items():
                if req_id in self._trackers or req_id in self._spent:
                    self._spent[req_id] = self._spent.get(req_id, 0.0) + seconds

    # ------------------------------------------------------------------------------------------ worker
    @staticmethod
    def _ranks(parallel):
        try:
            from vllm.distributed.parallel_state import get_pp_group, get_tensor_model_parallel_rank
            return get_tensor_model_parallel_rank(), get_pp_group().rank_in_group
        except Exception:                       # no distributed environment (a single process): rank from config
            tp = parallel.tensor_parallel_size
            return parallel.rank % tp, parallel.rank // tp

    def register_kv_caches(self, kv_caches):
        """Describes the engine's per-layer caches to kvstash (one instance per worker rank)."""
        paged = kvstash.PagedKV(kv_caches)
        if self._block_size % paged.block_size:
            logger.error("kvstash: kernel blocks of %d tokens do not divide vLLM's %d-token blocks: the connector "
                         "stays off", paged.block_size, self._block_size)
            return
        # vLLM may cut its blocks into smaller kernel blocks: block b is kernel blocks b*r .. b*r+r-1.
        self._kernel_ratio = self._block_size // paged.block_size
        self._model_name = self._namespace(paged, list(kv_caches))
        self._paged = paged
        if self._engine_id is not None:         # the scheduler's tier lookups name it (see the module doc)
            self._instance = instance_id(self._engine_id, self._pp_rank, self._tp_rank)
        else:
            self._instance = (os.getpid() << 20 | secrets.randbits(20)) & ((1 << 63) - 1)
        self._connection.get()

    def get_handshake_metadata(self):
        """The model name this rank registers, for the scheduler (vLLM collects it after register_kv_caches)."""
        return KvStashHandshake(self._model_name) if self._model_name is not None else None

    def _register(self, client):
        """On every (re)connection: pin the pool for GPU caches and REGISTER this rank's layout."""
        paged = self._paged
        if paged is None:
            return
        self._chunk_tokens_of(client)
        if self._pin and paged.device.type == "cuda":
            info = client.pin_pool()
            logger.info("kvstash: pool of %.1f GiB registered with CUDA in %.2f s", info.bytes / (1 << 30),
                        info.seconds)
        layout = paged.layout(self._model_name, self._tp_size, self._tp_rank)
        r = client.register(self._instance, layout)
        if not r.ok:
            raise Refused("REGISTER %s: %s %s" % (layout.model, r.status.name, r.message))

    def start_load_kv(self, forward_context, **kwargs):
        self._step_errors = set()
        meta = self._connector_metadata
        if not isinstance(meta, KvStashConnectorMetadata) or self._paged is None:
            return
        if meta.server_lost:
            # The connection is suspect too (a server restarted in between would make its first call fail, and a
            # stopped one time out): dropped, and made again once the scheduler has found the server back.
            self._connection.close()
        for load in meta.loads:
            if meta.server_lost:
                self._fail_load([b for b in load.block_ids if b >= 0])
            else:
                self._load(load)

    def _kernel_blocks(self, block_ids):
        r = self._kernel_ratio
        if r == 1:
            return block_ids
        return [b * r + i if b >= 0 else -1 for b in block_ids for i in range(r)]

    def _left(self, spec) -> float:
        """What is left of a request's budget for this rank's calls in this step."""
        return spec.budget_s - self._step_spent.get(spec.req_id, 0.0)

    def _spend(self, spec, start):
        self._step_spent[spec.req_id] = self._step_spent.get(spec.req_id, 0.0) + time.monotonic() - start

    def _load(self, load):
        wanted = [b for b in load.block_ids if b >= 0]
        left = self._left(load)
        if left <= 0:
            self.stats["out_of_budget"] += 1
            self._fail_load(wanted)
            return
        start = time.monotonic()
        try:
            self._load_within(load, wanted, left)
        finally:
            self._spend(load, start)

    def _load_within(self, load, wanted, left):
        client = self._connection.get(left)
        if client is None:
            self._fail_load(wanted)
            return
        per = len(load.block_ids) // len(load.keys)
        try:
            with client.bounded(left):
                result = client.retrieve_paged(self._instance, self._paged, self._kernel_blocks(load.block_ids),
                                               load.keys, salt=load.salt, prefix=True)
        except KvStashError as ex:
            self._connection.lost(ex)
            self._fail_load(wanted)
            return
        except Exception:                       # a bug must not stop the engine: recompute, and say so
            logger.exception("kvstash: loading request %s failed", load.req_id)
            self._fail_load(wanted)
            return
        if result.ok:
            self.stats["loaded_chunks"] += len(result.done)
            self.stats["loaded_bytes"] += result.bytes
            return
        # Prefix semantics: from the first chunk that did not arrive intact, every block is recomputed.
        first_bad = min(list(result.failed) + list(result.missing)) if result.status == Status.OK else 0
        bad = [b for b in load.block_ids[first_bad * per:] if b >= 0]
        self.stats["loaded_chunks"] += first_bad
        self.stats["loaded_bytes"] += first_bad * (result.bytes // max(1, len(result.done)))
        self._fail_load(bad)
        logger.info("kvstash: %d of %d chunks of request %s not loaded (%s): recomputed", len(load.keys) - first_bad,
                    len(load.keys), load.req_id, result.status.name if result.status != Status.OK else
                    "missing" if result.missing and first_bad == min(result.missing) else "fenced")

    def _fail_load(self, block_ids):
        self._load_errors.update(block_ids)
        self._step_errors.update(block_ids)
        self.stats["load_errors"] += 1 if block_ids else 0

    def wait_for_layer_load(self, layer_name):
        return                                  # loads finish in start_load_kv

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        return                                  # saves happen whole in wait_for_save

    def wait_for_save(self):
        meta = self._connector_metadata
        if not isinstance(meta, KvStashConnectorMetadata):
            return
        if not self._consumer_only and self._paged is not None:
            for save in meta.saves:
                if meta.server_lost:
                    self.stats["store_errors"] += 1
                else:
                    self._save(save)
        self._finished_sending.update(meta.finish)
        self._maybe_log()

    def _save(self, save):
        per = len(save.block_ids) // len(save.keys)
        if self._step_errors:
            # The scheduler never plans a save through a block loaded in the same step; should one come, the
            # chunks from the first failed block on are not stored.
            for i, b in enumerate(save.block_ids):
                if b in self._step_errors:
                    logger.error("kvstash: a save of request %s reads block %d, which failed to load in this "
                                 "step: its chunks from there are not stored", save.req_id, b)
                    save = SaveSpec(save.req_id, save.keys[:i // per], save.block_ids[:i // per * per], save.salt,
                                    save.first_chunk, save.budget_s)
                    break
            if not save.keys:
                return
        left = self._left(save)
        if left <= 0:
            self.stats["out_of_budget"] += 1
            self.stats["store_errors"] += 1
            return
        start = time.monotonic()
        try:
            self._save_within(save, left)
        finally:
            self._spend(save, start)

    def _save_within(self, save, left):
        client = self._connection.get(left)
        if client is None:
            self.stats["store_errors"] += 1
            return
        try:
            with client.bounded(left):
                result = client.store_paged(self._instance, self._paged, self._kernel_blocks(save.block_ids),
                                            save.keys, salt=save.salt)      # split by the client past its limit
            if result.ok:
                self.stats["stored_chunks"] += len(result.done)
                self.stats["stored_bytes"] += result.bytes
            else:
                self.stats["store_errors"] += 1         # NO_SPACE or a lease that ended: a future miss, no more
        except KvStashError as ex:
            self._connection.lost(ex)
            self.stats["store_errors"] += 1
        except Exception:                       # a bug must not stop the engine: the chunk is a future miss
            logger.exception("kvstash: saving request %s failed", save.req_id)
            self.stats["store_errors"] += 1

    def get_finished(self, finished_req_ids):
        done, self._finished_sending = self._finished_sending, set()
        return (done or None), None

    def get_block_ids_with_load_errors(self):
        errors, self._load_errors = self._load_errors, set()
        return errors

    def build_connector_worker_meta(self):
        if not self._step_spent:
            return None
        spent, self._step_spent = self._step_spent, {}
        return KvStashWorkerMetadata(spent)

    def shutdown(self):
        self._connection.close()

    # ------------------------------------------------------------------------------------------ logging
    def _maybe_log(self):
        now = time.monotonic()
        if self._log_interval_s > 0 and now - self._last_log >= self._log_interval_s:
            self._last_log = now
            logger.info("kvstash %s: %s", self._role.name.lower(),
                        " ".join("%s=%d" % kv for kv in sorted(self.stats.items())))
