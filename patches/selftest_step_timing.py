#!/usr/bin/env python3
"""Self-test of the step-timing plugin against the installed vLLM, without starting a server.

Usage: python patches/selftest_step_timing.py      (the interpreter that runs vLLM)

1. register() with AGENTIC_STEP_LOG_PATH set: every target must be found on this vLLM
   (Scheduler.schedule/update_from_output/_build_kv_connector_meta/shutdown and
   KVConnectorFactory.create_connector).
2. The real KVConnectorFactory.create_connector (wrapped) builds tools/noop_connector.NoOpConnector
   in both roles from a real KVTransferConfig; the worker instance must get timed
   start_load_kv and get_transfer_results (vLLM >= 0.3x) or get_finished (0.26).
3. The scheduler wrappers, applied to stand-in functions, replay async scheduling's batch-queue
   order (schedule N, schedule N+1, update N, update N+1) with in-process worker calls; a forked
   child replays a worker-only process. The JSONL must have exactly the StepRecord fields, the
   right nulls, one record per step, and a separate file for the child.
Prints "selftest OK" and exits 0, or prints what failed and exits 1.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FIELDS = ["t_ns", "step_id", "pid", "step_duration_us", "schedule_us", "build_meta_us",
          "get_finished_us", "start_load_kv_us", "num_running", "num_waiting",
          "prefill_tokens", "decode_tokens"]
failures: list[str] = []


def check(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def main() -> int:
    tmp = tempfile.mkdtemp(prefix="ctax-selftest-")
    base = os.path.join(tmp, "step")
    os.environ["AGENTIC_STEP_LOG_PATH"] = base
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(REPO, "tools"))
    import ctax_step_timing as cst

    cst.register()
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    for name in ("schedule", "update_from_output", "_build_kv_connector_meta", "shutdown"):
        check(hasattr(Scheduler.__dict__.get(name), "__ctax_wrapped__"), f"Scheduler.{name} wrapped")
    raw = KVConnectorFactory.__dict__["create_connector"]
    check(hasattr(raw.__func__, "__ctax_wrapped__"), "KVConnectorFactory.create_connector wrapped")
    cst.register()  # re-entrant: must not double-wrap
    check(not hasattr(Scheduler.__dict__["schedule"].__ctax_wrapped__, "__ctax_wrapped__"),
          "register() is idempotent")

    # --- real factory + real no-op connector, both roles ---
    from vllm.config.kv_transfer import KVTransferConfig
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    ktc = KVTransferConfig(kv_connector="NoOpConnector", kv_connector_module_path="noop_connector",
                           kv_role="kv_producer")
    cfg = types.SimpleNamespace(kv_transfer_config=ktc,
                                scheduler_config=types.SimpleNamespace(
                                    disable_hybrid_kv_cache_manager=False))
    worker = KVConnectorFactory.create_connector(cfg, KVConnectorRole.WORKER, None)
    sched_conn = KVConnectorFactory.create_connector(config=cfg, role=KVConnectorRole.SCHEDULER,
                                                     kv_cache_config=None)
    fin = "get_transfer_results" if hasattr(type(worker), "get_transfer_results") else "get_finished"
    check(hasattr(worker.__dict__.get("start_load_kv"), "__ctax_wrapped__"), "worker start_load_kv timed")
    check(hasattr(worker.__dict__.get(fin), "__ctax_wrapped__"), f"worker {fin} timed")
    check("start_load_kv" not in sched_conn.__dict__, "scheduler-role connector left alone")
    check(sched_conn.build_connector_meta(None) is not None, "no-op metadata is not None")
    check(worker.get_num_new_matched_tokens(None, 0) == (0, False), "no-op matched tokens (0, False)")

    # --- scheduler wrappers on stand-ins: batch-queue order with in-process worker calls ---
    class Req:
        def __init__(self, prompt, computed):
            self.num_prompt_tokens, self.num_computed_tokens = prompt, computed

    class FakeSched:
        def __init__(self):
            self.requests = {"a": Req(100, 0), "b": Req(10, 10)}
            self.running, self.waiting = [1, 2], []

        def get_request_counts(self):
            return 2, 3

    def fake_schedule(self, *a, **k):
        # as vLLM: num_computed_tokens already advanced by the scheduled count on return
        self.requests["a"].num_computed_tokens += 64
        self.requests["b"].num_computed_tokens += 1
        wrapped_build(self, sched_conn, None)
        return types.SimpleNamespace(num_scheduled_tokens={"a": 64, "b": 1})

    def fake_update(self, so, mro):
        time.sleep(0.001)
        return {}

    wrapped_build = cst._wrap_build_meta(lambda self, c, so: c.build_connector_meta(so))
    sched_fn = cst._wrap_schedule(fake_schedule)
    upd_fn = cst._wrap_update(fake_update)
    s = FakeSched()
    o1 = sched_fn(s)
    worker.start_load_kv(None)
    getattr(worker, fin)(set())
    o2 = sched_fn(s)
    worker.start_load_kv(None)
    getattr(worker, fin)(set())
    upd_fn(s, o1, None)
    upd_fn(s, o2, None)

    pid = os.fork()
    if pid == 0:  # worker-only process (no schedule() here): one record per connector cycle
        cst._st.current = None
        for _ in range(3):
            worker.start_load_kv(None)
            getattr(worker, fin)(set())
        cst.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    cst.flush()

    main_file = f"{base}.{os.getpid()}.jsonl"
    child_file = f"{base}.{pid}.jsonl"
    recs = [json.loads(line) for line in open(main_file)] if os.path.exists(main_file) else []
    check(len(recs) == 2, f"2 step records in {main_file} (got {len(recs)})")
    for r in recs:
        check(list(r) == FIELDS, "exact StepRecord field order")
        check(all(r[k] is not None for k in FIELDS), "in-process step: every field set")
    if recs:
        r = recs[0]
        check(r["prefill_tokens"] == 64 and r["decode_tokens"] == 1, "prefill/decode split 64/1")
        check(r["num_running"] == 2 and r["num_waiting"] == 3, "counts from get_request_counts()")
        check(r["step_duration_us"] >= r["schedule_us"] > 0, "step_duration >= schedule > 0")
        check(recs[1]["step_id"] == recs[0]["step_id"] + 1, "step ids consecutive")
    crec = [json.loads(line) for line in open(child_file)] if os.path.exists(child_file) else []
    check(len(crec) == 3, f"3 worker-cycle records in the child's own file (got {len(crec)})")
    for r in crec:
        check(r["get_finished_us"] is not None and r["start_load_kv_us"] is not None
              and r["step_duration_us"] is None and r["build_meta_us"] is None,
              "worker record: only worker fields set")
    # overhead of the wrappers alone (stand-in functions that do nothing)
    noop_sched = cst._wrap_schedule(lambda self: types.SimpleNamespace(num_scheduled_tokens={}))
    noop_upd = cst._wrap_update(lambda self, so, m: None)
    n = 20000
    t0 = time.perf_counter_ns()
    for _ in range(n):
        noop_upd(s, noop_sched(s), None)
    per = (time.perf_counter_ns() - t0) / n / 1000
    cst.flush()
    print(f"info wrapper overhead per step (schedule+update, empty batch): {per:.2f} us")
    print(f"info vllm {getattr(__import__('vllm'), '__version__', '?')}, files in {tmp}")
    print("selftest OK" if not failures else f"selftest FAILED: {len(failures)} check(s)")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
