"""connector-tax step timing: a vLLM general plugin (entry-point group ``vllm.general_plugins``).

vLLM calls :func:`register` once per process (API server, EngineCore, each worker). When the
environment variable ``AGENTIC_STEP_LOG_PATH`` is set, it wraps, by attribute name and without
editing any vLLM file:

* ``Scheduler.schedule``            -> ``t_ns`` (entry), ``schedule_us``, ``num_running``,
  ``num_waiting``, ``prefill_tokens``, ``decode_tokens``
* ``Scheduler._build_kv_connector_meta`` (or, if absent, the scheduler connector's
  ``build_connector_meta``)         -> ``build_meta_us``
* ``Scheduler.update_from_output``  -> the step ends when it returns: ``step_duration_us`` =
  ``schedule()`` entry to the end of ``update_from_output()`` of the same ``SchedulerOutput``
  (matched by object identity, so async scheduling's batch queue, where step N+1 is scheduled
  before step N is updated, is handled)
* ``Scheduler.shutdown``            -> final flush
* ``KVConnectorFactory.create_connector`` -> on the WORKER-role connector it sets timed
  instance attributes over ``start_load_kv`` and ``get_transfer_results`` (vLLM >= 0.3x; the
  model runner's entry point) or ``get_finished`` (vLLM 0.26) -> ``start_load_kv_us``,
  ``get_finished_us``. Instance attributes, not a proxy: ``isinstance`` checks keep working.
  This covers Model Runner V1 (``KVConnectorModelRunnerMixin``) and V2
  (``v1/worker/gpu/kv_connector.py``) alike, because both call these methods on that object.

Records: one JSON line per engine step, written to ``<AGENTIC_STEP_LOG_PATH>.<pid>.jsonl`` with
exactly the ``StepRecord`` fields of ``collector/schema/src/lib.rs``. Times are
``time.perf_counter_ns()`` = Linux ``CLOCK_MONOTONIC``. Connector fields are ``null`` when the
callback did not run in this process during the step (always the case with no connector).

Processes: when the worker runs inside the EngineCore process (uni executor: GPU with TP=1, or
``VLLM_ENABLE_V1_MULTIPROCESSING=0``) the worker-side times land in the same step record. When
the worker is a separate process (CPU default, TP>1) that process writes its own file: one
record per connector cycle (``start_load_kv`` ... ``get_finished``/``get_transfer_results``),
with ``t_ns`` at the cycle's first callback, ``step_id`` counting cycles and only the two worker
fields set. Files are merged by time afterwards.

Cost on the hot path: a few ``perf_counter_ns`` calls, one small object and one
``deque.append`` per step, plus a loop over the scheduled requests for the prefill/decode split
(after ``schedule_us`` is taken). Formatting and file I/O run on a daemon thread that drains the
deque every 0.25 s; a final flush runs from ``Scheduler.shutdown``, ``atexit`` and
multiprocessing's exit finalizers (children started by ``multiprocessing`` leave via
``os._exit``, which skips ``atexit``).
"""

from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import time

__version__ = "0.1.0"

ENV_PATH = "AGENTIC_STEP_LOG_PATH"
FLUSH_INTERVAL_S = 0.25
_MAX_OPEN_STEPS = 64  # steps scheduled but never updated (should not happen) are emitted early

_pc = time.perf_counter_ns

# --------------------------------------------------------------------------------------------
# Per-process state (re-initialised in a forked child).


class _Step:
    __slots__ = (
        "t_ns", "step_id", "end_ns", "sched_ns", "build_ns", "fin_ns", "load_ns",
        "running", "waiting", "prefill", "decode",
    )

    def __init__(self, t_ns: int, step_id: int):
        self.t_ns = t_ns
        self.step_id = step_id
        self.end_ns = None
        self.sched_ns = None
        self.build_ns = None
        self.fin_ns = None
        self.load_ns = None
        self.running = None
        self.waiting = None
        self.prefill = None
        self.decode = None


class _State:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.queue: collections.deque = collections.deque()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.file = None
        self.path: str | None = None
        self.next_step = 0
        self.open: dict[int, _Step] = {}
        self.current: _Step | None = None  # newest step scheduled in this process
        self.current_done = True
        self.carry_fin = None  # worker-side time seen between two steps (same process)
        self.carry_load = None
        self.cycle: _Step | None = None  # worker-only process: current connector cycle
        self.next_cycle = 0
        self.stopped = False


