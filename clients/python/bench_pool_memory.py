"""Pool memory on demand against a pre-faulted pool, side by side in one run: the memory each holds after start and
after the pool is filled, the client's minor page faults per store, and store latency.

    python3 clients/python/bench_pool_memory.py                  # 1 GiB pool, 256 KiB chunks, 4096 stores
    python3 clients/python/bench_pool_memory.py --rounds 2       # each mode twice, alternating order

Each round starts a server per mode (the testkit's TestServer: a foreground-prepared pool, or the pool committed on
demand with a 64 MiB headroom), connects one Python client (it pre-touches the pool, or only the committed prefix),
(a third mode: a client that touches nothing, its chunk copies taking the faults), and fills the pool with one-chunk
stores (PREPARE_STORE, write_chunk, COMMIT_STORE), every chunk different. Faults
are the client's ru_minflt around each store; memory is RssShmem from /proc and the server's pool_bytes_committed.
Prints a Markdown table.
"""

import argparse
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "tests"))

import kvstash                                                    # noqa: E402
from kvstash import Status                                        # noqa: E402

MIB = 1 << 20
CHUNK_TOKENS = 16
LAYOUT = kvstash.Layout("pool-memory", layers=8, hidden=512, dtype="float16")     # 256 KiB chunks


def rss_shmem(pid="self"):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("RssShmem:"):
                return int(line.split()[1]) * 1024
    return 0


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100.0 * len(ordered)))]


def run(mode, pool_bytes, headroom):
    from support import Server
    started = time.perf_counter()
    server = Server(pool_bytes=pool_bytes, chunk_tokens=CHUNK_TOKENS,
                    on_demand_headroom=None if mode == "pre-faulted" else headroom).start()
    ready_s = time.perf_counter() - started
    try:
        result = {"mode": mode, "ready_s": ready_s}
        before = rss_shmem()
        with kvstash.connect(server.directory, pretouch=mode != "on-demand, no client touch") as client:
            result["client_after_connect"] = rss_shmem() - before
            result["server_after_start"] = rss_shmem(server.pid)
            result["committed_after_start"] = client.counters()["pool_bytes_committed"]
            assert client.register(1, LAYOUT).ok
            chunk = 2 * 8 * CHUNK_TOKENS * 512 * 2
            count = pool_bytes // chunk
            data = bytearray(os.urandom(chunk))
            faults, times = [], []
            for k in range(count):
                data[:8] = k.to_bytes(8, "little")
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                t0 = time.perf_counter()
                prepared = client.prepare_store(1, [(9, k)])
                assert prepared.status == Status.OK, prepared
                assert client.write_chunk(prepared, 0, data) == Status.OK
                assert client.commit_store(1, prepared).status == Status.OK
                times.append(time.perf_counter() - t0)
                faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
                if k + 1 == count // 4:
                    client.ping()
                    result["server_quarter"] = rss_shmem(server.pid)
                    result["committed_quarter"] = client.counters()["pool_bytes_committed"]
            client.ping()
            counters = client.counters()
            result.update(stores=count, faults_per_store=statistics.mean(faults),
                          stores_with_faults=sum(1 for f in faults if f) / count,
                          p50_us=percentile(times, 50) * 1e6, p99_us=percentile(times, 99) * 1e6,
                          committed_after_fill=counters["pool_bytes_committed"],
                          commit_misses=counters["pool_commit_misses"], evictions=counters["evictions"],
                          server_after_fill=rss_shmem(server.pid), client_after_fill=rss_shmem() - before)
        return result
    finally:
        server.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool-mib", type=int, default=1024)
    parser.add_argument("--headroom-mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    results = []
    for r in range(args.rounds):
        modes = ("pre-faulted", "on-demand", "on-demand, no client touch")
        modes = modes if r % 2 == 0 else modes[::-1]
        for mode in modes:
            results.append(run(mode, args.pool_mib * MIB, args.headroom_mib * MIB))
    print("| mode | ready s | server RssShmem / committed after start (MiB) | client RssShmem after connect (MiB) | "
          "server RssShmem / committed after %d stores (MiB) | after %d (full) | faults per store | "
          "stores that faulted | store p50 us | store p99 us | commit misses | evictions |"
          % (results[0]["stores"] // 4, results[0]["stores"]))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for x in results:
        print("| %s | %.2f | %d / %d | %d | %d / %d | %d / %d | %.2f | %.1f %% | %.0f | %.0f | %d | %d |" % (
            x["mode"], x["ready_s"], x["server_after_start"] // MIB, x["committed_after_start"] // MIB,
            x["client_after_connect"] // MIB, x["server_quarter"] // MIB, x["committed_quarter"] // MIB,
            x["server_after_fill"] // MIB, x["committed_after_fill"] // MIB,
            x["faults_per_store"], 100.0 * x["stores_with_faults"], x["p50_us"], x["p99_us"], x["commit_misses"],
            x["evictions"]))
    pre = [x for x in results if x["mode"] == "pre-faulted"]
    for mode in ("on-demand", "on-demand, no client touch"):
        on = [x for x in results if x["mode"] == mode]
        print("\n%s / pre-faulted: store p50 %.2fx, p99 %.2fx" % (mode,
              statistics.mean(x["p50_us"] for x in on) / statistics.mean(x["p50_us"] for x in pre),
              statistics.mean(x["p99_us"] for x in on) / statistics.mean(x["p99_us"] for x in pre)))


if __name__ == "__main__":
    main()
