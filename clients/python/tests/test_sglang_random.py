"""A randomized, seeded property test of kvstash.sglang.KvStashHiCacheStorage against a real kvstash server and
SGLang's own host pools on CPU.

Thousands of random operations are made the way SGLang's cache controller makes them (``batch_exists`` on the
page hashes of a prompt's prefix, then ``batch_get_v1`` into freshly allocated host pages or ``batch_get`` into
dummy flat pages; ``batch_set_v1`` / ``batch_set`` of host pages filled by the engine; now and then the single-page
calls), by four backends on one server: two engines of one checkpoint and page format (``A1``, ``A2``: they share
pages), one of another checkpoint with the same page format (``B``) and one of the first checkpoint with another
host layout of the same page bytes (``C``). A page's bytes are a function of its namespace's tag and its key,
so any byte anyone reads can be checked. Mixed in are the faults users meet: chunks evicted between
``batch_exists`` and the get (an admin CLEAR), a small server pool (256 slots for ~1,400 distinct pages: eviction
on most stores), a forced CLEAR and a store of other pages into the freed slots while a get is copying, the
server SIGKILLed and restarted on its directory, the server stopped (SIGSTOP) past the backends' ``timeout_s``
and continued.

After every operation: every page a backend reports read (True, non-None) holds exactly its key's bytes; the
True pages are a leading run, and a v1 host page after the first page not read was not written; a sample of
pages readable in each namespace (read by a plain kvstash client) holds exactly its key's bytes (every page of
every namespace at the end); once idle the server holds no reserved or pinned chunk and no pending transfer; no
call took longer than ``timeout_s`` plus ``SLACK_S``; a store answered all True is found by ``batch_exists``
right after (so a backend that never stores could not pass). At the end, enough gets must have read pages.

Seeded and reproducible: the seed is printed at the start and in every failure; ``KVSTASH_SEED=<n>`` replays it
(timing-dependent answers, such as which call meets a stopped server's timeout, may differ). The default run is
short (``KVSTASH_RANDOM_STEPS``, default 1500 steps, about a minute on two cores); a long one:
``KVSTASH_RANDOM_STEPS=20000 KVSTASH_SEED=7 "$(.ci/python-env clients/python/requirements-sglang.txt)" -m unittest
discover -s clients/python/tests -p test_sglang_random.py -v``.
"""

import hashlib
import logging
import os
import random
import sys
import time
import unittest

from support import Server, counter_named, wait_until
from test_sglang import SKIP

if not SKIP:
    import torch
    from test_sglang import make_backend, make_pool
    from kvstash.sglang import page_key

import kvstash

CHUNK_TOKENS = 16
PAGE_SIZE = 256                         # tokens: 2 x 2 layers x 2 heads x 16 dims x bf16 x 256 = 64 KiB pages
DOCS, DOC_PAGES = 24, 20                # the key universe of each namespace: 480 pages
TIMEOUT_S = 0.5
SLACK_S = 0.5
STEPS = int(os.environ.get("KVSTASH_RANDOM_STEPS", "1500"))
ENGINES = {"A1": ("ckpt-A", "page_first", "A"), "A2": ("ckpt-A", "page_first", "A"),
           "B": ("ckpt-B", "page_first", "B"), "C": ("ckpt-A", "layer_first", "C")}     # checkpoint, layout, tag
JUNK = 0x5A


def doc_keys(doc):
    """The page keys of document ``doc`` as SGLang chains them: each page's hash covers the pages before it."""
    keys, prev = [], ""
    for i in range(DOC_PAGES):
        prev = hashlib.sha256(("%s|%d:%d" % (prev, doc, i)).encode()).hexdigest()
        keys.append(prev)
    return keys


