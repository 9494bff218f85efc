"""The engine process of ``bench_engine.py``: one configuration in a fresh process. It builds a vLLM engine (vLLM's
CPU build) with the configuration's connector, runs the workload the spec file names, and writes the result file
(figures, or the exact error and where it was raised). Started by ``bench_engine.py`` as
``python bench_engine_child.py SPEC.json``; not meant to be run by hand.
"""

import json
import os
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def _where(ex) -> str:
    """The innermost frame of an exception's traceback, as ``path:line in function`` (site-packages trimmed)."""
    frames = traceback.extract_tb(ex.__traceback__)
    if not frames:
        return "?"
    frame = frames[-1]
    path = frame.filename
    for marker in ("site-packages/", "clients/python/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return "%s:%d in %s" % (path, frame.lineno, frame.name)


def _error(ex) -> dict:
    text = str(ex).strip().splitlines()
    cause = ex.__cause__ or ex.__context__
    error = {"error": "%s: %s" % (type(ex).__name__, text[0] if text else ""), "where": _where(ex)}
    if cause is not None:
        lines = str(cause).strip().splitlines()
        error["cause"] = "%s: %s" % (type(cause).__name__, lines[0] if lines else "")
        error["cause_where"] = _where(cause)
    return error


def _metrics(llm) -> dict:
    out = {}
    for metric in llm.get_metrics():
        name = metric.name
        if hasattr(metric, "value") and ("prefix_cache" in name or "offload" in name or "kv_" in name
                                         or "connector" in name or "lmcache" in name):
            out[name] = out.get(name, 0) + metric.value
    return out


def _delta(after, before) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items()}


def _connector_stats(llm) -> dict:
    stats = {}
    try:
        from vllm.distributed.kv_transfer import get_kv_transfer_group, has_kv_transfer_group
        if has_kv_transfer_group():
            stats["worker"] = dict(getattr(get_kv_transfer_group(), "stats", {}) or {})
        connector = llm.llm_engine.engine_core.engine_core.scheduler.connector
        if connector is not None:
            stats["scheduler"] = dict(getattr(connector, "stats", {}) or {})
    except Exception as ex:                     # counters are extra: never lose the figures over them
        stats["error"] = _error(ex)
    return stats


def summary(values):
    if not values:
        return {}
    ordered = sorted(values)

    def pick(q):
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return {"n": len(values), "mean": statistics.fmean(values), "p50": statistics.median(values), "p90": pick(0.9),
            "p99": pick(0.99), "max": ordered[-1], "sum": sum(values)}


def child(spec_path):
    """One configuration in this process: builds the engine, runs the workload, writes the result file."""
    with open(spec_path) as f:
        spec = json.load(f)
    result = {"peer": spec["peer"], "pid": os.getpid()}
    try:
        _child_run(spec, result)
    except BaseException as ex:                 # the configuration did not run: say exactly why
        result.update(_error(ex))
        result["traceback"] = traceback.format_exc().splitlines()[-40:]
    with open(spec["out"], "w") as f:
        json.dump(result, f)
    # vLLM's in-process engine and a connector's threads may keep the interpreter up: leave at once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _child_run(spec, result):
    sys.path.insert(0, HERE)
    started = time.monotonic()
    import bench_engine_connector
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig

    transfer = KVTransferConfig(**spec["transfer"]) if spec["transfer"] else None
    result["vllm_version"] = __import__("vllm").__version__
    llm = LLM(model=spec["model"], enforce_eager=True, max_model_len=spec["max_model_len"], seed=0,
              disable_log_stats=False, kv_cache_memory_bytes=spec["engine_kv_bytes"], kv_transfer_config=transfer)
    config = llm.llm_engine.vllm_config
    result["engine"] = {"start_s": time.monotonic() - started, "block_size": config.cache_config.block_size,
                        "engine_kv_blocks": config.cache_config.num_gpu_blocks,
                        "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
                        "torch_threads": __import__("torch").get_num_threads()}
    engine = llm.llm_engine
    params = SamplingParams(max_tokens=spec["output_tokens"], temperature=0.0, ignore_eos=True)
    step_s = []

    def send(request_id, prompt):
        start = time.perf_counter()
        engine.add_request(request_id, prompt, params)
        first = None
        final = None
        while engine.has_unfinished_requests():
            t = time.perf_counter()
            outputs = engine.step()
            step_s.append(time.perf_counter() - t)
            for output in outputs:
                if output.request_id != request_id:
                    continue
                if first is None and output.outputs and output.outputs[0].token_ids:
                    first = time.perf_counter() - start
                if output.finished:
                    final = output
        total = time.perf_counter() - start
        return {"ttft_s": first, "e2e_s": total, "prompt_tokens": len(final.prompt_token_ids),
                "output_tokens": list(final.outputs[0].token_ids), "cached_tokens": final.num_cached_tokens}

    result["timing_overhead_us_per_call"] = bench_engine_connector.overhead_s() * 1e6
    for i, prompt in enumerate(spec["warmup"]):
        send("warmup-%d" % i, prompt)
    bench_engine_connector.reset()
    step_s.clear()
    before = _metrics(llm)
    stats_before = _connector_stats(llm)
    cpu_before = os.times()
    requests = []
    phases = []
    t0 = time.perf_counter()
    for r, prompts in enumerate(spec["rounds"]):
        round_before = _metrics(llm)
        round_start = time.perf_counter()
        for item in prompts:
            record = send("r%d-d%d" % (r, item["doc"]), item["prompt"])
            record.update(doc=item["doc"], round=r)
            requests.append(record)
        phases.append({"round": r, "seconds": time.perf_counter() - round_start,
                       "metrics": _delta(_metrics(llm), round_before)})
    wall = time.perf_counter() - t0
    cpu_after = os.times()
    result["wall_s"] = wall
    result["cpu_s"] = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    result["requests"] = requests
    result["rounds"] = phases
    result["metrics"] = _delta(_metrics(llm), before)
    result["connector"] = _connector_stats(llm)
    result["connector_before"] = stats_before
    result["steps"] = {"engine": summary(step_s)}
    for role, timing in bench_engine_connector.TIMINGS.items():
        if timing["steps"] or timing["methods"]:
            result["steps"][role] = summary(timing["steps"])
            by_kind = {}
            for seconds, kind in zip(timing["steps"], timing["kinds"]):
                by_kind.setdefault(kind, []).append(seconds)
            result["steps"][role + "_by_kind"] = {kind: summary(v) for kind, v in sorted(by_kind.items())}
            result["steps"][role + "_methods"] = {name: {"calls": c, "seconds": s}
                                                   for name, (c, s) in sorted(timing["methods"].items())}


if __name__ == "__main__":
    child(sys.argv[1])
