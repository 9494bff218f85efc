"""KvStashConnector: vLLM's KV connector (v1) on the kvstash store.

Turned on with::

    vllm serve MODEL --kv-transfer-config '{"kv_connector":"KvStashConnector",
        "kv_connector_module_path":"kvstash.vllm","kv_role":"kv_both",
        "kv_load_failure_policy":"recompute","kv_connector_extra_config":{"dir":"/dev/shm/kvstash-USER"}}'

How it works:
- **Keys.** A kvstash chunk is ``chunk_tokens / block_size`` vLLM blocks. Its key is vLLM's own
  prefix-chained hash of the chunk's last block (``request.block_hashes``), folded to 128 bits, so it names
  the whole prefix up to the chunk's end; the namespace is the model (with its KV dtype and pipeline stage),
  the tensor-parallel world size and rank, and the request's ``cache_salt``. A partial chunk is never
  stored; decode tokens are not stored unless ``store_decode`` is set.
- **Scheduler.** ``get_num_new_matched_tokens`` asks kvstash (LOOKUP_ALL_RANKS: the prefix every
  tensor-parallel rank holds, from the first chunk the engine does not hold itself) and changes nothing;
  the hit is never the whole prompt (vLLM computes at least one token). ``build_connector_meta`` tells the
  workers which chunks to load into which blocks, and which newly complete chunks to save.
- **Workers.** ``start_load_kv`` retrieves the chunks and scatters them into the paged blocks (blocks the
  engine already holds are left alone); ``wait_for_save`` gathers complete chunks and stores them; both
  through the pool registered with CUDA. Loads and saves are synchronous (layer-wise hooks are no-ops).
- **Failures.** A chunk evicted or fenced between lookup and load, a MISS, a timeout, or a server that is
  gone or restarted turns into ``get_block_ids_with_load_errors`` (vLLM recomputes those blocks with
  ``kv_load_failure_policy: recompute``); never an exception into the engine, never KV that was not
  verified. Every wait is bounded by ``timeout_s``; a lost server is retried every ``reconnect_s`` (lookups
  answer 0 meanwhile) and the connection comes back by itself.

- **Second tier.** On a server that runs one (``serve --l2``), a prefix found short on the host is looked up
  again for each rank, waiting up to ``tier_wait_ms`` for the tier's read-through (chunks another host stored
  come back in the same call). These LOOKUPs name each rank's instance: its id is derived from vLLM's
  ``engine_id`` (unique per engine by default), the pipeline stage and the rank, so the scheduler knows the ids
  its workers registered. ``get_num_new_matched_tokens`` runs in the scheduler's loop: the wait holds up the
  whole step, so keep the bound small.

Extra config (``kv_connector_extra_config``): ``dir`` (default ``/dev/shm/kvstash-$USER``), ``timeout_s``
(5), ``reconnect_s`` (1), ``store_decode`` (false), ``log_interval_s`` (30), ``cuda`` (pin the pool when the
caches are on a GPU; true), ``model`` (the namespace's model name; default: the served model name),
``tier_wait_ms`` (5; 0 never waits for the second tier).
"""

import hashlib
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1, KVConnectorMetadata,
                                                              KVConnectorRole)

import kvstash
from kvstash import KvStashError, Status
from kvstash.reconnect import Reconnecting, Refused

logger = logging.getLogger("vllm.kvstash")        # under vLLM's logger: its handler and level apply

TIMEOUT_DEFAULT_S = 5.0
RECONNECT_DEFAULT_S = 1.0
LOG_INTERVAL_DEFAULT_S = 30.0
TIER_WAIT_DEFAULT_MS = 5.0


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
    """Chunks ``keys`` (range order) into blocks ``block_ids`` (n per chunk; -1: leave the block alone)."""
    req_id: str
    keys: list
    block_ids: list
    salt: Optional[str]


@dataclass
class SaveSpec:
    """Complete chunks ``keys`` (range order) from blocks ``block_ids`` (n per chunk)."""
    req_id: str
    keys: list
    block_ids: list
    salt: Optional[str]


@dataclass
class KvStashConnectorMetadata(KVConnectorMetadata):
    """What the workers load and save in one step."""
    loads: list = field(default_factory=list)
    saves: list = field(default_factory=list)


@dataclass
class _Tracker:
    """The scheduler's view of one running request."""
    request: Any
    block_ids: list
    saved_chunks: int = 0
    load: Optional[tuple] = None            # (first token, last token) to load, set by update_state_after_alloc


