"""What the vLLM connector's two sides tell each other (module documentation of ``kvstash.vllm.connector``): the
chunk keys and instance ids both compute alike, the step's loads and saves the scheduler hands the workers, the
model name each worker rank registered, and the time the workers spent per request."""

import hashlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorHandshakeMetadata, KVConnectorMetadata,
                                                              KVConnectorWorkerMetadata)


def instance_id(engine_id: Any, pp_rank: int, tp_rank: int) -> int:
    """The kvstash instance of one worker rank of an engine: the same in the scheduler and the worker processes."""
    raw = hashlib.sha256(b"kvstash-vllm-instance\0%s\0%d\0%d" % (str(engine_id).encode(), pp_rank, tp_rank))
    return int.from_bytes(raw.digest()[:8], "little") & ((1 << 63) - 1) or 1


def chunk_key(block_hash: Any) -> Tuple[int, int]:
    """The 128-bit kvstash key of a chunk whose last vLLM block has ``block_hash`` (bytes of any length, or
    an object with a stable ``bytes()``/``repr()``)."""
    raw = block_hash if isinstance(block_hash, (bytes, bytearray)) else repr(block_hash).encode()
    if len(raw) < 16:
        raw = hashlib.sha256(raw).digest()
    return int.from_bytes(raw[:8], "big"), int.from_bytes(raw[8:16], "big")


@dataclass
class ChunkRange:
    """Chunks ``keys`` of a request (range order, the first being its chunk ``first_chunk``) and their blocks
    ``block_ids`` (n per chunk); the request may wait ``budget_s`` more on kvstash."""
    req_id: str
    keys: List[Tuple[int, int]]
    block_ids: List[int]
    salt: Optional[str]
    first_chunk: int = 0
    budget_s: float = float("inf")


class LoadSpec(ChunkRange):
    """Chunks to load into their blocks (-1 in ``block_ids``: leave the block alone)."""


class SaveSpec(ChunkRange):
    """Complete chunks to save from their blocks."""


@dataclass
class KvStashConnectorMetadata(KVConnectorMetadata):
    """What the workers load and save in one step; ``finish``: requests whose blocks vLLM frees once every worker
    has run this step's saves (reported by ``get_finished``); ``server_lost``: the scheduler found the server gone
    or not answering and will not ask again for ``reconnect_s``, so the workers do not wait on it either in this
    step (their loads become load errors, their saves are skipped)."""
    loads: List[LoadSpec] = field(default_factory=list)
    saves: List[SaveSpec] = field(default_factory=list)
    finish: Set[str] = field(default_factory=set)
    server_lost: bool = False


@dataclass
class KvStashHandshake(KVConnectorHandshakeMetadata):
    """What a worker rank tells the scheduler once its caches are registered: the model name (namespace) it
    registered with kvstash."""
    model_name: str


@dataclass
class KvStashWorkerMetadata(KVConnectorWorkerMetadata):
    """Seconds a step's kvstash calls took per request on the workers (the slowest rank's, as ranks run at once)."""
    spent_s: Dict[str, float] = field(default_factory=dict)

    def aggregate(self, other: KVConnectorWorkerMetadata) -> "KvStashWorkerMetadata":
        merged = dict(self.spent_s)
        for req_id, seconds in getattr(other, "spent_s", {}).items():
            merged[req_id] = max(merged.get(req_id, 0.0), seconds)
        return KvStashWorkerMetadata(merged)

