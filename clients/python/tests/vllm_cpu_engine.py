"""One real vLLM engine process (vLLM's CPU build), driven line by line, for the end-to-end tests.

``python vllm_cpu_engine.py SPEC_JSON`` builds ``vllm.LLM`` with the engine core in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so the connector's counters can be read) from the spec:

- ``model``: a checkpoint directory (``tiny_llama.build``);
- ``kvstash``: a kvstash server's directory, or null for an engine without an external cache;
- ``extra``: more ``kv_connector_extra_config`` (e.g. ``checkpoint``);
- ``kv_gib``: the engine's own KV cache (``VLLM_CPU_KVCACHE_SPACE``), 1 by default.

It then reads one JSON command per line on standard input and answers each with one line on standard output that
starts with ``ENGINE `` (vLLM logs on the same streams; the tests read only those lines):

- ``{"op": "generate", "prompts": [...], "max_tokens": N, "logprobs": K}``: greedy; per prompt the prompt's token
  count, the generated tokens, the top-K logprobs of each generated position (``[[token, logprob], ...]``, exact
  floats), vLLM's ``num_cached_tokens`` and the seconds the call took;
- ``{"op": "stats"}``: the connector's counters of both roles and vLLM's prefix-cache metrics;
- ``{"op": "reset_prefix_cache"}``: drops the engine's own prefix cache, so the next prompts ask kvstash;
- ``{"op": "evict_before_next_load"}``: the next load the workers start finds its chunks gone (an admin CLEAR
  between the scheduler's lookup and the workers' load, as an eviction by another engine would be);
- ``{"op": "quit"}``.

The connector is ``EvictingConnector``, ``KvStashConnector`` with that one hook (and nothing else changed).
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import kvstash                                                        # noqa: E402
from kvstash.vllm import KvStashConnector                             # noqa: E402

_evict_next_load = False


class EvictingConnector(KvStashConnector):
    """``KvStashConnector`` whose workers can be told to find the chunks of their next load evicted."""

    def start_load_kv(self, forward_context, **kwargs):
        global _evict_next_load
        meta = self._connector_metadata
        if _evict_next_load and meta is not None and meta.loads:
            _evict_next_load = False
            with kvstash.connect(self.worker.directory) as admin:
                admin.clear()
        return super().start_load_kv(forward_context, **kwargs)


def _answer(value):
    sys.stdout.write("ENGINE " + json.dumps(value) + "\n")
    sys.stdout.flush()


def main():
    spec = json.loads(sys.argv[1])
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(spec.get("kv_gib", 1))
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    from vllm.distributed.kv_transfer import get_kv_transfer_group, has_kv_transfer_group

    transfer = None
    if spec.get("kvstash"):
        extra = {"dir": spec["kvstash"], "log_interval_s": 0}
        extra.update(spec.get("extra", {}))
        transfer = KVTransferConfig(kv_connector="EvictingConnector", kv_connector_module_path="vllm_cpu_engine",
                                    kv_role="kv_both", kv_load_failure_policy="recompute",
                                    kv_connector_extra_config=extra)
    llm = LLM(model=spec["model"], enforce_eager=True, max_model_len=spec.get("max_model_len", 8192), seed=0,
              disable_log_stats=False, kv_transfer_config=transfer)
    _answer({"ready": True})
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "generate":
            params = SamplingParams(max_tokens=command.get("max_tokens", 8), temperature=0.0,
                                    logprobs=command.get("logprobs", 5))
            results = []
            for prompt in command["prompts"]:
                start = time.monotonic()
                output = llm.generate([prompt], params, use_tqdm=False)[0]
                seconds = time.monotonic() - start
                completion = output.outputs[0]
                results.append({
                    "prompt_len": len(output.prompt_token_ids), "tokens": list(completion.token_ids),
                    "logprobs": [sorted([token, entry.logprob] for token, entry in position.items())
                                 for position in completion.logprobs],
                    "cached": output.num_cached_tokens, "seconds": seconds})
            _answer(results)
        elif op == "stats":
            stats = {"metrics": {m.name: m.value for m in llm.get_metrics()
                                 if "prefix_cache" in m.name and hasattr(m, "value")}}
            if has_kv_transfer_group():
                stats["worker"] = dict(get_kv_transfer_group().stats)
                stats["scheduler"] = dict(llm.llm_engine.engine_core.engine_core.scheduler.connector.stats)
            _answer(stats)
        elif op == "reset_prefix_cache":
            _answer({"reset": llm.reset_prefix_cache()})
        elif op == "evict_before_next_load":
            # vLLM imported this file again as the module "vllm_cpu_engine" for the connector class: its flag is that
            # module's, not this script's (__main__).
            import vllm_cpu_engine
            vllm_cpu_engine._evict_next_load = True
            _answer({"armed": True})
        elif op == "quit":
            _answer({"quit": True})
            break
        else:
            _answer({"error": "unknown op " + op})


if __name__ == "__main__":
    main()
