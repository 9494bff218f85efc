"""The namespace (model name) a vLLM worker rank registers: a digest of everything that gives its KV bytes their
meaning (module documentation of ``kvstash.vllm.connector``, *Namespace: what the bytes mean*)."""

import json
import logging
import secrets
from typing import Any, List, Optional

import kvstash
from kvstash.identity import checkpoint_of, digest_of, namespace

logger = logging.getLogger("vllm.kvstash")


def model_namespace(vllm_config: Any, paged: kvstash.PagedKV, layer_names: List[str], checkpoint: Optional[str],
                    engine_id: Any, stage: str) -> str:
    """The model name of a worker's KV: the checkpoint (its files, or the ``checkpoint`` option) and everything that
    gives the bytes their meaning; ``stage`` names the pipeline stage (``pp<rank>/<size>``)."""
    model = vllm_config.model_config
    ckpt = checkpoint_of(model.model, getattr(model, "revision", None), checkpoint,
                         hub_dirs=(getattr(vllm_config.load_config, "download_dir", None),))
    if ckpt is None:
        logger.warning("kvstash: the checkpoint %r has no files here to identify it by (config.json and "
                       "weights): this engine shares chunks with no other engine; set the option \"checkpoint\" "
                       "to share", model.model)
        digest = digest_of("private", engine_id if engine_id is not None else secrets.token_hex(16))
    else:
        logger.info("kvstash: checkpoint identity %s (%s)", ckpt.digest, ckpt.source)
        digest = ckpt.digest
    shape: List[Any] = list(paged.caches[0].shape)
    shape[1 if paged.kind == "kv_blocks" else 0] = "*"
    kv_dtype = vllm_config.cache_config.cache_dtype
    hf = getattr(model, "hf_config", None)
    arch = (getattr(hf, "architectures", None) or ["?"])[0]
    overrides = getattr(model, "hf_overrides", None)
    load_format = str(getattr(vllm_config.load_config, "load_format", ""))
    return namespace("vllm", digest, arch=arch, dtype=str(model.dtype).replace("torch.", ""),
                     kv_dtype=str(paged.dtype).replace("torch.", "") + ("" if kv_dtype == "auto" else
                                                                         "/" + str(kv_dtype)),
                     backend=backend_name(vllm_config, layer_names), kind=paged.kind,
                     page="x".join(str(d) for d in shape), layers=digest_of(*layer_names),
                     block=vllm_config.cache_config.block_size, quantization=getattr(model, "quantization", None),
                     overrides=json.dumps(overrides, sort_keys=True, default=str) if overrides else None,
                     weights="dummy" if load_format == "dummy" else None, stage=stage)


def backend_name(vllm_config: Any, layer_names: List[str]) -> str:
    """The attention backend of the engine's layers (vLLM's name for it), or ``unknown`` without a model."""
    context = getattr(vllm_config.compilation_config, "static_forward_context", None) or {}
    names = set()
    for layer in layer_names:
        backend = getattr(context.get(layer), "attn_backend", None)
        if backend is not None:
            names.add(backend.get_name())
    return "+".join(sorted(names)) if names else "unknown"
