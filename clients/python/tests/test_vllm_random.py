"""The vLLM engine seam under seeded random schedules: properties that must hold whatever happens.

Two engines (vLLM's real ``Scheduler``, ``Request`` and block hasher, two tensor-parallel ranks each, through
``tests/vllm_engine.py``; one scheduling synchronously, one asynchronously as vLLM does by default) share one real
kvstash server process with a small pool. Each step draws from the faults
users meet: requests that share prefixes arrive (some with a cache salt), finish, are aborted; vLLM preempts (few
KV blocks); chunks are evicted between the scheduler's lookup and the workers' load (an admin CLEAR, and pool
pressure); the server is SIGKILLed and restarted on its directory, or stopped with SIGSTOP for longer than
``timeout_s``; an engine drops its own prefix cache, so that hits come from kvstash. The stand-in model's KV at a
position depends on the whole prefix as it is in the cache (see vllm_engine.py), so wrong KV anywhere spreads to
every block computed after it, as in a real model.

After every step:
1. every block the connector loaded without reporting an error holds the right KV of its token prefix;
2. every block the forward reads holds the right KV, unless it is tainted: its load failed (the connector
   reports it), or it was computed over a tainted block and not computed again since (vLLM lets a request that
   shares a failed block through its prefix cache count it as computed while another request is due to recompute
   it, so it may compute over wrong KV; the connector must never store what comes of that);
3. every chunk the store holds under either engine's namespace equals the right KV of the tokens its key names
   (read back through the engines' own layouts; every ``CHECK_EVERY`` steps, after every fault and at the end);
4. the kvstash calls made for one request waited ``timeout_s`` (plus ``SLACK_S`` of scheduling noise) at most, in
   all: the scheduler's lookups, and each step's loads and saves (the slowest rank's, ranks run at once);
and at the end, once every request has finished: no KV block of either engine is held, the connectors keep no state
of a request, and the server holds no pin and no reservation.

Seeded and reproducible: the seed is printed on failure; ``KVSTASH_SEED=<n>`` replays it. ``KVSTASH_RANDOM_STEPS``
sets the number of steps (CI runs the default; ``KVSTASH_RANDOM_STEPS=5000`` is the long run).
"""

import collections
import importlib.util
import os
import random
import sys
import threading
import time
import unittest

from support import Server, counter

import kvstash

HAS_VLLM = importlib.util.find_spec("vllm") is not None and importlib.util.find_spec("torch") is not None
NO_VLLM = "vLLM is not installed (pip install 'kvstash[vllm]'; .ci/run installs it)"

