"""What SGLang's process says about the engine, for the SGLang backend's namespace (module documentation of
``kvstash.sglang.backend``, *A key means one thing*): the identity of the weights it runs, the arguments that change
what its KV bytes mean, the slice of the KV a rank holds, and an identity of this engine alone for weights that
cannot be identified."""

import hashlib
import json
import logging
import os
import socket
from typing import Any, Dict, Optional, Tuple

from kvstash.identity import checkpoint_of, digest_of

logger = logging.getLogger("kvstash.sglang")


class EngineIdentity:
    """What SGLang's process says about the weights it runs: the checkpoint's identity and the arguments that
    change what its KV bytes mean (module documentation of ``kvstash.sglang.backend``, *A key means one thing*).
    Read once at construction, except the weight version, which is followed."""

    def __init__(self, override: Optional[str]) -> None:
        self.override = override
        args = sglang_args()
        self.args_found = args is not None
        args = args or {}
        self.model_path = args.get("model_path")
        self.revision = args.get("revision")
        self.load_format = args.get("load_format")
        self.speculative = (args.get("speculative_algorithm"), args.get("speculative_draft_model_path"),
                            args.get("speculative_draft_model_revision"))
        self._fields = {k: v for k, v in args.items() if k not in ("model_path", "revision", "weight_version")
                        and not k.startswith("speculative_")}
        self.weight_version = args.get("weight_version")
        self._found, self._source, self.arch = self._identify()
        self._group: Optional[str] = None
        if self._found is None:
            logger.warning(
                "kvstash: the weights SGLang runs could not be identified (%s); this engine's HiCache L3 pages are "
                "shared with no other engine. To share them, set \"checkpoint\" in "
                "--hicache-storage-backend-extra-config to a string that names exactly these weights (e.g. "
                "\"org/model@<commit>\")", self._source)

    def _identify(self) -> Tuple[Optional[str], str, Optional[str]]:
        """(checkpoint digest or None, how it was found or why not, architecture or None)."""
        if self.load_format == "dummy" and not self.override:
            return None, "--load-format dummy: random weights", None
        if not self.override and not self.model_path:
            return None, "no SGLang server arguments in this process" if not self.args_found else \
                "no --model-path", None
        try:
            found = checkpoint_of(self.model_path, self.revision, override=self.override)
        except Exception as ex:             # unreadable files: the checkpoint is not known, which is safe
            logger.warning("kvstash: reading the checkpoint %s failed: %s: %s", self.model_path,
                           type(ex).__name__, ex)
            found = None
        if found is None:
            return None, "no config.json found for --model-path %s --revision %s" % (self.model_path,
                                                                                      self.revision), None
        return found.digest, found.source, architecture(found.directory) if found.directory else None

    def checkpoint(self, epoch: int) -> Tuple[str, str]:
        """(digest, description) of the checkpoint part of the namespace after ``epoch`` clears."""
        if self._found is not None and epoch == 0:
            return self._found, self._source
        if self._group is None:
            self._group = engine_group()
        why = self._source if self._found is None else "cleared"
        return digest_of("unshared", self._group, epoch), "this engine's own (%s, clear %d)" % (why, epoch)

    def fields(self) -> Dict[str, Any]:
        fields = dict(self._fields, weight_version=self.weight_version)
        if self.arch:
            fields["arch"] = self.arch
        return fields

    def draft_fields(self) -> Dict[str, Any]:
        """Namespace fields of a draft model whose KV is in the host pool's pages."""
        algorithm, path, revision = self.speculative
        if not path:                        # a draft made of the target's own weights (MTP, NEXTN)
            return {"speculative": algorithm, "draft": "target"}
        try:
            found = checkpoint_of(path, revision)
        except Exception:
            found = None
        if found is None:
            if self._found is not None:
                logger.warning("kvstash: the draft model %s could not be identified; this engine's HiCache L3 "
                               "pages are shared with no other engine", path)
            self._found, self._source = None, "draft model %s not identified" % path
            return {"speculative": algorithm, "draft": "unknown"}
        return {"speculative": algorithm, "draft": found.digest}

    def weights_moved(self) -> bool:
        """Whether SGLang's weight version changed since it was last looked at (then the new one is kept)."""
        version = weight_version()
        if version is None or version == self.weight_version:
            return False
        logger.warning("kvstash: SGLang's weight version moved from %s to %s", self.weight_version, version)
        self.weight_version = version
        return True


