"""Peer benchmark: kvstash next to Mooncake Store (a standalone ``mooncake_client`` holding the data, and its
embedded mode) and LMCache's MP server, in one run, the same sizes against each, every byte read back verified.

    python3 clients/python/bench_peers.py --install                      # once: Debian libraries and the peers' venvs
    python3 clients/python/bench_peers.py --json RESULT.json --markdown  # about 10 minutes on 2 vCPUs
    python3 clients/python/bench_peers.py --only kvstash --quick --json OUT.json     # seconds

Each system runs in a child process of its own (``--child SYSTEM``), in the Python that has its client library (the
peers' venvs: ``.ci/python-env clients/python/requirements-peers-mooncake.txt`` and ``...-lmcache.txt``). The child
execs the system's server processes as their users would (``./kvstash serve --dir D --pool-size P``;
``mooncake_master`` and ``mooncake_client`` with protocol tcp and P2PHANDSHAKE metadata; ``lmcache server
--supported-transfer-mode engine_driven``), times exec to the first answered existence check and stored probe chunk
(ready), warms up (the same requests for every system), measures, reads the servers' CPU and memory from /proc, and
writes its figures as JSON. The parent alternates the order of the systems between rounds (A B C, then C B A) and
reports the median of the rounds.

Measured per system: a one-key existence check (kvstash LOOKUP, Mooncake ``is_exist``, LMCache LOOKUP and
QUERY_PREFETCH_STATUS) p50/p90/p99/p99.9; store and retrieve of one chunk per request at each size (p50, p99, p99.9
and GB/s = bytes / summed request time); server CPU seconds per 1,000 requests over the timed phases (a store or a
retrieve counts as one request, whatever round trips it takes) and over 10 idle seconds after them; server RSS and
RssShmem after start and after the stores; ready time. Stored bytes are a pattern derived from the key (its id and
page index stamped into every 4 KiB of a random block); every retrieve is compared with it, byte for byte.
"""

import argparse
import ctypes
import hashlib
import inspect
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

KIB = 1 << 10
MIB = 1 << 20
SYSTEMS = ("kvstash", "mooncake", "mooncake-embedded", "lmcache")
TITLES = {"kvstash": "kvstash", "mooncake": "Mooncake standalone", "mooncake-embedded": "Mooncake embedded",
          "lmcache": "LMCache MP"}
VENVS = {"mooncake": "requirements-peers-mooncake.txt", "mooncake-embedded": "requirements-peers-mooncake.txt",
         "lmcache": "requirements-peers-lmcache.txt"}
DEBIAN = ("libibverbs1", "libnl-3-200", "libnl-route-3-200")
SIZES = (4 * KIB, 256 * KIB, 2 * MIB)
PAGE = 4096
STAMP = struct.Struct("<QQ")
WARMUP_KEYS, MEASURED_KEYS, HELD_KEYS = 1_000_000, 10_000_000, 50_000_000      # key ids (token ids for LMCache)

FULL = {"rounds": 2, "lookups": 20000, "warmup_lookups": 10000, "counts": {4 * KIB: 3000, 256 * KIB: 2000,
        2 * MIB: 2000}, "batch": {4 * KIB: 500, 256 * KIB: 250, 2 * MIB: 100}, "idle_s": 10.0}
QUICK = {"rounds": 1, "lookups": 1000, "warmup_lookups": 500, "counts": {4 * KIB: 100, 256 * KIB: 100, 2 * MIB: 40},
         "batch": {4 * KIB: 100, 256 * KIB: 50, 2 * MIB: 20}, "idle_s": 2.0}


