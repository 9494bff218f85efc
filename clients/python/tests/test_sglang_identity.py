"""kvstash.sglang: what a key means (the namespace a backend registers) and the options it accepts, against a real
kvstash server and SGLang's own classes on CPU.

The namespace tests publish SGLang server arguments in this process the way a scheduler has them (SGLang's
``RuntimeContext.override_server_args`` once per class, then its config bags' scoped ``override`` for
``--model-path``, ``--revision``, ``--kv-cache-dtype``, ``weight_version``...), build backends through SGLang's
factory inside them and check which backends find each other's pages. Checkpoints are small directories of a
``config.json`` and a weight file (the identity reads only their bytes), or a Hugging Face hub cache laid out as
the hub lays it out (``HF_HUB_CACHE``); the identity's digest cache goes to a temporary ``XDG_CACHE_HOME``.

Run with the SGLang virtual environment: ``"$(.ci/python-env clients/python/requirements-sglang.txt)" -m unittest
discover -s clients/python/tests -p test_sglang_identity.py -v``.
"""

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from unittest import mock

from support import CLIENT_ROOT, ServerTestCase
from test_sglang import EXTRA, SKIP

if not SKIP:
    import torch
    from sglang.srt import runtime_context as rc
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig
    from sglang.srt.mem_cache.storage import StorageBackendFactory
    from kvstash.options import OptionError
    from test_sglang import fill, make_backend, make_pool, page_keys

# A backend in another process, outside any SGLang engine: stores under an unknown checkpoint, looks for the pages
# its parent stored under an unknown one and under a named one.
CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, %r)
    import torch
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig
    from kvstash.sglang import KvStashHiCacheStorage
    args = json.loads(sys.argv[1])

    def backend(**extra):
        config = HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                      is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
                                      model_name="served", extra_config=dict(dir=args["dir"], page_bytes=1152,
                                                                             **extra))
        return KvStashHiCacheStorage(config)
    unknown, named = backend(), backend(checkpoint="named-weights")
    page = torch.arange(576, dtype=torch.int16).to(torch.bfloat16)
    result = {"stored": unknown.batch_set(args["child_keys"], [page] * len(args["child_keys"])),
              "parent_unknown": unknown.batch_exists(args["parent_unknown"]),
              "parent_named": named.batch_exists(args["parent_named"])}
    print("RESULT", json.dumps(result), flush=True)
