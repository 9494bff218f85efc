"""Test support: real server and Java peer processes (the testkit's io.kvstash.testkit.TestServer and
io.kvstash.testkit.TestWorker).

The Java classpath is, in this order: $KVSTASH_JAVA_CLASSPATH, or the testkit's class directory plus the
dependency jars printed by ``mvn dependency:build-classpath`` (computed once per test run, a few seconds; the
``test-compile`` phase also compiles the testkit). Every server runs in a fresh
/dev/shm/kvstash-pytest-<random> directory, created by the server (0700) and removed by the test.
"""

import contextlib
import itertools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(CLIENT_ROOT))
sys.path.insert(0, CLIENT_ROOT)

JAVA_OPTIONS = ["--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED"]
SERVER_CLASS = "io.kvstash.testkit.TestServer"
PEER_CLASS = "io.kvstash.testkit.TestWorker"
HASH_VECTORS = os.path.join(REPO, "wire", "src", "test", "resources", "hash-vectors.txt")

_classpath = None
_classpath_lock = threading.Lock()


def java_classpath():
    """The classpath of the Java peers (see the module comment)."""
    global _classpath
    with _classpath_lock:
        if _classpath is not None:
            return _classpath
        env = os.environ.get("KVSTASH_JAVA_CLASSPATH")
        if env:
            _classpath = env
            return _classpath
        out = os.path.join(tempfile.mkdtemp(prefix="kvstash-pytest-cp-"), "classpath.txt")
        base = ["mvn", "-B", "-q", "test-compile", "dependency:build-classpath", "-pl", "testkit", "-am",
                "-Dmdep.outputFile=" + out, "-Dmdep.includeScope=runtime"]
        for command in (base[:3] + ["-o"] + base[3:], base):          # offline first, then online
            result = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True)
            if result.returncode == 0 and os.path.exists(out):
                break
        else:
            raise RuntimeError("could not build the Java classpath:\n" + result.stdout[-4000:])
        with open(out) as f:
            jars = f.read().strip()
        shutil.rmtree(os.path.dirname(out), ignore_errors=True)
        classes = os.path.join(REPO, "testkit", "target", "classes")
        _classpath = classes + os.pathsep + jars
        return _classpath


def java_command(*args, main=PEER_CLASS, jvm=()):
    return ["java"] + JAVA_OPTIONS + list(jvm) + ["-cp", java_classpath(), main] + [str(a) for a in args]


