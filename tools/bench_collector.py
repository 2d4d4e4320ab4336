#!/usr/bin/env python3
"""Benchmark of the load generator itself (called by tools/bench_collector.sh).

Against ctax-sim on this machine it measures:
  1. send lateness (actual - intended send) p50/p99/max of ctax-collect at 32 req/s;
  2. the highest offered rate ctax-collect sustains with no rate loss
     (achieved send rate >= 99% of offered, no drops), tiny outputs, infinite-capacity sim;
  3. the streamed events/s at which the client adds > 1 ms to TTFT p50, for ctax-collect AND
     `vllm bench serve`, against the same fixed-latency sim (true server TTFT known exactly, so
     client-added TTFT = measured - fixed), side by side, and their ratio.

Only the standard library is used. Every server started here is ctax-sim: all numbers describe
the clients, not any model.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def pct(xs, q):
    """numpy 'linear' percentile."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    h = (len(s) - 1) * q
    lo = int(h)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (h - lo) * (s[hi] - s[lo])


class Env:
    def __init__(self, a):
        self.bin = a.bin_dir
        self.work = a.work_dir
        self.venv = a.venv
        self.tokenizer = a.tokenizer
        self.pin = a.pin
        self.rt = a.rt_priority
        self.quick = a.quick
        ncpu = os.cpu_count() or 1
        # Server on the last CPU, clients on CPU 0 (when there are >= 2).
        self.server_cpu = str(ncpu - 1) if (self.pin and ncpu >= 2) else None
        self.client_cpu = "0" if (self.pin and ncpu >= 2) else None
        self.have_chrt = shutil.which("chrt") is not None and self.rt > 0

    def wrap(self, cmd, cpu, rt):
        pre = []
        if cpu is not None and shutil.which("taskset"):
            pre += ["taskset", "-c", cpu]
        if rt and self.have_chrt:
            pre += ["chrt", "-f", str(self.rt)]
        return pre + cmd


class Sim:
    def __init__(self, env, extra):
        cmd = env.wrap([os.path.join(env.bin, "ctax-sim"), "--port", "0"] + extra, env.server_cpu, True)
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = self.p.stderr.readline()
        m = re.search(r"http://[^:]+:(\d+)", line)
        if not m:
            raise RuntimeError("ctax-sim did not start: " + line + self.p.stderr.read())
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def metrics(self):
        txt = urllib.request.urlopen(self.url + "/metrics", timeout=5).read().decode()
        out = {}
        for ln in txt.splitlines():
            if ln.startswith("ctax_sim:"):
                k, v = ln.split()
                out[k] = float(v)
        return out

    def stop(self):
        self.p.kill()
        self.p.wait()


def emit_lateness(before, after):
    n = after["ctax_sim:emit_lateness_seconds_count"] - before["ctax_sim:emit_lateness_seconds_count"]
    s = after["ctax_sim:emit_lateness_seconds_sum"] - before["ctax_sim:emit_lateness_seconds_sum"]
    return (s / n * 1e3) if n else float("nan")


def proc_cpu_s(pid):
    """utime+stime of a live process (all threads), seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def run_timed(cmd, sim=None):
    """Runs cmd; returns (returncode, output, wall_s, cpu_s, cpu_s_after_first_request).

    With `sim`, a watcher notes the client's CPU time when the simulator receives its first
    request, so start-up (Python imports, dataset preparation) can be left out of per-event costs."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    mark = {}
    if sim is not None:
        import threading
        base = sim.metrics().get("ctax_sim:requests_received_total", 0)

        def watch():
            while p.poll() is None and "cpu" not in mark:
                try:
                    if sim.metrics().get("ctax_sim:requests_received_total", 0) > base:
                        mark["cpu"] = proc_cpu_s(p.pid)
                        return
                except OSError:
                    pass
                time.sleep(0.02)
        w = threading.Thread(target=watch, daemon=True)
        w.start()
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    total = ru.ru_utime + ru.ru_stime
    before = mark.get("cpu")
    return p.returncode, out, wall, total, (total - before) if before is not None else None


