"""A vLLM engine without a model, for the connector tests.

vLLM's real ``Scheduler``, ``Request`` and block hasher on a CPU device config (a small Llama config written
to a temporary directory: no hub, no weights), one ``KvStashConnector`` worker per tensor-parallel rank with
CPU caches in vLLM's own layout, and a stand-in forward pass. The step follows vLLM's model runner and engine
core: the handshake metadata goes from the workers to the scheduler's connector once the caches are registered;
each step binds the metadata, starts the loads (before the forward when the step has synchronous loads, after it
otherwise), runs the forward, waits for the saves, and collects finished transfers, load errors and worker metadata
from every rank the way vLLM's output aggregator does (a transfer is finished once every rank says so).

The stand-in model behaves like attention where it matters here: the K and V it writes at a position depend on the
token, the position, the layer, the rank and a digest of the whole previous block **as it is in the cache** (every
rank, every layer). A block holding wrong KV therefore makes every later block the forward computes wrong too, as
in a real model, and the right KV of any block is a function of the token prefix alone (``KvModel.expected``), so
every loaded, computed or stored byte can be checked.

Run as a script it plays one engine process and prints one JSON line (the two-engine test):
``python vllm_engine.py DIR store|load TOKENS_JSON``.
"""

import collections
import json
import os
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch                                                          # noqa: E402
from vllm.config import (CacheConfig, DeviceConfig, KVTransferConfig, ModelConfig, ParallelConfig,  # noqa: E402
                         SchedulerConfig, VllmConfig)
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402
from vllm.sampling_params import SamplingParams                       # noqa: E402
from vllm.utils.hashing import sha256                                 # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.core.sched.async_scheduler import AsyncScheduler         # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler                    # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec  # noqa: E402
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput     # noqa: E402
from vllm.v1.request import Request, RequestStatus                    # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager         # noqa: E402

import kvstash                                                        # noqa: E402
from kvstash.vllm import KvStashConnector, chunk_key                  # noqa: E402

BLOCK = 16
LAYERS, HEADS, HEAD = 2, 2, 16
MODEL_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": HEADS, "head_dim": HEAD,
                "num_hidden_layers": LAYERS, "vocab_size": 32000, "max_position_embeddings": 8192,
                "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"}
_model_dirs = {}


def model_dir(config=None):
    """A fresh temporary directory (one per process and config) holding a small Llama config.json: vLLM reads the
    architecture from it, and kvstash the checkpoint's identity (equal configs in two directories are one
    checkpoint)."""
    text = json.dumps(config or MODEL_CONFIG, sort_keys=True)
    if text not in _model_dirs:
        directory = tempfile.mkdtemp(prefix="kvstash-vllm-model-")
        with open(os.path.join(directory, "config.json"), "w") as f:
            f.write(text)
        _model_dirs[text] = directory
    return _model_dirs[text]


def vllm_config(directory, role="kv_both", tp=1, rank=0, extra=None, batched_tokens=8192, model_config=None,
                model_path=None, async_scheduling=False):
    extra_config = {"dir": directory, "timeout_s": 2.0, "reconnect_s": 0.2, "log_interval_s": 0}
    extra_config.update(extra or {})
    return VllmConfig(
        model_config=ModelConfig(model=model_path or model_dir(model_config), skip_tokenizer_init=True,
                                 dtype="bfloat16", max_model_len=8192),
        scheduler_config=SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=batched_tokens, max_model_len=8192,
                                         is_encoder_decoder=False, enable_chunked_prefill=True,
                                         async_scheduling=async_scheduling),
        cache_config=CacheConfig(block_size=BLOCK, cache_dtype="auto", enable_prefix_caching=True),
        parallel_config=ParallelConfig(tensor_parallel_size=tp, rank=rank),
        kv_transfer_config=KVTransferConfig(kv_connector="KvStashConnector", kv_connector_module_path="kvstash.vllm",
                                            kv_role=role, kv_load_failure_policy="recompute",
                                            kv_connector_extra_config=extra_config),
        device_config=DeviceConfig("cpu"))


