"""The vLLM connector's scheduler side (module documentation of ``kvstash.vllm.connector``): the lookups that say how
many tokens kvstash holds, and the step's plan for the workers: which chunks to load into which blocks, which complete
chunks to save once every block they depend on holds verified KV, and which finished requests' blocks to hold until
their last saves are done."""

import collections
import time
from dataclasses import dataclass
from typing import Any, Deque, Dict, List, Optional, Set, Tuple

import kvstash
from kvstash import KvStashError
from kvstash.reconnect import Reconnecting

from .metadata import (KvStashConnectorMetadata, KvStashHandshake, KvStashWorkerMetadata, LoadSpec, SaveSpec,
                       chunk_key, instance_id)
from .side import Side, logger

#: One step of a request: (request id, its tracker, tokens computed before the step, and after it).
Step = Tuple[str, "_Tracker", int, int]


@dataclass
class _Tracker:
    """The scheduler's view of one request."""
    request: Any
    block_ids: List[int]
    saved_chunks: int = 0                   # chunks [0, saved_chunks) are stored, being stored or were loaded
    load: Optional[Tuple[int, int]] = None  # (first token, last token) to load, set by update_state_after_alloc
    hold_steps: int = 0                     # finished: steps its blocks may still be held for its last saves


class SchedulerSide(Side):
    """The connector in vLLM's scheduler process (``KVConnectorRole.SCHEDULER``)."""

    def __init__(self, vllm_config: Any, transfer: Any) -> None:
        super().__init__(vllm_config, transfer, "scheduler")
        self._trackers: Dict[str, _Tracker] = {}
        self._matched: Dict[str, Tuple[int, int]] = {}
        self._asked: Set[str] = set()       # requests asked about before: asked again, the server is told
        self._spent: Dict[str, float] = {}  # seconds kvstash calls took per request, scheduler and workers
        self._held: Dict[str, _Tracker] = {}    # finished requests whose blocks wait one step for their saves
        self._invalid: Set[int] = set()     # blocks reported as failed loads, until a step recomputes them
        lag = 2 if getattr(vllm_config.scheduler_config, "async_scheduling", False) else 1
        self._recent_loads: Deque[Set[int]] = collections.deque(maxlen=lag)     # blocks loaded by unreported steps
        self._derived: Deque[Tuple[Set[int], Set[int]]] = collections.deque(maxlen=lag)     # computed over them
        self._model_names: Dict[int, str] = {}      # pipeline stage -> the model name its workers registered
        self._told_unnamed = False
        self._connection = Reconnecting(self._directory, self._timeout_s, self._reconnect_s, logger, "recomputing",
                                        copy_transport=True)

    def _keys(self, request: Any, chunks: int, per: int) -> List[Tuple[int, int]]:
        hashes = request.block_hashes
        return [chunk_key(hashes[(k + 1) * per - 1]) for k in range(chunks)]

    def _budget(self, req_id: str) -> float:
        return self._timeout_s - self._spent.get(req_id, 0.0)

    # ------------------------------------------------------------------------------------------ scheduler
    def set_xfer_handshake_metadata_pp_aware(self, metadata: Optional[Dict[Tuple[int, int], Any]]) -> None:
        """vLLM hands over what every worker rank told it after registering its caches: the model names."""
        by_stage = collections.defaultdict(set)
        for (pp, _), meta in (metadata or {}).items():
            if isinstance(meta, KvStashHandshake) and meta.model_name:
                by_stage[pp].add(meta.model_name)
        for pp, names in by_stage.items():
            if len(names) == 1:
                self._model_names[pp] = next(iter(names))
            else:
                self._model_names.pop(pp, None)
                logger.error("kvstash: the ranks of pipeline stage %d registered different models (%s): lookups "
                             "answer 0", pp, ", ".join(sorted(names)))

    def set_xfer_handshake_metadata(self, metadata: Optional[Dict[int, Any]]) -> None:
        self.set_xfer_handshake_metadata_pp_aware({(0, tp): meta for tp, meta in (metadata or {}).items()})

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[int, bool]:
        if self._producer_only:
            return 0, False
        if len(self._model_names) < self._pp_size:
            if not self._told_unnamed:
                self._told_unnamed = True
                logger.warning("kvstash: the workers have not said which model they registered; no hits until "
                               "they do")
            return 0, False
        req_id = request.request_id
        budget = self._budget(req_id)
        if budget <= 0:
            self.stats["out_of_budget"] += 1
            return 0, False
        start = time.monotonic()
        try:
            return self._lookup(request, num_computed_tokens, budget)
        finally:
            self._spent[req_id] = self._spent.get(req_id, 0.0) + time.monotonic() - start

    def _lookup(self, request: Any, num_computed_tokens: int, budget: float) -> Tuple[int, bool]:
        client = self._connection.get(budget)
        if client is None:
            self.stats["unavailable"] += 1
            return 0, False
        try:
            chunk = self._chunk_tokens_of(client)
        except ValueError as ex:
            logger.error("kvstash: %s", ex)
            return 0, False
        per = chunk // self._block_size
        prompt = request.num_prompt_tokens
        usable = min(prompt // chunk, len(request.block_hashes) // per)
        first = num_computed_tokens // chunk                    # chunks before it are on the GPU already
        if usable <= first:
            return 0, False
        keys = self._keys(request, usable, per)[first:]
        hits = len(keys)
        # vLLM asks again at each step while a request waits (and after a preemption): asked again, the LOOKUP
        # goes QUIET, so the store's eviction policy counts one request's keys once, not once a step.
        again = request.request_id in self._asked
        self._asked.add(request.request_id)
        try:
            with client.bounded(budget):
                for pp in range(self._pp_size):
                    r = client.lookup_all_ranks(self._model_names[pp], self._tp_size, keys, salt=request.cache_salt,
                                                quiet=again)
                    hits = min(hits, r.hit_chunks if r.ok else 0)
                if hits < len(keys) and self._tier_wait_s > 0 and self._engine_id is not None and client.second_tier:
                    more = self._wait_for_tier(client, keys[hits:], request.cache_salt)
                    self.stats["tier_chunks"] += more
                    hits += more
        except KvStashError as ex:
            self._connection.failed(ex)
            self.stats["unavailable"] += 1
            return 0, False
        self.stats["lookups"] += 1
        # vLLM computes at least the last prompt token itself: a full hit stops a block short of it.
        limit = (prompt - 1) // self._block_size * self._block_size
        hit_tokens = min((first + hits) * chunk, limit)
        external = max(0, hit_tokens - num_computed_tokens)
        self._matched[request.request_id] = (num_computed_tokens, external)
        return external, False

    def _wait_for_tier(self, client: kvstash.Client, keys: List[Tuple[int, int]], salt: Optional[str]) -> int:
        """Chunks of ``keys`` (those after the prefix every rank holds) that every rank's instance holds once the
        second tier's read-through is over, all ranks within one ``tier_wait_ms``; 0 for a rank not registered."""
        deadline = time.monotonic() + self._tier_wait_s
        more = len(keys)
        for pp in range(self._pp_size):
            for rank in range(self._tp_size):
                r = client.lookup(instance_id(self._engine_id, pp, rank), keys, salt=salt,
                                  wait_tier_s=max(0.0, deadline - time.monotonic()), quiet=True)
                more = min(more, r.hit_chunks if r.ok else 0)
                if more == 0:
                    return 0
        return more

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        block_ids = list(blocks.get_block_ids()[0]) if blocks is not None else []
        tracker = self._trackers.get(request.request_id)
        if tracker is None:
            tracker = self._trackers[request.request_id] = _Tracker(request, block_ids)
        else:
            tracker.request, tracker.block_ids = request, block_ids
        matched = self._matched.pop(request.request_id, None)
        if num_external_tokens > 0 and matched is not None:
            local = matched[0]
            tracker.load = (local, local + num_external_tokens)
            self.stats["hit_tokens"] += num_external_tokens

    def build_connector_meta(self, scheduler_output: Any) -> KvStashConnectorMetadata:
        meta = KvStashConnectorMetadata()
        chunk = self._chunk_tokens
        if chunk is None:                       # never connected: nothing was matched, nothing can be saved
            client = self._connection.get()
            if client is None:
                self._finish_held(meta)
                return meta
            chunk = self._chunk_tokens_of(client)
        per = chunk // self._block_size
        scheduled = scheduler_output.num_scheduled_tokens
        steps = []                              # (request id, tracker, tokens computed before and after the step)
        for new in scheduler_output.scheduled_new_reqs:
            tracker = self._trackers.get(new.req_id)
            if tracker is None:
                continue
            tracker.block_ids = list(new.block_ids[0])
            steps.append((new.req_id, tracker, new.num_computed_tokens,
                          new.num_computed_tokens + scheduled.get(new.req_id, 0)))
        cached = scheduler_output.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            tracker = self._trackers.get(req_id)
            if tracker is None:
                continue
            new_blocks = cached.new_block_ids[i]
            if req_id in cached.resumed_req_ids:
                tracker.block_ids = list(new_blocks[0]) if new_blocks is not None else []
            elif new_blocks is not None:
                tracker.block_ids.extend(new_blocks[0])
            steps.append((req_id, tracker, cached.num_computed_tokens[i],
                          cached.num_computed_tokens[i] + scheduled.get(req_id, 0)))
        loading = set()
        for req_id, tracker, _, _ in steps:
            if tracker.load is not None:
                loading.update(self._plan_load(meta, req_id, tracker, chunk, per))
        if self._invalid:
            self._invalid.difference_update(loading)        # loaded again: verified like any other load, below
            self._recompute(steps)
        self._recent_loads.append(loading)
        self._derived.append(self._computed_over(steps, set().union(*self._recent_loads)))
        meta.server_lost = self._connection.resting()
        if not self._consumer_only:
            suspect = self._invalid.union(*self._recent_loads) if self._invalid or loading or \
                any(self._recent_loads) else None
            for req_id, tracker, _, after in steps:
                self._plan_save(meta, req_id, tracker, after, chunk, per, suspect)
            self._finish_held(meta, chunk, per, suspect)
        else:
            self._finish_held(meta)
        self._maybe_log()
        return meta

    def _recompute(self, steps: List[Step]) -> None:
        """What this step's forward does to the blocks that hold no KV to trust (``_invalid``): a block computed from
        a clean prefix is clean again; a block computed over one that is not is not clean either. vLLM lets a
        request that shares a failed block through its prefix cache count it as computed and go on, while another
        request is due to recompute it, so the second one can compute over wrong KV. The blocks are visited in
        position order, as attention reads them: a block another request recomputes in the same step is clean
        before a later block reads it. A request's prefix is clean when the block before the step's first one is
        (and that block itself, when the step starts within it): every block computed over an untrusted one is
        untrusted itself, here or, for loads not reported yet, when their report comes (``_computed_over``), so
        the last block before says what all before it hold, at no cost per block of context."""
        b = self._block_size
        by_block = collections.defaultdict(list)
        for _, tracker, before, after in steps:
            for j in range(before // b, min(-(-after // b), len(tracker.block_ids))):
                by_block[j].append((tracker, before))
        clean = {}
        for j in sorted(by_block):
            for tracker, before in by_block[j]:
                key = id(tracker)
                if key not in clean:
                    ids = tracker.block_ids
                    clean[key] = (j == 0 or ids[j - 1] not in self._invalid) and \
                        (before % b == 0 or ids[j] not in self._invalid)
                if clean[key]:
                    self._invalid.discard(tracker.block_ids[j])
                else:
                    self._invalid.add(tracker.block_ids[j])

    def _computed_over(self, steps: List[Step], unreported: Set[int]) -> Tuple[Set[int], Set[int]]:
        """(``unreported``, the blocks this step computes over one of them): loads whose outcome vLLM has not
        reported yet (this step's; under asynchronous scheduling the step before's too, whose report comes after
        this step was scheduled), and what this step's forward computes from them. Should one of those loads be
        reported failed, what was computed over it holds no KV to trust either (update_connector_output)."""
        derived = set()
        if unreported:
            b = self._block_size
            for _, tracker, before, after in steps:
                first, end = before // b, min(-(-after // b), len(tracker.block_ids))
                if end > first and not unreported.isdisjoint(tracker.block_ids[:first + (1 if before % b else 0)]):
                    derived.update(tracker.block_ids[first:end])
        return unreported, derived

    def _plan_load(self, meta: KvStashConnectorMetadata, req_id: str, tracker: _Tracker, chunk: int,
                   per: int) -> List[int]:
        """The LoadSpec of a request's matched tokens; the blocks it writes. The chunks loaded count as stored."""
        request = tracker.request
        load, tracker.load = tracker.load, None
        if load is None:
            return []
        start, end = load
        first, last = start // chunk, -(-end // chunk)
        keys = self._keys(request, last, per)[first:]
        block_ids = []
        for b in range(first * per, last * per):
            wanted = start // self._block_size <= b < -(-end // self._block_size) and b < len(tracker.block_ids)
            block_ids.append(tracker.block_ids[b] if wanted else -1)
        meta.loads.append(LoadSpec(req_id, keys, block_ids, request.cache_salt, first, self._budget(req_id)))
        tracker.saved_chunks = max(tracker.saved_chunks, last)     # a failed load winds it back (see below)
        return [b for b in block_ids if b >= 0]

    def _plan_save(self, meta: KvStashConnectorMetadata, req_id: str, tracker: _Tracker, computed: int, chunk: int,
                   per: int, suspect: Optional[Set[int]]) -> None:
        """A SaveSpec of the request's complete chunks not saved yet, up to the first that depends on a block whose
        KV is not verified (``suspect``: loaded this step, or a failed load not recomputed yet)."""
        request = tracker.request
        limit = request.num_tokens if self._store_decode else request.num_prompt_tokens
        complete = min(min(computed, limit) // chunk, len(request.block_hashes) // per, len(tracker.block_ids) // per)
        if complete <= tracker.saved_chunks:
            return
        savable = complete
        if suspect:
            for i, b in enumerate(tracker.block_ids[:complete * per]):
                if b in suspect:
                    savable = i // per
                    self.stats["deferred_saves"] += 1
                    break
        if savable <= tracker.saved_chunks:
            return
        # A later step's range starts with the last chunk saved (present, so not written again): the store then
        # knows the chain the new chunks continue, as it does for a range starting at the prompt's start.
        start = max(0, tracker.saved_chunks - 1)
        keys = self._keys(request, savable, per)[start:]
        meta.saves.append(SaveSpec(req_id, keys, tracker.block_ids[start * per:savable * per], request.cache_salt,
                                   start, self._budget(req_id)))
        tracker.saved_chunks = savable

    def _finish_held(self, meta: KvStashConnectorMetadata, chunk: Optional[int] = None, per: Optional[int] = None,
                     suspect: Optional[Set[int]] = None) -> None:
        """The last saves of requests that finished with chunks waiting for their verification; their blocks are
        freed once the workers have run them. A request whose chunks still wait for the report of a step's loads
        (under asynchronous scheduling a step's report comes one step later) is held one more step."""
        loads = set().union(*self._recent_loads)
        for req_id in list(self._held):
            tracker = self._held[req_id]
            if chunk is not None and per is not None:
                blocks = tracker.block_ids[:len(tracker.block_ids) // per * per]
                if tracker.hold_steps > 0 and loads and not loads.isdisjoint(blocks):
                    tracker.hold_steps -= 1
                    continue
                self._plan_save(meta, req_id, tracker, tracker.request.num_computed_tokens, chunk, per, suspect)
            meta.finish.add(req_id)
            self._spent.pop(req_id, None)
            del self._held[req_id]

    def request_finished(self, request: Any, block_ids: Optional[List[int]]) -> Tuple[bool, None]:
        req_id = request.request_id
        tracker = self._trackers.pop(req_id, None)
        self._matched.pop(req_id, None)
        self._asked.discard(req_id)
        if tracker is not None and not self._consumer_only and self._chunk_tokens:
            tracker.request = request
            if block_ids is not None:
                tracker.block_ids = list(block_ids)
            per = self._chunk_tokens // self._block_size
            limit = request.num_tokens if self._store_decode else request.num_prompt_tokens
            complete = min(min(request.num_computed_tokens, limit) // self._chunk_tokens,
                           len(request.block_hashes) // per, len(tracker.block_ids) // per)
            if complete > tracker.saved_chunks:
                tracker.hold_steps = self._recent_loads.maxlen or 1
                self._held[req_id] = tracker
                return True, None               # its blocks stay until the workers have saved them
        self._spent.pop(req_id, None)
        return False, None

    def update_connector_output(self, connector_output: Any) -> None:
        invalid = connector_output.invalid_block_ids
        if invalid:
            self._invalid.update(invalid)
            for loads, derived in self._derived:
                if derived and not loads.isdisjoint(invalid):
                    self._invalid.update(derived)
            per = (self._chunk_tokens or self._block_size) // self._block_size
            for tracker in self._trackers.values():
                for i, b in enumerate(tracker.block_ids[:tracker.saved_chunks * per]):
                    if b in invalid:            # vLLM recomputes from there: so will the saves
                        tracker.saved_chunks = i // per
                        break
        worker = connector_output.kv_connector_worker_meta
        if isinstance(worker, KvStashWorkerMetadata):
            for req_id, seconds in worker.spent_s.items():
                if req_id in self._trackers or req_id in self._spent:
                    self._spent[req_id] = self._spent.get(req_id, 0.0) + seconds


    def shutdown(self) -> None:
        self._connection.close()
