"""What a chunk's bytes mean: the identity of a checkpoint, and namespaces built from it.

Two engines may read each other's chunks only when their KV bytes mean the same thing: the same weights and
model configuration (not the same served name: fine-tunes and new revisions are served under one name), the
same dtype, KV layout, attention backend, block geometry and parallel slice. The engine integrations put all of
that into the model name they register (the server's namespace), so that engines that differ never share a chunk
and engines that agree always do, whatever path or host their files are on.

A checkpoint's identity is derived from its files: the model's ``config.json`` (and quantization configs beside
it) byte for byte, and the content digest of every weight file. A file of a Hugging Face hub snapshot is a link to
a blob named by the SHA-256 of its content, which is taken as it is; any other weight file is hashed once (about a
second per GiB) and its digest kept in ``~/.cache/kvstash/checkpoint-digests.json``, keyed by path, size, inode and
modification time, so a restart does not read the weights again. An operator who knows better (a model served
from object storage, a deliberate override) passes the identity explicitly.

Standard library only.
"""

import fcntl
import hashlib
import json
import logging
import os
import re
import time
from typing import Dict, List, Optional, Sequence

logger = logging.getLogger("kvstash.identity")

CONFIG_FILES = ("config.json", "quantize_config.json", "quant_config.json", "hf_quant_config.json",
                "params.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".npz", ".h5", ".msgpack")
IGNORED_WEIGHTS = ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth")
MAX_DEPTH = 2                           # weights in subfolders (some checkpoints shard into one) are found
HASH_BLOCK_BYTES = 8 << 20
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_COMMIT_HEX = re.compile(r"^[0-9a-f]{40}$")


class Checkpoint:
    """A checkpoint's identity: ``digest`` (32 hex characters) and ``source`` (how it was found, for logs)."""

    __slots__ = ("digest", "source", "directory", "files")

    def __init__(self, digest: str, source: str, directory: Optional[str] = None, files: int = 0) -> None:
        self.digest = digest
        self.source = source
        self.directory = directory
        self.files = files

    def __repr__(self) -> str:
        return "Checkpoint(%s, %s)" % (self.digest, self.source)


def digest_of(*parts: object) -> str:
    """32 hex characters of SHA-256 over ``parts`` (each ``str()``-ed, separated), stable across processes."""
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def checkpoint_of(model: Optional[str], revision: Optional[str] = None, override: Optional[object] = None,
                  cache_file: Optional[str] = None, hub_dirs: Sequence[Optional[str]] = ()) -> Optional[Checkpoint]:
    """The identity of the checkpoint ``model`` (a directory, or a hub id found at ``revision`` in one of
    ``hub_dirs`` or the local hub cache), or of ``override`` when one is given. ``None`` when the files cannot be
    found: the caller then shares with nobody (it must not guess from a name)."""
    if override is not None and str(override) != "":
        return Checkpoint(digest_of("override", override), "given: %s" % override)
    directory = resolve_directory(model, revision, hub_dirs)
    if directory is None:
        return None
    parts: List[str] = []
    configs = 0
    for name in CONFIG_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                parts.append("%s=%s" % (name, hashlib.sha256(f.read()).hexdigest()))
            configs += 1
    if configs == 0:
        return None
    weights = weight_files(directory)
    digests = FileDigests(cache_file)
    for relative in weights:
        parts.append("%s=%s" % (relative, digests.of(os.path.join(directory, relative))))
    digests.save()
    return Checkpoint(digest_of("files", *parts), "%d weight files in %s" % (len(weights), directory), directory,
                      len(weights))


def resolve_directory(model: Optional[object], revision: Optional[str] = None,
                      hub_dirs: Sequence[Optional[str]] = ()) -> Optional[str]:
    """``model`` when it is a directory, else its snapshot at ``revision`` (a branch, tag or commit; default
    ``main``) in the first of ``hub_dirs`` (an engine's download directory) and the local Hugging Face hub cache
    (``HF_HUB_CACHE``, ``HF_HOME/hub`` or ``~/.cache/huggingface/hub``) that has it, else ``None``."""
    if model is None:
        return None
    model = str(model)
    if os.path.isdir(model):
        return os.path.abspath(model)
    if model.count("/") != 1:
        return None
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub")
    ref = revision or "main"
    for base in [d for d in hub_dirs if d] + [hub]:
        repo = os.path.join(base, "models--" + model.replace("/", "--"))
        commit = ref if _COMMIT_HEX.match(ref) else None
        if commit is None:
            try:
                with open(os.path.join(repo, "refs", ref)) as f:
                    commit = f.read().strip()
            except OSError:
                continue
        snapshot = os.path.join(repo, "snapshots", commit)
        if os.path.isdir(snapshot):
            return snapshot
    return None


def weight_files(directory: str) -> List[str]:
    """The weight files under ``directory`` (up to ``MAX_DEPTH`` folders down), relative, sorted."""
    found: List[str] = []
    base_depth = directory.rstrip(os.sep).count(os.sep)
    for root, dirs, files in os.walk(directory, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if root.count(os.sep) - base_depth < MAX_DEPTH \
            else []
        for name in files:
            if name.endswith(WEIGHT_SUFFIXES) and name not in IGNORED_WEIGHTS:
                found.append(os.path.relpath(os.path.join(root, name), directory))
    return sorted(found)


class FileDigests:
    """SHA-256 of files, remembered across processes in a small JSON file (see the module doc)."""

    def __init__(self, cache_file: Optional[str] = None) -> None:
        self.path = cache_file or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                               os.path.join(os.path.expanduser("~"), ".cache"),
                                               "kvstash", "checkpoint-digests.json")
        self.known = self._load()
        self.added: Dict[str, str] = {}

    def of(self, path: str) -> str:
        """The SHA-256 (hex) of the file at ``path``: a hub blob's name, remembered, or computed once."""
        target = os.path.realpath(path)
        blob = os.path.basename(target)
        if target != os.path.abspath(path) and _SHA256_HEX.match(blob) and \
                os.path.basename(os.path.dirname(target)) == "blobs":
            return blob                     # a hub blob: named by the SHA-256 of its content
        st = os.stat(target)
        key = "%s|%d|%d|%d" % (target, st.st_size, st.st_ino, st.st_mtime_ns)
        digest = self.known.get(key) or self.added.get(key)
        if digest is None:
            digest = self._hash(target, key)
        return digest

    def _hash(self, target: str, key: str) -> str:
        # One process hashes a file at a time; the others wait for it and find its digest remembered.
        lock_path = self.path + ".lock"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            lock = open(lock_path, "a")
        except OSError:
            lock = None
        try:
            if lock is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)    # flock, not a POSIX record lock: no other descriptor drops it
                digest = self._load().get(key)
                if digest is not None:
                    return digest
            size = os.stat(target).st_size
            if size >= 1 << 30:
                logger.info("kvstash: hashing %s (%.1f GiB) once to identify its checkpoint", target, size / (1 << 30))
            h = hashlib.sha256()
            with open(target, "rb") as f:
                while True:
                    block = f.read(HASH_BLOCK_BYTES)
                    if not block:
                        break
                    h.update(block)
            digest = h.hexdigest()
            self.added[key] = digest
            self.save()
            return digest
        finally:
            if lock is not None:
                lock.close()

    def _load(self) -> Dict[str, str]:
        try:
            with open(self.path) as f:
                known = json.load(f)
            return known if isinstance(known, dict) else {}
        except (OSError, ValueError):
            return {}

    def save(self) -> None:
        """Writes the digests computed here to the cache file (atomically, merged with what others wrote)."""
        if not self.added:
            return
        known = self._load()
        known.update(self.added)
        tmp = "%s.%d.%d" % (self.path, os.getpid(), time.monotonic_ns())
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(known, f, sort_keys=True)
            os.replace(tmp, self.path)
            self.known = known
            self.added = {}
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def namespace(engine: str, checkpoint_digest: str, **meaning: object) -> str:
    """The model name an engine registers: ``engine`` (``vllm``, ``sglang``), a readable summary and a digest of the
    checkpoint and every field of ``meaning`` (dtype, layout, backend, block geometry, parallel slice). Equal for two
    engines exactly when they agree on all of them; never longer than a REGISTER's 255 bytes."""
    fields = sorted((k, "" if v is None else str(v)) for k, v in meaning.items())
    digest = digest_of(engine, checkpoint_digest, *("%s=%s" % kv for kv in fields))
    readable = ":".join(_short(v) for k, v in fields if k in ("arch", "dtype", "kv_dtype", "backend", "stage"))
    name = "%s:%s:%s" % (engine, readable, digest) if readable else "%s:%s" % (engine, digest)
    if len(name.encode("utf-8")) > 255:
        name = "%s:%s" % (engine, digest)
    return name


def _short(value: str, limit: int = 40) -> str:
    value = re.sub(r"[^A-Za-z0-9_.+/-]", "_", value)
    return value[:limit]
