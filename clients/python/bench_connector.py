"""KV through the vLLM connector next to the client's paged calls and a plain copy, one process, one run.

    python3 clients/python/bench_connector.py [--json] [--chunks 16] [--device cpu|cuda]

A ``KvStashConnector`` worker (vLLM's class, vLLM 0.33's ``[blocks, heads, 16, 2 * head]`` cache layout,
Llama-3.1-8B shape: 32 layers, 8 KV heads x 128, bf16, 256-token chunks) saves ``--chunks`` chunks through
``wait_for_save`` and loads them into other blocks through ``start_load_kv``; beside it the same chunks
through ``store_paged`` / ``retrieve_paged`` and a plain ``copy_`` of the same bytes (best of ``--rounds``).
Every loaded block is compared with its source. Needs vLLM and torch; starts its own server.
"""

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "tests"))

import bench_tensors                                                # noqa: E402

LAYERS, HEADS, HEAD, BLOCK, CHUNK = 32, 8, 128, 16, 256


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm_engine import vllm_config
    from kvstash.vllm import KvStashConnector, KvStashConnectorMetadata, LoadSpec, SaveSpec

    n = CHUNK // BLOCK
    blocks = 2 * args.chunks * n + 1
    chunk_bytes = 2 * LAYERS * CHUNK * HEADS * HEAD * 2
    directory = tempfile.mkdtemp(prefix="kvstash-bench-connector-", dir="/dev/shm")
    os.rmdir(directory)
    server = bench_tensors.start_server(directory, (args.chunks + 4) * chunk_bytes + (64 << 20), chunk_bytes)
    result = {"device": args.device, "chunks": args.chunks, "chunk_bytes": chunk_bytes, "rounds": args.rounds,
              "layout": "[blocks, %d, %d, %d] x %d layers, bf16" % (HEADS, BLOCK, 2 * HEAD, LAYERS)}
    try:
        config = vllm_config(directory, extra={"checkpoint": "bench/llama-3.1-8b-shape"})
        config.cache_config.block_size = BLOCK
        worker = KvStashConnector(config, KVConnectorRole.WORKER, None)
        gen = torch.Generator(device=args.device).manual_seed(3)
        caches = {"layer.%d" % i: torch.randn((blocks, HEADS, BLOCK, 2 * HEAD), dtype=torch.bfloat16,
                                              device=args.device, generator=gen) for i in range(LAYERS)}
        worker.register_kv_caches(caches)
        src_ids = list(range(args.chunks * n))
        dst_ids = list(range(args.chunks * n, 2 * args.chunks * n))
        paged = worker.worker._paged
        client = worker.worker._connection.get()
        timer = bench_tensors.Timer(torch, args.device)
        nbytes = args.chunks * chunk_bytes
        best = {}

        def keep(name, seconds):
            best[name] = max(best.get(name, 0.0), nbytes / seconds / 1e9)

        mismatches = 0
        flat = torch.empty((args.chunks, chunk_bytes), dtype=torch.uint8, device=args.device)
        back = torch.empty_like(flat)
        for rnd in range(args.rounds + 1):
            keys = [(rnd, k) for k in range(args.chunks)]
            client.clear()
            meta = KvStashConnectorMetadata(saves=[SaveSpec("bench", keys, src_ids, None)])
            worker.bind_connector_metadata(meta)
            t_save, _ = timer.time(worker.wait_for_save)
            meta = KvStashConnectorMetadata(loads=[LoadSpec("bench", keys, dst_ids, None)])
            worker.bind_connector_metadata(meta)
            t_load, _ = timer.time(lambda: worker.start_load_kv(None))
            errors = worker.get_block_ids_with_load_errors()
            for cache in caches.values():
                if not torch.equal(cache[src_ids].view(torch.int16), cache[dst_ids].view(torch.int16)):
                    mismatches += 1
            mismatches += len(errors)
            keys2 = [(rnd + 100, k) for k in range(args.chunks)]
            t_store, stored = timer.time(lambda k=keys2: client.store_paged(worker.worker._instance, paged, src_ids, k))
            t_ret, got = timer.time(lambda k=keys2: client.retrieve_paged(worker.worker._instance, paged, dst_ids, k))
            assert stored.ok and got.ok, (stored, got)
            t_out, _ = timer.time(lambda: back.copy_(flat))
            t_in, _ = timer.time(lambda: flat.copy_(back))
            if rnd:
                keep("connector_save_gbps", t_save)
                keep("connector_load_gbps", t_load)
                keep("paged_store_gbps", t_store)
                keep("paged_retrieve_gbps", t_ret)
                keep("copy_out_gbps", t_out)
                keep("copy_in_gbps", t_in)
        result.update(best)
        result["mismatches"] = mismatches
        result["save_vs_paged_store"] = best["connector_save_gbps"] / best["paged_store_gbps"]
        result["load_vs_paged_retrieve"] = best["connector_load_gbps"] / best["paged_retrieve_gbps"]
        result["save_vs_copy"] = best["connector_save_gbps"] / best["copy_out_gbps"]
        result["load_vs_copy"] = best["connector_load_gbps"] / best["copy_in_gbps"]
        result["worker_stats"] = dict(worker.stats)
        worker.shutdown()
    finally:
        bench_tensors.stop_server(server, directory)
    if args.json:
        print(json.dumps(result, indent=1, sort_keys=True))
    else:
        print("%d chunks of %.0f MiB (%s), best of %d, %s" % (args.chunks, chunk_bytes / (1 << 20), result["layout"],
                                                              args.rounds, args.device))
        print("| path | out (store/save) GB/s | in (retrieve/load) GB/s |")
        print("|---|---:|---:|")
        print("| plain copy_ of the same bytes | %.2f | %.2f |" % (result["copy_out_gbps"], result["copy_in_gbps"]))
        print("| client store_paged / retrieve_paged | %.2f | %.2f |" % (result["paged_store_gbps"],
                                                                       result["paged_retrieve_gbps"]))
        print("| connector wait_for_save / start_load_kv | %.2f | %.2f |" % (result["connector_save_gbps"],
                                                                           result["connector_load_gbps"]))
        print("mismatches: %d" % mismatches)
    return 1 if result.get("mismatches") else 0


if __name__ == "__main__":
    sys.exit(main())