""") % CLIENT_ROOT


def make_checkpoint(root, name, weights=b"weights-1", config=None):
    """A checkpoint directory: config.json and one weight file with the given bytes."""
    directory = os.path.join(root, name)
    os.makedirs(directory)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config or {"architectures": ["LlamaForCausalLM"], "hidden_size": 64}, f)
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(weights)
    return directory


def make_hub_snapshot(hub, repo, commit, weights, ref=None):
    """A snapshot of ``repo`` at ``commit`` in a hub cache: files are links to blobs named by their SHA-256."""
    base = os.path.join(hub, "models--" + repo.replace("/", "--"))
    snapshot = os.path.join(base, "snapshots", commit)
    os.makedirs(snapshot)
    os.makedirs(os.path.join(base, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(base, "refs"), exist_ok=True)
    for name, data in (("config.json", b'{"architectures": ["LlamaForCausalLM"]}'), ("model.safetensors", weights)):
        blob = os.path.join(base, "blobs", hashlib.sha256(data).hexdigest())
        with open(blob, "wb") as f:
            f.write(data)
        os.symlink(os.path.relpath(blob, snapshot), os.path.join(snapshot, name))
    if ref is not None:
        with open(os.path.join(base, "refs", ref), "w") as f:
            f.write(commit)


class Answered:
    """``found(backend, keys)``: ``batch_exists``, asserted to have been answered by the server (a miss because the
    backend could not register or connect would pass for pages kept apart)."""

    def found(self, backend, keys):
        before = backend.stats["unavailable"], backend.stats["refused"], backend.stats["errors"]
        hits = backend.batch_exists(keys)
        self.assertEqual((backend.stats["unavailable"], backend.stats["refused"], backend.stats["errors"]), before,
                         backend.stats)
        return hits


@unittest.skipIf(SKIP, SKIP)
class OptionsTest(unittest.TestCase):
    """Options are checked when SGLang's factory builds the backend (no server needed: nothing connects yet)."""

    def build(self, **extra):
        config = HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                      is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
                                      model_name="served", extra_config=dict(EXTRA, **extra))
        backend = StorageBackendFactory.create_backend("dynamic", config, None)
        self.addCleanup(backend.close)
        return backend

    def test_should_refuse_an_option_of_the_wrong_type_or_value_naming_it(self):
        bad = [("timeout_s", "soon"), ("timeout_s", 0), ("timeout_s", -1), ("timeout_s", float("nan")),
               ("timeout_s", True), ("reconnect_s", -0.5), ("reconnect_s", [1]), ("log_interval_s", "often"),
               ("log_interval_s", -1), ("page_bytes", 0), ("page_bytes", 1.5), ("page_bytes", "4k"),
               ("dir", 5), ("dir", ""), ("checkpoint", 7), ("checkpoint", ""), ("checkpoint", {"id": "x"})]
        for key, value in bad:
            with self.subTest(key=key, value=value):
                with self.assertRaises(OptionError) as caught:
                    self.build(**{key: value})
                message = str(caught.exception)
                self.assertEqual(len(message.splitlines()), 1, message)
                self.assertIn(repr(key), message)
                self.assertIn(repr(value), message)
                self.assertIn("expected", message)

    def test_should_take_good_values_of_every_option(self):
        backend = self.build(dir="/dev/shm/kvstash-nowhere", checkpoint="org/model@abc", timeout_s="2.5",
                             reconnect_s=0, page_bytes=1152, log_interval_s=0)
        self.assertEqual((backend.directory, backend.timeout_s, backend.reconnect_s, backend.log_interval_s),
                         ("/dev/shm/kvstash-nowhere", 2.5, 0.0, 0.0))
        self.assertEqual(backend.checkpoint, "given: org/model@abc")
        self.assertEqual(backend.layout(16).chunk_bytes(16), 1152)

    def test_should_warn_once_about_unknown_options_and_pass_sglang_keys(self):
        with self.assertLogs("kvstash.sglang", "WARNING") as logs:
            self.build(checkpoint="x", model="my-model", timeoutt_s=3, tp_lcm_size=4, prefetch_threshold=256)
        unknown = [line for line in logs.output if "unknown option" in line]
        self.assertEqual(len(unknown), 1, logs.output)
        self.assertIn("model, timeoutt_s", unknown[0])
        self.assertIn("known options: checkpoint, dir, log_interval_s, page_bytes, reconnect_s, timeout_s", unknown[0])
        for sglang_key in ("backend_name", "interface_v1", "tp_lcm_size", "prefetch_threshold"):
            self.assertNotIn(sglang_key, unknown[0].split("ignored")[0])