# ============================================================================================ shared helpers
def percentiles(samples):
    """p50, p90, p99, p99.9 and max in microseconds, from the sorted samples (seconds)."""
    s = sorted(samples)
    if not s:
        return {}

    def at(q):
        return s[min(len(s) - 1, int(q * len(s)))] * 1e6
    return {"count": len(s), "p50_us": at(0.50), "p90_us": at(0.90), "p99_us": at(0.99), "p999_us": at(0.999),
            "max_us": s[-1] * 1e6, "mean_us": sum(s) / len(s) * 1e6}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pids):
    """The pids and every process below them (scanning /proc for parents)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    found, todo = set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(child for child, parent in parents.items() if parent == pid)
    return sorted(found)


def cpu_seconds(pid, tid=None):
    path = "/proc/%d/stat" % pid if tid is None else "/proc/%d/task/%d/stat" % (pid, tid)
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid):
    out = {"VmRSS": 0, "RssShmem": 0, "RssAnon": 0}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in out:
                    out[key] = int(line.split()[1])
    except OSError:
        pass
    return out


def key_pattern(base, key_id):
    """The bytes stored under ``key_id``: ``base`` with (key id, page index) stamped at every 4 KiB page."""
    out = bytearray(base)
    for page in range(0, len(out), PAGE):
        STAMP.pack_into(out, page, key_id, page // PAGE)
    return out


def machine():
    load = os.getloadavg()
    return {"cores": os.cpu_count(), "load_average": [round(x, 2) for x in load], "date":
            time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(), "kernel": platform.release(),
            "python": platform.python_version(), "cpu": _cpu_model()}


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# ============================================================================================ systems (child side)
class System:
    """One system under test, in the child process: exec its servers, connect, and the four operations."""

    name = ""
    embedded_threads = False          # the data lives in this process: count its non-main threads as server CPU

    def __init__(self, params):
        self.params = params
        self.processes = []
        self.workdir = tempfile.mkdtemp(prefix="bench-peers-%s-" % self.name)

    def spawn(self, argv, env=None, name="server"):
        log = open(os.path.join(self.workdir, "%s.log" % name), "wb")
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
        log.close()
        self.processes.append((name, process))
        return process

    def check_alive(self):
        for name, process in self.processes:
            if process.poll() is not None:
                tail = [line for line in self.log_tail(name, 6000).splitlines() if line.strip()]
                errors = [line for line in tail if "Error" in line or "error" in line] or tail or [""]
                raise RuntimeError("%s exited with %s: %s" % (name, process.returncode, errors[-1].strip()))

    def log_tail(self, name, size=1500):
        try:
            with open(os.path.join(self.workdir, "%s.log" % name), "rb") as f:
                return f.read()[-size:].decode("utf-8", "replace")
        except OSError:
            return ""

    def server_pids(self):
        return descendants([p.pid for _, p in self.processes if p.poll() is None])

    def server_cpu(self):
        total = sum(cpu_seconds(pid) for pid in self.server_pids())
        if self.embedded_threads:
            me = os.getpid()
            for tid in os.listdir("/proc/%d/task" % me):
                if int(tid) != me:
                    total += cpu_seconds(me, int(tid))
        return total

    def server_memory(self):
        total = {"VmRSS": 0, "RssShmem": 0, "RssAnon": 0}
        for pid in self.server_pids():
            for key, value in memory_kib(pid).items():
                total[key] += value
        return total

    def stop(self):
        for _, process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        self.processes = []

    # subclasses: start(), connect() -> True when answered, prepare(size), exists(key), store(size, key, data),
    # retrieve(size, key, out) -> True when read, clear(), close(), versions()


class KvStash(System):
    name = "kvstash"

    def load(self):
        import kvstash                                                   # noqa: F401

    def start(self):
        self.directory = "/dev/shm/kvstash-bench-peers-%d" % os.getpid()
        self.hlog = os.path.join(self.workdir, "server.hlog")
        command = self.params.get("kvstash_serve") or [os.path.join(REPO, "kvstash"), "serve"]
        self.spawn(list(command) + ["--dir", self.directory, "--pool-size", self.params["pool_size"],
                                    "--prepare-pool", self.params.get("kvstash_prepare_pool", "background"),
                                    "--hlog", self.hlog])
        self.client = None
        self.instances = {}
        self.retrieve_path = kvstash_retrieve_path(self.params.get("kvstash_retrieve", "auto"))

    def connect(self):
        import kvstash
        if self.client is None:
            try:
                self.client = kvstash.connect(self.directory, timeout=5.0)
            except kvstash.KvStashError:
                return False
            for size in sorted(SIZES, reverse=True):               # the largest first: it sets the slot size
                instance = 0x7065_0000 + size // KIB
                hidden = size // (4 * self.client.chunk_tokens)             # float16 [2, 1, C, H]: size bytes
                layout = kvstash.Layout("bench-peers-%d" % size, layers=1, hidden=hidden, dtype="float16")
                r = self.client.register(instance, layout)
                if not r.ok or r.chunk_bytes != size:
                    raise RuntimeError("REGISTER %d: %s" % (size, r))
                self.instances[size] = instance
        return self.client.lookup(self.instances[SIZES[0]], [(0x7065, 0)]).ok

    def exists(self, key):
        return self.client.lookup(self.instances[SIZES[0]], [(0x7065, key)]).hit_chunks == 1

    def store(self, size, key, data):
        instance = self.instances[size]
        p = self.client.prepare_store(instance, [(0x7065, key)])
        if not p.transfer_id or self.client.write_chunk(p, 0, data) != 0:
            return False
        return self.client.commit_store(instance, p).ok

    def retrieve(self, size, key, out):
        return kvstash_retrieve(self.client, self.instances[size], [(0x7065, key)], out, self.retrieve_path)

    def clear(self):
        self.client.clear(force=True)

    def close(self):
        if self.client is not None:
            self.client.close()
            self.client = None

    def stop(self):
        super().stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def versions(self):
        import kvstash
        return {"kvstash_client": getattr(kvstash, "__version__", "?"), "retrieve_path": self.retrieve_path}


def kvstash_retrieve_path(option):
    """How a kvstash retrieve is made: ``two-trip`` (PREPARE_RETRIEVE, copy, COMMIT_RETRIEVE awaited) or
    ``one-trip`` (COMMIT_RETRIEVE sent without awaiting its reply, where the client offers it:
    ``commit_retrieve(..., reply=False)``). ``auto`` takes one-trip when the client has it."""
    import kvstash
    one_trip = "reply" in inspect.signature(kvstash.Client.commit_retrieve).parameters
    if option == "one-trip" and not one_trip:
        raise RuntimeError("this kvstash client has no commit_retrieve(..., reply=False)")
    if option == "auto":
        return "one-trip" if one_trip else "two-trip"
    return option


def kvstash_retrieve(client, instance, keys, out, path):
    """The one place a kvstash retrieve is made (see ``kvstash_retrieve_path``): True when ``out`` holds the chunk."""
    r = client.prepare_retrieve(instance, keys)
    if not r.transfer_id:
        return False
    ok = client.read_chunk_into(r, 0, out) == 0
    if path == "one-trip":
        client.commit_retrieve(instance, r, reply=False)
        return ok
    return client.commit_retrieve(instance, r).ok and ok


class Mooncake(System):
    """Mooncake Store: ``mooncake_master`` plus a standalone ``mooncake_client`` holding the pool (vLLM's
    "standalone-store" mode: this process contributes no segment), protocol tcp, P2PHANDSHAKE metadata."""

    name = "mooncake"

    def _bin(self, tool):
        return os.path.join(os.path.dirname(sys.executable), tool)

    def _env(self):
        """The wheel's binaries and store.so link libcudart.so.12 (unused without a GPU): nvidia-cuda-runtime-cu12's
        copy goes on LD_LIBRARY_PATH for the servers and is loaded into this process before mooncake.store."""
        env = dict(os.environ)
        try:
            import nvidia.cuda_runtime
        except ImportError:
            return env
        lib = os.path.join(list(nvidia.cuda_runtime.__path__)[0], "lib")
        ctypes.CDLL(os.path.join(lib, "libcudart.so.12"), mode=ctypes.RTLD_GLOBAL)
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        return env

    def load(self):
        self.env = self._env()
        from mooncake.store import MooncakeDistributedStore                 # noqa: F401

    def start(self):
        self.master_port = free_port()
        env = self.env
        self.spawn([self._bin("mooncake_master"), "--rpc_port=%d" % self.master_port,
                    "--metrics_port=%d" % free_port(), "--enable_http_metadata_server=false"], env, "master")
        deadline = time.monotonic() + 60               # the standalone client once the master listens (started
        while not self.listening() and time.monotonic() < deadline:     # together, it waits out a retry of ~1 s)
            self.check_alive()
            time.sleep(0.005)
        self.start_holder(env)
        self.store_handle = None
        self.buffers = {}

    def start_holder(self, env):
        self.holder_port = free_port()
        self.spawn([self._bin("mooncake_client"), "--master_server_address=127.0.0.1:%d" % self.master_port,
                    "--metadata_server=P2PHANDSHAKE", "--protocol=tcp", "--host=127.0.0.1",
                    "--global_segment_size=%s" % self.params["pool_size_bytes"], "--port=%d" % self.holder_port],
                   env, "mooncake_client")

    def listening(self):
        """Whether the master (and the standalone client) accept connections: setup() against a master not yet
        listening waits out a retry of its own (about a second), which would count against Mooncake's ready time."""
        for port in (self.master_port, getattr(self, "holder_port", None)):
            if port is not None:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                except OSError:
                    return False
        return True

    def segment_bytes(self):
        return 0

    def connect(self):
        if self.store_handle is None:
            if not self.listening():
                return False
            from mooncake.store import MooncakeDistributedStore
            store = MooncakeDistributedStore()
            if store.setup("127.0.0.1", "P2PHANDSHAKE", self.segment_bytes(), 16 * MIB, "tcp", "",
                           "127.0.0.1:%d" % self.master_port) != 0:
                store.close()
                return False
            self.store_handle = store
        return self.store_handle.is_exist("bench-peers-probe") in (0, 1)

    def prepare(self, size):
        if size not in self.buffers:
            pair = []
            for _ in range(2):
                buf = bytearray(size)
                holder = (ctypes.c_char * size).from_buffer(buf)
                pointer = ctypes.addressof(holder)
                if self.store_handle.register_buffer(pointer, size) != 0:
                    raise RuntimeError("register_buffer(%d) failed" % size)
                pair.append((buf, holder, pointer))
            self.buffers[size] = pair

    def exists(self, key):
        return self.store_handle.is_exist("k%d" % key) == 1

    def store(self, size, key, data):
        buf, _, pointer = self.buffers[size][0]
        buf[:] = data                                         # the caller's copy into its registered buffer: untimed
        return "defer", lambda: self.store_handle.put_from("k%d" % key, pointer, size) == 0

    def retrieve(self, size, key, out):
        buf, _, pointer = self.buffers[size][1]
        buf[:] = bytes(size)                                  # untimed: a failed read cannot pass for a good one
        return "defer", lambda: self.store_handle.get_into("k%d" % key, pointer, size) == size, buf

    def clear(self):
        self.store_handle.remove_all(True)

    def close(self):
        if self.store_handle is not None:
            self.store_handle.close()
            self.store_handle = None

    def versions(self):
        from importlib.metadata import version
        return {"mooncake-transfer-engine-non-cuda": version("mooncake-transfer-engine-non-cuda")}