_st = _State()


def _reset_after_fork() -> None:
    global _st
    _st = _State()


def _state() -> _State:
    st = _st
    if st.pid != os.getpid():  # forked without register_at_fork (should not happen)
        _reset_after_fork()
        st = _st
    return st


# --------------------------------------------------------------------------------------------
# Output


def _us(ns):
    return "null" if ns is None else "%.3f" % (ns / 1000.0)


def _int(v):
    return "null" if v is None else str(int(v))


def _format(rec: _Step, pid: int) -> str:
    dur = None if rec.end_ns is None else rec.end_ns - rec.t_ns
    return (
        '{"t_ns":%d,"step_id":%d,"pid":%d,"step_duration_us":%s,"schedule_us":%s,'
        '"build_meta_us":%s,"get_finished_us":%s,"start_load_kv_us":%s,"num_running":%s,'
        '"num_waiting":%s,"prefill_tokens":%s,"decode_tokens":%s}\n'
        % (
            rec.t_ns, rec.step_id, pid, _us(dur), _us(rec.sched_ns), _us(rec.build_ns),
            _us(rec.fin_ns), _us(rec.load_ns), _int(rec.running), _int(rec.waiting),
            _int(rec.prefill), _int(rec.decode),
        )
    )


def _emit(rec: _Step) -> None:
    st = _state()
    st.queue.append(rec)
    if st.thread is None:
        _start_writer(st)


def _start_writer(st: _State) -> None:
    with st.lock:
        if st.thread is not None:
            return
        t = threading.Thread(target=_writer_loop, args=(st,), name="ctax-step-writer", daemon=True)
        st.thread = t
        t.start()


def _writer_loop(st: _State) -> None:
    while not st.stopped:
        time.sleep(FLUSH_INTERVAL_S)
        if st.pid != os.getpid():
            return
        _drain(st, blocking=True)


def _drain(st: _State, blocking: bool) -> None:
    """Write every queued record. Safe to call from any thread; never raises."""
    if not st.lock.acquire(blocking=blocking, timeout=2.0 if blocking else -1):
        return
    try:
        q = st.queue
        if not q:
            return
        if st.file is None:
            base = os.environ.get(ENV_PATH)
            if not base:
                q.clear()
                return
            st.path = "%s.%d.jsonl" % (base, st.pid)
            d = os.path.dirname(st.path)
            if d:
                os.makedirs(d, exist_ok=True)
            st.file = open(st.path, "a", encoding="utf-8")
        parts = []
        pid = st.pid
        while True:
            try:
                parts.append(_format(q.popleft(), pid))
            except IndexError:
                break
        st.file.write("".join(parts))
        st.file.flush()
    except Exception as e:  # never let timing break the engine
        _log("write failed: %r" % (e,))
    finally:
        st.lock.release()


def flush() -> None:
    """Emit steps still open (without an end) and write everything queued."""
    st = _state()
    if st.open:
        for rec in sorted(st.open.values(), key=lambda r: r.t_ns):
            st.queue.append(rec)
        st.open.clear()
    if st.cycle is not None:
        st.queue.append(st.cycle)
        st.cycle = None
    _drain(st, blocking=True)


def _log(msg: str) -> None:
    try:
        sys.stderr.write("[ctax_step_timing] pid=%d %s\n" % (os.getpid(), msg))
        sys.stderr.flush()
    except Exception:
        pass


# --------------------------------------------------------------------------------------------
# Scheduler-side wrappers (EngineCore process)


def _count_tokens(sched, out, rec: _Step) -> None:
    try:
        rc = getattr(sched, "get_request_counts", None)
        if rc is not None:
            rec.running, rec.waiting = rc()
        else:
            rec.running, rec.waiting = len(sched.running), len(sched.waiting)
        nst = out.num_scheduled_tokens
        reqs = sched.requests
        pre = 0
        total = 0
        for rid, n in nst.items():
            total += n
            r = reqs.get(rid)
            if r is None:
                continue
            # _update_after_schedule has already advanced num_computed_tokens by n.
            left = r.num_prompt_tokens - (r.num_computed_tokens - n)
            if left > 0:
                pre += n if n < left else left
        rec.prefill = pre
        rec.decode = total - pre
    except Exception:
        pass