class Contents:
    """The bytes of each (tag, key) page: SHAKE-128 of both, with every bfloat16's exponent kept off all-ones
    (no NaN patterns travel through a dtype copy)."""

    def __init__(self, page_bytes):
        self.page_bytes = page_bytes
        self.cache = {}

    def tensor(self, tag, key):
        page = self.cache.get((tag, key))
        if page is None:
            raw = bytearray(hashlib.shake_128(("%s|%s" % (tag, key)).encode()).digest(self.page_bytes))
            page = torch.frombuffer(raw, dtype=torch.uint8)
            page[1::2] &= 0xBF
            self.cache[(tag, key)] = page
        return page

    def bytes(self, tag, key):
        return self.tensor(tag, key).numpy().tobytes()


class Engine:
    """One backend with its own host pool, as one SGLang engine has."""

    def __init__(self, name, directory, contents):
        self.name = name
        checkpoint, layout, self.tag = ENGINES[name]
        self.pool = make_pool(layout, PAGE_SIZE, pages=16)
        self.backend = make_backend(directory, self.pool, checkpoint=checkpoint, timeout_s=TIMEOUT_S,
                                    reconnect_s=0.05)
        self.contents = contents

    def fill(self, indices, keys):
        for i, key in enumerate(keys):
            page = self.pool.get_data_page(int(indices[i * PAGE_SIZE]), flat=False)
            page.copy_(self.contents.tensor(self.tag, key).view(page.dtype).view(page.shape))

    def junk(self, indices, n):
        for i in range(n):
            self.pool.get_data_page(int(indices[i * PAGE_SIZE]), flat=False).view(torch.uint8).fill_(JUNK)

    def host_bytes(self, indices, i):
        return self.pool.get_data_page(int(indices[i * PAGE_SIZE])).contiguous().view(torch.uint8).numpy().tobytes()


class Raw:
    """A plain kvstash client registered in one namespace (an oracle's reads, a filler's stores), connected again
    after a restart."""

    def __init__(self, directory, layout):
        self.directory = directory
        self.layout = layout
        self.instance = random.getrandbits(62) | 1
        self.client = None

    def get(self):
        if self.client is not None:
            try:
                self.client.check_connection()
                return self.client
            except kvstash.KvStashError:
                self.close()
        self.client = kvstash.connect(self.directory, timeout=10)
        r = self.client.register(self.instance, self.layout)
        assert r.ok, r
        return self.client

    def read(self, key, page_bytes):
        """The page bytes readable under ``key``, or None."""
        c = self.get()
        r = c.prepare_retrieve(self.instance, [page_key(key)])
        if r.status == kvstash.Status.MISS:
            return None
        assert r.ok, r
        try:
            data = bytes(c.slot_view(r, 0)[:page_bytes])
            return data if c.is_still_readable(r, 0) else None
        finally:
            c.commit_retrieve(self.instance, r)

    def fill_pool(self, tag, contents, n, rng):
        """Stores up to ``n`` pages of random keys (every free or evictable slot, when n is the pool's size)."""
        c = self.get()
        while True:
            p = c.prepare_store(self.instance, [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(n)])
            if p.status != kvstash.Status.NO_SPACE or n == 1:
                break
            n //= 2
        if not p.ok or not p.transfer_id:
            return
        for i in range(len(p.slots)):
            c.write_chunk(p, i, contents.bytes(tag, str(i)))
        c.commit_store(self.instance, p)

    def close(self):
        if self.client is not None:
            try:
                self.client.close()
            except Exception:
                pass
            self.client = None


