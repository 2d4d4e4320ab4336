#!/usr/bin/env python3
"""Pre-flight verification of one configuration against a real vLLM server (stdlib only).

Driven by tools/verify_<config>.sh / tools/verify_config.sh, which pick the seed's criteria;
usable directly:

    verify_server.py --config C [--requests N] [--max-tokens M] [--request-timeout S]
                     [--total-timeout S] [--dummy-bootstrap]

Environment: the launch contract of launch/common.sh (CTAX_MODEL, CTAX_PORT, ...), plus
  CTAX_PREFLIGHT_DIR          where verify_<config>.log goes (default ${TMPDIR:-/tmp}/ctax-preflight)
  CTAX_VERIFY_STARTUP_TIMEOUT seconds to wait for /v1/models 200 (default 300)
  CTAX_VERIFY_GRACE           seconds between SIGINT and SIGKILL of the server group (default 20)
  CTAX_VERIFY_LAUNCH          launch script override (test hook; default launch/launch_<C>.sh)
  CTAX_VERIFY_PROMPT_WORDS    random words per prompt (default 250: ~1,300 tokens with the tiny
                              CPU model's tokenizer, measured; at least one per word). Long enough
                              that a connector saving whole 256-token chunks (LMCache) saves
                              some during the pre-flight: with 24 words (~60 tokens) the
                              unmodified multi_mooncake_lmcache passed it on the H200 and died
                              at its first 4096-token request, in LMCache's store path
  CTAX_PREFLIGHT_IMPORT_CHECK 0 = skip the package import check (test hook; default 1)

Steps: (1) import check of the connector's package (tools/preflight_check.py --packages-only):
a failure is a SKIP with the exact ImportError text and no launch; (2) launch the server through
the launch script in its own session/process group (setsid), output appended to the log, run
directory <PREFLIGHT_DIR>/run_<config>/ (launch.sh lands there); (3) wait for GET /v1/models 200
listing the served model; (4) send the requests one after another (streaming completions, random
text prompt, temperature 0, ignore_eos, usage chunk; no kv_transfer_params) and require HTTP 200,
[DONE], usage.completion_tokens == max_tokens and the time limits; (5) engine health: /health
200, server process alive, no fatal engine log line, no increase of
vllm:request_success_total{finished_reason="error"} (vLLM has no engine_core_failed_total);
(6) stop the whole process group (SIGINT, SIGKILL after the grace period).

Last stdout line, always one JSON object:
  {"config": C, "decision": "include"|"skip", "reason": str|null, "log": "verify_C.log",
   "seconds": float}
Exit 0 for include and skip; 2 for usage/environment errors (bad arguments, CTAX_PORT already in
use), in which case the JSON has "decision": "error" and is not a verdict on the config.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import string
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FATAL_PATTERNS = [
    "EngineCore encountered a fatal error",
    "Engine core initialization failed",
    "EngineCore failed to start",
    "EngineDeadError",
    "engine core exited unexpectedly",
]
ERROR_LINE = re.compile(r"(Error|Exception|error:|FAILED|Traceback)")
# "(EngineCore pid=1) ERROR 11-29 15:31:57 [core.py:1510] " and similar prefixes of vLLM log lines.
LOG_PREFIX = re.compile(r"^(\(\w+ pid=\d+\)\s+)?((DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+"
                        r"\d\d-\d\d \d\d:\d\d:\d\d \[[^\]]*\]\s+)?")
EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt): .*")
GENERIC_ERRORS = ("Engine core initialization failed", "Worker failed with error",
                  "See root cause above", "EngineDeadError", "leaked shared_memory")


class UsageError(Exception):
    """Not a verdict on the config: bad arguments or environment (exit 2)."""


class Verify:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.config = a.config
        self.t0 = time.monotonic()
        self.pre_dir = os.environ.get("CTAX_PREFLIGHT_DIR") or os.path.join(
            os.environ.get("TMPDIR", "/tmp"), "ctax-preflight")
        os.makedirs(self.pre_dir, exist_ok=True)
        self.log_name = f"verify_{self.config}.log"
        self.log_path = os.path.join(self.pre_dir, self.log_name)
        self.host = os.environ.get("CTAX_HOST", "127.0.0.1")
        self.port = int(os.environ.get("CTAX_PORT", "8000"))
        model = os.environ.get("CTAX_MODEL", "")
        self.served = os.environ.get("CTAX_SERVED_NAME") or os.path.basename(model.rstrip("/"))
        self.proc: subprocess.Popen | None = None
        self.dummy: subprocess.Popen | None = None
        self.logf = open(self.log_path, "w", encoding="utf-8")

    # ---- logging ----
    def note(self, msg: str) -> None:
        line = f"[verify {time.strftime('%H:%M:%S')} +{time.monotonic() - self.t0:.1f}s] {msg}\n"
        self.logf.write(line)
        self.logf.flush()
        sys.stderr.write(line)

    def log_tail(self, n: int = 12) -> list[str]:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                lines = [ln.rstrip() for ln in f if ln.strip() and not ln.startswith("[verify ")]
        except OSError:
            return []
        return lines[-n:]

    def log_reason(self) -> str:
        """The root cause: the first exception line of the server output that is not one of
        vLLM's generic wrappers, else the last error-looking line; plus the log tail."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                lines = [ln.rstrip() for ln in f if not ln.startswith("[verify ")]
        except OSError:
            lines = []
        root = None
        for ln in lines:
            m = EXC_LINE.match(LOG_PREFIX.sub("", ln))
            if m and not any(g in ln for g in GENERIC_ERRORS):
                root = m.group(0).strip()
                break
        if root is None:
            errs = [ln for ln in lines[-40:] if ERROR_LINE.search(ln)]
            root = (errs[-1] if errs else (lines[-1] if lines else "no server output")).strip()
        tail = " | ".join(ln.strip() for ln in self.log_tail(4))
        return f"{root[:500]} [log tail: {tail[:700]}]"

    # ---- HTTP ----
    def http(self, method: str, path: str, body: dict | None = None, timeout: float = 10.0):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if data else {}
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            return r.status, r.read().decode("utf-8", "replace")
        finally:
            conn.close()

    def port_in_use(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0):
                return True
        except OSError:
            return False

    # ---- steps ----
    def import_check(self) -> str | None:
        if os.environ.get("CTAX_PREFLIGHT_IMPORT_CHECK", "1") == "0":
            self.note("import check disabled (CTAX_PREFLIGHT_IMPORT_CHECK=0)")
            return None
        p = subprocess.run([sys.executable, os.path.join(HERE, "preflight_check.py"),
                            "--packages-only", "--compact", "--config", self.config],
                           capture_output=True, text=True, timeout=600)
        self.note(f"import check: {p.stdout.strip()[-2000:]}")
        try:
            res = json.loads(p.stdout.strip().splitlines()[-1])
            entry = res["configs"][self.config]
        except Exception as e:
            return f"import check failed to run: {type(e).__name__}: {e}; {p.stderr.strip()[-300:]}"
        return None if entry["ready"] else entry["reason"]

    def start_dummy(self) -> None:
        port = os.environ.get("CTAX_MOONCAKE_BOOTSTRAP_PORT", "8998")
        self.dummy_log = os.path.join(self.pre_dir, f"dummy_bootstrap_{self.config}.jsonl")
        if os.path.exists(self.dummy_log):
            os.remove(self.dummy_log)
        self.dummy = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "dummy_bootstrap.py"), "--host", "127.0.0.1",
             "--port", port, "--log", self.dummy_log],
            stdout=self.logf, stderr=subprocess.STDOUT, start_new_session=True)
        os.environ["CTAX_MOONCAKE_BOOTSTRAP_ADDR"] = f"127.0.0.1:{port}"
        for _ in range(50):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=1)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    self.note(f"dummy bootstrap up on 127.0.0.1:{port} (pid {self.dummy.pid}); "
                              f"consumer pointed at it via bootstrap_server_address")
                    return
            except OSError:
                time.sleep(0.1)
        self.note("WARNING: dummy bootstrap did not answer /health; continuing without it")

    def launch(self) -> None:
        script = os.environ.get("CTAX_VERIFY_LAUNCH") or os.path.join(
            REPO, "launch", f"launch_{self.config}.sh")
        env = dict(os.environ)
        env["CTAX_RUN_DIR"] = os.path.join(self.pre_dir, f"run_{self.config}")
        self.note(f"launching {script} (run dir {env['CTAX_RUN_DIR']}, port {self.port})")
        self.proc = subprocess.Popen(["bash", script], stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)

    def wait_ready(self) -> str | None:
        limit = float(os.environ.get("CTAX_VERIFY_STARTUP_TIMEOUT", "300"))
        t_start = time.monotonic()
        while time.monotonic() - t_start < limit:
            rc = self.proc.poll()
            if rc is not None:
                return f"server exited with status {rc} before it was ready: {self.log_reason()}"
            try:
                st, body = self.http("GET", "/v1/models", timeout=5)
                if st == 200:
                    ids = [m.get("id") for m in json.loads(body).get("data", [])]
                    if self.served not in ids:
                        return f"/v1/models does not list '{self.served}' (got {ids})"
                    self.startup_s = time.monotonic() - t_start
                    self.note(f"ready: /v1/models 200 {ids} after {self.startup_s:.1f} s")
                    return None
            except (OSError, http.client.HTTPException, ValueError):
                pass
            time.sleep(1.0)
        return f"/v1/models not 200 within {limit:.0f} s: {self.log_reason()}"

    def error_count(self) -> float | None:
        try:
            st, body = self.http("GET", "/metrics", timeout=10)
        except (OSError, http.client.HTTPException):
            return None
        if st != 200:
            return None
        total = 0.0
        for ln in body.splitlines():
            if ln.startswith("vllm:request_success_total{") and 'finished_reason="error"' in ln:
                try:
                    total += float(ln.rsplit(" ", 1)[1])
                except ValueError:
                    pass
        return total

    def one_request(self, i: int) -> tuple[str | None, float]:
        rng = random.Random()
        n_words = int(os.environ.get("CTAX_VERIFY_PROMPT_WORDS", "250"))
        words = " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 7)))
                         for _ in range(n_words))
        body = {"model": self.served, "prompt": f"ctax preflight {i} {rng.getrandbits(64):x} {words}",
                "max_tokens": self.a.max_tokens, "temperature": 0, "ignore_eos": True,
                "stream": True, "stream_options": {"include_usage": True}}
        t = time.monotonic()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.a.request_timeout)
        try:
            conn.request("POST", "/v1/completions", body=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                return f"request {i}: HTTP {r.status}: {r.read()[:300]!r}", time.monotonic() - t
            done, usage, chunks = False, None, 0
            for raw in r:
                ln = raw.decode("utf-8", "replace").strip()
                if not ln.startswith("data:"):
                    continue
                data = ln[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                obj = json.loads(data)
                if obj.get("choices"):
                    chunks += 1
                if obj.get("usage"):
                    usage = obj["usage"]
                if "error" in obj:
                    return f"request {i}: error event {obj['error']}", time.monotonic() - t
            dt = time.monotonic() - t
            if not done:
                return f"request {i}: stream ended without [DONE]", dt
            got = (usage or {}).get("completion_tokens")
            if got != self.a.max_tokens:
                return f"request {i}: completion_tokens {got} != max_tokens {self.a.max_tokens}", dt
            prompt = (usage or {}).get("prompt_tokens")
            self.note(f"request {i}: 200, {prompt} prompt tokens, {got} tokens in {chunks} chunks, "
                      f"{dt:.2f} s")
            return None, dt
        except (OSError, http.client.HTTPException, ValueError) as e:
            return f"request {i}: {type(e).__name__}: {e}", time.monotonic() - t
        finally:
            conn.close()

    def requests(self) -> str | None:
        before = self.error_count()
        t_all = time.monotonic()
        for i in range(self.a.requests):
            err, dt = self.one_request(i)
            if err:
                if self.proc.poll() is not None:
                    err += f"; server exited with status {self.proc.returncode}: {self.log_reason()}"
                return err
            if dt > self.a.request_timeout:
                return f"request {i} took {dt:.1f} s (limit {self.a.request_timeout:.0f} s per request)"
        total = time.monotonic() - t_all
        self.note(f"{self.a.requests} request(s) done in {total:.2f} s")
        if self.a.total_timeout and total > self.a.total_timeout:
            return (f"{self.a.requests} requests took {total:.1f} s "
                    f"(limit {self.a.total_timeout:.0f} s for all)")
        after = self.error_count()
        if before is not None and after is not None and after > before:
            return f"vllm:request_success_total{{finished_reason=\"error\"}} rose {before:g} -> {after:g}"
        if after is None:
            self.note("WARNING: /metrics unreadable; error-count check skipped")
        return None

    def health(self) -> str | None:
        try:
            st, _ = self.http("GET", "/health", timeout=10)
        except (OSError, http.client.HTTPException) as e:
            return f"/health unreachable: {type(e).__name__}: {e}"
        if st != 200:
            return f"/health returned {st} (engine dead?): {self.log_reason()}"
        if self.proc.poll() is not None:
            return f"server process exited with status {self.proc.returncode}"
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        for pat in FATAL_PATTERNS:
            if pat in text:
                return f"log contains '{pat}': {self.log_reason()}"
        self.note("engine healthy: /health 200, process alive, no fatal log line")
        return None

    def stop(self) -> None:
        grace = float(os.environ.get("CTAX_VERIFY_GRACE", "20"))
        for name, p in (("server", self.proc), ("dummy bootstrap", self.dummy)):
            if p is None:
                continue
            try:
                pgid = os.getpgid(p.pid)
            except ProcessLookupError:
                pgid = None
            if pgid is not None and p.poll() is None:
                os.killpg(pgid, signal.SIGINT if name == "server" else signal.SIGTERM)
                try:
                    p.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self.note(f"{name} still running after {grace:.0f} s: SIGKILL to group {pgid}")
            if pgid is not None:
                try:  # children left in the group (EngineCore, workers) go too
                    os.killpg(pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.note(f"{name} stopped (status {p.returncode})")
        if self.dummy is not None:
            n = 0
            try:
                with open(self.dummy_log) as f:
                    n = sum(1 for _ in f)
            except OSError:
                pass
            self.note(f"dummy bootstrap was contacted {n} time(s) (log {self.dummy_log})")

    def run(self) -> tuple[str, str | None]:
        self.note(f"config {self.config}: {self.a.requests} x max_tokens={self.a.max_tokens}, "
                  f"per-request limit {self.a.request_timeout:.0f} s"
                  + (f", total limit {self.a.total_timeout:.0f} s" if self.a.total_timeout else ""))
        reason = self.import_check()
        if reason:
            return "skip", reason
        if self.port_in_use():
            raise UsageError(f"{self.host}:{self.port} is already in use (CTAX_PORT)")
        try:
            if self.a.dummy_bootstrap:
                self.start_dummy()
            self.launch()
            reason = self.wait_ready() or self.requests() or self.health()
        finally:
            self.stop()
        return ("skip", reason) if reason else ("include", None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--request-timeout", type=float, default=30.0)
    ap.add_argument("--total-timeout", type=float, default=0.0, help="0 = no limit on the sum")
    ap.add_argument("--dummy-bootstrap", action="store_true")
    a = ap.parse_args()
    configs = ["plain", "noop_connector", "mooncake_producer", "mooncake_consumer",
               "mooncake_both", "nixl_both", "lmcache_only", "multi_mooncake_lmcache",
               # named variants (launch/common.sh CTAX_VARIANTS)
               "mooncake_both_nhd", "multi_mooncake_lmcache_nhd"]
    if a.config not in configs or a.requests < 1 or a.max_tokens < 1:
        ap.error(f"--config must be one of {configs}; --requests/--max-tokens >= 1")
    if not os.environ.get("CTAX_MODEL"):
        ap.error("CTAX_MODEL is not set")
    t0 = time.monotonic()
    v = Verify(a)
    code = 0
    try:
        decision, reason = v.run()
    except UsageError as e:
        decision, reason, code = "error", str(e), 2
    except KeyboardInterrupt:
        v.stop()
        decision, reason, code = "error", "interrupted", 2
    out = {"config": a.config, "decision": decision, "reason": reason, "log": v.log_name,
           "seconds": round(time.monotonic() - t0, 1)}
    v.note(f"decision: {json.dumps(out)}")
    v.logf.close()
    sys.stdout.flush()
    print(json.dumps(out), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
