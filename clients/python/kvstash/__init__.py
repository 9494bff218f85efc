"""kvstash: a dependency-free Python worker client for the kvstash KV-cache chunk store.

It speaks the shared-memory protocol of docs/PROTOCOL.md with mmap, struct, os and fcntl only; numpy,
when importable, is used to hand out slots as ndarray views.

    import kvstash
    with kvstash.connect("/dev/shm/kvstash-me") as c:
        c.register(42, kvstash.Layout("my-model", layers=32, hidden=1024, dtype="bfloat16"))
        r = c.prepare_store(42, tokens=prompt_tokens)
        for i in range(len(r.slots)):
            c.write_chunk(r, i, chunk_bytes_of(r.slots[i].range_index))
        if r.transfer_id:
            c.commit_store(42, r.transfer_id)
"""

from .client import Client, Response, connect, default_directory
from .errors import (BadFilesError, ClosedError, CudaUnavailableError, DetachedError, KvStashError,
                     KvStashTimeoutError, Reason, RejectedError, ServerGoneError, ServerRestartedError)
from .hashing import chunk_hashes, namespace, salt_value
from .tensors import PagedKV, PinInfo, TensorTransfer     # torch imported on first use
from .types import Dtype, Layout, RegisterInfo, RequestType, SlotEntry, Status

__all__ = [
    "BadFilesError", "Client", "ClosedError", "CudaUnavailableError", "DetachedError", "Dtype", "KvStashError",
    "KvStashTimeoutError", "Layout", "PagedKV", "PinInfo", "Reason", "RegisterInfo", "RejectedError",
    "RequestType", "Response", "ServerGoneError", "ServerRestartedError", "SlotEntry", "Status",
    "TensorTransfer", "chunk_hashes", "connect", "default_directory", "namespace", "salt_value",
]

__version__ = "0.1.0"
