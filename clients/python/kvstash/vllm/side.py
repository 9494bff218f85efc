"""What both sides of the vLLM connector (module documentation of ``kvstash.vllm.connector``) share: the options of
``kv_connector_extra_config``, the settings read from vLLM's configuration, the counters and their log line, and the
server's chunk size."""

import logging
import time
from typing import Any, Dict, Optional

import kvstash
from kvstash.options import Option, parse_options

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



class Side:
    """One side of the connector, the scheduler's or a worker's: its settings (``OPTIONS`` and vLLM's
    configuration), its counters (``stats``) and the server's chunk size once known."""

    def __init__(self, vllm_config: Any, transfer: Any, name: str) -> None:
        options = parse_options("kv_connector_extra_config", transfer.kv_connector_extra_config, OPTIONS, logger)
        self.name = name
        self._vllm_config = vllm_config
        self._directory: str = options["dir"] or kvstash.default_directory()
        self._timeout_s: float = options["timeout_s"]
        self._reconnect_s: float = options["reconnect_s"]
        self._store_decode: bool = options["store_decode"]
        self._log_interval_s: float = options["log_interval_s"]
        self._pin: bool = options["cuda"]
        self._checkpoint: Optional[str] = options["checkpoint"]
        self._tier_wait_s: float = options["tier_wait_ms"] / 1000.0
        self._chunk_tokens: Optional[int] = options["chunk_tokens"] or None      # learnt from the server otherwise
        self._engine_id = getattr(transfer, "engine_id", None)
        self._block_size: int = vllm_config.cache_config.block_size
        parallel = vllm_config.parallel_config
        self._tp_size: int = parallel.tensor_parallel_size
        self._pp_size: int = parallel.pipeline_parallel_size
        self._consumer_only = transfer.kv_role == "kv_consumer"
        self._producer_only = transfer.kv_role == "kv_producer"
        self.stats: Dict[str, int] = {
            "lookups": 0, "hit_tokens": 0, "tier_chunks": 0, "loaded_chunks": 0, "loaded_bytes": 0, "load_errors": 0,
            "stored_chunks": 0, "stored_bytes": 0, "store_errors": 0, "unavailable": 0, "deferred_saves": 0,
            "out_of_budget": 0}
        self._last_log = time.monotonic()

    @property
    def directory(self) -> str:
        """The kvstash server's directory (the ``dir`` option, or ``kvstash.default_directory()``)."""
        return self._directory

    @property
    def chunk_tokens(self) -> Optional[int]:
        """The server's chunk tokens: the option, or what the server said once connected; None before."""
        return self._chunk_tokens

    def _chunk_tokens_of(self, client: kvstash.Client) -> int:
        if self._chunk_tokens is None:
            self._chunk_tokens = client.chunk_tokens
        if self._chunk_tokens % self._block_size:
            raise ValueError("kvstash chunks of %d tokens are not whole %d-token vLLM blocks: start the server "
                             "with --chunk-tokens a multiple of the block size" % (self._chunk_tokens,
                                                                                   self._block_size))
        return self._chunk_tokens

    def _maybe_log(self) -> None:
        now = time.monotonic()
        if self._log_interval_s > 0 and now - self._last_log >= self._log_interval_s:
            self._last_log = now
            logger.info("kvstash %s: %s", self.name,
                        " ".join("%s=%d" % kv for kv in sorted(self.stats.items())))