MODEL_ARGS = ("model_path", "revision", "dtype", "kv_cache_dtype", "quantization", "modelopt_quant", "load_format",
              "json_model_override_args", "quantization_param_path")
RENAMED = {"dtype": "weights_dtype", "kv_cache_dtype": "kv_dtype"}    # the namespace's readable part shows kv_dtype
SPEC_ARGS = ("speculative_algorithm", "speculative_draft_model_path", "speculative_draft_model_revision")


def sglang_args() -> Optional[Dict[str, Optional[str]]]:
    """The arguments of the SGLang engine in this process that give its KV bytes their meaning ({name: str or
    None}), or None when none are published (the backend used outside a scheduler)."""
    try:
        from sglang.srt import runtime_context as rc
        model, spec, lora, serving = rc.get_model(), rc.get_spec(), rc.get_lora(), rc.get_serving()
        args = {name: getattr(model, name, None) for name in MODEL_ARGS}
        args.update({name: getattr(spec, name, None) for name in SPEC_ARGS})
        args["lora_paths"] = getattr(lora, "lora_paths", None)
        args["weight_version"] = getattr(serving, "weight_version", None)
    except Exception:                       # no published configuration, or an SGLang without these bags
        return None
    out = {}
    for name, value in args.items():
        if name == "json_model_override_args" and isinstance(value, str):
            try:
                value = json.dumps(json.loads(value), sort_keys=True)       # spacing and key order do not matter
            except ValueError:
                pass
        elif name == "quantization_param_path" and value:
            value = file_digest(value)         # fp8 KV scales: their content, wherever the file is
        elif name == "kv_cache_dtype" and value in ("bf16", "bfloat16"):
            value = "bfloat16"
        elif value is not None and not isinstance(value, str):
            value = json.dumps(value, sort_keys=True, default=str)
        out[RENAMED.get(name, name)] = value
    return out


def weight_version() -> Optional[str]:
    try:
        from sglang.srt import runtime_context as rc
        return rc.get_serving().weight_version
    except Exception:
        return None


def engine_group() -> str:
    """A string every scheduler process of this SGLang engine shares and no other process: its parent (the
    launcher or the data-parallel controller that started the schedulers) by host, boot, PID namespace, pid and
    start time (pids are reused)."""
    ppid = os.getppid()
    parts = [socket.gethostname(), ppid]
    for path, read in (("/proc/sys/kernel/random/boot_id", lambda f: f.read().strip()),
                       ("/proc/self/ns/pid", None),
                       ("/proc/%d/stat" % ppid, lambda f: f.read().rsplit(")", 1)[1].split()[19])):
        try:
            if read is None:
                parts.append(os.readlink(path))
            else:
                with open(path) as f:
                    parts.append(read(f))
        except (OSError, IndexError):
            parts.append("?")
    return digest_of("engine", *parts)


def new_instance() -> int:
    return int.from_bytes(os.urandom(8), "big") >> 2 | 1


def slice_of(config: Any) -> Tuple[int, int, str]:
    """(world size, rank, stage) of this rank's pages: MLA's KV is the same on every tensor-parallel rank."""
    if config is None:
        return 1, 0, "single"
    mla = bool(config.is_mla_model)
    world_size, rank = (1, 0) if mla else (int(config.tp_size), int(config.tp_rank))
    stage = ["mla" if mla else "tp%d/%d" % (rank, world_size)]
    if config.pp_size > 1:
        stage.append("pp%d/%d" % (config.pp_rank, config.pp_size))
    if getattr(config, "attn_cp_size", 1) > 1:
        stage.append("cp%d/%d" % (config.attn_cp_rank, config.attn_cp_size))
    if getattr(config, "dcp_size", 1) > 1:
        stage.append("dcp%d/%d" % (config.dcp_rank, config.dcp_size))
    return world_size, rank, "+".join(stage)


def architecture(directory: str) -> Optional[str]:
    try:
        with open(os.path.join(directory, "config.json")) as f:
            return ",".join(json.load(f).get("architectures") or []) or None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def file_digest(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return "sha256:" + hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return "unreadable:" + str(path)

