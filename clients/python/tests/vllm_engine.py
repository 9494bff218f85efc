"""A vLLM engine without a model, for the connector tests.

vLLM's real ``Scheduler``, ``Request`` and block hasher on a CPU device config (a small Llama config written
to a temporary directory: no hub, no weights), one ``KvStashConnector`` worker per tensor-parallel rank with
CPU caches in vLLM's own layout, and a stand-in forward pass that writes each scheduled token's K and V as a
function of (token, position, layer, rank), so that every loaded block can be checked bit for bit.

Run as a script it plays one engine process and prints one JSON line (the two-engine test):
``python vllm_engine.py DIR store|load TOKENS_JSON``.
"""

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
from vllm.v1.core.sched.scheduler import Scheduler                    # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec  # noqa: E402
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput     # noqa: E402
from vllm.v1.request import Request                                   # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager         # noqa: E402

from kvstash.vllm import KvStashConnector                             # noqa: E402

BLOCK = 16
LAYERS, HEADS, HEAD = 2, 2, 16
MODEL_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": HEADS, "head_dim": HEAD,
                "num_hidden_layers": LAYERS, "vocab_size": 32000, "max_position_embeddings": 8192,
                "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"}
_model_dir = None


def model_dir():
    """A directory holding a small Llama config.json (vLLM reads the architecture from it, nothing else)."""
    global _model_dir
    if _model_dir is None:
        _model_dir = tempfile.mkdtemp(prefix="kvstash-vllm-model-")
        with open(os.path.join(_model_dir, "config.json"), "w") as f:
            json.dump(MODEL_CONFIG, f)
    return _model_dir


def vllm_config(directory, role="kv_both", tp=1, rank=0, extra=None, batched_tokens=8192):
    # The model directory is a fresh temporary one per process: name the model, as engines that share
    # a store serve the same model name.
    extra_config = {"dir": directory, "timeout_s": 2.0, "reconnect_s": 0.2, "log_interval_s": 0,
                    "model": "kvstash-test/tiny-llama"}
    extra_config.update(extra or {})
    return VllmConfig(
        model_config=ModelConfig(model=model_dir(), skip_tokenizer_init=True, dtype="bfloat16", max_model_len=8192),
        scheduler_config=SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=batched_tokens, max_model_len=8192,
                                         is_encoder_decoder=False, enable_chunked_prefill=True),
        cache_config=CacheConfig(block_size=BLOCK, cache_dtype="auto", enable_prefix_caching=True),
        parallel_config=ParallelConfig(tensor_parallel_size=tp, rank=rank),
        kv_transfer_config=KVTransferConfig(kv_connector="KvStashConnector", kv_connector_module_path="kvstash.vllm",
                                            kv_role=role, kv_load_failure_policy="recompute",
                                            kv_connector_extra_config=extra_config),
        device_config=DeviceConfig("cpu"))


def kv_value(token, position, layer, kv, rank):
    """The stand-in model's K (kv=0) or V (kv=1) of one token: a deterministic bf16 vector."""
    base = float((token * 131 + position * 31 + layer * 7 + kv * 3 + rank * 5) % 997) / 8.0
    return (torch.arange(HEADS * HEAD, dtype=torch.float32) / 64.0 + base).to(torch.bfloat16).view(HEADS, HEAD)


