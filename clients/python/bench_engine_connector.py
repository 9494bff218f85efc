"""KV connectors with their own time measured, for ``bench_engine.py``: the same classes, every engine-facing method
timed (nothing else changed).

``TimedKvStashConnector`` is ``KvStashConnector``; ``TimedOffloadingConnector`` and ``TimedLMCacheConnectorV1`` are
vLLM's ``OffloadingConnector`` and ``LMCacheConnectorV1`` (imported only when asked for, so this module loads in an
environment without LMCache). Load one with ``"kv_connector": "TimedKvStashConnector",
"kv_connector_module_path": "bench_engine_connector"`` (this directory on ``sys.path``).

The time goes to ``TIMINGS[role]`` of this module, in the process that runs that role (with the engine core in the
calling process, ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, both roles are in the caller's): per method the calls and
seconds, and per engine step the seconds spent in all of the role's methods. A scheduler step ends with
``build_connector_meta``; what vLLM calls after a step (``update_connector_output``, ``request_finished``) counts
in the next. A worker step is ``bind_connector_metadata`` .. ``clear_connector_metadata``. A method that calls
another timed one counts once in the step. Each step is tagged with what it did (``kinds``): ``lookup`` (the
scheduler asked about a request), ``load`` / ``save`` (the workers' metadata had loads / saves: kvstash's and any
connector whose metadata has ``loads`` and ``saves`` lists), or ``idle``.
"""

import time

SCHEDULER_METHODS = ("get_num_new_matched_tokens", "update_state_after_alloc", "build_connector_meta",
                     "update_connector_output", "request_finished", "request_finished_all_groups",
                     "update_state_after_free", "take_events", "get_kv_connector_stats", "has_pending_block_frees")
WORKER_METHODS = ("bind_connector_metadata", "start_load_kv", "wait_for_layer_load", "save_kv_layer",
                  "wait_for_save", "get_transfer_results", "get_finished", "get_block_ids_with_load_errors",
                  "get_kv_connector_stats", "get_kv_connector_kv_cache_events", "build_connector_worker_meta",
                  "clear_connector_metadata", "handle_preemptions")
STEP_END = {"scheduler": "build_connector_meta", "worker": "clear_connector_metadata"}


def _new_role():
    return {"methods": {}, "steps": [], "kinds": [], "open": 0.0, "depth": 0, "kind": set()}


TIMINGS = {"scheduler": _new_role(), "worker": _new_role()}


def reset():
    """Forgets what was measured (e.g. after a warm-up)."""
    for role in TIMINGS:
        TIMINGS[role] = _new_role()


# What a step did, for the per-step figures: a scheduler step that looked a request up, a worker step whose
# metadata (KvStashConnectorMetadata, or any with the same ``loads``/``saves`` lists) loads or saves chunks.
STEP_KIND = {"get_num_new_matched_tokens": "lookup"}


def _work_of(meta):
    kinds = set()
    if getattr(meta, "loads", None):
        kinds.add("load")
    if getattr(meta, "saves", None):
        kinds.add("save")
    return kinds


def _timed(name, method):
    def wrapper(self, *args, **kwargs):
        role = "scheduler" if self._timed_role == "scheduler" else "worker"
        timing = TIMINGS[role]
        timing["depth"] += 1
        start = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            seconds = time.perf_counter() - start
            timing["depth"] -= 1
            entry = timing["methods"].setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += seconds
            if timing["depth"] == 0:
                timing["open"] += seconds
                if name in STEP_KIND:
                    timing["kind"].add(STEP_KIND[name])
                elif name == "bind_connector_metadata" and args:
                    timing["kind"].update(_work_of(args[0]))
                if name == STEP_END[role]:
                    timing["steps"].append(timing["open"])
                    timing["kinds"].append("+".join(sorted(timing["kind"])) or "idle")
                    timing["open"] = 0.0
                    timing["kind"] = set()
    wrapper.__name__ = name
    wrapper.__qualname__ = name
    return wrapper


def timed(base):
    """A subclass of connector class ``base`` whose engine-facing methods add their time to ``TIMINGS``."""
    def __init__(self, vllm_config, role, kv_cache_config=None):
        self._timed_role = "scheduler" if getattr(role, "name", str(role)).upper().endswith("SCHEDULER") \
            else "worker"
        base.__init__(self, vllm_config, role, kv_cache_config)

    namespace = {"__init__": __init__, "__module__": __name__, "__doc__": "%s, timed." % base.__name__}
    for name in set(SCHEDULER_METHODS + WORKER_METHODS):
        method = getattr(base, name, None)
        if callable(method):
            namespace[name] = _timed(name, method)
    return type("Timed" + base.__name__, (base,), namespace)


def _kvstash():
    from kvstash.vllm import KvStashConnector
    return timed(KvStashConnector)


def _offloading():
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading_connector import OffloadingConnector
    return timed(OffloadingConnector)


def _lmcache():
    from vllm.distributed.kv_transfer.kv_connector.v1.lmcache_connector import LMCacheConnectorV1
    return timed(LMCacheConnectorV1)


_FACTORIES = {"TimedKvStashConnector": _kvstash, "TimedOffloadingConnector": _offloading,
              "TimedLMCacheConnectorV1": _lmcache}
_made = {}


def __getattr__(name):
    """The timed classes, made when vLLM first asks for one (``getattr(module, class_name)``)."""
    if name in _FACTORIES:
        if name not in _made:
            _made[name] = _FACTORIES[name]()
        return _made[name]
    raise AttributeError(name)


def overhead_s(calls=20000) -> float:
    """Seconds the timing itself adds to one call (a timed no-op against the plain one)."""
    class Plain:
        _timed_role = "worker"

        def get_finished(self, ids):
            return None, None
    saved = TIMINGS["worker"]
    TIMINGS["worker"] = _new_role()
    timed_call = _timed("get_finished", Plain.get_finished)
    plain = Plain()
    try:
        start = time.perf_counter()
        for _ in range(calls):
            Plain.get_finished(plain, None)
        base = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(calls):
            timed_call(plain, None)
        return max(0.0, (time.perf_counter() - start - base) / calls)
    finally:
        TIMINGS["worker"] = saved
