#!/usr/bin/env python3
"""A dummy Mooncake bootstrap server: a harmless stand-in that records every contact.

Usage: dummy_bootstrap.py [--host 127.0.0.1] [--port 8998] [--log FILE]

Why it exists: the seed's kv_consumer pre-flight starts "a dummy bootstrap process" and points
the consumer at it. In current vLLM (0.26 .. 0.33) a MooncakeConnector *consumer* needs no peer
to start: it runs a receiver loop and contacts a prefiller's bootstrap server
(``GET <remote_bootstrap_addr>/query``) only for a request that carries
``kv_transfer_params.do_remote_prefill``; plain requests are served locally. Only *producers*
talk to a bootstrap server at startup (``POST /register``, to their own embedded server or to
``kv_connector_extra_config.bootstrap_server_address``). So the dummy is not needed for the
consumer to start; the pre-flight runs it anyway, on the bootstrap port, and reports how many
times anything contacted it (expected: 0 for a consumer serving plain requests).

It speaks the two routes of vLLM's ``MooncakeBootstrapServer``:
  POST /register  -> 200 {"status": "ok"}; the JSON body is kept
  GET  /query     -> 200 with the registered workers keyed by dp rank ({} when none)
and ``GET /health`` (200, not counted: the verify script's own readiness probe). Everything
else is answered 404 and recorded. Every contact is one JSON line in --log:
{"t_unix": ..., "method": ..., "path": ..., "client": ..., "body": ...}.
On SIGTERM/SIGINT it exits 0 after printing "dummy_bootstrap: N contact(s)".
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _State:
    def __init__(self, log_path: str | None):
        self.lock = threading.Lock()
        self.log_path = log_path
        self.contacts = 0
        self.workers: dict[str, object] = {}

    def record(self, method: str, path: str, client: str, body: str | None) -> None:
        with self.lock:
            self.contacts += 1
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"t_unix": time.time(), "method": method, "path": path,
                                        "client": client, "body": body}) + "\n")


def make_handler(state: _State):
    class Handler(BaseHTTPRequestHandler):
        server_version = "ctax-dummy-bootstrap/1"

        def log_message(self, fmt, *args):  # quiet; contacts go to --log
            return

        def _reply(self, code: int, obj) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> str | None:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n).decode("utf-8", "replace") if n else None

        def do_GET(self):  # noqa: N802
            path = self.path.split("?", 1)[0]
            if path == "/health":
                self._reply(200, {"status": "ok", "contacts": state.contacts})
                return
            state.record("GET", self.path, self.client_address[0], None)
            if path == "/query":
                self._reply(200, state.workers)
            else:
                self._reply(404, {"error": "unknown path"})

        def do_POST(self):  # noqa: N802
            body = self._body()
            state.record("POST", self.path, self.client_address[0], body)
            if self.path.split("?", 1)[0] == "/register":
                try:
                    payload = json.loads(body or "{}")
                    key = str(payload.get("dp_rank", 0)) if isinstance(payload, dict) else "0"
                    state.workers[key] = payload
                except ValueError:
                    pass
                self._reply(200, {"status": "ok"})
            else:
                self._reply(404, {"error": "unknown path"})

    return Handler


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8998)
    ap.add_argument("--log", default=None, help="JSONL file of contacts (appended)")
    a = ap.parse_args()
    state = _State(a.log)
    srv = ThreadingHTTPServer((a.host, a.port), make_handler(state))
    srv.daemon_threads = True

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"dummy_bootstrap listening on {a.host}:{srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        srv.server_close()
    print(f"dummy_bootstrap: {state.contacts} contact(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