@unittest.skipIf(SKIP, SKIP)
class NamespaceTest(Answered, ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 16 << 20, "chunk_tokens": 16}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp(prefix="kvstash-sglang-identity-")
        cls.env = mock.patch.dict(os.environ, {"XDG_CACHE_HOME": os.path.join(cls.root, "cache"),
                                               "HF_HUB_CACHE": os.path.join(cls.root, "hub")})
        cls.env.start()
        cls.published = rc.get_context().override_server_args()     # a scheduler's published arguments
        cls.published.install()
        cls.ckpt = make_checkpoint(cls.root, "ckpt", b"weights-1")

    @classmethod
    def tearDownClass(cls):
        cls.published.restore()
        cls.env.stop()
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    @contextlib.contextmanager
    def engine(self, **model_args):
        """SGLang's --model-path, --revision, --kv-cache-dtype... as a scheduler publishes them."""
        with rc.get_model().override(**dict({"model_path": self.ckpt}, **model_args)):
            yield

    def backend(self, served="served-name", checkpoint=None, **model_args):
        """A backend built by SGLang's factory inside an engine of ``model_args`` (``served`` is SGLang's served
        model name); calls on it after this are outside the bag override, as a scheduler's threads are."""
        with self.engine(**model_args):
            backend = make_backend(self.server.directory, make_pool(), model=served, checkpoint=checkpoint)
        self.addCleanup(backend.close)
        return backend

    def store(self, backend, label, n=3):
        keys = page_keys(label, n)
        pool = backend.mem_pool_host
        src = pool.alloc(n * 16)
        fill(pool, src, seed=n)
        self.assertEqual(backend.batch_set_v1(keys, src), [True] * n)
        pool.free(src)
        return keys

    def test_should_share_pages_between_served_names_and_paths_of_one_checkpoint(self):
        copy = shutil.copytree(self.ckpt, os.path.join(self.root, "copy-of-ckpt"))
        writer = self.backend(served="llama-prod")
        keys = self.store(writer, "one-checkpoint")
        self.assertIn("1 weight files in %s" % self.ckpt, writer.checkpoint)
        self.assertIn("LlamaForCausalLM", writer.model_name)
        self.assertEqual(self.found(self.backend(served="llama-canary"), keys), 3)     # another served name
        self.assertEqual(self.found(self.backend(model_path=copy), keys), 3)          # the same bytes elsewhere

    def test_should_not_share_pages_between_checkpoints_served_under_one_name(self):
        tuned = make_checkpoint(self.root, "fine-tune", b"weights-2")
        other_config = make_checkpoint(self.root, "other-config", b"weights-1", {"hidden_size": 65})
        keys = self.store(self.backend(served="llama"), "two-checkpoints")
        self.assertEqual(self.found(self.backend(served="llama", model_path=tuned), keys), 0)
        self.assertEqual(self.found(self.backend(served="llama", model_path=other_config), keys), 0)
        self.assertEqual(self.found(self.backend(served="llama"), keys), 3)

    def test_should_tell_hub_revisions_apart(self):
        hub = os.environ["HF_HUB_CACHE"]
        make_hub_snapshot(hub, "org/model", "1" * 40, b"revision-1", ref="main")
        make_hub_snapshot(hub, "org/model", "2" * 40, b"revision-2")
        keys = self.store(self.backend(model_path="org/model"), "revisions")             # main = revision 1
        self.assertEqual(self.found(self.backend(model_path="org/model", revision="1" * 40), keys), 3)
        self.assertEqual(self.found(self.backend(model_path="org/model", revision="2" * 40), keys), 0)

    def test_should_not_share_pages_between_engines_that_run_the_weights_otherwise(self):
        keys = self.store(self.backend(json_model_override_args='{"rope_theta": 1000000, "b": 2}'), "run-otherwise")
        same = self.backend(json_model_override_args='{"b":2,"rope_theta":1000000}')    # spacing, key order
        self.assertEqual(self.found(same, keys), 3)
        for args in ({"json_model_override_args": '{"rope_theta": 500000, "b": 2}'}, {"kv_cache_dtype": "fp8_e4m3"},
                     {"quantization": "fp8"}, {"dtype": "float16"}, {"load_format": "gguf"}):
            with self.subTest(**args):
                args.setdefault("json_model_override_args", '{"rope_theta": 1000000, "b": 2}')
                self.assertEqual(self.found(self.backend(**args), keys), 0)
        with rc.get_lora().override(lora_paths=["adapter=/adapters/a"]):
            with_lora = self.backend(json_model_override_args='{"rope_theta": 1000000, "b": 2}')
        self.assertEqual(self.found(with_lora, keys), 0)

    def test_should_move_to_other_pages_when_the_weight_version_moves(self):
        writer = self.backend()
        old = self.store(writer, "version-default")
        with rc.get_serving().override(weight_version="step-100"):
            self.assertEqual(self.found(writer, old), 0)                    # pages of the weights before
            new = self.store(writer, "version-100")
            self.assertEqual(self.found(self.backend(), new), 3)            # an engine built at step-100
        self.assertEqual(self.found(self.backend(), new), 0)
        self.assertEqual(self.found(self.backend(), old), 3)

    def test_should_find_none_of_its_pages_after_clear_and_share_none_after(self):
        writer, peer = self.backend(), self.backend()
        before = self.store(writer, "before-clear")
        self.assertEqual(self.found(peer, before), 3)
        writer.clear()
        self.assertEqual(self.found(writer, before), 0)
        self.assertIn("cleared", writer.checkpoint)
        after = self.store(writer, "after-clear")
        self.assertEqual(self.found(peer, after), 0)
        self.assertEqual(self.found(peer, before), 3)                      # other engines keep theirs

    def test_should_share_dummy_weights_with_no_engine(self):
        keys = self.store(self.backend(), "real-weights")
        with self.assertLogs("kvstash.sglang", "WARNING") as logs:
            dummy = self.backend(load_format="dummy")
        self.assertIn("load-format dummy", " ".join(logs.output))
        self.assertIn("this engine's own", dummy.checkpoint)
        self.assertEqual(self.found(dummy, keys), 0)
        self.assertEqual(self.found(self.backend(), self.store(dummy, "dummy-weights")), 0)

    def test_should_keep_the_namespace_within_a_register_name(self):
        deep = make_checkpoint(self.root, "x" * 200, b"weights-1")
        backend = self.backend(model_path=deep, json_model_override_args=json.dumps({"k" * 300: 1}))
        self.assertLessEqual(len(backend.model_name.encode()), 255)
        self.store(backend, "long-name", 1)


