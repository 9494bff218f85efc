"""kvstash.identity: a checkpoint is identified by its files, never by its name or path; namespaces differ exactly
when what gives the bytes their meaning differs. Standard library only: runs without torch or an engine."""

import hashlib
import json
import os
import shutil
import tempfile
import unittest

from support import CLIENT_ROOT  # noqa: F401  (puts the package on sys.path)

from kvstash.identity import FileDigests, checkpoint_of, namespace, resolve_directory


class CheckpointTest(unittest.TestCase):

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="kvstash-identity-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.cache = os.path.join(self.root, "digests.json")

    def model(self, name, config=None, weights=None):
        directory = os.path.join(self.root, name)
        os.makedirs(directory)
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(config or {"model_type": "llama", "num_hidden_layers": 2}, f)
        for file, data in (weights or {"model.safetensors": b"weights-1"}).items():
            os.makedirs(os.path.dirname(os.path.join(directory, file)), exist_ok=True)
            with open(os.path.join(directory, file), "wb") as f:
                f.write(data)
        return directory

    def digest(self, directory, **kwargs):
        return checkpoint_of(directory, cache_file=self.cache, **kwargs).digest

    def test_should_give_the_same_files_at_two_paths_one_identity(self):
        self.assertEqual(self.digest(self.model("a")), self.digest(self.model("b")))

    def test_should_tell_apart_checkpoints_that_differ_in_any_weight_or_config_byte(self):
        base = self.digest(self.model("base"))
        tuned = self.digest(self.model("tuned", weights={"model.safetensors": b"weights-2"}))
        config = self.digest(self.model("config", config={"model_type": "llama", "num_hidden_layers": 3}))
        sharded = self.digest(self.model("sharded", weights={"model.safetensors": b"weights-1",
                                                             "extra/adapter.safetensors": b"x"}))
        self.assertEqual(len({base, tuned, config, sharded}), 4)

    def test_should_hash_a_weight_file_again_when_it_changes_in_place(self):
        directory = self.model("a")
        first = self.digest(directory)
        path = os.path.join(directory, "model.safetensors")
        stat = os.stat(path)
        with open(path, "wb") as f:
            f.write(b"weights-2")                               # same size
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        self.assertNotEqual(self.digest(directory), first)

    def test_should_remember_digests_across_processes_by_path_size_inode_and_time(self):
        directory = self.model("a")
        self.digest(directory)
        with open(self.cache) as f:
            remembered = json.load(f)
        self.assertEqual(list(remembered.values()), [hashlib.sha256(b"weights-1").hexdigest()])
        key = next(iter(remembered))
        remembered[key] = "0" * 64                              # a remembered digest is used, not recomputed
        with open(self.cache, "w") as f:
            json.dump(remembered, f)
        self.assertEqual(FileDigests(self.cache).of(os.path.join(directory, "model.safetensors")), "0" * 64)

    def test_should_take_a_hub_blobs_name_as_its_digest_and_find_a_snapshot_by_revision(self):
        hub = os.path.join(self.root, "hub")
        repo = os.path.join(hub, "models--acme--tiny")
        blob = hashlib.sha256(b"weights-1").hexdigest()
        os.makedirs(os.path.join(repo, "blobs"))
        with open(os.path.join(repo, "blobs", blob), "wb") as f:
            f.write(b"not what the name says")                 # the name is trusted: no read of the weights
        commit = "a" * 40
        snapshot = os.path.join(repo, "snapshots", commit)
        os.makedirs(snapshot)
        os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snapshot, "model.safetensors"))
        with open(os.path.join(snapshot, "config.json"), "w") as f:
            json.dump({"model_type": "llama", "num_hidden_layers": 2}, f)
        os.makedirs(os.path.join(repo, "refs"))
        with open(os.path.join(repo, "refs", "main"), "w") as f:
            f.write(commit)
        old = os.environ.get("HF_HUB_CACHE")
        os.environ["HF_HUB_CACHE"] = hub
        try:
            self.assertEqual(resolve_directory("acme/tiny"), snapshot)
            self.assertEqual(resolve_directory("acme/tiny", commit), snapshot)
            self.assertIsNone(resolve_directory("acme/tiny", "b" * 40))
            self.assertIsNone(resolve_directory("acme/other"))
            # The same files as a plain directory: one checkpoint, whichever way it was found.
            self.assertEqual(self.digest("acme/tiny"), self.digest(self.model("plain")))
        finally:
            if old is None:
                del os.environ["HF_HUB_CACHE"]
            else:
                os.environ["HF_HUB_CACHE"] = old

    def test_should_identify_nothing_without_files_and_anything_named_by_the_operator(self):
        self.assertIsNone(checkpoint_of("acme/not-downloaded", cache_file=self.cache))
        self.assertIsNone(checkpoint_of(os.path.join(self.root, "missing"), cache_file=self.cache))
        empty = os.path.join(self.root, "no-config")
        os.makedirs(empty)
        self.assertIsNone(checkpoint_of(empty, cache_file=self.cache))
        given = checkpoint_of("acme/not-downloaded", override="acme/tiny@v2", cache_file=self.cache)
        self.assertEqual(given.digest, checkpoint_of(self.model("a"), override="acme/tiny@v2",
                                                     cache_file=self.cache).digest)
        self.assertNotEqual(given.digest, checkpoint_of("x", override="acme/tiny@v3", cache_file=self.cache).digest)


class NamespaceTest(unittest.TestCase):

    def test_should_differ_exactly_when_a_field_of_meaning_differs(self):
        fields = {"arch": "LlamaForCausalLM", "dtype": "bfloat16", "kv_dtype": "bfloat16", "backend": "FLASH_ATTN",
                  "kind": "blocks_heads", "page": "*x8x16x256", "block": 16, "stage": "pp0/1"}
        base = namespace("vllm", "c" * 32, **fields)
        self.assertEqual(base, namespace("vllm", "c" * 32, **dict(reversed(list(fields.items())))))
        names = {base, namespace("vllm", "d" * 32, **fields), namespace("sglang", "c" * 32, **fields)}
        for key in fields:
            names.add(namespace("vllm", "c" * 32, **dict(fields, **{key: "other"})))
        self.assertEqual(len(names), 3 + len(fields))

    def test_should_stay_within_a_register_requests_model_name(self):
        name = namespace("vllm", "c" * 32, arch="A" * 300, backend="B" * 300, stage="pp0/1")
        self.assertLessEqual(len(name.encode()), 255)
        self.assertNotEqual(name, namespace("vllm", "c" * 32, arch="A" * 299, backend="B" * 300, stage="pp0/1"))


if __name__ == "__main__":
    unittest.main()
