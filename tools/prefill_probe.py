#!/usr/bin/env python3
"""Prefill-capacity probe: how many requests per second of a given input length one server can
prefill (stdlib only). Used to decide whether a Phase B shape can be measured at ref_safe without
queueing (DESIGN.md §4.4 "Phase B shapes"): a shape whose prefill capacity is below ref_safe
queues without bound at ref_safe and measures queueing, not the per-step tax.

    prefill_probe.py --input-lens 4096,32768 [--repeats 3] [--burst 4] [--out FILE]
                     [--config plain] [--startup-timeout 600]

Environment: the launch contract of launch/common.sh (CTAX_MODEL, CTAX_PORT, CTAX_VLLM, ...).
The server is launched, awaited and stopped by the pre-flight's code (tools/verify_server.py,
class Verify): run directory ${CTAX_PROBE_DIR:-${TMPDIR:-/tmp}/ctax-probe}/run_<config>,
server output in verify_<config>.log beside it.
Steps: (1) launch launch/launch_<config>.sh in its own session; (2) wait for GET /v1/models 200
listing the served name; (3) for each input length: one unmeasured request (kernel warm-up), then
--repeats sequential requests with max_tokens 1 (latency = one request's prefill + one token),
then --burst requests sent at once (capacity = burst / wall time of the burst, the server's
prefill throughput with a full chunked-prefill budget); (4) stop the process group (SIGINT,
then SIGKILL to whatever is left of it). Prompts are random token IDs in [10, --vocab-hi), so no tokenizer is involved
and no prefix is shared (prefix caching cannot help).

Last stdout line: one JSON object {"config", "served", "lens": {L: {"latency_s": [...],
"burst": n, "burst_wall_s": s, "capacity_req_s": r, "capacity_tok_s": t}}}; also written to
--out when given. Exit 0 on success, 1 when the server did not come up or a request failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verify_server import Verify  # noqa: E402  (the pre-flight's launch/wait/stop)


def post(host: str, port: int, body: dict, timeout: float) -> float:
    """One completion request; returns its wall time in seconds (raises on a non-200)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read().decode("utf-8", "replace")
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {text[:300]}")
    finally:
        conn.close()
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input-lens", required=True, help="comma-separated prompt lengths (tokens)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--burst", type=int, default=4)
    ap.add_argument("--config", default="plain")
    ap.add_argument("--startup-timeout", type=float, default=600.0)
    ap.add_argument("--request-timeout", type=float, default=600.0)
    ap.add_argument("--vocab-hi", type=int, default=150000,
                    help="prompt token IDs are drawn from [10, VOCAB_HI)")
    ap.add_argument("--out")
    a = ap.parse_args()
    lens = [int(x) for x in a.input_lens.split(",") if x.strip()]
    if not lens or min(lens) <= 0 or a.repeats < 1 or a.burst < 1:
        print("--input-lens, --repeats and --burst must be positive", file=sys.stderr)
        return 2
    host = os.environ.get("CTAX_HOST", "127.0.0.1")
    port = int(os.environ.get("CTAX_PORT", "8000"))
    model = os.environ.get("CTAX_MODEL", "")
    served = os.environ.get("CTAX_SERVED_NAME") or os.path.basename(model.rstrip("/"))
    # Its own directory, never a pre-flight's (whose verify_<config>.log it would overwrite),
    # and always launch/launch_<config>.sh.
    os.environ["CTAX_PREFLIGHT_DIR"] = os.environ.get("CTAX_PROBE_DIR") or os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "ctax-probe")
    os.environ.pop("CTAX_VERIFY_LAUNCH", None)
    os.environ["CTAX_VERIFY_STARTUP_TIMEOUT"] = str(a.startup_timeout)
    server = Verify(argparse.Namespace(config=a.config))
    result: dict = {"config": a.config, "served": served, "lens": {}}
    rc = 0
    try:
        server.launch()
        err = server.wait_ready()
        if err:
            raise RuntimeError(f"{err} (see {server.log_path})")
        result["ready_s"] = round(server.startup_s, 1)
        rng = random.Random(20261201)
        for n in lens:
            def body() -> dict:
                return {"model": served, "prompt": [rng.randrange(10, a.vocab_hi) for _ in range(n)],
                        "max_tokens": 1, "temperature": 0.0}
            post(host, port, body(), a.request_timeout)  # warm-up, not recorded
            lat = [round(post(host, port, body(), a.request_timeout), 4)
                   for _ in range(a.repeats)]
            bodies = [body() for _ in range(a.burst)]
            tb = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(a.burst) as ex:
                list(ex.map(lambda b: post(host, port, b, a.request_timeout), bodies))
            wall = time.monotonic() - tb
            cap = a.burst / wall
            result["lens"][str(n)] = {"latency_s": lat, "burst": a.burst,
                                      "burst_wall_s": round(wall, 4),
                                      "capacity_req_s": round(cap, 4),
                                      "capacity_tok_s": round(cap * n, 1)}
            print(f"[probe] input {n}: latency {lat} s; burst of {a.burst} in {wall:.2f} s "
                  f"= {cap:.2f} req/s ({cap * n:.0f} prompt tokens/s)", file=sys.stderr)
    except (RuntimeError, OSError) as e:
        result["error"] = str(e)
        rc = 1
    finally:
        server.stop()
        server.logf.close()
    line = json.dumps(result, sort_keys=True)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(line + "\n")
    print(line)
    return rc


if __name__ == "__main__":
    sys.exit(main())