def collect(env, sim, name, cell, extra=()):
    d = os.path.join(env.work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    plan = os.path.join(d, "plan.json")
    with open(plan, "w") as f:
        json.dump({"cells": [cell]}, f)
    cmd = [os.path.join(env.bin, "ctax-collect"), "--url", sim.url, "--model", "sim", "--config", "bench",
           "--launch", "0", "--plan", plan, "--out", os.path.join(d, "run"), "--no-progress",
           "--rt-priority", str(env.rt)] + list(extra)
    rc, out, wall, cpu, cpu_run = run_timed(env.wrap(cmd, env.client_cpu, False), sim)
    if rc not in (0, 3):
        raise RuntimeError(f"ctax-collect failed ({rc}):\n{out}")
    c = cell["cell"]
    rate = c["rate"]
    rate_s = str(int(rate)) if float(rate).is_integer() else str(rate)
    cellname = f"r{rate_s}_i{c['input_len']}_o{c['output_len']}"
    recs = [json.loads(l) for l in open(os.path.join(d, "run", f"requests_{cell['phase']}_{cellname}.jsonl"))]
    summ = json.load(open(os.path.join(d, "run", "summary.json")))["cells"][f"{cell['phase']}/{cellname}"]
    return recs, summ, (cpu_run if cpu_run is not None else cpu), wall


def cell(rate, inp, out, duration, warmup=0.0, cap=4096, arrival="fixed", min_completed=1):
    return {"phase": "A", "cell": {"rate": rate, "input_len": inp, "output_len": out}, "arrival": arrival,
            "duration_s": duration, "warmup_s": warmup, "min_completed": min_completed,
            "max_cell_s": duration + warmup + 120, "inflight_cap": cap, "seed": 1}


# ---------------------------------------------------------------------------------------------
def part1(env):
    log("== 1. send lateness at 32 req/s (continuous-batching sim, 512 in / 64 out) ==")
    sim = Sim(env, ["--rt-priority", str(env.rt)] if env.rt else [])
    try:
        dur = 10 if env.quick else 30
        recs, summ, cpu, wall = collect(env, sim, "p1", cell(32, 512, 64, dur, warmup=1.0))
    finally:
        sim.stop()
    late = [(r["t_send_ns"] - r["t_intended_ns"]) / 1e3 for r in recs if r["t_send_ns"] is not None]
    res = {"n": len(late), "p50_us": pct(late, 0.5), "p99_us": pct(late, 0.99), "max_us": max(late),
           "dropped": sum(r["status"] == "dropped" for r in recs), "ok": sum(r["status"] == "ok" for r in recs),
           "client_cpu_pct": summ["client_cpu_pct"]}
    log(f"   {res}")
    return res


def part2(env):
    log("== 2. highest offered rate with no rate loss (fixed sim: TTFT 1 ms, 1 output token) ==")
    rates = [250, 500, 1000, 2000, 4000] if env.quick else [250, 500, 1000, 2000, 4000, 8000, 16000]
    sim = Sim(env, ["--fixed-ttft-ms", "1", "--fixed-itl-ms", "1", "--workers", "1"]
              + (["--rt-priority", str(env.rt)] if env.rt else []))
    rows = []
    try:
        for rate in rates:
            dur = 3.0 if env.quick else 5.0
            recs, summ, cpu, wall = collect(env, sim, f"p2_{rate}", cell(rate, 16, 1, dur, cap=4096))
            sends = sorted(r["t_send_ns"] for r in recs if r["t_send_ns"] is not None)
            achieved = (len(sends) - 1) / ((sends[-1] - sends[0]) / 1e9) if len(sends) > 1 else 0.0
            intended = sorted(r["t_intended_ns"] for r in recs)
            late = [(r["t_send_ns"] - r["t_intended_ns"]) / 1e3 for r in recs if r["t_send_ns"] is not None]
            row = {"rate": rate, "scheduled": len(recs), "achieved": achieved,
                   "achieved_pct": 100 * achieved / rate,
                   "dropped": sum(r["status"] == "dropped" for r in recs),
                   "ok": sum(r["status"] == "ok" for r in recs),
                   "late_p50_us": pct(late, 0.5), "late_p99_us": pct(late, 0.99), "late_max_us": max(late),
                   "client_cpu_pct": summ["client_cpu_pct"],
                   "window_s": (intended[-1] - intended[0]) / 1e9}
            row["no_loss"] = row["achieved_pct"] >= 99.0 and row["dropped"] == 0
            rows.append(row)
            log(f"   {rate:6d} req/s: achieved {achieved:8.1f} ({row['achieved_pct']:.1f}%), dropped {row['dropped']}, "
                f"ok {row['ok']}/{row['scheduled']}, lateness p50/p99 {row['late_p50_us']:.0f}/{row['late_p99_us']:.0f} µs, "
                f"client CPU {row['client_cpu_pct']:.0f}%")
    finally:
        sim.stop()
    best = max([r["rate"] for r in rows if r["no_loss"]], default=0)
    return {"rows": rows, "max_no_loss_rate": best}


def ctax_level(env, sim, ev, L, itl_ms, ttft_ms, dur):
    rate = ev / L
    before = sim.metrics()
    recs, summ, cpu, wall = collect(env, sim, f"p3c_{ev}", cell(rate, 16, L, dur, arrival="poisson"))
    after = sim.metrics()
    ttft = [(r["t_first_token_ns"] - r["t_send_ns"]) / 1e6 for r in recs if r["status"] == "ok"]
    nev = sum(len(r["events"]) for r in recs)
    return {"ok": len(ttft), "failed": sum(r["status"] not in ("ok",) for r in recs),
            "ttft_p50_ms": pct(ttft, 0.5), "added_ms": pct(ttft, 0.5) - ttft_ms,
            "cpu_s": cpu, "cpu_us_per_event": cpu / max(nev, 1) * 1e6,
            "sim_emit_late_ms": emit_lateness(before, after)}


def vllm_level(env, sim, ev, L, itl_ms, ttft_ms, dur):
    rate = ev / L
    n = max(int(rate * dur), 20)
    d = os.path.join(env.work, f"p3v_{ev}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    cmd = [os.path.join(env.venv, "bin", "vllm"), "bench", "serve", "--backend", "vllm", "--base-url", sim.url,
           "--model", "sim", "--tokenizer", env.tokenizer, "--dataset-name", "random",
           "--random-input-len", "16", "--random-output-len", str(L), "--num-prompts", str(n),
           "--request-rate", str(rate), "--ignore-eos", "--seed", "1", "--save-result", "--result-dir", d,
           "--result-filename", "r.json", "--percentile-metrics", "ttft,itl", "--metric-percentiles", "50,99",
           "--disable-tqdm"]
    before = sim.metrics()
    rc, out, wall, cpu_total, cpu = run_timed(env.wrap(cmd, env.client_cpu, True), sim)
    after = sim.metrics()
    cpu = cpu if cpu is not None else cpu_total
    if rc != 0:
        raise RuntimeError(f"vllm bench serve failed ({rc}):\n{out[-3000:]}")
    r = json.load(open(os.path.join(d, "r.json")))
    # CPU from the first request on (imports and dataset preparation excluded).
    nev = r["total_output_tokens"]
    return {"ok": r["completed"], "failed": r["failed"], "ttft_p50_ms": r["median_ttft_ms"],
            "added_ms": r["median_ttft_ms"] - ttft_ms, "cpu_s": cpu, "cpu_us_per_event": cpu / max(nev, 1) * 1e6,
            "sim_emit_late_ms": emit_lateness(before, after), "duration_s": r["duration"]}


def crossing(rows, thr=1.0, base=0.0):
    """Events/s beyond which the client-added TTFT p50 stays above base + thr ms: the last upward
    crossing (a client can be above the threshold at idle, dip under it as the machine wakes
    up, and cross it again for good under load). Log-linear interpolation between the two levels
    around it. Returns (value, how)."""
    import math
    thr = base + thr
    if not rows:
        return 0, "no data"
    if rows[-1]["added_ms"] <= thr:
        return rows[-1]["ev"], "not reached (>= highest level)"
    i = len(rows) - 1
    while i > 0 and rows[i - 1]["added_ms"] > thr:
        i -= 1
    if i == 0:
        return rows[0]["ev"], "above at every level"
    lo, hi = rows[i - 1], rows[i]
    x0, y0, x1, y1 = math.log(lo["ev"]), lo["added_ms"], math.log(hi["ev"]), hi["added_ms"]
    x = x0 + (thr - y0) * (x1 - x0) / (y1 - y0) if y1 != y0 else x1
    how = "interpolated"
    if any(r["added_ms"] > thr for r in rows[:i]):
        how += "; also above at lower levels"
    return math.exp(x), how


def part3(env):
    L, ttft_ms, itl_ms = 50, 20.0, 10.0
    log(f"== 3. events/s where the client adds > 1 ms to TTFT p50 (fixed sim: TTFT {ttft_ms} ms, ITL {itl_ms} ms, "
        f"{L} tokens/request, Poisson arrivals) ==")
    levels = [100, 250, 500, 1000, 2000, 4000, 8000, 11000, 16000, 23000, 32000, 45000, 64000]
    if env.quick:
        levels = [100, 1000, 4000, 8000, 16000, 32000]
    sim = Sim(env, ["--fixed-ttft-ms", str(ttft_ms), "--fixed-itl-ms", str(itl_ms), "--workers", "1"]
              + (["--rt-priority", str(env.rt)] if env.rt else []))
    out = {"ctax": [], "vllm": []}
    try:
        for who, fn in (("ctax", ctax_level), ("vllm", vllm_level)):
            if who == "vllm" and not (env.venv and os.path.exists(os.path.join(env.venv, "bin", "vllm"))):
                log("   vllm bench serve: SKIPPED (no vLLM venv; set CTAX_VLLM_VENV)")
                break
            above = 0
            for ev in levels:
                # At least 8 s (4 s quick) and 40 requests per level.
                dur = max(4.0 if env.quick else 8.0, 40 * L / ev)
                r = fn(env, sim, ev, L, itl_ms, ttft_ms, dur)
                r["ev"] = ev
                out[who].append(r)
                log(f"   {who:5s} {ev:6d} ev/s: TTFT p50 {r['ttft_p50_ms']:.3f} ms (client-added {r['added_ms']:+.3f} ms), "
                    f"ok {r['ok']} failed {r['failed']}, client CPU {r['cpu_us_per_event']:.1f} µs/event, "
                    f"sim emit lateness {r['sim_emit_late_ms']:.3f} ms")
                # The simulator itself falling behind ends the ramp: beyond it nothing is the client's.
                r["sim_limited"] = r["sim_emit_late_ms"] > 0.2
                if r["sim_limited"]:
                    log(f"   {who}: the simulator emits tokens {r['sim_emit_late_ms']:.2f} ms late on average at "
                        f"{ev} events/s: this level and above measure the simulator, not the client; stopping")
                    break
                # Go on until the client is > 1 ms above its own lowest-load value twice in a row.
                if r["added_ms"] > out[who][0]["added_ms"] + 1.0:
                    above += 1
                    if above >= 2:
                        break
                else:
                    above = 0
    finally:
        sim.stop()
    res = {"L": L, "ttft_ms": ttft_ms, "itl_ms": itl_ms, "levels": out}
    for who in ("ctax", "vllm"):
        clean = [r for r in out[who] if not r.get("sim_limited")]
        if clean:
            res[who + "_capacity"] = crossing(clean)
            res[who + "_capacity_rel"] = crossing(clean, base=clean[0]["added_ms"])
    # CPU per event of both clients at the highest level both ran cleanly.
    common = {r["ev"] for r in out["ctax"] if not r.get("sim_limited")} & \
        {r["ev"] for r in out["vllm"] if not r.get("sim_limited")}
    if common:
        top = max(common)
        res["cpu_compare_ev"] = top
        for who in ("ctax", "vllm"):
            res[who + "_cpu_us_per_event"] = next(r for r in out[who] if r["ev"] == top)["cpu_us_per_event"]
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--venv", default=os.environ.get("CTAX_VLLM_VENV"))
    ap.add_argument("--tokenizer", default=os.environ.get("CTAX_TINY_MODEL"))
    ap.add_argument("--no-pin", dest="pin", action="store_false")
    ap.add_argument("--rt-priority", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--parts", default="1,2,3")
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args()
    a.work_dir = a.work_dir or tempfile.mkdtemp(prefix="ctax-bench-")
    env = Env(a)
    log(f"bench_collector: CPUs {os.cpu_count()}, server CPU {env.server_cpu}, client CPU {env.client_cpu}, "
        f"SCHED_FIFO {env.rt if env.have_chrt else 'off'}, work dir {env.work}")
    log(f"load average at start: {os.getloadavg()}")
    parts = set(a.parts.split(","))
    res = {"cpus": os.cpu_count(), "pinned": env.pin, "rt_priority": env.rt, "loadavg_start": os.getloadavg()}
    if "1" in parts:
        res["lateness_32"] = part1(env)
    if "2" in parts:
        res["rate_ramp"] = part2(env)
    if "3" in parts:
        res["events"] = part3(env)
    res["loadavg_end"] = os.getloadavg()
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(res, f, indent=2)
    report(res, env)


def report(res, env):
    p = print
    p("")
    p("=" * 78)
    p("ctax-collect benchmark (server: ctax-sim, SIMULATED; numbers describe the clients)")
    p(f"machine: {res['cpus']} CPUs; server pinned to CPU {env.server_cpu}, clients to CPU {env.client_cpu}; "
      f"SCHED_FIFO {env.rt if env.have_chrt else 'off'} for server and both clients")
    p(f"load average start/end: {tuple(round(x, 2) for x in res['loadavg_start'])} / "
      f"{tuple(round(x, 2) for x in res['loadavg_end'])}")
    p("-" * 78)
    if "lateness_32" in res:
        r = res["lateness_32"]
        ok = "MET" if r["p99_us"] <= 100 else "NOT MET"
        p(f"1. send lateness at 32 req/s ({r['n']} requests): p50 {r['p50_us']:.1f} µs, p99 {r['p99_us']:.1f} µs, "
          f"max {r['max_us']:.1f} µs   [goal p99 <= 100 µs: {ok}]")
    if "rate_ramp" in res:
        rr = res["rate_ramp"]
        p("2. offered-rate ramp (1 output token, infinite-capacity sim):")
        p(f"   {'offered':>8} {'achieved':>10} {'%':>7} {'dropped':>8} {'ok':>7} {'late p50':>9} {'late p99':>9} {'CPU%':>6}  no loss")
        for r in rr["rows"]:
            p(f"   {r['rate']:>8} {r['achieved']:>10.1f} {r['achieved_pct']:>7.2f} {r['dropped']:>8} {r['ok']:>7} "
              f"{r['late_p50_us']:>7.0f}µs {r['late_p99_us']:>7.0f}µs {r['client_cpu_pct']:>6.1f}  {'yes' if r['no_loss'] else 'NO'}")
        ok = "MET" if rr["max_no_loss_rate"] >= 1000 else "NOT MET"
        p(f"   highest offered rate with no rate loss: {rr['max_no_loss_rate']} req/s   [goal >= 1000: {ok}]")
    if "events" in res:
        e = res["events"]
        p(f"3. client-added TTFT p50 vs streamed events/s (sim TTFT {e['ttft_ms']} ms, ITL {e['itl_ms']} ms, "
          f"{e['L']} tokens/request):")
        p(f"   {'events/s':>9} | {'ctax-collect added':>18} {'µs CPU/ev':>9} {'sim late':>8} | "
          f"{'vllm bench serve added':>22} {'µs CPU/ev*':>10} {'sim late':>8}")
        byev = {}
        for who in ("ctax", "vllm"):
            for r in e["levels"][who]:
                byev.setdefault(r["ev"], {})[who] = r
        for ev in sorted(byev):
            c = byev[ev].get("ctax")
            v = byev[ev].get("vllm")
            def cellfmt(x, w1, w2):
                if not x:
                    return f"{'-':>{w1 + 2}} {'':>{w2}} {'':>8}"
                flag = "!" if x.get("sim_limited") else " "
                return f"{x['added_ms']:>+{w1}.3f}ms {x['cpu_us_per_event']:>{w2}.1f} {x['sim_emit_late_ms']:>6.3f}ms{flag}"
            cs = cellfmt(c, 16, 9)
            vs = cellfmt(v, 20, 10)
            p(f"   {ev:>9} | {cs} | {vs}")
        p("   (CPU/ev: client CPU from its first request to exit / streamed events; sim late: mean lateness of the")
        p("    simulator's token emissions; '!' = simulator saturated, level not attributable to the client)")
        for key, label in (("_capacity", "adds > 1 ms to TTFT p50 for good (absolute: measured - true TTFT > 1 ms)"),
                           ("_capacity_rel", "adds > 1 ms more than at its lowest load level")):
            cc = e.get("ctax" + key)
            vc = e.get("vllm" + key)
            p(f"   {label}:")
            if cc:
                p(f"      ctax-collect:     {cc[0]:>8.0f} events/s ({cc[1]})")
            if vc:
                p(f"      vllm bench serve: {vc[0]:>8.0f} events/s ({vc[1]})")
            if cc and vc and vc[0] > 0:
                ratio = cc[0] / vc[0]
                bound = ">= " if ("not reached" in cc[1] or "every level" in vc[1]) else ""
                ok = "MET" if ratio >= 10 else "NOT MET"
                p(f"      ratio: {bound}{ratio:.1f}x   [goal >= 10x: {ok}]")
        ce, ve = e.get("ctax_cpu_us_per_event"), e.get("vllm_cpu_us_per_event")
        if ce and ve:
            p(f"   client CPU per streamed event at {e['cpu_compare_ev']} events/s: ctax-collect {ce:.1f} µs, vllm bench serve "
              f"{ve:.1f} µs -> {ve / ce:.1f}x less CPU per event")
    p("=" * 78)


if __name__ == "__main__":
    main()