def _wrap_schedule(orig):
    def schedule(self, *args, **kwargs):
        st = _st
        t0 = _pc()
        if st.pid != os.getpid():
            st = _state()
        rec = _Step(t0, st.next_step)
        st.next_step += 1
        if st.carry_fin is not None or st.carry_load is not None:
            rec.fin_ns, rec.load_ns = st.carry_fin, st.carry_load
            st.carry_fin = st.carry_load = None
        st.current = rec
        st.current_done = False
        out = orig(self, *args, **kwargs)
        rec.sched_ns = _pc() - t0
        _count_tokens(self, out, rec)
        st.open[id(out)] = rec
        if len(st.open) > _MAX_OPEN_STEPS:
            oldest = min(st.open, key=lambda k: st.open[k].t_ns)
            _emit(st.open.pop(oldest))
        return out

    schedule.__ctax_wrapped__ = orig
    return schedule


def _wrap_update(orig):
    def update_from_output(self, scheduler_output, *args, **kwargs):
        try:
            return orig(self, scheduler_output, *args, **kwargs)
        finally:
            t1 = _pc()
            st = _st
            rec = st.open.pop(id(scheduler_output), None)
            if rec is not None:
                rec.end_ns = t1
                if rec is st.current:
                    st.current_done = True
                _emit(rec)

    update_from_output.__ctax_wrapped__ = orig
    return update_from_output


def _wrap_build_meta(orig):
    def _build_kv_connector_meta(self, *args, **kwargs):
        t0 = _pc()
        try:
            return orig(self, *args, **kwargs)
        finally:
            dt = _pc() - t0
            rec = _st.current
            if rec is not None:
                rec.build_ns = dt if rec.build_ns is None else rec.build_ns + dt

    _build_kv_connector_meta.__ctax_wrapped__ = orig
    return _build_kv_connector_meta


def _wrap_shutdown(orig):
    def shutdown(self, *args, **kwargs):
        try:
            return orig(self, *args, **kwargs)
        finally:
            flush()

    shutdown.__ctax_wrapped__ = orig
    return shutdown


# --------------------------------------------------------------------------------------------
# Connector instance wrappers (worker side; scheduler-side build_connector_meta fallback)


def _add_worker_time(field: str, t0: int, dt: int, ends_cycle: bool) -> None:
    st = _st
    if st.pid != os.getpid():
        st = _state()
    if st.current is not None:
        # A scheduler runs in this process: uni executor, the worker is in-process.
        if not st.current_done:
            rec = st.current
            old = getattr(rec, field)
            setattr(rec, field, dt if old is None else old + dt)
        else:  # between update_from_output and the next schedule(): give it to the next step
            attr = "carry_fin" if field == "fin_ns" else "carry_load"
            old = getattr(st, attr)
            setattr(st, attr, dt if old is None else old + dt)
        return
    # Worker-only process: one record per connector cycle.
    cyc = st.cycle
    if cyc is not None and field == "load_ns" and cyc.load_ns is not None:
        _emit(cyc)  # a new cycle began before the previous one reported finished ids
        cyc = None
    if cyc is None:
        cyc = st.cycle = _Step(t0, st.next_cycle)
        st.next_cycle += 1
    old = getattr(cyc, field)
    setattr(cyc, field, dt if old is None else old + dt)
    if ends_cycle:
        st.cycle = None
        _emit(cyc)


def _timed_method(bound, field: str, ends_cycle: bool):
    def timed(*args, **kwargs):
        t0 = _pc()
        try:
            return bound(*args, **kwargs)
        finally:
            _add_worker_time(field, t0, _pc() - t0, ends_cycle)

    timed.__ctax_wrapped__ = bound
    return timed


def _timed_build_meta(bound):
    def build_connector_meta(*args, **kwargs):
        t0 = _pc()
        try:
            return bound(*args, **kwargs)
        finally:
            dt = _pc() - t0
            rec = _st.current
            if rec is not None:
                rec.build_ns = dt if rec.build_ns is None else rec.build_ns + dt

    build_connector_meta.__ctax_wrapped__ = bound
    return build_connector_meta


_INSTRUMENT_NOTES: list[str] = []
_BUILD_META_ON_CLASS = False


