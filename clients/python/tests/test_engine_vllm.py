"""A real vLLM engine end to end: vLLM's CPU build runs the model's forward pass over KV that kvstash returned.

Each engine is a process of its own (tests/vllm_cpu_engine.py) on a small Llama with real random weights
(tiny_llama.py), greedy; the kvstash server is a process of its own too. Prompts share a prefix of 3,841 tokens
(BOS and 3,840 words): 15 chunks of 256 tokens, 30 of the CPU backend's blocks of 128.

- A first engine stores the prefix; a second, fresh one loads it: vLLM's own figures (``num_cached_tokens``, the
  external prefix-cache metrics) agree with the connector's counters, and the greedy tokens and top-5 logprobs are
  bit-equal to an engine without kvstash that computed the same split (the prefix from its own prefix cache, the
  rest in one step). A cold run (every token in one step) rounds otherwise: its first token is the same and its
  logprobs within a stated tolerance; greedy decoding may part from it later, at a near tie.
- Negative controls that can fail: an engine with other weights gets no hit; told by the operator that it is the
  same checkpoint, it loads the other weights' KV and its output changes (so the equality above means something).
- The OpenAI server started as the README says answers a chat completion and reports the cached tokens.
- kvstash SIGKILLed mid-run: same tokens by recompute; restarted: hits come back without an engine restart.
  Chunks evicted between the scheduler's lookup and the workers' load: same tokens, and what is stored after is
  right.

Runs in the environment of ``.ci/python-env clients/python/requirements-vllm-cpu.txt`` (vLLM's CPU build); skipped
elsewhere, with the reason.
"""

import importlib.metadata
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

from support import HERE, Server

sys.path.insert(0, os.path.dirname(HERE))
import tiny_llama                                                     # noqa: E402


def _vllm_cpu():
    try:
        importlib.metadata.distribution("vllm-cpu")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


HAS_VLLM_CPU = _vllm_cpu()
NO_VLLM_CPU = "vLLM's CPU build is not installed here (.ci/python-env clients/python/requirements-vllm-cpu.txt)"
CHUNK = 256
SHARED_WORDS = 3840                     # + BOS: 3,841 shared tokens, of which 15 whole chunks (3,840 tokens)
HIT = 15 * CHUNK
PREFIX = tiny_llama.prompt(SHARED_WORDS, 1)
P1 = PREFIX + " " + tiny_llama.prompt(150, 2)
P2 = PREFIX + " " + tiny_llama.prompt(120, 3)
P3 = PREFIX + " " + tiny_llama.prompt(90, 4)
POOL = 256 << 20
COLD_TOLERANCE = 0.1


