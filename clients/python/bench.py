"""Python client benchmarks: chunk store/retrieve GB/s next to the raw copy limit of Python, control round
trips, and the Java client's figures (the testkit's `TestWorker bench`) on the same server.

    python3 clients/python/bench.py                 # starts its own server (1 GiB pool, 256-token chunks)
    python3 clients/python/bench.py --dir DIR       # against a running server (its pool must fit 32 MiB)
    python3 clients/python/bench.py --sizes 256k --wait backoff,blocking    # servers of two wait modes, side by side

Prints a Markdown table. Store = fenced write_chunk (slot-word check + memoryview slice assignment into the
mapped pool); retrieve = read_chunk_into a preallocated bytearray + slot-word check; "with control" adds
the PREPARE and COMMIT round trips of the chunk.
"""

import argparse
import mmap
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "tests"))

import kvstash                                                    # noqa: E402
from kvstash import Status                                        # noqa: E402

KIB = 1 << 10
MIB = 1 << 20
SIZES = (2 * MIB, 32 * MIB)


def gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def raw_copy(size, iterations):
    """The same copies without the protocol: memoryview slice assignment into (and out of) a mapped,
    pre-touched /dev/shm file, one distinct destination per iteration like distinct pool slots."""
    path = "/dev/shm/kvstash-bench-raw-%d" % os.getpid()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size * iterations)
        mm = mmap.mmap(fd, size * iterations, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        view = memoryview(mm)
        source = memoryview(bytearray(os.urandom(size)))
        target = memoryview(bytearray(size))
        for k in range(iterations):                               # touch every page once, like the server
            view[k * size:(k + 1) * size] = source
        target[:] = view[:size]
        write = read = 0.0
        for k in range(iterations):
            at = k * size
            t0 = time.perf_counter()
            view[at:at + size] = source
            t1 = time.perf_counter()
            write += t1 - t0
        for k in range(iterations):
            at = k * size
            t1 = time.perf_counter()
            target[0:size] = view[at:at + size]
            t2 = time.perf_counter()
            read += t2 - t1
        source.release()
        target.release()
        view.release()
        mm.close()
        return gbps(size * iterations, write), gbps(size * iterations, read)
    finally:
        os.close(fd)
        os.unlink(path)


def chunk_layout(size, chunk_tokens):
    hidden = max(1, min(1024, size // (4 * chunk_tokens)))        # float16, [2, L, C, H]
    return kvstash.Layout("py-bench-%d" % size, layers=size // (4 * chunk_tokens * hidden), hidden=hidden,
                          dtype="float16")


def parse_size(text):
    """A chunk size as the command line gives it: bytes, or with a k or m suffix (256k, 2m)."""
    text = text.strip().lower()
    scale = {"k": KIB, "m": MIB}.get(text[-1:], 1)
    return int(text[:-1] if scale != 1 else text) * scale


def format_size(size):
    return "%d MiB" % (size // MIB) if size % MIB == 0 else "%d KiB" % (size // KIB)


def store_retrieve(c, instance, size, iterations):
    """Stores ``iterations`` distinct chunks (distinct slots), then retrieves each; GB/s of the copies
    alone and of the copies with their PREPARE and COMMIT round trips."""
    source = memoryview(bytearray(os.urandom(size)))
    target = bytearray(size)
    copy_in = copy_out = full_in = full_out = 0.0
    c.clear()
    keys = [[(0x7079, size + it)] for it in range(iterations)]
    for it in range(iterations):
        t0 = time.perf_counter()
        p = c.prepare_store(instance, keys[it])
        t1 = time.perf_counter()
        assert c.write_chunk(p, 0, source) == Status.OK
        t2 = time.perf_counter()
        assert c.commit_store(instance, p).ok
        t3 = time.perf_counter()
        copy_in += t2 - t1
        full_in += t3 - t0
    for it in range(iterations):
        t3 = time.perf_counter()
        r = c.prepare_retrieve(instance, keys[it])
        t4 = time.perf_counter()
        assert c.read_chunk_into(r, 0, target) == Status.OK
        t5 = time.perf_counter()
        assert c.commit_retrieve(instance, r).ok
        t6 = time.perf_counter()
        copy_out += t5 - t4
        full_out += t6 - t3
    c.clear()
    n = size * iterations
    assert target == source.obj
    return gbps(n, copy_in), gbps(n, full_in), gbps(n, copy_out), gbps(n, full_out)


def percentiles(samples):
    samples = sorted(samples)
    return samples[len(samples) // 2] * 1e6, samples[int(len(samples) * 0.99)] * 1e6


def round_trips(c, instance, count):
    for _ in range(1000):
        c.ping()
    pings = []
    for _ in range(count):
        t0 = time.perf_counter()
        c.ping()
        pings.append(time.perf_counter() - t0)
    pairs = []
    for k in range(count // 4):
        t0 = time.perf_counter()
        p = c.prepare_store(instance, [(0x7274, k)])
        c.commit_store(instance, p)
        pairs.append(time.perf_counter() - t0)
    c.clear()
    return percentiles(pings), percentiles(pairs)


def java_bench(directory, size, iterations):
    from support import run_peer
    code, _, line = run_peer("bench", directory, size, iterations)
    if code != 0:
        return None
    return {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", line)}


def run_one(directory, sizes, args):
    """The rows (one per chunk size) and the round trips of one server."""
    rows = []
    with kvstash.connect(directory) as c:
        instances = {}
        for size in sorted(sizes, reverse=True):              # the largest first: it sets the slot size
            instance = 900_000 + size // KIB
            r = c.register(instance, chunk_layout(size, c.chunk_tokens))
            assert r.ok and r.chunk_bytes == size, r
            instances[size] = instance
        for size in sizes:
            store_retrieve(c, instances[size], size, args.iterations)              # warm-up round
            raw = [raw_copy(size, args.iterations) for _ in range(args.rounds)]
            runs = [store_retrieve(c, instances[size], size, args.iterations) for _ in range(args.rounds)]
            median = [statistics.median(column) for column in zip(*(r + s for r, s in zip(raw, runs)))]
            java = None if args.no_java else java_bench(directory, size, args.iterations)
            rows.append((size, *median, java))
        round_trips(c, instances[sizes[0]], 4000)                                    # warm-up
        time.sleep(1.0)                       # let the server's JIT and GC threads settle (2 cores)
        trips = round_trips(c, instances[sizes[0]], args.round_trips)
    return rows, trips


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--dir", help="directory of a running server (default: start one)")
    parser.add_argument("--iterations", type=int, default=30,
                        help="distinct chunks per round, at most the pool's slot count (default 30)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds, median reported (default 3)")
    parser.add_argument("--round-trips", type=int, default=20000, help="pings (default 20000)")
    parser.add_argument("--no-java", action="store_true", help="skip the Java client's figures")
    parser.add_argument("--sizes", default="2m,32m",
                        help="chunk sizes, comma-separated, bytes or with a k or m suffix (default 2m,32m)")
    parser.add_argument("--wait", help="server wait mode when starting one (default: backoff); several, "
                        "comma-separated (backoff,blocking), start one server each and print their rows side by side")
    args = parser.parse_args()
    sizes = [parse_size(size) for size in args.sizes.split(",")]
    waits = [None] if args.wait is None else [w.strip() for w in args.wait.split(",")]
    if args.dir is not None and args.wait is not None:
        parser.error("--wait starts servers of its own: leave out --dir")

    results = []
    for wait in waits:
        server = None
        directory = args.dir
        if directory is None:
            from support import Server
            server = Server(pool_bytes=1 << 30, chunk_tokens=256, wait=wait).start()
            directory = server.directory
        try:
            results.append((wait or ("backoff" if server is not None else "running server"),
                            *run_one(directory, sizes, args)))
        finally:
            if server is not None:
                server.close()

    print("| server wait | chunk | raw copy in / out (Python) | Python store: copy / with control | "
          "Python retrieve: copy / with control | Java store / retrieve (copy) |")
    print("|---|---|---|---|---|---|")
    for wait, rows, _ in results:
        for size, raw_w, raw_r, store, store_full, retrieve, retrieve_full, java in rows:
            jt = "n/a" if java is None else "%.2f / %.2f GB/s" % (java["store_gbps"], java["retrieve_gbps"])
            print("| %s | %s | %.2f / %.2f GB/s | %.2f / %.2f GB/s | %.2f / %.2f GB/s | %s |"
                  % (wait, format_size(size), raw_w, raw_r, store, store_full, retrieve, retrieve_full, jt))
    print()
    print("| server wait | round trip (Python) | p50 | p99 |")
    print("|---|---|---|---|")
    for wait, rows, ((ping50, ping99), (pair50, pair99)) in results:
        print("| %s | PING | %.0f us | %.0f us |" % (wait, ping50, ping99))
        print("| %s | PREPARE_STORE (1 chunk) + COMMIT_STORE, no payload | %.0f us | %.0f us |"
              % (wait, pair50, pair99))
        java = rows[0][-1]
        if java is not None:
            print("| %s | PING, Java client (same server) | %.0f us | %.0f us |"
                  % (wait, java["ping_p50_us"], java["ping_p99_us"]))


if __name__ == "__main__":
    main()