class KvStashConnector(KVConnectorBase_V1):
    """vLLM KV connector on kvstash (see the module documentation)."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        transfer = self._kv_transfer_config
        extra = transfer.kv_connector_extra_config or {}
        self._directory = extra.get("dir") or kvstash.default_directory()
        self._timeout_s = float(extra.get("timeout_s", TIMEOUT_DEFAULT_S))
        self._reconnect_s = float(extra.get("reconnect_s", RECONNECT_DEFAULT_S))
        self._store_decode = bool(extra.get("store_decode", False))
        self._log_interval_s = float(extra.get("log_interval_s", LOG_INTERVAL_DEFAULT_S))
        self._pin = bool(extra.get("cuda", True))
        self._tier_wait_s = max(0.0, float(extra.get("tier_wait_ms", TIER_WAIT_DEFAULT_MS))) / 1000.0
        self._engine_id = getattr(transfer, "engine_id", None)
        self._block_size = vllm_config.cache_config.block_size
        parallel = vllm_config.parallel_config
        self._tp_size = parallel.tensor_parallel_size
        self._pp_size = parallel.pipeline_parallel_size
        model = extra.get("model") or vllm_config.model_config.served_model_name or vllm_config.model_config.model
        if isinstance(model, (list, tuple)):
            model = model[0]
        kv_dtype = vllm_config.cache_config.cache_dtype
        if kv_dtype == "auto":
            kv_dtype = str(vllm_config.model_config.dtype).replace("torch.", "")
        self._model_base = "vllm:%s:%s" % (model, kv_dtype)
        self._consumer_only = transfer.kv_role == "kv_consumer"
        self._producer_only = transfer.kv_role == "kv_producer"
        self._chunk_tokens = int(extra.get("chunk_tokens", 0)) or None      # learnt from the server otherwise
        self.stats = {"lookups": 0, "hit_tokens": 0, "tier_chunks": 0, "loaded_chunks": 0, "loaded_bytes": 0,
                      "load_errors": 0, "stored_chunks": 0, "stored_bytes": 0, "store_errors": 0, "unavailable": 0}
        self._last_log = time.monotonic()
        if role == KVConnectorRole.SCHEDULER:
            self._trackers = {}
            self._matched = {}
            self._asked = set()                 # requests asked about before: asked again, the server is told
            self._connection = Reconnecting(self._directory, self._timeout_s, self._reconnect_s, logger,
                                            "recomputing", copy_transport=True)
        else:
            self._paged = None
            self._kernel_ratio = 1
            self._instance = None
            self._load_errors = set()
            self._tp_rank, self._pp_rank = self._ranks(parallel)
            self._connection = Reconnecting(self._directory, self._timeout_s, self._reconnect_s, logger,
                                            "recomputing", self._register)

    # ------------------------------------------------------------------------------------------ naming
    def model_name(self, pp_rank: int) -> str:
        """The kvstash model name of pipeline stage ``pp_rank`` (its layers differ from other stages')."""
        return "%s:pp%d/%d" % (self._model_base, pp_rank, self._pp_size)

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

    # ------------------------------------------------------------------------------------------ scheduler
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        if self._producer_only:
            return 0, False
        client = self._connection.get()
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
            for pp in range(self._pp_size):
                r = client.lookup_all_ranks(self.model_name(pp), self._tp_size, keys, salt=request.cache_salt,
                                            quiet=again)
                hits = min(hits, r.hit_chunks if r.ok else 0)
        except KvStashError as ex:
            self._connection.lost(ex)
            self.stats["unavailable"] += 1
            return 0, False
        if hits < len(keys) and self._tier_wait_s > 0 and self._engine_id is not None and client.second_tier:
            try:
                more = self._wait_for_tier(client, keys[hits:], request.cache_salt)
            except KvStashError as ex:
                self._connection.lost(ex)
                more = 0
            self.stats["tier_chunks"] += more
            hits += more
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
                return meta
            chunk = self._chunk_tokens_of(client)
        per = chunk // self._block_size
        scheduled = scheduler_output.num_scheduled_tokens
        for new in scheduler_output.scheduled_new_reqs:
            tracker = self._trackers.get(new.req_id)
            if tracker is None:
                continue
            tracker.block_ids = list(new.block_ids[0])
            self._plan(meta, new.req_id, tracker, new.num_computed_tokens + scheduled.get(new.req_id, 0), chunk,
                       per)
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
            self._plan(meta, req_id, tracker, cached.num_computed_tokens[i] + scheduled.get(req_id, 0), chunk, per)
        self._maybe_log()
        return meta

    def _plan(self, meta, req_id, tracker, computed_after_step, chunk, per):
        request = tracker.request
        salt = request.cache_salt
        if tracker.load is not None:
            start, end = tracker.load
            tracker.load = None
            first, last = start // chunk, -(-end // chunk)
            keys = self._keys(request, last, per)[first:]
            block_ids = []
            for b in range(first * per, last * per):
                wanted = start // self._block_size <= b < -(-end // self._block_size) and b < len(tracker.block_ids)
                block_ids.append(tracker.block_ids[b] if wanted else -1)
            meta.loads.append(LoadSpec(req_id, keys, block_ids, salt))
        if self._consumer_only:
            return
        limit = request.num_tokens if self._store_decode else request.num_prompt_tokens
        complete = min(min(computed_after_step, limit) // chunk, len(request.block_hashes) // per,
                       len(tracker.block_ids) // per)
        if complete > tracker.saved_chunks:
            # A later step's range starts with the last chunk saved (present, so not written again): the store
            # then knows the chain the new chunks continue, as it does for a range starting at the prompt's start.
            start = max(0, tracker.saved_chunks - 1)
            keys = self._keys(request, complete, per)[start:]
            block_ids = tracker.block_ids[start * per:complete * per]
            meta.saves.append(SaveSpec(req_id, keys, block_ids, salt))
            tracker.saved_chunks = complete

    def request_finished(self, request, block_ids):
        self._trackers.pop(request.request_id, None)
        self._matched.pop(request.request_id, None)
        self._asked.discard(request.request_id)
        return False, None                       # saves are synchronous: the blocks are free at once

    def update_connector_output(self, connector_output):
        return

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
        self._paged = paged
        if self._engine_id is not None:         # the scheduler's tier lookups name it (see the module doc)
            self._instance = instance_id(self._engine_id, self._pp_rank, self._tp_rank)
        else:
            self._instance = (os.getpid() << 20 | secrets.randbits(20)) & ((1 << 63) - 1)
        self._connection.get()

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
        layout = paged.layout(self.model_name(self._pp_rank), self._tp_size, self._tp_rank)
        r = client.register(self._instance, layout)
        if not r.ok:
            raise Refused("REGISTER %s: %s %s" % (layout.model, r.status.name, r.message))

    def start_load_kv(self, forward_context, **kwargs):
        meta = self._connector_metadata
        if not isinstance(meta, KvStashConnectorMetadata) or not meta.loads or self._paged is None:
            return
        for load in meta.loads:
            self._load(load)

    def _kernel_blocks(self, block_ids):
        r = self._kernel_ratio
        if r == 1:
            return block_ids
        return [b * r + i if b >= 0 else -1 for b in block_ids for i in range(r)]

    def _load(self, load):
        wanted = [b for b in load.block_ids if b >= 0]
        client = self._connection.get()
        if client is None:
            self._fail_load(wanted)
            return
        per = len(load.block_ids) // len(load.keys)
        try:
            result = client.retrieve_paged(self._instance, self._paged, self._kernel_blocks(load.block_ids), load.keys,
                                           salt=load.salt)
        except KvStashError as ex:
            self._connection.lost(ex)
            self._fail_load(wanted)
            return
        except Exception:                       # a bug must not stop the engine: recompute, and say so
            logger.exception("kvstash: loading request %s failed", load.req_id)
            self._fail_load(wanted)
            return
        if result.status == Status.OK and not result.failed:
            self.stats["loaded_chunks"] += len(result.done)
            self.stats["loaded_bytes"] += result.bytes
            return
        # Prefix semantics: from the first chunk that did not arrive intact, every block is recomputed.
        first_bad = min(result.failed) if result.status == Status.OK else 0
        bad = [b for b in load.block_ids[first_bad * per:] if b >= 0]
        self.stats["loaded_chunks"] += first_bad
        self._fail_load(bad)
        logger.info("kvstash: %d of %d chunks of request %s not loaded (%s): recomputed", len(load.keys) - first_bad,
                    len(load.keys), load.req_id, result.status.name if result.status != Status.OK else "reclaimed")

    def _fail_load(self, block_ids):
        self._load_errors.update(block_ids)
        self.stats["load_errors"] += 1 if block_ids else 0

    def wait_for_layer_load(self, layer_name):
        return                                  # loads finish in start_load_kv

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        return                                  # saves happen whole in wait_for_save

    def wait_for_save(self):
        meta = self._connector_metadata
        if self._consumer_only or not isinstance(meta, KvStashConnectorMetadata) or self._paged is None:
            return
        for save in meta.saves:
            self._save(save)
        self._maybe_log()

    def _save(self, save):
        client = self._connection.get()
        if client is None:
            self.stats["store_errors"] += 1
            return
        try:
            result = client.store_paged(self._instance, self._paged, self._kernel_blocks(save.block_ids), save.keys,
                                        salt=save.salt)             # split by the client past the server's limit
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
        return None, None

    def get_block_ids_with_load_errors(self):
        errors, self._load_errors = self._load_errors, set()
        return errors

    def shutdown(self):
        self._connection.close()

    # ------------------------------------------------------------------------------------------ logging
    def _maybe_log(self):
        now = time.monotonic()
        if self._log_interval_s > 0 and now - self._last_log >= self._log_interval_s:
            self._last_log = now
            logger.info("kvstash %s: %s", self._role.name.lower(),
                        " ".join("%s=%d" % kv for kv in sorted(self.stats.items())))
