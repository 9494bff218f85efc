"""KV tensors through kvstash next to the copy limit of the same bytes, in one process and one run.

    python3 clients/python/bench_tensors.py --device cuda --json      # GPU worker (pool pinned with CUDA)
    python3 clients/python/bench_tensors.py --device cpu               # the same on CPU tensors

For each model shape (Llama-3.1-8B: 32 layers x 8 KV heads x 128, bf16; a 70B shape: 80 layers x 8 x 128;
an MLA shape: 61 layers x 576) and 256-token chunks it measures, best of ``--rounds``:
- the baseline: on CUDA, ``copy_`` between GPU tensors and ``pin_memory=True`` host buffers (the PCIe
  limit) and between GPU tensors and ordinary process memory; on the CPU, ``copy_`` between ordinary tensors;
- contiguous ``store_tensors`` / ``retrieve_tensors`` of chunk tensors (PREPARE and COMMIT included);
- paged ``store_paged`` / ``retrieve_paged`` from and into a vLLM-style paged cache (16-token blocks,
  block ids shuffled, so every chunk is gathered from scattered blocks and scattered back elsewhere), in the
  FlashAttention layout ``[2, blocks, 16, heads, head]`` (MLA: ``[blocks, 16, 576]``) and in vLLM 0.33's
  ``[blocks, heads, 16, 2 * head]`` (``paged_heads_*``), the layout the vLLM connector moves;
- on CUDA, the first shape's contiguous store/retrieve before the pool is registered with CUDA, and the
  registration time of the whole pool.
Every retrieved chunk is compared with its source (``mismatches``). Starts its own server unless ``--dir``
names a running one (``KVSTASH_JAR`` / ``JAVA_HOME`` or ``java`` on the PATH choose the server).
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import kvstash                                                      # noqa: E402

MIB = 1 << 20
SEGMENT_BYTES = 1 << 30                 # the pool's segment (docs/PROTOCOL.md §3.2)
CHUNK_TOKENS = 256
BLOCK_SIZE = 16
SHAPES = {                       # name: (layers, kv heads, head size, mla)
    "llama-3.1-8b": (32, 8, 128, False),
    "70b": (80, 8, 128, False),
    "mla": (61, 1, 576, True),
}


def chunk_bytes(shape):
    layers, heads, head, mla = shape
    return (1 if mla else 2) * layers * CHUNK_TOKENS * heads * head * 2


def gbps(nbytes, seconds):
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


class Timer:
    """Wall time of a block that ends with every device copy finished."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def time(self, fn):
        self.sync()
        start = time.perf_counter()
        result = fn()
        self.sync()
        return time.perf_counter() - start, result


def start_server(directory, pool_bytes, slot_bytes):
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    jar = os.environ.get("KVSTASH_JAR") or os.path.join(REPO, "server", "target", "kvstash.jar")
    if not os.path.exists(jar):
        raise SystemExit("bench_tensors: no server jar at %s (build it with ./kvstash --help, or set KVSTASH_JAR)"
                         % jar)
    command = [java, "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED", "-jar", jar, "serve",
               "--dir", directory, "--pool-size", str(pool_bytes), "--slot-bytes", str(slot_bytes),
               "--chunk-tokens", str(CHUNK_TOKENS)]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    lines = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "ready" in line:
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return process
    process.kill()
    raise SystemExit("bench_tensors: the server did not start:\n" + "".join(lines[-20:]))


def stop_server(process, directory):
    if process is None:
        return
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
    shutil.rmtree(directory, ignore_errors=True)


def baselines(torch, timer, device, src, rounds):
    """Best-of-rounds GB/s of the same bytes without kvstash: (d2h, h2d) into pinned host buffers and into
    ordinary memory on CUDA; on the CPU a plain copy_ between ordinary tensors both ways."""
    n = src.shape[0]
    nbytes = src.numel() * src.element_size()
    out = {}
    kinds = (("pinned", True), ("pageable", False)) if device == "cuda" else (("plain", False),)
    for name, pinned in kinds:
        host = torch.empty(src.shape, dtype=src.dtype, pin_memory=pinned)
        host.view(torch.uint8).fill_(1)                                # touch every page once
        back = torch.empty_like(src)
        d2h = h2d = 0.0
        for _ in range(rounds + 1):                                     # the first round warms up
            t_out, _ = timer.time(lambda host=host: [host[k].copy_(src[k], non_blocking=True) for k in range(n)])
            t_in, _ = timer.time(lambda host=host, back=back: [back[k].copy_(host[k], non_blocking=True)
                                                        for k in range(n)])
            d2h, h2d = max(d2h, gbps(nbytes, t_out)), max(h2d, gbps(nbytes, t_in))
        out[name] = (d2h, h2d)
        del host, back
    return out


