"""vLLM integration: ``KvStashConnector`` (load it with ``"kv_connector_module_path": "kvstash.vllm"``).

Needs vLLM and torch (``pip install 'kvstash[vllm]'``); the rest of the package does not.
"""

from .connector import KvStashConnector
from .metadata import KvStashConnectorMetadata, LoadSpec, SaveSpec, chunk_key

__all__ = ["KvStashConnector", "KvStashConnectorMetadata", "LoadSpec", "SaveSpec", "chunk_key"]