class MooncakeEmbedded(Mooncake):
    """Mooncake Store embedded: ``mooncake_master`` only; this process mounts the pool as its global segment
    (``setup`` with global_segment_size = the pool). Server CPU: the master plus this process's Mooncake threads
    (every thread but the measuring one); server memory: the master plus this process's growth from setup on."""

    name = "mooncake-embedded"
    embedded_threads = True

    def start_holder(self, env):
        self.rss_before = memory_kib(os.getpid())

    def segment_bytes(self):
        return self.params["pool_size_bytes"]

    def server_memory(self):
        total = super().server_memory()
        now = memory_kib(os.getpid())
        for key in total:
            total[key] += max(0, now[key] - self.rss_before[key])
        return total


class LMCache(System):
    """LMCache's MP server (``lmcache server --supported-transfer-mode engine_driven``), driven through its own
    ``lmcache bench server`` client (``ServerBenchClient``: REGISTER_KV_CACHE of CPU KV caches, STORE/RETRIEVE of
    their blocks over its shared memory, LOOKUP + QUERY_PREFETCH_STATUS). One chunk = one 16-token block: the server
    runs with ``--chunk-size 16``, and each size is a KV shape of that many bytes per chunk."""

    name = "lmcache"
    CHUNK_TOKENS = 16
    SHAPES = {4 * KIB: (1, 1, 64), 256 * KIB: (4, 8, 128), 2 * MIB: (32, 8, 128)}     # layers, heads, head size

    def load(self):
        import torch                                                                    # noqa: F401
        from lmcache.cli.commands.bench.server_bench.client import ServerBenchClient     # noqa: F401

    def start(self):
        self.port, self.http_port = free_port(), free_port()
        gib = max(1, self.params["pool_size_bytes"] // (1 << 30))
        self.spawn([os.path.join(os.path.dirname(sys.executable), "lmcache"), "server", "--host", "127.0.0.1",
                    "--port", str(self.port), "--http-port", str(self.http_port), "--chunk-size",
                    str(self.CHUNK_TOKENS), "--l1-size-gb", str(gib), "--eviction-policy", "LRU",
                    "--supported-transfer-mode", "engine_driven", "--disable-metrics"])
        self.clients = {}
        self.probe = None
        self.sequence = 0

    def _client(self, size):
        """The ``ServerBenchClient`` of one chunk size (its KV shape), registered as an instance of its own; one at
        a time (the others are closed: UNREGISTER_KV_CACHE)."""
        if size not in self.clients:
            for other in list(self.clients):
                self.clients.pop(other)[0].close()
            from lmcache.cli.commands.bench.server_bench import helpers
            helpers._INSTANCE_ID_BASE = 1000 + 10 * SIZES.index(size)
            from lmcache.cli.commands.bench.server_bench.client import ServerBenchClient
            from lmcache.cli.commands.bench.server_bench.config import BenchConfig
            layers, heads, head_size = self.SHAPES[size]
            blocks = self.params["batch"][size] + 2
            config = BenchConfig(rpc_url="tcp://127.0.0.1:%d" % self.port,
                                 http_url="http://127.0.0.1:%d" % self.http_port, mode="cpu",
                                 transfer_mode="engine_driven", tp_size=1, use_mla=False,
                                 num_tokens=self.CHUNK_TOKENS,
                                 kvcache_shape_spec="(2,%d,%d,%d,%d):float16:%d" % (
                                     blocks, self.CHUNK_TOKENS, heads, head_size, layers),
                                 num_blocks=blocks, block_size=self.CHUNK_TOKENS)
            client = ServerBenchClient(config, lambda message: None)
            client.start()
            worker = client._workers[0]
            self.clients[size] = (client, list(worker.kv_caches.values()))
        return self.clients[size]

    def connect(self):
        if self.probe is None:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthcheck" % self.http_port, timeout=1) as r:
                    r.read()
            except OSError:
                return False
            self.probe = self._client(SIZES[0])[0]
        self.exists(0)
        self.after()
        self.after = None
        return True

    def _request(self, size, key):
        import dataclasses
        client, _ = self._client(size)
        self.sequence += 1
        request = client.create_request(key, "r%d-%d" % (key, self.sequence), "bench")
        return client, dataclasses.replace(request, block_offset=self._block(size, key), num_blocks=1)

    def _block(self, size, key):
        return key % (self.params["batch"][size] + 1)

    def exists(self, key):
        from lmcache.cli.commands.bench.server_bench.helpers import _send_end_session
        client, request = self._request(SIZES[0], key)
        hits = self._lookup(client, request)
        self.after = lambda: _send_end_session(client._require_started(), request.request_id)  # untimed
        return hits == 1

    def _lookup(self, client, request):
        """LOOKUP, then QUERY_PREFETCH_STATUS until it is answered (no pause between polls): the hit chunks. The
        LOOKUP reserves the chunks' read locks for the RETRIEVE of the same session; END_SESSION lets them go."""
        from lmcache.cli.commands.bench.server_bench.helpers import _make_key
        req_client = client._require_started()
        lookup_key = _make_key(request.token_ids, request.request_id, start=0, end=request.num_full_tokens,
                               world_size=client._kv_world_size)
        req_client.lookup(lookup_key, 1).result(timeout=10)
        while True:
            hits = req_client.query_prefetch_status(request.request_id).result(timeout=10)
            if hits is not None:
                return hits

    def _pieces(self, size, key):
        import torch
        _, tensors = self._client(size)
        block = self._block(size, key)
        return [t[k, block].view(torch.uint8).reshape(-1) for t in tensors for k in range(2)]

    def store(self, size, key, data):
        import torch
        at = 0
        for piece in self._pieces(size, key):                # the engine's KV blocks hold the chunk: untimed
            n = piece.numel()
            piece.copy_(torch.frombuffer(data, dtype=torch.uint8, count=n, offset=at))
            at += n
        client, request = self._request(size, key)
        return "defer", lambda: bool(client.store(request, 0, self.CHUNK_TOKENS).succeeded)

    def retrieve(self, size, key, out):
        pieces = self._pieces(size, key)
        for piece in pieces:
            piece.zero_()
        client, request = self._request(size, key)

        def read():                                   # LMCache's retrieve: LOOKUP, RETRIEVE, END_SESSION (timed)
            if self._lookup(client, request) != 1:
                client.end_session(request)
                return False
            result = client.retrieve(request, 0, self.CHUNK_TOKENS)
            client.end_session(request)
            return result is not None and result.succeeded

        def gather():
            at = 0
            for piece in pieces:
                n = piece.numel()
                out[at:at + n] = piece.numpy().tobytes()
                at += n
        return "defer", read, gather

    def clear(self):
        request = urllib.request.Request("http://127.0.0.1:%d/cache/clear" % self.http_port, data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=30) as r:
            r.read()

    def close(self):
        for client, _ in self.clients.values():
            client.close()
        self.clients = {}

    def versions(self):
        from importlib.metadata import version
        return {"lmcache": version("lmcache"), "torch": version("torch")}


CLASSES = {"kvstash": KvStash, "mooncake": Mooncake, "mooncake-embedded": MooncakeEmbedded, "lmcache": LMCache}


# ============================================================================================ the measurement (child)
def timed(system, op, *args):
    """Runs one operation; returns (ok, seconds, after). A system may hand back ("defer", call[, after]) so that only
    ``call`` is timed (work the caller of a real client does outside the request, such as filling its own buffer)."""
    t0 = time.perf_counter()
    result = op(*args)
    t1 = time.perf_counter()
    after = None
    if isinstance(result, tuple) and result and result[0] == "defer":
        t0 = time.perf_counter()
        ok = result[1]()
        t1 = time.perf_counter()
        after = result[2] if len(result) > 2 else None
    else:
        ok = result
    return bool(ok), t1 - t0, after


class Verifier:
    def __init__(self):
        self.bytes = 0
        self.chunks = 0
        self.mismatches = 0
        self.failures = 0
        self.first_mismatch = None

    def check(self, got, expected, where):
        self.chunks += 1
        if bytes(got) == bytes(expected):
            self.bytes += len(expected)
        else:
            self.mismatches += 1
            if self.first_mismatch is None:
                self.first_mismatch = where


def run_size(system, size, count, batch, base, key_base, verify, cpu):
    """``count`` stores then retrieves of distinct keys, ``batch`` at a time (stored, retrieved, cleared)."""
    store_s, retrieve_s = [], []
    out = bytearray(size)
    cpu_used = 0.0
    done = 0
    if hasattr(system, "prepare"):
        system.prepare(size)
    while done < count:
        n = min(batch, count - done)
        keys = [key_base + done + i for i in range(n)]
        patterns = {k: key_pattern(base, k) for k in keys}
        c0 = cpu()
        for k in keys:
            ok, seconds, _ = timed(system, system.store, size, k, patterns[k])
            if not ok:
                verify.failures += 1
            store_s.append(seconds)
        for k in keys:
            out[:] = bytes(size)
            ok, seconds, after = timed(system, system.retrieve, size, k, out)
            retrieve_s.append(seconds)
            got = out
            if after is not None:                               # Mooncake: its registered buffer; LMCache: gather
                if callable(after):
                    after()
                else:
                    got = after
            if not ok:
                verify.failures += 1
            verify.check(got, patterns[k], "%s key %d" % (size, k))
        cpu_used += cpu() - c0
        system.clear()
        done += n
    return {"store": percentiles(store_s), "retrieve": percentiles(retrieve_s),
            "store_gbps": size * len(store_s) / sum(store_s) / 1e9,
            "retrieve_gbps": size * len(retrieve_s) / sum(retrieve_s) / 1e9,
            "requests": 2 * count, "server_cpu_s": cpu_used}


def run_lookups(system, count, key):
    samples = []
    misses = 0
    for _ in range(count):
        t0 = time.perf_counter()
        hit = system.exists(key)
        samples.append(time.perf_counter() - t0)
        after = getattr(system, "after", None)
        if after is not None:
            after()
            system.after = None
        if not hit:
            misses += 1
    return samples, misses


def child(name, params):
    """Runs one system once and returns its figures."""
    system = CLASSES[name](params)
    result = {"system": name, "ok": False}
    try:
        system.load()                                  # the client library's imports: before the clock
        t_exec = time.monotonic()
        system.start()
        deadline = t_exec + params["ready_timeout_s"]
        last = ""
        probe = key_pattern(os.urandom(4 * KIB), 1)
        while True:
            system.check_alive()
            try:
                answered = system.connect()
            except ImportError:
                raise
            except Exception as error:                                     # not up yet: retry until the deadline
                answered = False
                last = "%s: %s" % (type(error).__name__, error)
            if answered:
                result.setdefault("ready_answer_s", time.monotonic() - t_exec)    # first existence check answered
                if hasattr(system, "prepare"):
                    system.prepare(4 * KIB)
                ok, _, _ = timed(system, system.store, 4 * KIB, 1, probe)
                if ok:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("not ready after %.0f s (%s)" % (params["ready_timeout_s"], last))
            time.sleep(0.01)
        result["ready_s"] = time.monotonic() - t_exec                          # and a probe chunk stored
        system.clear()
        time.sleep(0.5)
        result["memory_idle_kib"] = system.server_memory()
        result["versions"] = system.versions()

        base = {size: os.urandom(size) for size in SIZES}
        verify = Verifier()
        lookup_key = 7
        ok, _, _ = timed(system, system.store, 4 * KIB, lookup_key, key_pattern(base[4 * KIB], lookup_key))
        if not ok:
            raise RuntimeError("could not store the lookup key")
        # Warm-up: the same requests for every system (the kvstash server compiles its request path meanwhile).
        _, misses = run_lookups(system, params["warmup_lookups"], lookup_key)
        for size in SIZES:
            run_size(system, size, params["batch"][size], params["batch"][size], base[size],
                     WARMUP_KEYS + 100_000 * SIZES.index(size), Verifier(), system.server_cpu)
        ok, _, _ = timed(system, system.store, 4 * KIB, lookup_key, key_pattern(base[4 * KIB], lookup_key))
        c0 = system.server_cpu()
        samples, misses = run_lookups(system, params["lookups"], lookup_key)
        lookup_cpu = system.server_cpu() - c0
        result["lookup"] = percentiles(samples)
        result["lookup"].update({"misses": misses, "server_cpu_s": lookup_cpu})
        phases = {}
        memory_peak = result["memory_idle_kib"]
        for size in SIZES:
            phases[str(size)] = run_size(system, size, params["counts"][size], params["batch"][size], base[size],
                                         MEASURED_KEYS + 1_000_000 * SIZES.index(size), verify, system.server_cpu)
        # Memory after the stores: store one batch of the largest size and hold it.
        size = SIZES[-1]
        for k in range(params["batch"][size]):
            timed(system, system.store, size, HELD_KEYS + k, key_pattern(base[size], HELD_KEYS + k))
        memory_peak = system.server_memory()
        system.clear()
        result["sizes"] = phases
        result["memory_stored_kib"] = memory_peak
        result["memory_stored_bytes"] = params["batch"][size] * size
        requests = params["lookups"] + sum(p["requests"] for p in phases.values())
        busy = lookup_cpu + sum(p["server_cpu_s"] for p in phases.values())
        result["server_cpu_per_1000"] = busy / requests * 1000
        result["timed_requests"] = requests
        c0 = system.server_cpu()                       # idle: the client stays connected, as an idle engine's would
        time.sleep(params["idle_s"])
        result["server_cpu_idle_s"] = system.server_cpu() - c0
        result["idle_s"] = params["idle_s"]
        result["verified"] = {"bytes": verify.bytes, "chunks": verify.chunks, "mismatches": verify.mismatches,
                              "failed_requests": verify.failures, "first_mismatch": verify.first_mismatch}
        result["server_processes"] = len(system.server_pids())
        result["ok"] = verify.mismatches == 0 and verify.failures == 0
        if not result["ok"]:
            result["error"] = "%d mismatched chunks, %d failed requests" % (verify.mismatches, verify.failures)
    except BaseException as error:
        import traceback
        result["error"] = "%s: %s" % (type(error).__name__, str(error).strip().splitlines()[0] if str(error) else "")
        result["traceback"] = traceback.format_exc()[-3000:]
        for log_name, _ in system.processes:
            result.setdefault("server_logs", {})[log_name] = system.log_tail(log_name)
    finally:
        try:
            system.close()
        except Exception:
            pass
        system.stop()
        if name == "kvstash":
            result["server_hlog"] = kvstash_hlog(system, params)
        shutil.rmtree(system.workdir, ignore_errors=True)
    return result


def kvstash_hlog(system, params):
    """The server-side latency per request type from ``serve --hlog`` (``kvstash latency --json``)."""
    path = getattr(system, "hlog", None)
    if not path or not os.path.exists(path):
        return None
    command = params.get("kvstash_latency") or [os.path.join(REPO, "kvstash"), "latency"]
    try:
        out = subprocess.run(list(command) + [path, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, timeout=120)
        data = json.loads(out.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as error:
        return {"error": str(error)}
    return {tag[5:]: figures for tag, figures in data.get("latency_us", {}).items() if tag.startswith("type.")}


# ============================================================================================ the parent
def venv_python(requirements):
    """The python of ``.ci/python-env FILE``'s venv when it exists (the same name python-env gives it), else None."""
    path = os.path.join(HERE, requirements)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    flavour = requirements[len("requirements-"):-len(".txt")]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    venv = os.path.join(cache, "kvstash", "venv-%s-%s" % (flavour, digest))
    if os.path.exists(os.path.join(venv, ".complete")):
        return os.path.join(venv, "bin", "python")
    return None


def install(systems):
    """Debian's libraries for Mooncake's wheel, then each peer's venv (``.ci/python-env``)."""
    if any(s.startswith("mooncake") for s in systems):
        missing = [p for p in DEBIAN if subprocess.run(["dpkg", "-s", p], stdout=subprocess.DEVNULL,
                                                       stderr=subprocess.DEVNULL).returncode != 0]
        if missing:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            if subprocess.run(["apt-get", "install", "-y", "-qq"] + missing, env=env).returncode != 0:
                subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
                subprocess.run(["apt-get", "install", "-y", "-qq"] + missing, env=env, check=True)
    for requirements in sorted({VENVS[s] for s in systems if s in VENVS}):
        subprocess.run([os.path.join(REPO, ".ci", "python-env"), "clients/python/" + requirements], check=True,
                       stdout=subprocess.DEVNULL)


def run_child(name, python, params, timeout):
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        params_file, out_file = os.path.join(tmp, "params.json"), os.path.join(tmp, "out.json")
        with open(params_file, "w") as f:
            json.dump(params, f)
        env = dict(os.environ, PYTHONPATH=HERE if name == "kvstash" else "")
        try:
            done = subprocess.run([python, os.path.abspath(__file__), "--child", name, "--params", params_file,
                                   "--out", out_file], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"system": name, "ok": False, "error": "timed out after %d s" % timeout}
        except OSError as error:                                   # e.g. a --python-... that is not there
            return {"system": name, "ok": False, "error": "%s: %s" % (type(error).__name__, error)}
        if not os.path.exists(out_file):
            lines = [line for line in done.stdout.strip().splitlines() if line.strip()]
            return {"system": name, "ok": False, "error": lines[-1] if lines else "exit %d" % done.returncode,
                    "output": done.stdout[-3000:]}
        with open(out_file) as f:
            return json.load(f)


def median_of(runs, path):
    values = []
    for run in runs:
        value = run
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
            if value is None:
                break
        if isinstance(value, (int, float)):
            values.append(value)
    return statistics.median(values) if values else None


ROWS = [("lookup p50", ("lookup", "p50_us"), "us", "low"),
        ("lookup p99", ("lookup", "p99_us"), "us", "low"),
        ("lookup p99.9", ("lookup", "p999_us"), "us", "low")]
for _size in SIZES:
    _label = "%d KiB" % (_size // KIB) if _size < MIB else "%d MiB" % (_size // MIB)
    for _op in ("store", "retrieve"):
        ROWS += [("%s %s p50" % (_op, _label), ("sizes", str(_size), _op, "p50_us"), "us", "low"),
                 ("%s %s p99" % (_op, _label), ("sizes", str(_size), _op, "p99_us"), "us", "low"),
                 ("%s %s GB/s" % (_op, _label), ("sizes", str(_size), _op + "_gbps"), "GB/s", "high")]
ROWS += [("server CPU per 1,000 requests", ("server_cpu_per_1000",), "s", "low"),
         ("server CPU idle, per 10 s", ("server_cpu_idle_per_10s",), "s", "low"),
         ("server RSS idle", ("memory_idle_kib", "VmRSS"), "MiB", "low"),
         ("server RSS after stores", ("memory_stored_kib", "VmRSS"), "MiB", "low"),
         ("ready after exec", ("ready_s",), "s", "low")]


JSON_ONLY = ("lookup p99.9", "server RSS after stores")          # in the JSON's summary, not in the table


def summarize(results):
    """Median over the rounds of every row, per system; the failures' first error."""
    summary = {}
    for name, runs in results.items():
        good = [r for r in runs if r.get("ok")]
        for r in good:
            if "server_cpu_idle_s" in r:
                r["server_cpu_idle_per_10s"] = r["server_cpu_idle_s"] / r["idle_s"] * 10
        if not good:
            summary[name] = {"error": next((r.get("error") for r in runs if r.get("error")), "did not run")}
            continue
        summary[name] = {label: median_of(good, path) for label, path, _, _ in ROWS}
    return summary


def fmt(value, unit):
    """A figure in its row's unit (the unit is in the row's label)."""
    if value is None:
        return "-"
    if unit == "MiB":
        return "%.0f" % (value / 1024)
    if unit == "us":
        return "%.0f" % value if value >= 10 else "%.1f" % value
    if unit == "GB/s":
        return "%.2f" % value if value >= 0.1 else "%.3f" % value
    return "%.3f" % value if value < 1 else "%.2f" % value


def markdown(summary, systems, hlog):
    peers = [s for s in systems if s != "kvstash"]
    header = ["row", "kvstash (server-side p99)"] + [TITLES[p] for p in peers]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    ours = summary.get("kvstash", {})
    for label, _, unit, better in ROWS:
        if label in JSON_ONLY:
            continue
        ours_cell = fmt(ours.get(label), unit) if "error" not in ours else "-"
        side = server_side(label, hlog)
        name = label if label.endswith(unit) else "%s (%s)" % (label, unit)
        cells = [name, ours_cell + (" (%s)" % side if side else "")]
        for peer in peers:
            theirs = summary.get(peer, {})
            if "error" in theirs or "error" in ours:
                cells.append("did not run" if "error" in theirs else "-")
                continue
            a, b = ours.get(label), theirs.get(label)
            if a is None or b is None:
                cells.append("%s (no ratio)" % fmt(b, unit))
                continue
            if a == 0 or b == 0:                              # e.g. no CPU tick over the idle seconds
                cells.append("%s: %s" % (fmt(b, unit), "tie" if a == b else "kvstash" if (a < b) == (
                    better == "low") else TITLES[peer].split()[0]))
                continue
            ratio = a / b
            wins = ratio < 1 if better == "low" else ratio > 1
            cells.append("%s: %.2fx %s" % (fmt(b, unit), ratio, "kvstash" if wins or ratio == 1 else
                                             TITLES[peer].split()[0]))
        lines.append("| " + " | ".join(cells) + " |")
    notes = []
    for name in systems:
        if "error" in summary.get(name, {}):
            notes.append("- %s did not run: `%s`" % (TITLES[name], summary[name]["error"].replace("|", "\\|")))
    return "\n".join(lines + ([""] + notes if notes else []))


def server_side(label, hlog):
    if not hlog or "error" in hlog or not ("p99" in label and "p99.9" not in label):
        return ""
    if label.startswith("lookup"):
        types = ["LOOKUP"]
    elif label.startswith("store"):
        types = ["PREPARE_STORE", "COMMIT_STORE"]
    else:
        types = ["PREPARE_RETRIEVE", "COMMIT_RETRIEVE"]
    return " + ".join("%.0f" % hlog[t]["p99"] for t in types if t in hlog)


def merged_hlog(runs):
    """The server-side p99 per request type, the median over the rounds."""
    tables = [r["server_hlog"] for r in runs if isinstance(r.get("server_hlog"), dict) and "error" not in
              r["server_hlog"]]
    if not tables:
        return None
    return {t: {"p99": statistics.median(table[t]["p99"] for table in tables if t in table)}
            for t in tables[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--only", default=",".join(SYSTEMS),
                        help="systems, comma-separated, of " + ", ".join(SYSTEMS) + " (default: all)")
    parser.add_argument("--quick", action="store_true", help="short runs: 1 round, few requests")
    parser.add_argument("--rounds", type=int, help="rounds, the order of systems reversed every other round "
                        "(default 2; --quick 1)")
    parser.add_argument("--json", help="write every figure, per round, and the machine to this file")
    parser.add_argument("--markdown", action="store_true", help="print the table of ratios")
    parser.add_argument("--install", action="store_true", help="install Debian's libraries for Mooncake and the "
                        "peers' venvs first (.ci/python-env; LMCache's is a few GiB)")
    parser.add_argument("--pool-size", default="1g", help="pool of every system (default 1g)")
    parser.add_argument("--python-mooncake", help="Python with mooncake-transfer-engine-non-cuda (default: the venv "
                        "of requirements-peers-mooncake.txt)")
    parser.add_argument("--python-lmcache", help="Python with lmcache (default: the venv of "
                        "requirements-peers-lmcache.txt)")
    parser.add_argument("--kvstash-retrieve", choices=("auto", "two-trip", "one-trip"), default="auto",
                        help="how kvstash retrieves (see kvstash_retrieve_path; default auto)")
    parser.add_argument("--kvstash-prepare-pool", choices=("background", "foreground", "on-demand"),
                        default="background", help="kvstash's pool: committed whole at start in the background "
                        "(the server's default) or as chunks are stored (on-demand, the operator's choice)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per system and round (default 1800)")
    parser.add_argument("--from-json", help="print the table of a --json file written before, and nothing else")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        sys.path.insert(0, HERE)
        with open(args.params) as f:
            params = {k: v for k, v in json.load(f).items()}
        for key in ("counts", "batch"):
            params[key] = {int(k): v for k, v in params[key].items()}
        result = child(args.child, params)
        with open(args.out, "w") as f:
            json.dump(result, f)
        return

    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        names = [name for name in SYSTEMS if name in saved["runs"]]
        print(markdown(summarize(saved["runs"]), names, merged_hlog(saved["runs"].get("kvstash", []))))
        return
    systems = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        parser.error("unknown systems: %s" % ", ".join(unknown))
    if args.install:
        install(systems)
    shape = dict(QUICK if args.quick else FULL)
    rounds = args.rounds or shape["rounds"]
    pool_bytes = parse_size(args.pool_size)
    params = {"pool_size": args.pool_size, "pool_size_bytes": pool_bytes, "lookups": shape["lookups"],
              "warmup_lookups": shape["warmup_lookups"], "counts": shape["counts"], "batch": shape["batch"],
              "idle_s": shape["idle_s"], "ready_timeout_s": 180.0, "kvstash_retrieve": args.kvstash_retrieve,
              "kvstash_prepare_pool": args.kvstash_prepare_pool}
    pythons = {"kvstash": sys.executable}
    for name in systems:
        if name != "kvstash":
            option = args.python_lmcache if name == "lmcache" else args.python_mooncake
            pythons[name] = option or venv_python(VENVS[name])
    if "kvstash" in systems:                                # build the launcher's jar now, not on the clock
        subprocess.run([os.path.join(REPO, "kvstash"), "serve", "--print-config"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    before = machine()
    results = {name: [] for name in systems}
    orders = []
    for r in range(rounds):
        order = systems if r % 2 == 0 else list(reversed(systems))
        orders.append(order)
        for name in order:
            if pythons.get(name) is None:
                result = {"system": name, "ok": False, "error": "no venv: run with --install (or .ci/python-env "
                          "clients/python/%s), or pass --python-%s" % (VENVS[name], name.split("-")[0])}
            else:
                print("round %d: %s ..." % (r + 1, name), file=sys.stderr, flush=True)
                result = run_child(name, pythons[name], params, args.timeout)
            result["round"] = r + 1
            results[name].append(result)
            if not result.get("ok"):
                print("  %s: %s" % (name, result.get("error")), file=sys.stderr, flush=True)
    after = machine()
    summary = summarize(results)
    hlog = merged_hlog(results.get("kvstash", []))
    table = markdown(summary, systems, hlog)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "clients/python/bench_peers.py " + " ".join(sys.argv[1:]),
                       "machine_before": before, "machine_after": after, "rounds": rounds, "orders": orders,
                       "params": params, "pythons": pythons, "summary": summary, "kvstash_server_p99_us": hlog,
                       "runs": results, "table": table}, f, indent=1)
    if args.markdown:
        print("load average %s before, %s after; %d cores; %s" % (before["load_average"], after["load_average"],
                                                                 before["cores"], before["date"]))
        print()
        print(table)
    failed = [name for name in systems if "error" in summary.get(name, {})]
    if "kvstash" in failed:
        sys.exit(1)


def parse_size(text):
    text = text.strip().lower()
    scale = {"k": KIB, "m": MIB, "g": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if scale != 1 else text) * scale


if __name__ == "__main__":
    main()