class KvModel:
    """The stand-in model's KV (see the module doc): K/V at position p of layer l on rank r are a bf16 vector that
    depends on (token p, p, l, r, digest of block p // BLOCK - 1 over every rank and layer)."""

    def __init__(self, tp, layers=LAYERS):
        self.tp = tp
        self.layers = layers
        gen = torch.Generator().manual_seed(7)
        self.weights = torch.randint(1, 1 << 20, (tp, layers, HEADS, BLOCK, 2 * HEAD), generator=gen,
                                     dtype=torch.int64)
        self.ramp = torch.arange(HEADS * HEAD, dtype=torch.float32) / 64.0
        self._memo = {}

    def digest(self, block):
        """A 61-bit digest of one block's KV, ``[tp, layers, heads, BLOCK, 2 * head]`` bf16."""
        return int((block.view(torch.int16).to(torch.int64) * self.weights).sum()) & ((1 << 61) - 1)

    def values(self, digest, tokens, positions, layer, kv, rank):
        """``[len(tokens), heads, head]`` bf16: K (kv 0) or V (kv 1) of the tokens at the positions."""
        base = torch.tensor([((digest * 1000003 + t * 131 + p * 31 + layer * 7 + kv * 3 + rank * 5) % 997) / 8.0
                             for t, p in zip(tokens, positions)], dtype=torch.float32)
        return (self.ramp[None, :] + base[:, None]).to(torch.bfloat16).view(len(tokens), HEADS, HEAD)

    def block(self, digest, tokens, first_position):
        """The whole right block after a block of ``digest``: ``[tp, layers, heads, BLOCK, 2 * head]``."""
        out = torch.empty((self.tp, self.layers, HEADS, BLOCK, 2 * HEAD), dtype=torch.bfloat16)
        positions = range(first_position, first_position + BLOCK)
        for rank in range(self.tp):
            for layer in range(self.layers):
                for kv in (0, 1):
                    out[rank, layer, :, :, kv * HEAD:(kv + 1) * HEAD] = \
                        self.values(digest, tokens, positions, layer, kv, rank).permute(1, 0, 2)
        return out

    def expected(self, tokens, blocks):
        """The right KV of the first ``blocks`` full blocks of ``tokens``, a list of block tensors."""
        out, digest = [], 0
        for b in range(blocks):
            key = (digest, tuple(tokens[b * BLOCK:(b + 1) * BLOCK]))
            block = self._memo.get(key)
            if block is None:
                block = self._memo[key] = self.block(digest, key[1], b * BLOCK)
            out.append(block)
            digest = self.digest(block)
        return out