@unittest.skipIf(SKIP, SKIP)
class UnidentifiedTest(Answered, ServerTestCase):
    """No SGLang arguments are published here, as in a process outside an engine."""

    SERVER_OPTIONS = {"pool_bytes": 16 << 20, "chunk_tokens": 16}

    def backend(self, **options):
        config = HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                                      is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
                                      model_name="served", extra_config=dict(EXTRA, dir=self.server.directory,
                                                                             page_bytes=1152, **options))
        backend = StorageBackendFactory.create_backend("dynamic", config, None)
        self.addCleanup(backend.close)
        return backend

    def test_should_share_unidentified_pages_within_one_engine_only_and_warn_once(self):
        with self.assertLogs("kvstash.sglang", "WARNING") as logs:
            rank0 = self.backend()
        told = [line for line in logs.output if '"checkpoint"' in line]
        self.assertEqual(len(told), 1, logs.output)
        self.assertIn("this engine's own", rank0.checkpoint)
        page = torch.arange(576, dtype=torch.int16).to(torch.bfloat16)
        unknown, named = page_keys("unknown-parent", 2), page_keys("named-parent", 2)
        self.assertTrue(rank0.batch_set(unknown, [page, page]))
        self.assertTrue(self.backend(checkpoint="named-weights").batch_set(named, [page, page]))
        self.assertEqual(self.found(self.backend(), unknown), 2)        # another rank of this engine (process)

        child_keys = page_keys("unknown-child", 2)
        args = json.dumps({"dir": self.server.directory, "child_keys": child_keys, "parent_unknown": unknown,
                           "parent_named": named})
        run = subprocess.run([sys.executable, "-c", CHILD, args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, timeout=180)
        lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
        self.assertTrue(lines, run.stderr[-3000:])
        child = json.loads(lines[0][len("RESULT "):])
        self.assertEqual(child, {"stored": True, "parent_unknown": 0, "parent_named": 2})
        self.assertEqual(self.found(rank0, child_keys), 0)             # another engine's unidentified pages


if __name__ == "__main__":
    unittest.main()
