"""The vLLM connector's worker side (module documentation of ``kvstash.vllm.connector``): one per worker rank. It
registers the rank's paged KV caches under the rank's namespace, loads the chunks the scheduler planned into their
blocks (the readable leading ones; the rest become load errors, which vLLM recomputes) and saves complete chunks,
each request's calls within what is left of its budget."""

import os
import secrets
import time
from typing import Any, Dict, List, Optional, Set, Tuple

import kvstash
from kvstash import CudaUnavailableError, KvStashError, Status
from kvstash.reconnect import Reconnecting, Refused

from .metadata import (ChunkRange, KvStashConnectorMetadata, KvStashHandshake, KvStashWorkerMetadata, LoadSpec,
                       SaveSpec, instance_id)
from .naming import model_namespace
from .side import Side, logger


class WorkerSide(Side):
    """The connector in one of vLLM's worker processes (``KVConnectorRole.WORKER``)."""

    def __init__(self, vllm_config: Any, transfer: Any) -> None:
        super().__init__(vllm_config, transfer, "worker")
        self._paged: Optional[kvstash.PagedKV] = None
        self._kernel_ratio = 1
        self._instance = 0
        self._model_name: Optional[str] = None
        self._load_errors: Set[int] = set()     # for vLLM: taken by get_block_ids_with_load_errors
        self._step_errors: Set[int] = set()     # this step's: no save may read them
        self._step_spent: Dict[str, float] = {}
        self._finished_sending: Set[str] = set()
        self._tp_rank, self._pp_rank = self._ranks(vllm_config.parallel_config)
        self._connection = Reconnecting(self._directory, self._timeout_s, self._reconnect_s, logger, "recomputing",
                                        self._register)

    @property
    def model_name(self) -> Optional[str]:
        """The model name (namespace) this worker rank registers: see the module documentation."""
        return self._model_name

    @staticmethod
    def _ranks(parallel: Any) -> Tuple[int, int]:
        try:
            from vllm.distributed.parallel_state import get_pp_group, get_tensor_model_parallel_rank
            return get_tensor_model_parallel_rank(), get_pp_group().rank_in_group
        except Exception:                       # no distributed environment (a single process): rank from config
            tp = parallel.tensor_parallel_size
            return parallel.rank % tp, parallel.rank // tp

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        """Describes the engine's per-layer caches to kvstash (one instance per worker rank)."""
        paged = kvstash.PagedKV(kv_caches)
        if self._block_size % paged.block_size:
            logger.error("kvstash: kernel blocks of %d tokens do not divide vLLM's %d-token blocks: the connector "
                         "stays off", paged.block_size, self._block_size)
            return
        # vLLM may cut its blocks into smaller kernel blocks: block b is kernel blocks b*r .. b*r+r-1.
        self._kernel_ratio = self._block_size // paged.block_size
        self._model_name = model_namespace(self._vllm_config, paged, list(kv_caches), self._checkpoint, self._engine_id,
                                           "pp%d/%d" % (self._pp_rank, self._pp_size))
        self._paged = paged
        if self._engine_id is not None:         # the scheduler's tier lookups name it (see the module doc)
            self._instance = instance_id(self._engine_id, self._pp_rank, self._tp_rank)
        else:
            self._instance = (os.getpid() << 20 | secrets.randbits(20)) & ((1 << 63) - 1)
        self._connection.get()

    def get_handshake_metadata(self) -> Optional[KvStashHandshake]:
        """The model name this rank registers, for the scheduler (vLLM collects it after register_kv_caches)."""
        return KvStashHandshake(self._model_name) if self._model_name is not None else None

    def _register(self, client: kvstash.Client) -> None:
        """On every (re)connection: pin the pool for GPU caches and REGISTER this rank's layout."""
        paged = self._paged
        if paged is None:
            return
        self._chunk_tokens_of(client)
        if self._pin and paged.device.type == "cuda":
            self._pin_pool(client)
        assert self._model_name is not None     # set with the caches, in register_kv_caches
        layout = paged.layout(self._model_name, self._tp_size, self._tp_rank)
        r = client.register(self._instance, layout)
        if not r.ok:
            raise Refused("REGISTER %s: %s %s" % (layout.model, r.status_name, r.message))

    def _pin_pool(self, client: kvstash.Client) -> None:
        """Registers the pool with CUDA, so copies between the GPU caches and the pool run at PCIe speed. Where CUDA
        refuses (``CudaUnavailableError``: the connection is not affected), the connector goes on through pageable
        memory, slower, and does not ask again."""
        try:
            info = client.pin_pool()
        except CudaUnavailableError as ex:
            self._pin = False
            logger.warning("kvstash: the pool could not be registered with CUDA (%s): transfers go through pageable "
                           "memory", ex)
            return
        logger.info("kvstash: pool of %.1f GiB registered with CUDA in %.2f s", info.bytes / (1 << 30), info.seconds)

    def start_load_kv(self, meta: Any) -> None:
        """The step's loads (``meta``: the metadata vLLM bound for this step), before its forward."""
        self._step_errors = set()
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

    def _kernel_blocks(self, block_ids: List[int]) -> List[int]:
        r = self._kernel_ratio
        if r == 1:
            return block_ids
        return [b * r + i if b >= 0 else -1 for b in block_ids for i in range(r)]

    def _left(self, spec: ChunkRange) -> float:
        """What is left of a request's budget for this rank's calls in this step."""
        return spec.budget_s - self._step_spent.get(spec.req_id, 0.0)

    def _spend(self, spec: ChunkRange, start: float) -> None:
        self._step_spent[spec.req_id] = self._step_spent.get(spec.req_id, 0.0) + time.monotonic() - start

    def _load(self, load: LoadSpec) -> None:
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

    def _load_within(self, load: LoadSpec, wanted: List[int], left: float) -> None:
        client = self._connection.get(left)
        if client is None:
            self._fail_load(wanted)
            return
        per = len(load.block_ids) // len(load.keys)
        paged = self._paged
        assert paged is not None                # start_load_kv loads only after register_kv_caches
        try:
            with client.bounded(left):
                result = client.retrieve_paged(self._instance, paged, self._kernel_blocks(load.block_ids),
                                               load.keys, salt=load.salt, prefix=True)
        except KvStashError as ex:
            self._connection.failed(ex)
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
                    len(load.keys), load.req_id, result.status_name if result.status != Status.OK else
                    "missing" if result.missing and first_bad == min(result.missing) else "fenced")

    def _fail_load(self, block_ids: List[int]) -> None:
        self._load_errors.update(block_ids)
        self._step_errors.update(block_ids)
        self.stats["load_errors"] += 1 if block_ids else 0

    def wait_for_save(self, meta: Any) -> None:
        """The step's saves (``meta``: the metadata vLLM bound for this step), after its forward."""
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

    def _save(self, save: SaveSpec) -> None:
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

    def _save_within(self, save: SaveSpec, left: float) -> None:
        client = self._connection.get(left)
        if client is None:
            self.stats["store_errors"] += 1
            return
        paged = self._paged
        assert paged is not None                # wait_for_save saves only after register_kv_caches
        try:
            with client.bounded(left):
                result = client.store_paged(self._instance, paged, self._kernel_blocks(save.block_ids),
                                            save.keys, salt=save.salt)      # split by the client past its limit
            if result.ok:
                self.stats["stored_chunks"] += len(result.done)
                self.stats["stored_bytes"] += result.bytes
            else:
                self.stats["store_errors"] += 1         # NO_SPACE or a lease that ended: a future miss, no more
        except KvStashError as ex:
            self._connection.failed(ex)
            self.stats["store_errors"] += 1
        except Exception:                       # a bug must not stop the engine: the chunk is a future miss
            logger.exception("kvstash: saving request %s failed", save.req_id)
            self.stats["store_errors"] += 1

    def get_finished(self) -> Tuple[Optional[Set[str]], None]:
        done, self._finished_sending = self._finished_sending, set()
        return (done or None), None

    def get_block_ids_with_load_errors(self) -> Set[int]:
        errors, self._load_errors = self._load_errors, set()
        return errors

    def build_connector_worker_meta(self) -> Optional[KvStashWorkerMetadata]:
        if not self._step_spent:
            return None
        spent, self._step_spent = self._step_spent, {}
        return KvStashWorkerMetadata(spent)

    def shutdown(self) -> None:
        self._connection.close()