def _instrument_connector(conn, role) -> None:
    role_name = getattr(role, "name", str(role))
    done = []
    try:
        if role_name == "WORKER":
            fin = "get_transfer_results" if hasattr(type(conn), "get_transfer_results") else "get_finished"
            for name, field, ends in (("start_load_kv", "load_ns", False), (fin, "fin_ns", True)):
                bound = getattr(conn, name, None)
                if bound is None or hasattr(bound, "__ctax_wrapped__"):
                    continue
                setattr(conn, name, _timed_method(bound, field, ends))
                done.append(name)
        elif role_name == "SCHEDULER" and not _BUILD_META_ON_CLASS:
            bound = getattr(conn, "build_connector_meta", None)
            if bound is not None and not hasattr(bound, "__ctax_wrapped__"):
                conn.build_connector_meta = _timed_build_meta(bound)
                done.append("build_connector_meta")
    except Exception as e:
        _log("could not instrument %s connector %s: %r" % (role_name, type(conn).__name__, e))
        return
    if done:
        _log("timing %s connector %s: %s" % (role_name, type(conn).__name__, ", ".join(done)))


def _wrap_create_connector(orig_func):
    def create_connector(cls, *args, **kwargs):
        conn = orig_func(cls, *args, **kwargs)
        role = kwargs.get("role", args[1] if len(args) > 1 else None)
        _instrument_connector(conn, role)
        return conn

    create_connector.__ctax_wrapped__ = orig_func
    return classmethod(create_connector)


# --------------------------------------------------------------------------------------------
# Registration


_registered = False


def _patch(cls, name: str, wrapper, wrapped: list, missing: list, label: str) -> bool:
    fn = cls.__dict__.get(name) if cls is not None else None
    if fn is None:
        missing.append(label)
        return False
    if hasattr(fn, "__ctax_wrapped__"):
        wrapped.append(label + "(already)")
        return True
    setattr(cls, name, wrapper(fn))
    wrapped.append(label)
    return True


def register() -> None:
    """Entry point (``vllm.general_plugins``). Re-entrant; a no-op unless the env var is set."""
    global _registered, _BUILD_META_ON_CLASS
    if not os.environ.get(ENV_PATH):
        return
    if _registered:
        return
    _registered = True
    wrapped: list[str] = []
    missing: list[str] = []
    try:
        from vllm.v1.core.sched.scheduler import Scheduler
    except Exception as e:  # pragma: no cover - drift
        Scheduler = None
        missing.append("vllm.v1.core.sched.scheduler.Scheduler (%r)" % (e,))
    if Scheduler is not None:
        _patch(Scheduler, "schedule", _wrap_schedule, wrapped, missing, "Scheduler.schedule")
        _patch(
            Scheduler, "update_from_output", _wrap_update, wrapped, missing,
            "Scheduler.update_from_output",
        )
        _BUILD_META_ON_CLASS = _patch(
            Scheduler, "_build_kv_connector_meta", _wrap_build_meta, wrapped, missing,
            "Scheduler._build_kv_connector_meta",
        )
        _patch(Scheduler, "shutdown", _wrap_shutdown, wrapped, missing, "Scheduler.shutdown")
        if not _BUILD_META_ON_CLASS:
            wrapped.append("connector.build_connector_meta (fallback, per instance)")
    try:
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

        raw = KVConnectorFactory.__dict__.get("create_connector")
        if isinstance(raw, classmethod) and hasattr(raw.__func__, "__ctax_wrapped__"):
            wrapped.append("KVConnectorFactory.create_connector(already)")
        elif isinstance(raw, classmethod):
            KVConnectorFactory.create_connector = _wrap_create_connector(raw.__func__)
            wrapped.append("KVConnectorFactory.create_connector")
        else:
            missing.append("KVConnectorFactory.create_connector (not a classmethod)")
    except Exception as e:  # pragma: no cover - drift
        missing.append("KVConnectorFactory (%r)" % (e,))

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_reset_after_fork)
    atexit.register(flush)
    try:
        import multiprocessing.util as mpu

        mpu.Finalize(None, flush, exitpriority=100)
    except Exception:
        pass
    try:
        import vllm

        ver = getattr(vllm, "__version__", "?")
    except Exception:
        ver = "?"
    clock = time.get_clock_info("perf_counter").implementation
    _log(
        "registered (vllm %s, clock %s) -> %s.<pid>.jsonl; wrapped: %s; NOT FOUND: %s"
        % (ver, clock, os.environ.get(ENV_PATH), ", ".join(wrapped) or "-", ", ".join(missing) or "-")
    )