STEPS = int(os.environ.get("KVSTASH_RANDOM_STEPS", "300"))
C = 64                                  # chunk tokens: 4 vLLM blocks of 16
TIMEOUT_S = 0.5
SLACK_S = 0.4                           # time a step spends outside kvstash waits (Python, the stand-in model)
CHECK_EVERY = 10
NUM_BLOCKS = 48                         # 768 tokens per engine: vLLM preempts when several requests run
POOL_BYTES = 3 << 20                    # ~90 chunks of 2 ranks: evictions all along
MAX_KILLS = MAX_STOPS = max(3, STEPS // 100)     # faults that cost time: a few per hundred steps
PINNED_CHUNKS, RESERVED_CHUNKS = 2, 1   # gauges (docs/PROTOCOL.md, counters)

if HAS_VLLM:
    import torch
    torch.set_num_threads(1)
    from vllm_engine import Engine, StoreChecker


class Timed:
    """Times one engine's kvstash calls (invariant 4): per request, its own calls (the scheduler's lookups, each
    rank's loads and saves of it, the slowest rank per step as ranks run at once); per step, the scheduler's calls
    and the slowest rank's loads and saves together."""

    def __init__(self, engine):
        self.spent = collections.defaultdict(float)
        self.worst = 0.0                                    # the most one request waited, in all
        self.worst_step = 0.0                               # the longest one step waited
        self.step_scheduler = 0.0
        self.step_ranks = collections.defaultdict(float)    # rank -> seconds in this step
        self.step_requests = collections.defaultdict(float) # (rank, request) -> seconds in this step
        scheduler = engine.connector
        lookup = scheduler.get_num_new_matched_tokens

        def timed_lookup(request, num_computed_tokens):
            start = time.monotonic()
            try:
                return lookup(request, num_computed_tokens)
            finally:
                took = time.monotonic() - start
                self.step_scheduler += took
                self._add(request.request_id, took)
        scheduler.get_num_new_matched_tokens = timed_lookup
        for rank, worker in enumerate(engine.workers):
            for name in ("_load", "_save"):
                self._wrap(rank, worker.worker, name)

    def _wrap(self, rank, worker, name):
        call = getattr(worker, name)

        def timed(spec):
            start = time.monotonic()
            try:
                return call(spec)
            finally:
                took = time.monotonic() - start
                self.step_ranks[rank] += took
                self.step_requests[(rank, spec.req_id)] += took
        setattr(worker, name, timed)

    def end_step(self):
        per_request = collections.defaultdict(float)
        for (_, req_id), took in self.step_requests.items():
            per_request[req_id] = max(per_request[req_id], took)
        for req_id, took in per_request.items():
            self._add(req_id, took)
        self.worst_step = max(self.worst_step, self.step_scheduler + max(self.step_ranks.values(), default=0.0))
        self.step_scheduler = 0.0
        self.step_ranks.clear()
        self.step_requests.clear()

    def _add(self, req_id, took):
        self.spent[req_id] += took
        self.worst = max(self.worst, self.spent[req_id])


@unittest.skipUnless(HAS_VLLM, NO_VLLM)
class EngineSeamRandomTest(unittest.TestCase):

    def test_should_hold_every_invariant_over_random_schedules(self):
        seed = int(os.environ.get("KVSTASH_SEED") or random.SystemRandom().randrange(1 << 32))
        schedule = Schedule(self, seed, STEPS)
        try:
            summary = schedule.run()
        except BaseException:
            print("\ntest_vllm_random: FAILED at step %s with KVSTASH_SEED=%d (KVSTASH_RANDOM_STEPS=%d)"
                  % (schedule.step_index, seed, STEPS), file=sys.stderr)
            raise
        print("\ntest_vllm_random: seed %d, %d steps: %s" % (seed, STEPS, summary), file=sys.stderr)
        if STEPS >= 200:                # the schedule met the faults it is about
            self.assertGreater(summary["loaded_chunks"], 0, summary)
            self.assertGreater(summary["load_errors"], 0, summary)
            self.assertGreater(summary["deferred_saves"], 0, summary)
            self.assertGreater(summary["stored_chunks_checked"], 0, summary)


class Schedule:
    """One seeded run (see the module doc)."""

    def __init__(self, test, seed, steps):
        self.test = test
        self.rng = random.Random(seed)
        self.steps = steps
        self.server = Server(pool_bytes=POOL_BYTES, chunk_tokens=C).start()
        self.alive = True
        self.kills = self.stops = 0
        self.down_until = None
        extra = {"timeout_s": TIMEOUT_S, "reconnect_s": 0.1}
        # The second engine runs vLLM's default, asynchronous scheduling, as its engine core does: a step is
        # scheduled and executed before the output of the one before it (load errors included) is processed.
        self.engines = [Engine(self.server.directory, tp=2, num_blocks=NUM_BLOCKS, extra=extra, batched_tokens=256,
                               async_scheduling=bool(e)) for e in range(2)]
        self.timers = [Timed(e) for e in self.engines]
        self.checkers = [StoreChecker(e, self.server.directory) for e in self.engines]
        rng = self.rng
        self.prefixes = [[rng.randrange(1, 30000) for _ in range(rng.choice((1, 2, 3, 4)) * C + rng.randrange(C))]
                         for _ in range(6)]
        self.next_id = 0
        self.step_index = None
        self.counts = collections.Counter()

    def run(self):
        try:
            for step in range(self.steps):
                self._step(step)
            self.step_index = "drain"
            self._drain()
            return self._summary()
        finally:
            for engine in self.engines:
                engine.close()
            self.server.close()

    # ------------------------------------------------------------------------------------------ one step
    def _step(self, step):
        self.step_index = step
        rng = self.rng
        if not self.alive and step >= self.down_until:
            self.server.start()
            self.alive = True
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            self._add(rng.choice(self.engines))
        if rng.random() < 0.05:
            self._abort()
        if rng.random() < 0.03:
            engine = rng.choice(self.engines)
            engine.scheduler.reset_prefix_cache()
        for e, engine in enumerate(self.engines):
            if not engine.has_work():
                continue
            hook = self._fault(engine)
            paused = None
            if self.alive and self.stops < MAX_STOPS and rng.random() < 0.01:
                paused = self._pause()
            engine.step(before_load=hook)
            if paused is not None:
                paused.join()
            self.timers[e].end_step()
            self._check_step(engine, self.timers[e])
        if self.alive and (step % CHECK_EVERY == 0 or self.counts["faults_since_check"]):
            self._check_store()

    def _add(self, engine):
        rng = self.rng
        tokens = list(rng.choice(self.prefixes)) + [rng.randrange(1, 30000) for _ in range(rng.randrange(0, 80))]
        salt = "tenant-b" if rng.random() < 0.2 else None
        self.next_id += 1
        engine.add("r%d" % self.next_id, tokens, max_tokens=rng.randrange(1, 9), salt=salt)
        self.counts["requests"] += 1

    def _abort(self):
        engine = self.rng.choice(self.engines)
        live = [r for r in engine.scheduler.requests.values() if not r.is_finished()]
        if live:
            engine.abort(self.rng.choice(live).request_id)
            self.counts["aborts"] += 1

    def _fault(self, engine):
        """A fault for the moment between the scheduler's lookup and the workers' loads, or None."""
        rng = self.rng
        roll = rng.random()
        if not self.alive:
            return None
        if roll < 0.15:
            def evict(meta):
                if meta.loads:
                    with kvstash.connect(self.server.directory) as admin:
                        admin.clear()
                    self.counts["evictions_before_load"] += 1
                    self.counts["faults_since_check"] += 1
            return evict
        if roll < 0.17 and self.kills < MAX_KILLS:
            def kill(meta):
                self.server.kill()
                self.alive = False
                self.kills += 1
                self.down_until = self.step_index + rng.randrange(1, 6)
                self.counts["kills"] += 1
            return kill
        return None

    def _pause(self):
        """SIGSTOP for longer than timeout_s, SIGCONT from a timer; the step runs meanwhile."""
        self.server.pause()
        self.stops += 1
        self.counts["stops"] += 1
        timer = threading.Timer(TIMEOUT_S * 1.6, self.server.resume)
        timer.start()
        return timer

    # ------------------------------------------------------------------------------------------ invariants
    def _check_step(self, engine, timer):
        t = self.test
        t.assertEqual(engine.mismatched_blocks, 0, "a block loaded without an error holds wrong KV (invariant 1)")
        t.assertEqual(engine.bad_reads, [], "the forward read wrong KV that no failed load explains (invariant 2)")
        t.assertLessEqual(timer.worst, TIMEOUT_S + SLACK_S,
                          "a request waited %.2f s on kvstash in all (invariant 4)" % timer.worst)
        t.assertLessEqual(timer.worst_step, TIMEOUT_S + SLACK_S,
                          "a step waited %.2f s on kvstash (invariant 4)" % timer.worst_step)

    def _check_store(self):
        self.counts["faults_since_check"] = 0
        for engine, checker in zip(self.engines, self.checkers):
            read, wrong = checker.mismatches(engine.saved)
            self.counts["stored_chunks_checked"] += read
            self.test.assertEqual(wrong, [], "chunks in the store differ from their tokens' KV (invariant 3)")

    def _drain(self):
        if not self.alive:
            self.server.start()
            self.alive = True
        for _ in range(400):
            if not any(e.has_work() for e in self.engines):
                break
            for e, engine in enumerate(self.engines):
                if engine.has_work():
                    engine.step()
                    self.timers[e].end_step()
                    self._check_step(engine, self.timers[e])
        t = self.test
        for engine in self.engines:
            t.assertFalse(engine.has_work())
            t.assertEqual(engine.free_blocks(), engine.num_blocks - 1, "KV blocks held after every request ended")
            c = engine.connector.scheduler
            t.assertEqual((c._trackers, c._matched, c._asked, c._held, c._spent), ({}, {}, set(), {}, {}),
                          "the scheduler's connector keeps state of finished requests")
        self._check_store()
        with kvstash.connect(self.server.directory) as probe:
            t.assertEqual((counter(probe, PINNED_CHUNKS), counter(probe, RESERVED_CHUNKS)), (0, 0),
                          "pins or reservations left on the server")

    def _summary(self):
        out = dict(self.counts)
        out.pop("faults_since_check", None)
        for key in ("loaded_chunks", "load_errors", "stored_chunks", "deferred_saves", "out_of_budget"):
            out[key] = sum(w.stats.get(key, 0) for e in self.engines for w in e.workers + [e.connector]
                           if key in w.stats)
        out["worst_request_wait_s"] = round(max(t.worst for t in self.timers), 3)
        out["worst_step_wait_s"] = round(max(t.worst_step for t in self.timers), 3)
        return out


if __name__ == "__main__":
    unittest.main()