class Engine:
    """One engine: a scheduler and one worker connector per tensor-parallel rank (see the module doc)."""

    def __init__(self, directory, role="kv_both", tp=1, num_blocks=512, extra=None, saving_ranks=None,
                 batched_tokens=8192):
        init_none_hash(sha256)
        self.num_blocks = num_blocks
        self.configs = [vllm_config(directory, role, tp, r, extra, batched_tokens) for r in range(tp)]
        config = self.configs[0]
        self.kv_cache_config = KVCacheConfig(
            num_blocks=num_blocks, kv_cache_tensors=[],
            kv_cache_groups=[KVCacheGroupSpec(["layer.%d" % i for i in range(LAYERS)],
                                              FullAttentionSpec(block_size=BLOCK, num_kv_heads=HEADS, head_size=HEAD,
                                                                dtype=torch.bfloat16))])
        config.cache_config.num_gpu_blocks = num_blocks
        self.scheduler = Scheduler(config, self.kv_cache_config, StructuredOutputManager(config), block_size=BLOCK,
                                   log_stats=True)
        self.hasher = get_request_block_hasher(BLOCK, sha256)
        self.workers, self.caches = [], []
        for r in range(tp):
            worker = KvStashConnector(self.configs[r], KVConnectorRole.WORKER, self.kv_cache_config)
            # vLLM 0.33's FlashAttention layout: [num_blocks, kv heads, block size, 2 * head size].
            caches = {"layer.%d" % i: torch.zeros((num_blocks, HEADS, BLOCK, 2 * HEAD), dtype=torch.bfloat16)
                      for i in range(LAYERS)}
            worker.register_kv_caches(caches)
            self.workers.append(worker)
            self.caches.append(list(caches.values()))
        self.saving_ranks = set(range(tp)) if saving_ranks is None else set(saving_ranks)
        self.blocks = {}
        self.requests = {}
        self.first_computed = {}
        self.mismatched_blocks = 0
        self.checked_blocks = 0
        self.invalid = set()

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

    def step(self, before_load=None):
        """One scheduler step: load, check what was loaded, the stand-in forward, save, update."""
        out = self.scheduler.schedule()
        meta = out.kv_connector_metadata
        if before_load is not None:
            before_load(meta)
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
        invalid = set()
        for worker in self.workers:
            worker.bind_connector_metadata(meta)
            worker.start_load_kv(None)
            invalid |= worker.get_block_ids_with_load_errors()
        self.invalid |= invalid
        self._check_loads(meta, invalid)
        starts = {new.req_id: new.num_computed_tokens for new in out.scheduled_new_reqs}
        starts.update(zip(cached.req_ids, cached.num_computed_tokens))
        for req_id, count in out.num_scheduled_tokens.items():
            self._forward(req_id, starts[req_id], count)
        for rank, worker in enumerate(self.workers):
            if rank in self.saving_ranks:
                worker.wait_for_save()
            worker.clear_connector_metadata()
        ids = list(out.num_scheduled_tokens)
        sampled = []
        for req_id in ids:
            request = self.requests[req_id]
            done_prefill = starts[req_id] + out.num_scheduled_tokens[req_id] >= request.num_tokens
            sampled.append([7 + len(request.output_token_ids)] if done_prefill else [])
        mro = ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                                sampled_token_ids=sampled, kv_connector_output=KVConnectorOutput(invalid_block_ids=invalid))
        self.scheduler.update_from_output(out, mro)
        return out, invalid

    def run(self, max_steps=50, before_load=None):
        """Steps until every request has finished."""
        for _ in range(max_steps):
            if not self.scheduler.has_requests():
                return
            self.step(before_load)
            before_load = None
        raise AssertionError("requests still running after %d steps" % max_steps)

    def _forward(self, req_id, start, count):
        request = self.requests[req_id]
        tokens = request.all_token_ids
        for p in range(start, start + count):
            block, offset = self.blocks[req_id][p // BLOCK], p % BLOCK
            for rank, caches in enumerate(self.caches):
                for layer, cache in enumerate(caches):
                    cache[block, :, offset, :HEAD] = kv_value(tokens[p], p, layer, 0, rank)
                    cache[block, :, offset, HEAD:] = kv_value(tokens[p], p, layer, 1, rank)

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
        for rank, caches in enumerate(self.caches):
            for layer, cache in enumerate(caches):
                for offset in range(BLOCK):
                    p = index * BLOCK + offset
                    if not (torch.equal(cache[block, :, offset, :HEAD], kv_value(tokens[p], p, layer, 0, rank)) and
                            torch.equal(cache[block, :, offset, HEAD:], kv_value(tokens[p], p, layer, 1, rank))):
                        return False
        return True

    def request_blocks_match(self, req_id, tokens):
        """Every full block of a finished request's prompt holds the right K and V (after any recompute)."""
        return all(self.block_matches(tokens, i, b) for i, b in enumerate(self.blocks[req_id][:len(tokens) // BLOCK]))

    def free_blocks(self):
        return self.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()

    def close(self):
        for worker in self.workers:
            worker.shutdown()
        self.connector.shutdown()


def main():
    directory, mode, tokens = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    engine = Engine(directory)
    engine.add("r", tokens)
    engine.run()
    worker = engine.workers[0]
    print(json.dumps({"first_computed": engine.first_computed["r"], "checked_blocks": engine.checked_blocks,
                      "mismatched_blocks": engine.mismatched_blocks, "invalid": len(engine.invalid),
                      "worker": worker.stats, "scheduler": engine.connector.stats, "mode": mode,
                      "free_blocks": engine.free_blocks(), "num_blocks": engine.num_blocks}), flush=True)
    engine.close()


if __name__ == "__main__":
    main()