class Engine:
    """A vLLM engine process (tests/vllm_cpu_engine.py), driven by one JSON command per line."""

    def __init__(self, model, kvstash_dir=None, **extra):
        spec = {"model": model, "kvstash": kvstash_dir, "extra": extra}
        self.log = tempfile.NamedTemporaryFile(prefix="vllm-engine-", suffix=".log", delete=False)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.path.dirname(HERE)]))
        self.process = subprocess.Popen([sys.executable, os.path.join(HERE, "vllm_cpu_engine.py"), json.dumps(spec)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                        env=env)
        self.log.close()                                    # the engine writes it; read by name on failure
        self._read(600)

    def _read(self, timeout):
        answer = {}

        def read():
            for line in self.process.stdout:
                if line.startswith("ENGINE "):
                    answer["value"] = json.loads(line[len("ENGINE "):])
                    return
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if "value" not in answer:
            self.process.kill()
            with open(self.log.name) as f:
                raise AssertionError("the engine did not answer within %d s; its log ends:\n%s"
                                     % (timeout, f.read()[-6000:]))
        return answer["value"]

    def ask(self, op, timeout=600, **fields):
        self.process.stdin.write(json.dumps(dict(fields, op=op)) + "\n")
        self.process.stdin.flush()
        return self._read(timeout)

    def generate(self, *prompts, max_tokens=8):
        return self.ask("generate", prompts=list(prompts), max_tokens=max_tokens, logprobs=5)

    def stats(self):
        return self.ask("stats")

    def close(self):
        if self.process.poll() is None:
            try:
                self.ask("quit", timeout=60)
            except (AssertionError, OSError, ValueError):
                pass
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        os.unlink(self.log.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def delta(after, before):
    return {key: value - before.get(key, 0) for key, value in after.items()}


def _common(a, b):
    """How many leading tokens two runs share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def max_logprob_gap(a, b):
    """The largest difference between two runs' top-5 logprobs at positions where both ranked the same tokens."""
    gap = 0.0
    for position_a, position_b in zip(a["logprobs"], b["logprobs"]):
        tokens_a = {token: lp for token, lp in position_a}
        for token, lp in position_b:
            if token in tokens_a:
                gap = max(gap, abs(tokens_a[token] - lp))
    return gap


class ModelsTestCase(unittest.TestCase):
    """Two checkpoints of one shape: weights from seed 0 and from seed 1."""

    @classmethod
    def setUpClass(cls):
        cls.models = tempfile.mkdtemp(prefix="kvstash-models-")
        cls.model = tiny_llama.build(os.path.join(cls.models, "seed0"), seed=0)
        cls.other = tiny_llama.build(os.path.join(cls.models, "seed1"), seed=1)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.models, ignore_errors=True)


@unittest.skipUnless(HAS_VLLM_CPU, NO_VLLM_CPU)
class TwoEnginesTest(ModelsTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The reference: an engine without kvstash. P1 cold, then P2 over the prefix its own prefix cache kept
        # (the split a kvstash hit gives), then P2 cold.
        with Engine(cls.model) as engine:
            cls.p1, cls.p2_split = engine.generate(P1, P2)
            engine.ask("reset_prefix_cache")
            cls.p2_cold, = engine.generate(P2)

    def setUp(self):
        self.server = Server(pool_bytes=POOL, chunk_tokens=CHUNK).start()
        self.addCleanup(self.server.close)

    def test_should_give_a_fresh_engine_the_prefix_and_the_same_tokens(self):
        self.assertEqual(HIT, self.p2_split["cached"], "the reference engine's own prefix cache: the same split")
        with Engine(self.model, self.server.directory) as first:
            stored, = first.generate(P1)
            first_stats = first.stats()
        self.assertEqual(0, stored["cached"])
        self.assertEqual(self.p1["tokens"], stored["tokens"])
        self.assertEqual(15, first_stats["worker"]["stored_chunks"])

        with Engine(self.model, self.server.directory) as second:
            loaded, = second.generate(P2)
            stats = second.stats()
        # vLLM's own figures and the connector's counters tell one story.
        self.assertEqual(HIT, loaded["cached"])
        self.assertEqual(HIT, stats["metrics"]["vllm:external_prefix_cache_hits"])
        self.assertEqual(loaded["prompt_len"], stats["metrics"]["vllm:external_prefix_cache_queries"])
        self.assertEqual(HIT, stats["scheduler"]["hit_tokens"])
        self.assertEqual(15, stats["worker"]["loaded_chunks"])
        self.assertEqual(0, stats["worker"]["load_errors"])
        self.assertEqual(0, stats["worker"]["stored_chunks"], "a hit stores nothing it just loaded")
        # The same split over the same KV computes the same bits.
        self.assertEqual(self.p2_split["tokens"], loaded["tokens"])
        self.assertEqual(self.p2_split["logprobs"], loaded["logprobs"])
        # A cold run computes the whole prompt in one step, the split in two: bf16 rounds differently, and greedy
        # decoding may part at a near tie a few tokens on. The first token agrees, and its top-5 logprobs within
        # COLD_TOLERANCE (a few bf16 steps of logits of this size).
        self.assertEqual(self.p2_cold["tokens"][0], loaded["tokens"][0])
        gap = max_logprob_gap({"logprobs": self.p2_cold["logprobs"][:1]}, {"logprobs": loaded["logprobs"][:1]})
        self.assertLess(gap, COLD_TOLERANCE)
        print("\ntest_engine_vllm: a cold run against a loaded one, first token's top-5 logprobs %.4f apart; "
              "tokens equal for %d of %d" % (gap, _common(self.p2_cold["tokens"], loaded["tokens"]),
                                             len(loaded["tokens"])), file=sys.stderr)

    def test_should_never_give_an_engine_the_kv_of_other_weights(self):
        with Engine(self.model, self.server.directory) as first:
            first.generate(P1)
        with Engine(self.other, self.server.directory) as other:
            right, = other.generate(P2)
            stats = other.stats()
        self.assertEqual(0, right["cached"], "other weights, another checkpoint: no hit")
        self.assertEqual(0, stats["scheduler"]["hit_tokens"])
        self.assertEqual(0, stats["metrics"]["vllm:external_prefix_cache_hits"])

        # The control of the control: told that both are one checkpoint, the engine with other weights loads the
        # first one's KV, and what it answers changes. Had it not, the equalities above would prove nothing.
        with Engine(self.model, self.server.directory, checkpoint="same-by-decree") as first:
            first.generate(P1)
        with Engine(self.other, self.server.directory, checkpoint="same-by-decree") as misled:
            wrong, = misled.generate(P2)
        self.assertEqual(HIT, wrong["cached"])
        self.assertNotEqual(right["logprobs"], wrong["logprobs"])
        self.assertNotEqual(right["tokens"], wrong["tokens"], "the other weights' KV changes the greedy tokens")


@unittest.skipUnless(HAS_VLLM_CPU, NO_VLLM_CPU)
class ServerFaultsTest(ModelsTestCase):

    def test_should_answer_the_same_across_a_killed_server_a_restart_and_an_eviction_before_load(self):
        # References without kvstash: each prompt computed cold (one step), and over a prefix from the engine's own
        # prefix cache (the split a kvstash hit gives). The prefix's KV is the same function of its tokens whatever
        # follows them, but not the same bits: computed as part of P1 or of P3 (one step of 3,991 or 3,931 tokens),
        # it is rounded differently. So each split reference reads the prefix computed as the loaded chunks were.
        with Engine(self.model) as reference:
            _, split_p2 = reference.generate(P1, P2)              # the prefix as P1 computed it
            reference.ask("reset_prefix_cache")
            cold_p2, = reference.generate(P2)
            reference.ask("reset_prefix_cache")
            cold_p3, split_p3 = reference.generate(P3, P3)        # the prefix as P3 computed it
        server = Server(pool_bytes=POOL, chunk_tokens=CHUNK).start()
        self.addCleanup(lambda: server.close())
        with Engine(self.model, server.directory, reconnect_s=0.2, timeout_s=2.0) as engine:
            stored, = engine.generate(P1)
            self.assertEqual(15, engine.stats()["worker"]["stored_chunks"])

            # SIGKILL: no hit, the same tokens by recompute (engine's own prefix cache dropped each time, so that
            # every prompt asks kvstash).
            server.kill()
            engine.ask("reset_prefix_cache")
            before = engine.stats()
            recomputed, = engine.generate(P2)
            self.assertEqual(0, recomputed["cached"])
            self.assertEqual(cold_p2["logprobs"], recomputed["logprobs"], "computed cold, as the reference's")
            self.assertGreater(delta(engine.stats()["scheduler"], before["scheduler"])["unavailable"], 0)

            # Restarted on the same directory: the engine finds it again by itself; P1 stores, P2 hits.
            server = Server(pool_bytes=POOL, chunk_tokens=CHUNK, directory=server.directory).start()
            time.sleep(0.5)
            engine.ask("reset_prefix_cache")
            engine.generate(P1)
            engine.ask("reset_prefix_cache")
            before = engine.stats()
            hit, = engine.generate(P2)
            self.assertEqual(HIT, hit["cached"], "hits come back without an engine restart")
            self.assertEqual(split_p2["logprobs"], hit["logprobs"])
            self.assertEqual(15, delta(engine.stats()["worker"], before["worker"])["loaded_chunks"])

            # Every chunk gone between the scheduler's lookup and the workers' load: vLLM is told which blocks
            # failed and computes them; the tokens are the same.
            engine.ask("reset_prefix_cache")
            engine.ask("evict_before_next_load")
            before = engine.stats()
            evicted, = engine.generate(P3)
            after = engine.stats()
            self.assertGreater(delta(after["worker"], before["worker"])["load_errors"], 0)
            self.assertEqual(cold_p3["logprobs"], evicted["logprobs"], "computed cold, as the reference's")

            # What that recomputation stored is right: loaded again, it gives the same tokens.
            engine.ask("reset_prefix_cache")
            again, = engine.generate(P3)
            self.assertEqual(HIT, again["cached"])
            self.assertEqual(split_p3["logprobs"], again["logprobs"])


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url, body, timeout=300):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        text = response.read().decode()
        return json.loads(text) if text else None


@unittest.skipUnless(HAS_VLLM_CPU, NO_VLLM_CPU)
class OpenAiServerTest(ModelsTestCase):

    def test_should_answer_a_chat_completion_and_report_the_tokens_kvstash_gave(self):
        server = Server(pool_bytes=POOL, chunk_tokens=CHUNK).start()
        self.addCleanup(server.close)
        port = _free_port()
        transfer = {"kv_connector": "KvStashConnector", "kv_connector_module_path": "kvstash.vllm",
                    "kv_role": "kv_both", "kv_load_failure_policy": "recompute",
                    "kv_connector_extra_config": {"dir": server.directory}}
        # README's line for vLLM's CPU build (VLLM_SERVER_DEV_MODE only for /reset_prefix_cache below).
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), VLLM_CPU_KVCACHE_SPACE="1",
                   VLLM_SERVER_DEV_MODE="1", HF_HUB_OFFLINE="1")
        log = tempfile.NamedTemporaryFile(prefix="vllm-openai-", suffix=".log", delete=False)
        self.addCleanup(os.unlink, log.name)
        process = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model,
                                    "--port", str(port), "--kv-transfer-config", json.dumps(transfer),
                                    "--enable-prompt-tokens-details"], stdout=log, stderr=subprocess.STDOUT, env=env)

        def stop():
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.addCleanup(stop)
        base = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 600
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    with open(log.name) as f:
                        self.fail("the OpenAI server did not start; its log ends:\n" + f.read()[-6000:])
                time.sleep(1)
        chat = {"model": self.model, "max_tokens": 6, "temperature": 0,
                "messages": [{"role": "system", "content": PREFIX}, {"role": "user", "content": "w1 w2 w3"}]}
        first = _post(base + "/v1/chat/completions", chat)
        self.assertEqual(0, (first["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        _post(base + "/reset_prefix_cache", {})
        second = _post(base + "/v1/chat/completions", chat)
        prompt_tokens = second["usage"]["prompt_tokens"]
        cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertEqual((prompt_tokens - 1) // CHUNK * CHUNK, cached, "whole chunks of the prompt, from kvstash")
        self.assertEqual(first["choices"][0]["message"]["content"], second["choices"][0]["message"]["content"])
        with urllib.request.urlopen(base + "/metrics", timeout=30) as response:
            metrics = response.read().decode()
        hits = [line for line in metrics.splitlines() if line.startswith("vllm:external_prefix_cache_hits_total")]
        self.assertTrue(hits, "vLLM exports the external prefix cache's hits")
        self.assertEqual(cached, sum(float(line.rsplit(" ", 1)[1]) for line in hits))


if __name__ == "__main__":
    unittest.main()