def new_directory():
    """A fresh, not yet existing /dev/shm/kvstash-pytest-<random> path (the server creates it)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return os.path.join(base, "kvstash-pytest-" + secrets.token_hex(6))


class Server:
    """A kvstash server process (TestServer). Stops when the test stops it, or at stdin EOF."""

    def __init__(self, pool_bytes=64 << 20, chunk_tokens=16, lease_ms=None, wait=None, directory=None,
                 l2_seeds=None, on_demand_headroom=None):
        self.l2_seeds = l2_seeds                # redis://host:port,... : a second tier on that cluster
        self.on_demand_headroom = on_demand_headroom    # bytes: the pool committed on demand with this headroom
        self.pool_bytes = pool_bytes
        self.chunk_tokens = chunk_tokens
        self.lease_ms = lease_ms
        self.wait = wait
        self.directory = directory or new_directory()
        self.process = None
        self.incarnation = None

    def start(self, timeout=60):
        args = [self.directory, self.pool_bytes, self.chunk_tokens]
        if self.lease_ms is not None or self.wait is not None:
            args.append(self.lease_ms if self.lease_ms is not None else 30000)
        if self.wait is not None:
            args.append(self.wait)
        jvm = ["-Dkvstash.l2=" + self.l2_seeds] if self.l2_seeds else []
        if self.on_demand_headroom is not None:
            jvm += ["-Dkvstash.poolOnDemand=true", "-Dkvstash.onDemandHeadroomBytes=%d" % self.on_demand_headroom]
        self.process = subprocess.Popen(java_command(*args, main=SERVER_CLASS, jvm=jvm), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = {}

        def read_ready():
            line = self.process.stdout.readline()
            ready["line"] = line
        reader = threading.Thread(target=read_ready, daemon=True)
        reader.start()
        reader.join(timeout)
        line = ready.get("line", "")
        if not line.startswith("READY"):
            self.process.kill()
            err = self.process.stderr.read() if self.process.poll() is not None else ""
            raise RuntimeError("server did not start: %r %s" % (line, err[-4000:]))
        fields = dict(kv.split("=", 1) for kv in line.split()[1:])
        self.incarnation = int(fields["incarnation"], 16)
        # Drain the server's output so that it never blocks on a full pipe.
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=stream.read, daemon=True).start()
        return self

    @property
    def pid(self):
        return self.process.pid

    def stop(self, timeout=30):
        """Clean shutdown (stdin EOF, like SIGTERM): the server deletes its files."""
        if self.process is None:
            return
        try:
            self.process.send_signal(signal.SIGCONT)             # a paused server could not shut down
        except OSError:
            pass
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._release_pipes()

    def _release_pipes(self):
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except (OSError, ValueError):
                pass
        self.process = None

    def kill(self):
        """kill -9: the server leaves its files behind."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self._release_pipes()

    def pause(self, timeout=5.0):
        """SIGSTOP: the server stops answering (and its heartbeat stops) while its process lives. Returns once every
        thread of it is stopped: the signal is delivered asynchronously, and a thread spinning on another core
        could otherwise still answer a request sent just after it."""
        self.process.send_signal(signal.SIGSTOP)
        task = "/proc/%d/task" % self.process.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for tid in os.listdir(task):
                try:
                    with open(os.path.join(task, tid, "stat")) as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
                except OSError:                             # a thread that ended meanwhile
                    pass
            if states and all(state in ("T", "t") for state in states):
                return
            time.sleep(0.001)
        raise AssertionError("the server's process %d did not stop within %.1f s" % (self.process.pid, timeout))

    def resume(self):
        """SIGCONT after pause()."""
        self.process.send_signal(signal.SIGCONT)

    def close(self):
        """Stops the server and removes its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


class RedisCluster:
    """A real Redis Cluster (3 masters, 3 replicas of redis-server) in a Java process of the testkit
    (io.kvstash.testkit.RedisClusterProcess, the Java tests' RedisCluster). ``close()`` ends its standard input: it
    stops every node and removes their files. ``available()`` says whether redis-server and redis-cli are here."""

    MAIN = "io.kvstash.testkit.RedisClusterProcess"

    def __init__(self):
        self.process = None
        self.seeds = None

    @staticmethod
    def available():
        return shutil.which("redis-server") is not None and shutil.which("redis-cli") is not None

    def start(self, timeout=120):
        self.process = subprocess.Popen(java_command(main=self.MAIN), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        ready = {}
        reader = threading.Thread(target=lambda: ready.setdefault("line", self.process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        line = ready.get("line", "")
        if not line.startswith("READY seeds="):
            self.close()
            raise RuntimeError("the Redis Cluster did not start: %r" % line)
        self.seeds = line.split("=", 1)[1].strip()
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=stream.read, daemon=True).start()
        return self

    def close(self, timeout=60):
        if self.process is None:
            return
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:           # its nodes are its children: they go with the JVM's hook
            self.process.terminate()
            self.process.wait()
        self.process = None


def run_peer(*args, timeout=120):
    """Runs a TestWorker mode (store, retrieve, bench); returns (exit code, {range index: sha256 hex}, DONE line)."""
    result = subprocess.run(java_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            timeout=timeout)
    chunks, done = {}, ""
    for line in result.stdout.splitlines():
        if line.startswith("CHUNK "):
            _, index, digest = line.split()
            chunks[int(index)] = digest
        elif line.startswith("DONE") or line.startswith("BENCH"):
            done = line
    if result.returncode != 0 and not done:
        done = "exit %d: %s" % (result.returncode, result.stderr[-2000:])
    return result.returncode, chunks, done


def java_random_bytes(seed, n):
    """java.util.Random(seed).nextBytes(n bytes), for checking what the Java peer stored."""
    multiplier, addend, mask = 0x5DEECE66D, 0xB, (1 << 48) - 1
    state = (seed ^ multiplier) & mask
    out = bytearray(n)
    i = 0
    while i < n:
        state = (state * multiplier + addend) & mask
        rnd = state >> 16                                    # next(32), as an unsigned 32-bit value
        for _ in range(min(4, n - i)):
            out[i] = rnd & 0xFF
            rnd >>= 8
            i += 1
    return bytes(out)


def wait_until(predicate, timeout, interval=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def counter(client, counter_id):
    """A counter once every request this client was answered has been counted: the server updates some counters
    and gauges just after an answer (PROTOCOL.md 2.3), and it decides a PING only after that work of every earlier
    request."""
    client.ping()
    return client.counter(counter_id)


def counter_named(client, name):
    """A counter by the name the server labels it with in its control file (PROTOCOL.md 2.3), once counted (see
    ``counter``)."""
    client.ping()
    return client.counters()[name]


READABLE_CHUNKS, RESERVED_CHUNKS, EVICTIONS = 0, 1, 13


def evict_least_recent(client, instance, slot_capacity, evict=1, tag=0xE71C7):
    """Fills the pool with new chunks of ``instance`` (committed unwritten: their bytes do not matter) until
    exactly ``evict`` chunks were evicted, the least recently used ones under the server's default (LRU) policy.
    ``slot_capacity``: the REGISTER answer's, the pool holding one slot size. Returns the keys it stored."""
    free = slot_capacity - counter(client, READABLE_CHUNKS) - counter(client, RESERVED_CHUNKS)
    before = counter(client, EVICTIONS)
    keys = [(tag, next(_filler_ids)) for _ in range(free + evict)]
    for first in range(0, len(keys), client.max_chunks):
        prepared = client.prepare_store(instance, keys[first:first + client.max_chunks])
        assert prepared.ok and prepared.transfer_id, prepared
        assert client.commit_store(instance, prepared).ok
    evicted = counter(client, EVICTIONS) - before
    assert evicted == evict, "evicted %d chunks, not %d" % (evicted, evict)
    return keys


_filler_ids = itertools.count(1)


class ServerTestCase(__import__("unittest").TestCase):
    """One server per test class (started in setUpClass, stopped and its directory removed after)."""

    SERVER_OPTIONS = {}
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(**cls.SERVER_OPTIONS).start()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.close()
            assert not os.path.exists(cls.server.directory)

    def connect(self, **options):
        import kvstash
        client = kvstash.connect(self.server.directory, **options)
        self.addCleanup(client.close)
        return client

    LIVENESS_COUNTERS = ("wire_records", "wire_malformed", "clients_attached", "clients_detached", "clients",
                         "dead_clients", "errors")

    def server_counters(self):
        """The server's wire and liveness counters, read through a fresh client (after a DetachedError the
        detached one may not be usable)."""
        import kvstash
        with kvstash.connect(self.server.directory) as probe:
            counters = probe.counters()
        return {name: counters.get(name) for name in self.LIVENESS_COUNTERS}

    @contextlib.contextmanager
    def diagnosed(self):
        """Re-raises a DetachedError with the server's counters, which tell the reason apart: a corrupt
        request ring counts wire_malformed and errors, a client whose lock the server could take counts
        dead_clients; a closing flag counts neither."""
        import kvstash
        try:
            yield
        except kvstash.DetachedError as error:
            raise AssertionError("%s; server counters: %s" % (error, self.server_counters())) from error
