"""KvStashConnector against the real vLLM package (pinned in requirements-test.txt) on CPU: vLLM's Scheduler,
Requests and block hasher, worker connectors with CPU caches in vLLM's layout, a real kvstash server.

Skipped, with the reason, where vLLM is not installed (.ci/run installs it, so CI runs these). vLLM's
entry points (``LLM``, ``vllm serve``) need a GPU build of its kernels (``vllm._C``), which the PyPI wheel
does not have on a CPU: the tests drive the connector with vLLM's own scheduler classes instead, and a
stand-in forward pass (tests/vllm_engine.py) in place of the model.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from support import HERE, Server, ServerTestCase, counter

import kvstash
from kvstash.descriptor import FLAG_QUIET

HAS_VLLM = importlib.util.find_spec("vllm") is not None and importlib.util.find_spec("torch") is not None
NO_VLLM = "vLLM is not installed (pip install 'kvstash[vllm]'; .ci/run installs it)"
C = 64                                  # the test server's chunk tokens: 4 vLLM blocks of 16
STORED_CHUNKS = 11                      # counter id (docs/PROTOCOL.md §2.3)

if HAS_VLLM:
    import torch
    torch.set_num_threads(1)            # see test_tensors: the server holds the other core
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm_engine import BLOCK, HEAD, HEADS, LAYERS, MODEL_CONFIG, Engine, StoreChecker, model_dir, vllm_config
    from kvstash.options import OptionError
    from kvstash.vllm import KvStashConnector


def prompt(seed, chunks, extra=0):
    base = 1000 + seed * 10_000
    return list(range(base, base + chunks * C + extra))


@unittest.skipUnless(HAS_VLLM, NO_VLLM)
class ConnectorTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 64 << 20, "chunk_tokens": C}

    def engine(self, **options):
        engine = Engine(self.server.directory, **options)
        self.addCleanup(engine.close)
        return engine

    def assertEmpty(self, engine):
        """vLLM's scheduler and the connector hold nothing once every request has finished."""
        self.assertFalse(engine.scheduler.has_requests())
        self.assertEqual(engine.free_blocks(), engine.num_blocks - 1)          # all but vLLM's null block
        self.assertEqual(engine.connector.scheduler._trackers, {})
        self.assertEqual(engine.connector.scheduler._matched, {})
        self.assertEqual(engine.connector.scheduler._asked, set())
        self.assertEqual(engine.connector.scheduler._held, {})
        self.assertEqual(engine.connector.scheduler._spent, {})

    def assertStoreRight(self, *engines):
        """Every chunk any of ``engines`` asked to save is absent from the store or holds its tokens' KV."""
        read = 0
        for engine in engines:
            n, wrong = StoreChecker(engine, self.server.directory).mismatches(engine.saved)
            self.assertEqual(wrong, [], "chunks in the store differ from their tokens' KV")
            read += n
        return read

    def test_should_load_a_prefix_another_engine_process_stored_bit_for_bit(self):
        stored = prompt(1, 3, extra=5)                                         # 3 chunks and a partial one
        runs = {}
        for mode, tokens in (("store", stored), ("load", stored[:2 * C] + list(range(7, 7 + 45)))):
            out = subprocess.run([sys.executable, os.path.join(HERE, "vllm_engine.py"), self.server.directory, mode,
                                  json.dumps(tokens)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 timeout=300)
            self.assertEqual(out.returncode, 0, out.stderr[-3000:])
            runs[mode] = json.loads(out.stdout.strip().splitlines()[-1])
        store, load = runs["store"], runs["load"]
        self.assertEqual(store["worker"]["stored_chunks"], 3)                  # never the partial chunk
        self.assertEqual(store["first_computed"], 0)
        # The second engine's computed tokens jump by the two shared chunks, read from kvstash.
        self.assertEqual(load["first_computed"], 2 * C)
        self.assertEqual(load["scheduler"]["hit_tokens"], 2 * C)
        self.assertEqual(load["checked_blocks"], 2 * C // BLOCK)
        self.assertEqual(load["mismatched_blocks"], 0)
        self.assertEqual(load["invalid"], 0)
        self.assertEqual(load["worker"]["loaded_chunks"], 2)
        for run in runs.values():
            self.assertEqual(run["free_blocks"], run["num_blocks"] - 1)

    def test_should_count_only_whole_chunks_and_never_the_whole_prompt(self):
        a = self.engine()
        half = prompt(2, 2, extra=C // 2)
        exact = prompt(3, 3)
        a.add("half", half)
        a.add("exact", exact)
        a.run()
        self.assertEqual(a.workers[0].stats["stored_chunks"], 5)
        b = self.engine()
        b.add("half", half)
        b.add("exact", exact)
        b.run()
        self.assertEqual(b.first_computed["half"], 2 * C)                      # not 2.5 chunks
        # Every token of "exact" is stored, but vLLM must compute one: the hit stops a block short.
        self.assertEqual(b.first_computed["exact"], 3 * C - BLOCK)
        self.assertEqual(b.mismatched_blocks, 0)
        self.assertGreater(b.checked_blocks, 0)
        self.assertEqual(b.invalid, set())
        self.assertEmpty(a)
        self.assertEmpty(b)

    def test_should_agree_across_tensor_parallel_ranks(self):
        partial = self.engine(tp=2, saving_ranks=[0])                          # rank 1 never saves
        only_rank0 = prompt(4, 2)
        partial.add("x", only_rank0)
        partial.run()
        full = self.engine(tp=2)
        both = prompt(5, 2)
        full.add("y", both)
        full.run()
        reader = self.engine(tp=2)
        reader.add("x", only_rank0 + [1, 2, 3])
        reader.add("y", both + [1, 2, 3])
        reader.run()
        self.assertEqual(reader.first_computed["x"], 0)                        # not every rank has it
        self.assertEqual(reader.first_computed["y"], 2 * C)
        self.assertEqual(reader.mismatched_blocks, 0)                          # each rank got its own KV
        self.assertEqual(reader.checked_blocks, 2 * C // BLOCK)                 # "y"'s blocks, every rank in each
        self.assertEmpty(reader)

    def test_should_recompute_a_chunk_evicted_between_lookup_and_load(self):
        tokens = prompt(6, 3, extra=3)
        a = self.engine()
        a.add("a", tokens)
        a.run()
        b = self.engine()

        def evict(meta):
            self.assertTrue(meta.loads)                                        # the lookup found them ...
            with kvstash.connect(self.server.directory) as admin:
                self.assertGreaterEqual(admin.clear().count, 3)                # ... and they are gone now
        b.add("b", tokens)
        b.run(before_load=evict)
        self.assertEqual(len(b.invalid), 3 * C // BLOCK)                       # reported, so vLLM recomputed
        self.assertEqual(b.workers[0].stats["load_errors"], 1)
        self.assertTrue(b.request_blocks_match("b", tokens))                   # the KV in the end is right
        self.assertEmpty(b)

    def test_should_ask_again_about_a_waiting_request_quietly(self):
        # vLLM's scheduler asks at each step while a request waits; only the first ask counts the request's keys
        # as referenced in the store's eviction policy (a LOOKUP_ALL_RANKS with QUIET says "asked before").
        engine = self.engine(tp=2)
        request = engine.add("w", prompt(7, 3, extra=1))
        client = engine.connector.scheduler._connection.get()
        flags = []
        call = client._call

        def recording(msg_type, *args, **kwargs):
            if msg_type == kvstash.RequestType.LOOKUP_ALL_RANKS:
                flags.append(kwargs.get("flags", 0))
            return call(msg_type, *args, **kwargs)
        client._call = recording
        for _ in range(3):
            self.assertEqual(engine.connector.get_num_new_matched_tokens(request, 0), (0, False))
        self.assertEqual(flags, [0, FLAG_QUIET, FLAG_QUIET])
        engine.run()
        self.assertEqual(flags[3:], [FLAG_QUIET])           # the scheduler's own ask
        other = engine.add("v", prompt(8, 2, extra=1))
        engine.connector.get_num_new_matched_tokens(other, 0)
        self.assertEqual(flags[4:], [0])                                      # another request: a first ask
        client._call = call
        engine.run()
        self.assertEmpty(engine)

    def test_should_start_each_later_save_of_a_chunked_prefill_at_the_last_chunk_saved(self):
        # With prefill cut into steps of two chunks, each step saves the chunks it completed; a later step's range
        # starts with the chunk saved before it (present, so not written again), so the store sees the chain.
        tokens = prompt(9, 5, extra=3)
        a = self.engine(batched_tokens=2 * C)
        saves = []
        a.add("c", tokens)
        for _ in range(10):
            if not a.scheduler.has_requests():
                break
            a.step(before_load=lambda meta: saves.extend(save.keys for save in meta.saves))
        self.assertEqual([len(keys) for keys in saves], [2, 3, 2])          # chunks 0-1, 1-3, 3-4
        self.assertEqual(saves[1][0], saves[0][-1])
        self.assertEqual(saves[2][0], saves[1][-1])
        self.assertEqual(a.workers[0].stats["stored_chunks"], 5)               # each chunk written once
        self.assertEmpty(a)
        b = self.engine()
        b.add("d", tokens)
        b.run()
        self.assertEqual(b.first_computed["d"], 5 * C)
        self.assertEqual(b.mismatched_blocks, 0)
        self.assertEmpty(b)

    def test_should_never_store_as_a_consumer_and_never_load_as_a_producer(self):
        probe = self.connect()
        before = counter(probe, STORED_CHUNKS)
        consumer = self.engine(role="kv_consumer")
        consumer.add("c", prompt(7, 2))
        consumer.run()
        self.assertEqual(consumer.workers[0].stats["stored_chunks"], 0)
        self.assertEqual(counter(probe, STORED_CHUNKS), before)
        both = self.engine()
        both.add("p", prompt(8, 2))
        both.run()
        producer = self.engine(role="kv_producer")
        producer.add("p", prompt(8, 2, extra=1))
        producer.run()
        self.assertEqual(producer.first_computed["p"], 0)
        self.assertEqual(producer.connector.stats["lookups"], 0)

    def test_should_store_decode_tokens_only_when_configured(self):
        for store_decode, expected in ((False, 1), (True, 2)):
            engine = self.engine(extra={"store_decode": store_decode})
            engine.add("d", prompt(9 + expected, 1, extra=10), max_tokens=C)   # generation crosses a chunk end
            engine.run(max_steps=C + 10)
            self.assertEqual(engine.workers[0].stats["stored_chunks"], expected, "store_decode=%s" % store_decode)
            self.assertEmpty(engine)

    def test_should_log_its_counters_through_vllms_logger(self):
        engine = self.engine(extra={"log_interval_s": 1e-6})
        with self.assertLogs("vllm.kvstash", "INFO") as logs:
            engine.add("l", prompt(13, 1, extra=2))
            engine.run()
        lines = [line for line in logs.output if "stored_chunks=" in line]
        self.assertTrue(any("worker" in line and "stored_chunks=1" in line for line in lines), logs.output)
        self.assertTrue(any("scheduler" in line and "lookups=1" in line for line in lines), logs.output)

    def test_should_keep_apart_requests_with_different_cache_salts(self):
        tokens = prompt(12, 2, extra=1)
        a = self.engine()
        a.add("a", tokens, salt="tenant-a")
        a.run()
        b = self.engine()
        b.add("same", tokens, salt="tenant-a")
        b.add("other", tokens, salt="tenant-b")
        b.run()
        self.assertEqual(b.first_computed["same"], 2 * C)
        self.assertEqual(b.first_computed["other"], 0)

    # ------------------------------------------------------------------------------ only verified KV is stored
    def test_should_never_store_the_chunks_of_a_load_that_failed(self):
        # The prefix is gone between the scheduler's lookup and the worker's load: the blocks it was to fill hold
        # no KV of it, and the blocks computed after them in the same step were computed from them. None of it may
        # reach the store; once vLLM has recomputed them, they are stored right.
        tokens = prompt(30, 3, extra=5)
        a = self.engine()
        a.add("a", tokens)
        a.run()
        b = self.engine()
        longer = tokens[:3 * C] + prompt(31, 2, extra=3)

        def evict(meta):
            self.assertTrue(meta.loads)
            with kvstash.connect(self.server.directory) as admin:
                admin.clear()
        b.add("b", longer)
        b.run(before_load=evict)
        self.assertGreater(len(b.invalid), 0)
        self.assertGreaterEqual(self.assertStoreRight(a, b), 5)           # all five chunks, stored after recompute
        c = self.engine()
        c.add("c", longer + [5])
        c.run()
        self.assertEqual(c.first_computed["c"], 5 * C)
        self.assertEqual(c.mismatched_blocks, 0)
        self.assertEmpty(b)
        self.assertEmpty(c)

    def test_should_save_the_chunks_computed_with_a_load_in_the_next_step_and_never_the_chunks_loaded(self):
        tokens = prompt(32, 3, extra=5)
        a = self.engine()
        a.add("a", tokens)
        a.run()
        b = self.engine()
        longer = tokens[:3 * C] + prompt(33, 1, extra=2)
        saves = []
        b.add("b", longer)                                   # loads 3 chunks, computes the 4th, finishes at once
        for _ in range(10):
            if not b.scheduler.has_requests():
                break
            b.step(before_load=lambda meta: saves.extend((s.first_chunk, len(s.keys)) for s in meta.saves))
        # The step that loads saves nothing; the next one (the request's blocks held for it) saves the 4th chunk,
        # with the last chunk loaded ahead of it to name the chain; the chunks loaded are never sent again.
        self.assertEqual(saves, [(2, 2)])
        self.assertEqual(b.workers[0].stats["loaded_chunks"], 3)
        self.assertEqual(b.workers[0].stats["stored_chunks"], 1)
        self.assertEqual(b.finished_sending, {"b"})
        self.assertStoreRight(a, b)
        self.assertEmpty(b)

    def test_should_load_the_readable_leading_chunks_when_one_in_the_middle_is_gone(self):
        tokens = prompt(34, 4, extra=5)
        a = self.engine()
        a.add("a", tokens)
        a.run()
        b = self.engine()

        def hole(meta):
            self.assertEqual(len(meta.loads[0].keys), 4)
            with kvstash.connect(self.server.directory) as admin:
                admin.clear()
            StoreChecker(b, self.server.directory).store(tokens, [0, 1, 3])     # chunk 2 is gone
        b.add("b", tokens)
        b.run(before_load=hole)
        self.assertEqual(b.workers[0].stats["loaded_chunks"], 2)
        self.assertEqual(len(b.invalid), 2 * C // BLOCK)                 # chunks 2 and 3 recomputed
        self.assertEqual(b.mismatched_blocks, 0)
        self.assertGreater(b.checked_blocks, 0)
        self.assertTrue(b.request_blocks_match("b", tokens))
        self.assertStoreRight(a, b)
        self.assertEmpty(b)

    # ------------------------------------------------------------------------------ a key means one thing
    def test_should_share_one_checkpoint_at_two_paths_and_never_two_checkpoints_under_one_name(self):
        tokens = prompt(35, 2, extra=3)
        a = self.engine()
        a.add("a", tokens)
        a.run()
        copy = tempfile.mkdtemp(prefix="kvstash-vllm-copy-")
        self.addCleanup(shutil.rmtree, copy, True)
        shutil.copy(os.path.join(model_dir(), "config.json"), copy)
        same = self.engine(model_path=copy)                              # the same files elsewhere: shares
        fine_tune = self.engine(model_config=dict(MODEL_CONFIG, rms_norm_eps=1e-5))    # other files: never
        for engine in (same, fine_tune):
            engine.add("x", tokens + [9])
            engine.run()
        self.assertEqual(same.workers[0].model_name, a.workers[0].model_name)
        self.assertNotEqual(fine_tune.workers[0].model_name, a.workers[0].model_name)
        self.assertEqual(same.first_computed["x"], 2 * C)
        self.assertEqual(same.mismatched_blocks, 0)
        self.assertEqual(fine_tune.first_computed["x"], 0)

    def test_should_keep_apart_checkpoints_named_by_the_operator(self):
        tokens = prompt(36, 2, extra=3)
        first = self.engine(extra={"checkpoint": "acme/llama-ft@1"})
        first.add("a", tokens)
        first.run()
        other = self.engine(extra={"checkpoint": "acme/llama-ft@2"})
        again = self.engine(extra={"checkpoint": "acme/llama-ft@1"})
        for engine in (other, again):
            engine.add("x", tokens + [9])
            engine.run()
        self.assertEqual(other.first_computed["x"], 0)
        self.assertEqual(again.first_computed["x"], 2 * C)

    def test_should_register_a_bigger_model_under_a_name_of_its_own(self):
        # A model with more layers under the same served name used to meet LAYOUT_MISMATCH for the server's life.
        tokens = prompt(37, 2, extra=3)
        small = self.engine()
        small.add("s", tokens)
        small.run()
        big = self.engine(layers=LAYERS + 1)
        big.add("b", tokens)
        big.run()
        self.assertEqual(big.workers[0].stats["stored_chunks"], 2)
        again = self.engine(layers=LAYERS + 1)
        again.add("b", tokens + [9])
        again.run()
        self.assertEqual(again.first_computed["b"], 2 * C)
        self.assertEqual(again.mismatched_blocks, 0)
        self.assertStoreRight(small, big)

    def test_should_name_every_layout_meaning_apart(self):
        # Caches with the same bytes that mean different things: another element order, another attention
        # backend, another KV dtype. Each registers a model name of its own.
        names = {}
        shapes = {"blocks_heads": (8, HEADS, BLOCK, 2 * HEAD), "kv_blocks": (2, 8, BLOCK, HEADS, HEAD),
                  "blocks_kv": (8, 2, BLOCK, HEADS, HEAD)}
        for kind, shape in shapes.items():
            names[kind] = self.worker_name({"layer.%d" % i: torch.zeros(shape, dtype=torch.bfloat16)
                                            for i in range(LAYERS)})
        for backend in ("FLASH_ATTN", "TRITON_ATTN"):
            names[backend] = self.worker_name({"layer.%d" % i: torch.zeros(shapes["blocks_heads"], dtype=torch.bfloat16)
                                               for i in range(LAYERS)}, backend=backend)
        names["fp16"] = self.worker_name({"layer.%d" % i: torch.zeros(shapes["blocks_heads"], dtype=torch.float16)
                                          for i in range(LAYERS)})
        self.assertEqual(len(set(names.values())), len(names), names)
        for name in names.values():
            self.assertLessEqual(len(name.encode()), 255)
        self.assertEqual(names["blocks_heads"], self.worker_name(
            {"layer.%d" % i: torch.zeros(shapes["blocks_heads"], dtype=torch.bfloat16) for i in range(LAYERS)}))

    def worker_name(self, caches, backend=None):
        config = vllm_config(self.server.directory)
        if backend is not None:
            class Backend:
                @staticmethod
                def get_name():
                    return backend

            class Layer:
                attn_backend = Backend
            config.compilation_config.static_forward_context = {name: Layer() for name in caches}
        worker = KvStashConnector(config, KVConnectorRole.WORKER, None)
        self.addCleanup(worker.shutdown)
        worker.register_kv_caches(caches)
        return worker.model_name

    # ------------------------------------------------------------------------------ options
    def test_should_refuse_a_bad_option_in_one_line_naming_it(self):
        for extra, named in (({"dir": 5}, "'dir': got 5 (int); expected a non-empty string"),
                             ({"timeout_s": "soon"}, "'timeout_s': got 'soon' (str); expected a number"),
                             ({"reconnect_s": -1}, "'reconnect_s': got -1 (int); expected a number >= 0"),
                             ({"store_decode": "maybe"}, "'store_decode': got 'maybe' (str); expected true or false"),
                             ({"chunk_tokens": 1.5}, "'chunk_tokens': got 1.5 (float); expected an integer")):
            for role in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER):
                with self.assertRaises(OptionError) as caught:
                    KvStashConnector(vllm_config(self.server.directory, extra=extra), role, None)
                self.assertIn(named, str(caught.exception))
                self.assertNotIn("\n", str(caught.exception))

    def test_should_warn_about_an_unknown_option_with_the_known_ones(self):
        with self.assertLogs("vllm.kvstash", "WARNING") as logs:
            connector = KvStashConnector(vllm_config(self.server.directory, extra={"model": "x", "timout_s": 1}),
                                         KVConnectorRole.SCHEDULER, None)
        connector.shutdown()
        self.assertTrue(any("unknown options model, timout_s ignored" in line and "timeout_s" in line
                            for line in logs.output), logs.output)


@unittest.skipUnless(HAS_VLLM, NO_VLLM)
class ServerLossTest(unittest.TestCase):
    def connected_worker(self):
        """An engine on a server of its own, connected, that would not connect again within a test: (the engine,
        its worker side, the worker's client)."""
        server = Server(pool_bytes=64 << 20, chunk_tokens=C).start()
        self.addCleanup(server.close)
        engine = Engine(server.directory, extra={"reconnect_s": 30})
        self.addCleanup(engine.close)
        worker = engine.workers[0].worker
        return engine, worker, worker._connection.get()

    def test_should_serve_by_recompute_while_the_server_is_gone_and_reconnect_when_it_is_back(self):
        server = Server(pool_bytes=64 << 20, chunk_tokens=C).start()
        self.addCleanup(server.close)
        tokens, other, later = prompt(20, 3, extra=1), prompt(21, 3, extra=1), prompt(22, 3, extra=1)
        writer = Engine(server.directory)
        self.addCleanup(writer.close)
        writer.add("w1", tokens)
        writer.add("w2", other)
        writer.run()
        engine = Engine(server.directory)
        self.addCleanup(engine.close)
        timing = {}

        def kill(meta):
            self.assertTrue(meta.loads)
            server.kill()                                                      # kill -9 after the lookup
            timing["killed"] = time.monotonic()
        engine.add("r1", tokens)
        engine.step(before_load=kill)
        took = time.monotonic() - timing["killed"]
        self.assertLess(took, 2.0 + 1.0, "a load waited %.1f s on a dead server (timeout_s 2)" % took)
        print("\nkill -9 of the server: the step's loads failed over to recompute in %.0f ms" % (took * 1000),
              file=sys.stderr)
        engine.run()
        self.assertEqual(len(engine.invalid), 3 * C // BLOCK)
        self.assertTrue(engine.request_blocks_match("r1", tokens))
        # While it is gone: no hits (kvstash had "other"), no error into the engine, recompute.
        engine.add("r2", other)
        engine.run()
        self.assertEqual(engine.first_computed["r2"], 0)
        self.assertGreater(engine.connector.stats["unavailable"], 0)
        self.assertTrue(engine.request_blocks_match("r2", other))
        # A new server on the same directory: the engine reconnects by itself, stores and loads again.
        server.start()
        time.sleep(0.5)                                                        # > reconnect_s
        engine.add("r3", later)
        engine.run()
        self.assertEqual(engine.workers[0].stats["stored_chunks"], 3)
        engine.scheduler.reset_prefix_cache()                                 # so the hit must come from kvstash
        engine.add("r4", later + [7])
        engine.run()
        self.assertEqual(engine.first_computed["r4"], 3 * C)
        self.assertEqual(engine.mismatched_blocks, 0)
        self.assertGreater(engine.checked_blocks, 0)

    def test_should_keep_its_connection_after_an_error_that_does_not_end_it(self):
        # A KvStashError that leaves the connection working (CudaUnavailableError: KvStashError.connection_lost is
        # False) is no lost server: the worker's next save goes through the same connection at once, not after
        # reconnect_s of recomputing.
        engine, worker, client = self.connected_worker()
        store = client.store_paged

        def refuse_once(*args, **kwargs):
            client.store_paged = store
            raise kvstash.CudaUnavailableError("cudaHostRegister refused (the test's)")
        client.store_paged = refuse_once
        engine.add("a", prompt(30, 2, extra=1))
        engine.run()
        self.assertEqual(worker.stats["store_errors"], 1)
        engine.add("b", prompt(31, 2, extra=1))
        engine.run()
        self.assertEqual(worker.stats["stored_chunks"], 2)
        self.assertIs(worker._connection.get(), client)

    @unittest.skipIf(HAS_VLLM and torch.cuda.is_available(), "CUDA is here: it does not refuse the pool")
    def test_should_go_on_through_pageable_memory_where_cuda_refuses_the_pool(self):
        # A rank with GPU caches registers the pool with CUDA on each connection; where CUDA refuses (here: torch
        # sees no device), it warns once and goes on with the same connection, through pageable memory.
        engine, worker, client = self.connected_worker()
        with self.assertLogs("vllm.kvstash", "WARNING") as logs:
            worker._pin_pool(client)
        self.assertIn("pageable memory", logs.output[0])
        self.assertFalse(worker._pin)                           # not asked again on later connections
        self.assertIs(worker._connection.get(), client)
        engine.add("a", prompt(32, 2, extra=1))
        engine.run()
        self.assertEqual(worker.stats["stored_chunks"], 2)

    def test_should_wait_on_a_stopped_server_one_timeout_per_request(self):
        # SIGSTOP: the server's process lives and answers nothing. A new request's first step asks it in the
        # scheduler (the lookup) and would have its chunks stored by the worker in the same step: all of that
        # together waits timeout_s at most, not timeout_s per call.
        server = Server(pool_bytes=64 << 20, chunk_tokens=C).start()
        self.addCleanup(server.close)
        engine = Engine(server.directory, extra={"timeout_s": 1.0, "reconnect_s": 30})
        self.addCleanup(engine.close)
        warm = prompt(40, 1, extra=1)
        engine.add("warm", warm)                          # connected, registered, the chunk size known
        engine.run()
        server.pause()
        self.addCleanup(server.resume)
        engine.add("s", prompt(41, 3, extra=1))
        start = time.monotonic()
        engine.run()
        took = time.monotonic() - start
        server.resume()
        print("\nSIGSTOP of the server: a new request's whole life waited %.2f s (timeout_s 1)" % took,
              file=sys.stderr)
        self.assertLess(took, 1.0 + 0.5, "a request waited %.2f s on a stopped server (timeout_s 1)" % took)
        self.assertGreater(engine.connector.stats["unavailable"] + engine.workers[0].stats["store_errors"], 0)
        self.assertTrue(engine.request_blocks_match("s", prompt(41, 3, extra=1)))


if __name__ == "__main__":
    unittest.main()