def contiguous(torch, timer, c, instance, src, rounds, key_base):
    """Best-of-rounds store_tensors / retrieve_tensors GB/s of ``src`` (one chunk per row) and mismatches."""
    n = src.shape[0]
    nbytes = src.numel() * src.element_size()
    out = torch.empty_like(src)
    store = retrieve = 0.0
    mismatches = 0
    for r in range(rounds + 1):
        keys = [(key_base + r, k) for k in range(n)]
        c.clear()
        out.zero_()
        t_store, stored = timer.time(lambda keys=keys: c.store_tensors(instance, src, keys))
        if not stored.ok or len(stored.done) != n:
            raise RuntimeError("store_tensors: %r" % stored)
        t_ret, got = timer.time(lambda keys=keys: c.retrieve_tensors(instance, out, keys))
        if not got.ok or len(got.done) != n:
            raise RuntimeError("retrieve_tensors: %r" % got)
        mismatches += sum(0 if torch.equal(out[k].view(torch.uint8), src[k].view(torch.uint8)) else 1
                          for k in range(n))
        if r:
            store, retrieve = max(store, gbps(nbytes, t_store)), max(retrieve, gbps(nbytes, t_ret))
    c.clear()
    return store, retrieve, mismatches


def paged(torch, timer, c, instance, model, shape, n_chunks, device, rounds, key_base, kind):
    """Best-of-rounds store_paged / retrieve_paged GB/s through vLLM-style paged caches and mismatches."""
    layers, heads, head, mla = shape
    per_chunk = CHUNK_TOKENS // BLOCK_SIZE
    blocks = n_chunks * per_chunk + 7
    cache_shape = {"mla": (blocks, BLOCK_SIZE, head), "kv_blocks": (2, blocks, BLOCK_SIZE, heads, head),
                   "blocks_heads": (blocks, heads, BLOCK_SIZE, 2 * head)}[kind]
    gen = torch.Generator(device=device).manual_seed(7)
    source = [torch.randn(cache_shape, dtype=torch.bfloat16, device=device, generator=gen) for _ in range(layers)]
    target = [torch.zeros(cache_shape, dtype=torch.bfloat16, device=device) for _ in range(layers)]
    src_kv, dst_kv = kvstash.PagedKV(source, kind), kvstash.PagedKV(target, kind)
    r = c.register(instance, src_kv.layout(model))
    if not r.ok:
        raise RuntimeError("register: %r" % r)
    nbytes = n_chunks * r.chunk_bytes
    store = retrieve = 0.0
    mismatches = 0
    for rnd in range(rounds + 1):
        order = torch.randperm(blocks, device="cpu")
        table_in = order[:n_chunks * per_chunk]
        table_out = torch.randperm(blocks, device="cpu")[:n_chunks * per_chunk]
        keys = [(key_base + rnd, k) for k in range(n_chunks)]
        c.clear()
        t_store, stored = timer.time(lambda paged=src_kv, table=table_in, keys=keys:
                                     c.store_paged(instance, paged, table, keys))
        if not stored.ok or len(stored.done) != n_chunks:
            raise RuntimeError("store_paged: %r" % stored)
        t_ret, got = timer.time(lambda paged=dst_kv, table=table_out, keys=keys:
                                 c.retrieve_paged(instance, paged, table, keys))
        if not got.ok or len(got.done) != n_chunks:
            raise RuntimeError("retrieve_paged: %r" % got)
        a_ids, b_ids = table_in.to(device), table_out.to(device)
        for layer in range(layers):
            dim = 1 if kind == "kv_blocks" else 0
            a = source[layer].index_select(dim, a_ids).view(torch.int16)
            b = target[layer].index_select(dim, b_ids).view(torch.int16)
            if not torch.equal(a, b):
                per = (a != b).reshape(a.shape[0], n_chunks, -1) if kind == "kv_blocks" else \
                    (a != b).reshape(n_chunks, -1)
                bad = per.any(-1).any(0) if kind == "kv_blocks" else per.any(-1)
                mismatches += int(bad.sum().item())
        if rnd:
            store, retrieve = max(store, gbps(nbytes, t_store)), max(retrieve, gbps(nbytes, t_ret))
    c.clear()
    del source, target, src_kv, dst_kv
    return store, retrieve, mismatches


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help="where the KV tensors live (default: cuda when available, else cpu)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--dir", help="directory of a running server (its slots must hold the largest chunk)")
    parser.add_argument("--gib", type=float, default=None,
                        help="bytes per shape and direction, GiB (default: 3 on cuda, 0.5 on cpu)")
    parser.add_argument("--max-chunks", type=int, default=96, help="most chunks per shape (default 96)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds, best reported (default 3)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch intra-op threads (default: torch's own choice)")
    parser.add_argument("--base-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="where to make the server's directory when starting one (default /dev/shm)")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated, of: " + ", ".join(SHAPES))
    args = parser.parse_args()

    torch = kvstash.tensors.torch_module()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_tensors: --device cuda but torch sees no CUDA device")
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    for s in shapes:
        if s not in SHAPES:
            raise SystemExit("bench_tensors: unknown shape %r (known: %s)" % (s, ", ".join(SHAPES)))
    gib = args.gib if args.gib is not None else (3.0 if device == "cuda" else 0.5)
    largest = max(chunk_bytes(SHAPES[s]) for s in shapes)
    counts = {s: max(2, min(args.max_chunks, int(gib * (1 << 30)) // chunk_bytes(SHAPES[s]))) for s in shapes}
    slots = max(counts.values()) + 2
    per_segment = SEGMENT_BYTES // largest                          # no slot straddles a 1 GiB segment
    pool_bytes = -(-slots // per_segment) * SEGMENT_BYTES

    directory, server = args.dir, None
    if directory is None:
        directory = tempfile.mkdtemp(prefix="kvstash-bench-tensors-", dir=args.base_dir)
        os.rmdir(directory)                                             # the server creates it, 0700
        server = start_server(directory, pool_bytes, largest)
    timer = Timer(torch, device)
    result = {"device": device, "device_name": torch.cuda.get_device_name() if device == "cuda" else
              platform.processor() or platform.machine(), "torch": torch.__version__,
              "chunk_tokens": CHUNK_TOKENS, "block_size": BLOCK_SIZE, "rounds": args.rounds, "shapes": {},
              "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
              "mismatches": 0, "errors": []}
    try:
        with kvstash.connect(directory) as c:
            result["pool_bytes"] = c.pool_data_bytes
            instance = 7000
            first = True
            for name in shapes:
                shape = SHAPES[name]
                layers, heads, head, mla = shape
                n = counts[name]
                row = {"chunks": n, "chunk_bytes": chunk_bytes(shape), "bytes": n * chunk_bytes(shape)}
                result["shapes"][name] = row
                try:
                    instance += 1
                    layout = kvstash.Layout("bench-" + name, layers=layers, hidden=heads * head,
                                            dtype="bfloat16", mla=mla)
                    r = c.register(instance, layout)
                    if not r.ok:
                        raise RuntimeError("register: %r" % r)
                    src = torch.randn((n,) + layout.shape(CHUNK_TOKENS), dtype=torch.bfloat16, device=device)
                    base = baselines(torch, timer, device, src, args.rounds)
                    limit = base["pinned" if device == "cuda" else "plain"]
                    row["pinned_d2h_gbps"], row["pinned_h2d_gbps"] = limit
                    if device == "cuda":
                        row["pageable_d2h_gbps"], row["pageable_h2d_gbps"] = base["pageable"]
                    if device == "cuda" and first:
                        first = False
                        try:
                            s, t, mm = contiguous(torch, timer, c, instance, src, 1, 1 << 40)
                            row["unpinned_store_gbps"], row["unpinned_retrieve_gbps"] = s, t
                            result["mismatches"] += mm
                        except Exception as ex:
                            result["errors"].append("%s unpinned: %s: %s" % (name, type(ex).__name__, ex))
                        try:
                            info = c.pin_pool()
                            result["register_s"] = info.seconds
                            result["register_s_per_gib"] = info.s_per_gib
                            result["registered_bytes"] = info.bytes
                        except kvstash.CudaUnavailableError as ex:      # measure on, unpinned, and say so
                            result["errors"].append("pin_pool: %s" % ex)
                    s, t, mm = contiguous(torch, timer, c, instance, src, args.rounds, 2 << 40)
                    row["store_gbps"], row["retrieve_gbps"] = s, t
                    result["mismatches"] += mm
                    del src
                    instance += 1
                    s, t, mm = paged(torch, timer, c, instance, "bench-paged-" + name, shape, n, device,
                                     args.rounds, 3 << 40, "mla" if mla else "kv_blocks")
                    row["paged_store_gbps"], row["paged_retrieve_gbps"] = s, t
                    result["mismatches"] += mm
                    if not mla:             # vLLM 0.33's layout: [blocks, heads, block, 2 * head] (the connector's)
                        instance += 1
                        s, t, mm = paged(torch, timer, c, instance, "bench-heads-" + name, shape, n, device,
                                         args.rounds, 4 << 40, "blocks_heads")
                        row["paged_heads_store_gbps"], row["paged_heads_retrieve_gbps"] = s, t
                        row["paged_heads_store_vs_pinned"] = s / limit[0]
                        row["paged_heads_retrieve_vs_pinned"] = t / limit[1]
                        result["mismatches"] += mm
                    row["store_vs_pinned"] = row["store_gbps"] / limit[0]
                    row["retrieve_vs_pinned"] = row["retrieve_gbps"] / limit[1]
                    row["paged_store_vs_pinned"] = row["paged_store_gbps"] / limit[0]
                    row["paged_retrieve_vs_pinned"] = row["paged_retrieve_gbps"] / limit[1]
                except Exception as ex:                                 # keep the other shapes' figures
                    result["errors"].append("%s: %s: %s" % (name, type(ex).__name__, ex))
                finally:
                    if device == "cuda":
                        torch.cuda.empty_cache()
        if device == "cuda" and "register_s" in result:
            # The same registration on a mapping that was not populated at connect (pretouch=False).
            try:
                with kvstash.connect(directory, pretouch=False) as cold:
                    info = cold.pin_pool()
                    result["register_unpopulated_s_per_gib"] = info.s_per_gib
            except Exception as ex:
                result["errors"].append("pin_pool without MAP_POPULATE: %s" % ex)
    finally:
        stop_server(server, directory)

    rows = [r for r in result["shapes"].values() if "store_vs_pinned" in r]
    if rows:                                                            # the headline: the first shape
        head = rows[0]
        for key in ("pinned_d2h_gbps", "pinned_h2d_gbps", "store_gbps", "retrieve_gbps", "store_vs_pinned",
                    "retrieve_vs_pinned", "paged_store_vs_pinned", "paged_retrieve_vs_pinned"):
            result[key] = head[key]
        for key in ("store_vs_pinned", "retrieve_vs_pinned", "paged_store_vs_pinned", "paged_retrieve_vs_pinned",
                    "paged_heads_store_vs_pinned", "paged_heads_retrieve_vs_pinned"):
            values = [r[key] for r in rows if key in r]
            if values:
                result["min_" + key] = min(values)
    if args.json:
        print(json.dumps(result, indent=1, sort_keys=True))
    else:
        print_tables(result)
    return 1 if result["errors"] or result["mismatches"] else 0


def print_tables(result):
    limit = "pinned copy" if result["device"] == "cuda" else "plain copy_"
    print("device %s (%s), torch %s, %d-token chunks, %d-token blocks, best of %d"
          % (result["device"], result["device_name"], result["torch"], result["chunk_tokens"],
             result["block_size"], result["rounds"]))
    if "register_s" in result:
        print("pool registered with CUDA: %.2f GiB in %.3f s (%.3f s per GiB)"
              % (result["registered_bytes"] / (1 << 30), result["register_s"], result["register_s_per_gib"]))
    print()
    print("| shape | chunk | %s out / in GB/s | store / retrieve GB/s | x %s | paged store / retrieve GB/s "
          "| x %s |" % (limit, limit, limit))
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in result["shapes"].items():
        if "store_vs_pinned" not in r:
            continue
        print("| %s | %.1f MiB | %.1f / %.1f | %.1f / %.1f | %.2f / %.2f | %.1f / %.1f | %.2f / %.2f |"
              % (name, r["chunk_bytes"] / MIB, r["pinned_d2h_gbps"], r["pinned_h2d_gbps"], r["store_gbps"],
                 r["retrieve_gbps"], r["store_vs_pinned"], r["retrieve_vs_pinned"], r["paged_store_gbps"],
                 r["paged_retrieve_gbps"], r["paged_store_vs_pinned"], r["paged_retrieve_vs_pinned"]))
    heads = [(name, r) for name, r in result["shapes"].items() if "paged_heads_store_gbps" in r]
    if heads:
        print()
        print("| shape | paged, vLLM 0.33 layout [blocks, heads, 16, 2 * head]: store / retrieve GB/s | x %s |"
              % limit)
        print("|---|---:|---:|")
        for name, r in heads:
            print("| %s | %.1f / %.1f | %.2f / %.2f |" % (name, r["paged_heads_store_gbps"],
                                                         r["paged_heads_retrieve_gbps"],
                                                         r["paged_heads_store_vs_pinned"],
                                                         r["paged_heads_retrieve_vs_pinned"]))
    first = next(iter(result["shapes"].values()), {})
    if "unpinned_store_gbps" in first:
        print()
        print("before pin_pool (pool as mapped): store %.1f / retrieve %.1f GB/s; pageable copy %.1f / %.1f GB/s"
              % (first["unpinned_store_gbps"], first["unpinned_retrieve_gbps"], first["pageable_d2h_gbps"],
                 first["pageable_h2d_gbps"]))
    print("mismatches: %d" % result["mismatches"])
    for error in result["errors"]:
        print("error: " + error)


if __name__ == "__main__":
    sys.exit(main())