class Engine:
    """One engine: a scheduler and one worker connector per tensor-parallel rank (see the module doc)."""

    def __init__(self, directory, role="kv_both", tp=1, num_blocks=512, extra=None, saving_ranks=None,
                 batched_tokens=8192, model_config=None, handshake=True, layers=LAYERS, model_path=None,
                 async_scheduling=False):
        init_none_hash(sha256)
        if model_config is None and layers != LAYERS:
            model_config = dict(MODEL_CONFIG, num_hidden_layers=layers)
        self.num_blocks = num_blocks
        self.configs = [vllm_config(directory, role, tp, r, extra, batched_tokens, model_config, model_path,
                                    async_scheduling) for r in range(tp)]
        config = self.configs[0]
        self.kv_cache_config = KVCacheConfig(
            num_blocks=num_blocks, kv_cache_tensors=[],
            kv_cache_groups=[KVCacheGroupSpec(["layer.%d" % i for i in range(layers)],
                                              FullAttentionSpec(block_size=BLOCK, num_kv_heads=HEADS, head_size=HEAD,
                                                                dtype=torch.bfloat16))])
        config.cache_config.num_gpu_blocks = num_blocks
        # Asynchronous scheduling (vLLM's default) as its engine core runs it: the next step is scheduled and
        # executed before the output of the one in flight is processed (a batch queue of two).
        self.async_scheduling = async_scheduling
        self._queue = collections.deque()
        scheduler_class = AsyncScheduler if async_scheduling else Scheduler
        self.scheduler = scheduler_class(config, self.kv_cache_config, StructuredOutputManager(config),
                                         block_size=BLOCK, log_stats=True)
        self.hasher = get_request_block_hasher(BLOCK, sha256)
        self.model = KvModel(tp, layers)
        self.workers, self.caches = [], []
        for r in range(tp):
            worker = KvStashConnector(self.configs[r], KVConnectorRole.WORKER, self.kv_cache_config)
            # vLLM 0.33's FlashAttention layout: [num_blocks, kv heads, block size, 2 * head size].
            caches = {"layer.%d" % i: torch.zeros((num_blocks, HEADS, BLOCK, 2 * HEAD), dtype=torch.bfloat16)
                      for i in range(layers)}
            worker.register_kv_caches(caches)
            self.workers.append(worker)
            self.caches.append(list(caches.values()))
        if handshake:                           # what EngineCore does once the workers registered their caches
            self.scheduler.connector.set_xfer_handshake_metadata_pp_aware(
                {(0, r): w.get_handshake_metadata() for r, w in enumerate(self.workers)})
        self.saving_ranks = set(range(tp)) if saving_ranks is None else set(saving_ranks)
        self.blocks = {}
        self.requests = {}
        self.first_computed = {}
        self.mismatched_blocks = 0
        self.checked_blocks = 0
        self.invalid = set()
        self.finished_sending = set()
        self.saved = {}                         # (key, salt) -> the token prefix of every chunk a save named
        self.bad_reads = []                     # (request, block index, block id): wrong KV a forward read
        self.tainted = set()                    # blocks holding KV known wrong (see _forward)
        self._step_errors = set()

    @property
    def connector(self):
        return self.scheduler.connector

    def add(self, req_id, tokens, max_tokens=1, salt=None):
        request = Request(request_id=req_id, prompt_token_ids=list(tokens),
                          sampling_params=SamplingParams(max_tokens=max_tokens, ignore_eos=True), pooling_params=None,
                          block_hasher=self.hasher, cache_salt=salt)
        self.requests[req_id] = request
        self.scheduler.add_request(request)
        return request

    def abort(self, req_id):
        self.scheduler.finish_requests(req_id, RequestStatus.FINISHED_ABORTED)

    def step(self, before_load=None, after_forward=None):
        """One engine step (see the module doc); ``before_load(meta)`` and ``after_forward(meta)`` are the test's
        moments to break something. Returns (scheduler output, block ids reported as failed loads) of the batch
        executed, or (None, set()) when the step only processed the output of a batch in flight (asynchronous
        scheduling, as vLLM's engine core's batch queue does)."""
        if not self.async_scheduling:
            out = self.scheduler.schedule()
            mro, invalid = self._execute(out, before_load, after_forward)
            self.scheduler.update_from_output(out, mro)
            return out, invalid
        executed = (None, set())
        if self.scheduler.has_requests():
            out = self.scheduler.schedule()
            mro, invalid = self._execute(out, before_load, after_forward)
            self._queue.appendleft((out, mro))
            executed = (out, invalid)
            if len(self._queue) < 2 and (out.total_num_scheduled_tokens > 0 or self.scheduler.has_requests()):
                return executed
        if self._queue:
            out, mro = self._queue.pop()
            self.scheduler.update_from_output(out, mro)
        return executed

    def has_work(self):
        return self.scheduler.has_requests() or bool(self._queue)

    def tokens(self, request, upto):
        """The request's tokens up to position ``upto``: under asynchronous scheduling a step may compute a
        position whose sampled token is not appended yet (the stand-in samples token ``7 + k`` as output k)."""
        tokens = request.all_token_ids
        if len(tokens) >= upto:
            return tokens[:upto]
        return list(tokens) + [7 + k for k in range(len(tokens) - request.num_prompt_tokens,
                                                    upto - request.num_prompt_tokens)]

    def _execute(self, out, before_load, after_forward):
        """The workers' side of one scheduled batch: returns (model runner output, failed load blocks)."""
        meta = out.kv_connector_metadata
        if before_load is not None:
            before_load(meta)
        chunk = self.workers[0].worker.chunk_tokens
        for save in getattr(meta, "saves", ()):
            for i, key in enumerate(save.keys):
                end = (save.first_chunk + i + 1) * chunk
                self.saved[(key, save.salt)] = tuple(self.tokens(self.requests[save.req_id], end))
        for new in out.scheduled_new_reqs:
            self.blocks[new.req_id] = list(new.block_ids[0])
            self.first_computed.setdefault(new.req_id, new.num_computed_tokens)
        cached = out.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            new_blocks = cached.new_block_ids[i]
            if req_id in cached.resumed_req_ids:
                self.blocks[req_id] = list(new_blocks[0])
            elif new_blocks is not None:
                self.blocks[req_id].extend(new_blocks[0])
        sync = out.has_sync_kv_loads
        for worker in self.workers:
            worker.bind_connector_metadata(meta)
            if sync:
                worker.start_load_kv(None)
        # The test's oracle peeks at the load errors the workers will report after the step (vLLM asks for them
        # then); a block loaded without one holds right KV again.
        self._step_errors = set().union(*(w.worker._load_errors for w in self.workers))
        for load in getattr(meta, "loads", ()):
            self.tainted.difference_update(b for b in load.block_ids if b >= 0 and b not in self._step_errors)
        self.tainted |= self._step_errors
        starts = {new.req_id: new.num_computed_tokens for new in out.scheduled_new_reqs}
        starts.update(zip(cached.req_ids, cached.num_computed_tokens))
        self._forward({req_id: (starts[req_id], count) for req_id, count in out.num_scheduled_tokens.items()})
        if after_forward is not None:
            after_forward(meta)
        invalid, reported, worker_meta = set(), collections.Counter(), None
        for rank, worker in enumerate(self.workers):
            if not sync:
                worker.start_load_kv(None)
            if rank not in self.saving_ranks:           # a rank that never stores still finishes its transfers
                worker.bind_connector_metadata(type(meta)(loads=meta.loads, saves=[], finish=meta.finish))
            worker.wait_for_save()
            results = worker.get_transfer_results(out.finished_req_ids)
            reported.update(results.finished_sending)
            invalid |= worker.get_block_ids_with_load_errors()
            mine = worker.build_connector_worker_meta()
            if mine is not None:
                worker_meta = mine if worker_meta is None else worker_meta.aggregate(mine)
            worker.clear_connector_metadata()
        self.invalid |= invalid
        self._check_loads(meta, invalid)
        finished = {req_id for req_id, n in reported.items() if n == len(self.workers)}
        self.finished_sending |= finished
        ids = list(out.num_scheduled_tokens)
        sampled = []
        for req_id in ids:
            request = self.requests[req_id]
            end = starts[req_id] + out.num_scheduled_tokens[req_id]           # a step that reaches the prompt's end
            sampled.append([7 + end - request.num_prompt_tokens] if end >= request.num_prompt_tokens else [])
        connector_output = KVConnectorOutput(finished_sending=finished or None, invalid_block_ids=invalid,
                                             kv_connector_worker_meta=worker_meta)
        mro = ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                                sampled_token_ids=sampled,
                                kv_connector_output=None if connector_output.is_empty() else connector_output)
        return mro, invalid

    def run(self, max_steps=50, before_load=None):
        """Steps until every request has finished and vLLM has freed its blocks."""
        for _ in range(max_steps):
            if not self.has_work():
                return
            self.step(before_load)
            before_load = None
        raise AssertionError("requests still running after %d steps" % max_steps)

    def _forward(self, work):
        """The stand-in forward over ``{req_id: (first position, tokens)}``: block by block in position order over
        every request, so that a block another request writes in this step is written before a later block reads
        it (as attention reads the KV written earlier in the same layer)."""
        by_block = collections.defaultdict(list)
        for req_id, (start, count) in work.items():
            p = start
            while p < start + count:
                end = min(start + count, (p // BLOCK + 1) * BLOCK)
                by_block[p // BLOCK].append((req_id, p, end))
                p = end
        for b in sorted(by_block):
            for req_id, lo, hi in by_block[b]:
                table = self.blocks[req_id]
                digest = 0
                # The right KV comes only from right KV: what a forward computes over a tainted block (one whose
                # load failed, or computed over such a block) is tainted too, until computed again over right KV.
                # A wrong block read that is not tainted is KV the engine trusted: a bad read.
                taint = lo % BLOCK != 0 and table[b] in self.tainted
                if b > 0:
                    previous = self.block_kv(table[b - 1])
                    digest = self.model.digest(previous)
                    request = self.requests[req_id]
                    if b * BLOCK > request.num_prompt_tokens:
                        # Past the prompt the right KV depends on the tokens sampled, which vLLM may take back
                        # under asynchronous scheduling (a step after a failed load): only the taint carries over.
                        taint = taint or table[b - 1] in self.tainted
                    elif not torch.equal(previous, self.model.expected(request.all_token_ids, b)[b - 1]):
                        if table[b - 1] not in self.tainted:
                            self.bad_reads.append((req_id, b - 1, table[b - 1]))
                        taint = True
                if taint:
                    self.tainted.add(table[b])
                else:
                    self.tainted.discard(table[b])
                tokens = self.tokens(self.requests[req_id], hi)[lo:hi]
                positions = range(lo, hi)
                block = table[b]
                for rank, caches in enumerate(self.caches):
                    for layer, cache in enumerate(caches):
                        for kv in (0, 1):
                            cache[block, :, lo - b * BLOCK:hi - b * BLOCK, kv * HEAD:(kv + 1) * HEAD] = \
                                self.model.values(digest, tokens, positions, layer, kv, rank).permute(1, 0, 2)

    def block_kv(self, block):
        """One block of the cache as the model sees it: ``[tp, layers, heads, BLOCK, 2 * head]``."""
        return torch.stack([torch.stack([cache[block] for cache in caches]) for caches in self.caches])

    def _check_loads(self, meta, invalid):
        """Every block loaded without a reported error holds what the stand-in model computes there."""
        for load in getattr(meta, "loads", ()):
            tokens = self.requests[load.req_id].all_token_ids
            table = self.blocks[load.req_id]
            for b in load.block_ids:
                if b < 0 or b in invalid:
                    continue
                self.checked_blocks += 1
                if not self.block_matches(tokens, table.index(b), b):
                    self.mismatched_blocks += 1

    def block_matches(self, tokens, index, block):
        return torch.equal(self.block_kv(block), self.model.expected(tokens, index + 1)[index])

    def request_blocks_match(self, req_id, tokens):
        """Every full block of a finished request's prompt holds the right K and V (after any recompute)."""
        return all(self.block_matches(tokens, i, b) for i, b in enumerate(self.blocks[req_id][:len(tokens) // BLOCK]))

    def chunk_keys(self, tokens, salt=None):
        """The kvstash keys of the whole chunks of ``tokens`` (vLLM's block hashes, as the connector names them)."""
        request = Request(request_id="keys", prompt_token_ids=list(tokens), sampling_params=SamplingParams(),
                          pooling_params=None, block_hasher=self.hasher, cache_salt=salt)
        per = self.workers[0].worker.chunk_tokens // BLOCK
        return [chunk_key(request.block_hashes[(k + 1) * per - 1]) for k in range(len(tokens) // (per * BLOCK))]

    def free_blocks(self):
        return self.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()

    def close(self):
        for worker in self.workers:
            worker.shutdown()
        self.connector.shutdown()


class StoreChecker:
    """The store as an engine would read it: one kvstash instance per rank, registered with that worker's own
    layout and model name, reads chunks back by key into a scratch cache and compares them block by block with the
    model's KV of their token prefix. Each call connects anew (the server may have been restarted)."""

    def __init__(self, engine, directory):
        self.engine = engine
        self.directory = directory
        self.per = engine.workers[0].worker.chunk_tokens // BLOCK
        self.scratch = kvstash.PagedKV({"layer.%d" % i: torch.zeros((self.per, HEADS, BLOCK, 2 * HEAD),
                                                                    dtype=torch.bfloat16)
                                      for i in range(engine.model.layers)})

    def _clients(self):
        clients = []
        for rank, worker in enumerate(self.engine.workers):
            client = kvstash.connect(self.directory, timeout=5.0)
            instance = 0x5EED0000 + rank
            r = client.register(instance, self.scratch.layout(worker.model_name, len(self.engine.workers), rank))
            if not r.ok:
                client.close()
                raise AssertionError("the checker could not register rank %d: %s" % (rank, r))
            clients.append((client, instance))
        return clients

    def mismatches(self, known):
        """``known``: {(key, salt): token prefix}. Returns (chunks read, [(key, salt, rank) of wrong chunks])."""
        read, wrong = 0, []
        clients = self._clients()
        try:
            for (key, salt), prefix in known.items():
                k = len(prefix) // (self.per * BLOCK) - 1
                expected = None
                for rank, (client, instance) in enumerate(clients):
                    result = client.retrieve_paged(instance, self.scratch, list(range(self.per)), [key], salt=salt)
                    if not result.ok:
                        continue                                    # evicted (or never stored): not wrong
                    read += 1
                    if expected is None:
                        expected = self.engine.model.expected(list(prefix), (k + 1) * self.per)[k * self.per:]
                    for j in range(self.per):
                        actual = torch.stack([cache[j] for cache in self.scratch.caches])
                        if not torch.equal(actual, expected[j][rank]):
                            wrong.append((key, salt, rank))
                            break
        finally:
            for client, instance in clients:
                client.unregister(instance)
                client.close()
        return read, wrong

    def store(self, tokens, chunks, salt=None):
        """Stores the right KV of the chunks ``chunks`` (indices) of ``tokens`` for every rank, as an engine would."""
        keys = self.engine.chunk_keys(tokens, salt)
        clients = self._clients()
        try:
            for k in chunks:
                expected = self.engine.model.expected(list(tokens), (k + 1) * self.per)[k * self.per:]
                for rank, (client, instance) in enumerate(clients):
                    for j in range(self.per):
                        for layer, cache in enumerate(self.scratch.caches):
                            cache[j].copy_(expected[j][rank][layer])
                    result = client.store_paged(instance, self.scratch, list(range(self.per)), [keys[k]], salt=salt)
                    if not result.ok:
                        raise AssertionError("storing chunk %d for rank %d: %s" % (k, rank, result))
        finally:
            for client, instance in clients:
                client.unregister(instance)
                client.close()


def main():
    directory, mode, tokens = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    engine = Engine(directory)
    engine.add("r", tokens)
    engine.run()
    worker = engine.workers[0]
    print(json.dumps({"first_computed": engine.first_computed["r"], "checked_blocks": engine.checked_blocks,
                      "mismatched_blocks": engine.mismatched_blocks, "invalid": len(engine.invalid),
                      "worker": worker.stats, "scheduler": engine.connector.stats, "mode": mode,
                      "model_name": worker.model_name, "free_blocks": engine.free_blocks(),
                      "num_blocks": engine.num_blocks}), flush=True)
    engine.close()


if __name__ == "__main__":
    main()