@unittest.skipIf(SKIP, SKIP)
class RandomizedBackendTest(unittest.TestCase):

    def setUp(self):
        self.seed = int(os.environ.get("KVSTASH_SEED") or random.SystemRandom().randrange(1 << 30))
        print("\ntest_sglang_random: seed %d, %d steps (KVSTASH_SEED=%d to replay)" % (self.seed, STEPS, self.seed),
              file=sys.stderr)
        self.rng = random.Random(self.seed)
        random.seed(self.seed)
        self.server = Server(pool_bytes=16 << 20, chunk_tokens=CHUNK_TOKENS).start()
        self.addCleanup(self.server.close)
        self.addCleanup(self._continue_server)
        quiet = logging.getLogger("kvstash.sglang")
        self.addCleanup(quiet.setLevel, quiet.level)
        quiet.setLevel(logging.ERROR)                   # server losses are this test's daily bread
        self.docs = [doc_keys(d) for d in range(DOCS)]
        self.universe = [k for keys in self.docs for k in keys]
        probe = make_pool(page_size=PAGE_SIZE, pages=1)
        self.page_bytes = probe.get_dummy_flat_data_page().numel() * 2
        self.contents = Contents(self.page_bytes)
        self.engines = {name: Engine(name, self.server.directory, self.contents) for name in ENGINES}
        for engine in self.engines.values():
            self.addCleanup(engine.backend.close)
        self.admin = Raw(self.server.directory, kvstash.Layout("admin", layers=1, hidden=1, dtype="uint8"))
        self.oracles = {}
        self.filler = None
        self.addCleanup(self._close_raw)
        self.step = 0
        self.op = ""
        self.paused = False
        self.read_pages = 0
        self.gets = 0
        self.gets_with_hits = 0

    def _continue_server(self):
        if self.paused and self.server.process is not None:
            self.server.resume()

    def _close_raw(self):
        for raw in list(self.oracles.values()) + [self.admin, self.filler]:
            if raw is not None:
                raw.close()

    def _oracle(self, engine):
        """The plain reader of ``engine``'s namespace."""
        oracle = self.oracles.get(engine.tag)
        if oracle is None:
            oracle = self.oracles[engine.tag] = Raw(self.server.directory, engine.backend.layout(CHUNK_TOKENS))
        return oracle

    def _filler(self):
        if self.filler is None:
            layout = self.engines["A1"].backend.layout(CHUNK_TOKENS)._replace(model="filler")
            self.filler = Raw(self.server.directory, layout)
        return self.filler

    # ------------------------------------------------------------------------------------------ checks
    def broken(self, message):
        raise AssertionError("seed %d, step %d (%s): %s -- replay with KVSTASH_SEED=%d"
                             % (self.seed, self.step, self.op, message, self.seed))

    def timed(self, engine, what, *args):
        started = time.monotonic()
        result = getattr(engine.backend, what)(*args)
        took = time.monotonic() - started
        if took > TIMEOUT_S + SLACK_S:
            self.broken("%s.%s took %.3f s (timeout_s %.1f)" % (engine.name, what, took, TIMEOUT_S))
        return result

    def check_read(self, engine, keys, ok, what):
        """True entries are a leading run; ``what(i)`` (the bytes of page i as read) is its key's for each."""
        if len(ok) != len(keys):
            self.broken("%s answered %d entries for %d keys" % (engine.name, len(ok), len(keys)))
        run = ok.index(False) if False in ok else len(ok)
        if any(ok[run:]):
            self.broken("%s answered %s: a page after a gap" % (engine.name, ["T" if x else "F" for x in ok]))
        for i in range(run):
            if what(i) != self.contents.bytes(engine.tag, keys[i]):
                self.broken("%s read page %d (%s...) with bytes that are not its key's" % (engine.name, i, keys[i][:8]))
        self.gets += 1
        self.gets_with_hits += run > 0
        self.read_pages += run
        return run

    def answered(self, engine, before):
        """Whether every call of the backend since ``state(engine)`` was ``before`` was answered by the server (no
        connection lost or made again, nothing unavailable)."""
        return self.state(engine) == before

    def state(self, engine):
        connection, stats = engine.backend._connection, engine.backend.stats
        return connection.reconnects, connection.failures, stats["unavailable"], stats["errors"]

    def check_store(self, sample):
        """Pages readable in each namespace hold their keys' bytes (a sample, or every key)."""
        for name in ("A1", "B", "C"):
            engine = self.engines[name]
            if engine.backend.model_name is None:
                continue
            oracle = self._oracle(engine)
            for key in sample:
                data = oracle.read(key, self.page_bytes)
                if data is not None and data != self.contents.bytes(engine.tag, key):
                    self.broken("namespace of %s holds page %s... with bytes that are not its key's"
                              % (engine.name, key[:8]))

    def check_idle(self, after_fault):
        """No reserved or pinned chunk and no pending transfer once every backend is idle."""
        client = self.admin.get()

        def idle():
            return all(counter_named(client, name) == 0
                       for name in ("reserved_chunks", "pinned_chunks", "pending_transfers"))
        # A backend that gave up on a stopped server dropped its connection: the server ends its transfers when it
        # sees the client closed (every 100 ms).
        if not (idle() or after_fault and wait_until(idle, 5.0)):
            self.broken("idle server holds %s" % {name: counter_named(client, name) for name in
                                                ("reserved_chunks", "pinned_chunks", "pending_transfers")})

    # ------------------------------------------------------------------------------------------ operations
    def pick_engine(self):
        return self.engines[self.rng.choices(["A1", "A2", "B", "C"], weights=[35, 35, 15, 15])[0]]

    def pick_doc(self):
        return self.docs[self.rng.choices(range(DOCS), weights=[(d + 1) ** -1.5 for d in range(DOCS)])[0]]

    def store(self, engine):
        keys = self.pick_doc()
        start = 0 if self.rng.random() < 0.5 else self.rng.randrange(DOC_PAGES)     # a prompt's first node, or later
        keys = keys[start:start + self.rng.randint(1, 8)]
        n = len(keys)
        host = engine.pool.alloc(n * PAGE_SIZE)
        try:
            engine.fill(host, keys)
            before = self.state(engine)
            if self.rng.random() < 0.8:
                self.op += " batch_set_v1 %d" % n
                ok = self.timed(engine, "batch_set_v1", keys, host)
                if len(ok) != n:
                    self.broken("batch_set_v1 answered %d entries for %d keys" % (len(ok), n))
                stored = all(ok)
            else:
                self.op += " batch_set %d" % n
                values = [engine.pool.get_data_page(int(host[i * PAGE_SIZE])) for i in range(n)]
                stored = self.timed(engine, "batch_set", keys, values)
            if stored and self.answered(engine, before):
                found = self.timed(engine, "batch_exists", keys)
                if self.answered(engine, before) and found != n:
                    self.broken("%s stored %d pages and found %d of them right after" % (engine.name, n, found))
        finally:
            engine.pool.free(host)

    def fetch(self, engine, fault=None):
        """SGLang's prefetch: batch_exists on a prefix, then the pages (the hits, or all of them) into host
        pages or dummy flat pages; ``fault(engine)`` runs between the two."""
        keys = self.pick_doc()[:self.rng.randint(1, DOC_PAGES)]
        hits = self.timed(engine, "batch_exists", keys)
        if not 0 <= hits <= len(keys):
            self.broken("batch_exists answered %d for %d keys" % (hits, len(keys)))
        if hits == 0 and self.rng.random() < 0.8:
            return                                  # SGLang gets nothing when nothing hit; now and then it is tried
        if fault is not None:
            fault(engine)
        try:
            self.get(engine, keys, hits)
        finally:
            engine.backend.__dict__.pop("_retrieve", None)      # a fault's wrapper, had the get not used it

    def get(self, engine, keys, hits):
        if self.rng.random() < 0.5 and hits > 0:
            keys = keys[:hits]
        n = len(keys)
        if self.rng.random() < 0.75:
            self.op += " batch_get_v1 %d/%d" % (n, hits)
            host = engine.pool.alloc(n * PAGE_SIZE)
            try:
                engine.junk(host, n)
                ok = self.timed(engine, "batch_get_v1", keys, host)
                run = self.check_read(engine, keys, ok, lambda i: engine.host_bytes(host, i))
                for i in range(run + 1, n):          # nothing after the first page not read was written
                    if engine.host_bytes(host, i) != bytes([JUNK]) * self.page_bytes:
                        self.broken("%s wrote host page %d after a gap at %d" % (engine.name, i, run))
            finally:
                engine.pool.free(host)
        else:
            self.op += " batch_get %d/%d" % (n, hits)
            targets = [engine.pool.get_dummy_flat_data_page().view(torch.uint8).fill_(JUNK).view(torch.bfloat16)
                       for _ in keys]
            pages = self.timed(engine, "batch_get", keys, targets)
            ok = [p is not None for p in pages]
            self.check_read(engine, keys, ok, lambda i: pages[i].contiguous().view(torch.uint8).numpy().tobytes())

    def single(self, engine):
        key = self.rng.choice(self.pick_doc())
        kind = self.rng.choice(["exists", "get", "set"])
        self.op += " " + kind
        if kind == "exists":
            self.timed(engine, "exists", key)
        elif kind == "get":
            target = engine.pool.get_dummy_flat_data_page()
            page = self.timed(engine, "get", key, target)
            self.check_read(engine, [key], [page is not None],
                            lambda i: page.contiguous().view(torch.uint8).numpy().tobytes())
        else:
            value = self.contents.tensor(engine.tag, key).clone().view(torch.bfloat16)
            self.timed(engine, "set", key, value)

    def evict_between(self, engine):
        self.admin.get().clear()                    # every unpinned chunk goes: evicted between exists and get

    def clear_during_get(self, engine):
        """Wraps the next get: after page j is copied, a forced CLEAR ends its pins and a filler's store takes
        every slot, so later slots (and page j's) hold other bytes while the get goes on."""
        backend = engine.backend
        original = backend._retrieve
        j = self.rng.randrange(4)

        def retrieve(keys, sink):
            def sink_then_reclaim(i, slot):
                sink(i, slot)
                if i == j:
                    self.admin.get().clear(force=True)
                    self._filler().fill_pool("F", self.contents, 256, self.rng)
            try:
                return original(keys, sink_then_reclaim)
            finally:
                backend.__dict__.pop("_retrieve", None)
        backend._retrieve = retrieve

    def kill_restart(self):
        self.op += " kill"
        self.server.kill()
        engine = self.pick_engine()
        self.rng.choice([self.store, self.fetch])(engine)
        self.server.start()

    def pause(self):
        self.op += " SIGSTOP"
        self.server.pause()
        self.paused = True
        try:
            for _ in range(2):
                engine = self.pick_engine()
                self.rng.choice([self.store, self.fetch])(engine)
        finally:
            self.server.resume()
            self.paused = False

    # ------------------------------------------------------------------------------------------ the test
    def test_should_never_hand_over_a_wrong_page_under_random_calls_and_faults(self):
        started = time.monotonic()
        faults = 0
        for self.step in range(STEPS):
            draw = self.rng.random()
            engine = self.pick_engine()
            self.op = engine.name
            fault = False
            if draw < 0.35:
                self.store(engine)
            elif draw < 0.78:
                self.fetch(engine)
            elif draw < 0.84:
                self.single(engine)
            elif draw < 0.88:
                self.op += " evict-between"
                self.fetch(engine, self.evict_between)
            elif draw < 0.985:
                self.op += " clear-during-get"
                self.fetch(engine, self.clear_during_get)
            elif draw < 0.9935:
                self.pause()
                fault = True
            else:
                self.kill_restart()
                fault = True
            faults += fault
            self.check_idle(fault)
            self.check_store(self.rng.sample(self.universe, 3))
        self.step = STEPS
        self.op = "final check of every page"
        self.check_store(self.universe)
        took = time.monotonic() - started
        print("test_sglang_random: %d steps in %.1f s (%d server faults): %d gets, %d with pages, %d pages read; %s"
              % (STEPS, took, faults, self.gets, self.gets_with_hits, self.read_pages,
                 self.engines["A1"].backend.stats), file=sys.stderr)
        if self.gets_with_hits < self.gets // 5:
            self.broken("only %d of %d gets read a page: the test checked too little" % (self.gets_with_hits,
                                                                                      self.gets))


if __name__ == "__main__":
    unittest.main()
