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
  connection comes back by itself. An error that leaves the connection working and the server answering
  (``KvStashError.connection_lost`` False, but not a timeout) fails that call only: the connection stays. Where CUDA
  refuses to register the pool (``CudaUnavailableError``), one warning, and transfers go on through pageable memory.
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
line naming it, an unknown one is warned about): see ``OPTIONS`` (``kvstash.vllm.side``).

The connector is two objects, one per role: ``SchedulerSide`` (``kvstash.vllm.scheduler``) in the scheduler's
process and ``WorkerSide`` (``kvstash.vllm.worker``) in each worker's; ``KvStashConnector`` is the class vLLM loads
and hands each call to the side of its role. What they tell each other is in ``kvstash.vllm.metadata``, the namespace
derivation in ``kvstash.vllm.naming``, the options and counters both have in ``kvstash.vllm.side``.
"""

from typing import Any, Dict, List, Optional, Set, Tuple

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, KVConnectorRole

from .metadata import (KvStashConnectorMetadata, KvStashHandshake, KvStashWorkerMetadata, LoadSpec, SaveSpec,
                       chunk_key, instance_id)
from .scheduler import SchedulerSide
from .side import OPTIONS
from .worker import WorkerSide

__all__ = ["KvStashConnector", "KvStashConnectorMetadata", "KvStashHandshake", "KvStashWorkerMetadata", "LoadSpec",
           "OPTIONS", "SaveSpec", "chunk_key", "instance_id"]


class KvStashConnector(KVConnectorBase_V1):
    """vLLM KV connector on kvstash (see the module documentation): the side of its role, ``scheduler`` or
    ``worker``, does the work; the other is None."""

    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None) -> None:
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        self.scheduler: Optional[SchedulerSide] = None
        self.worker: Optional[WorkerSide] = None
        if role == KVConnectorRole.SCHEDULER:
            self.scheduler = SchedulerSide(vllm_config, self._kv_transfer_config)
        else:
            self.worker = WorkerSide(vllm_config, self._kv_transfer_config)

    @property
    def stats(self) -> Dict[str, int]:
        """The counters of this side (logged every ``log_interval_s``)."""
        return self._side().stats

    @property
    def model_name(self) -> Optional[str]:
        """The model name (namespace) this worker rank registers: see the module documentation."""
        return self._worker().model_name

    def _side(self) -> Any:
        return self.scheduler if self.scheduler is not None else self.worker

    def _scheduler(self) -> SchedulerSide:
        if self.scheduler is None:
            raise RuntimeError("kvstash: a scheduler call on the worker's connector")
        return self.scheduler

    def _worker(self) -> WorkerSide:
        if self.worker is None:
            raise RuntimeError("kvstash: a worker call on the scheduler's connector")
        return self.worker

    # ------------------------------------------------------------------------------------------ scheduler
    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[int, bool]:
        return self._scheduler().get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        self._scheduler().update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> KvStashConnectorMetadata:
        return self._scheduler().build_connector_meta(scheduler_output)

    def request_finished(self, request: Any, block_ids: List[int]) -> Tuple[bool, None]:
        return self._scheduler().request_finished(request, block_ids)

    def update_connector_output(self, connector_output: Any) -> None:
        self._scheduler().update_connector_output(connector_output)

    def set_xfer_handshake_metadata_pp_aware(self, metadata: Dict[Tuple[int, int], Any]) -> None:
        """vLLM hands over what every worker rank told it after registering its caches: the model names."""
        self._scheduler().set_xfer_handshake_metadata_pp_aware(metadata)

    def set_xfer_handshake_metadata(self, metadata: Dict[int, Any]) -> None:
        self._scheduler().set_xfer_handshake_metadata(metadata)

    # ------------------------------------------------------------------------------------------ worker
    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        """Describes the engine's per-layer caches to kvstash (one instance per worker rank)."""
        self._worker().register_kv_caches(kv_caches)

    def get_handshake_metadata(self) -> Optional[KvStashHandshake]:
        """The model name this rank registers, for the scheduler (vLLM collects it after register_kv_caches)."""
        return self._worker().get_handshake_metadata()

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        self._worker().start_load_kv(self._connector_metadata)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return                                  # loads finish in start_load_kv

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        return                                  # saves happen whole in wait_for_save

    def wait_for_save(self) -> None:
        self._worker().wait_for_save(self._connector_metadata)

    def get_finished(self, finished_req_ids: Set[str]) -> Tuple[Optional[Set[str]], None]:
        return self._worker().get_finished()

    def get_block_ids_with_load_errors(self) -> Set[int]:
        return self._worker().get_block_ids_with_load_errors()

    def build_connector_worker_meta(self) -> Optional[KvStashWorkerMetadata]:
        return self._worker().build_connector_worker_meta()

    def shutdown(self) -> None:
        self._side().shutdown()
