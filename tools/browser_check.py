#!/usr/bin/env python3
"""Opens the report's index.html in headless Chromium and checks what a reader would see.

Talks to Chromium over the DevTools protocol through --remote-debugging-pipe (file descriptors
3 and 4, NUL-separated JSON), so it needs only the Python standard library: no websocket
package, no network port, nothing to pip-install.

Checks (exit status 1 when any fails):
  - no console errors, no uncaught exceptions, no error log entries (failed loads included);
  - the page loads nothing from outside the file itself (no resource entries, no <script>,
    no stylesheet <link>, no external <img>);
  - every figure #fig1..#fig8 exists and either holds an <svg> with a non-zero bounding box and
    real plot elements, or a non-empty "not drawn" note; --expect-svg pins which ones are drawn;
  - every anchor #h1..#h6, #sc1..#sc7, #fig1..#fig8, #conventions, #provenance resolves, and
    so does every in-page link (href="#...");
and writes a full-page PNG screenshot (--screenshot) and optionally one PNG per figure
(--shots-dir).

Exit status: 0 all checks passed, 1 a check failed, 2 no Chromium found (the caller decides
whether that is a failure), 3 the browser misbehaved (timeout, crash).

  python3 tools/browser_check.py site/index.html --screenshot /tmp/report.png
  python3 tools/browser_check.py --self-test     # proves console errors are detected
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REQUIRED_ANCHORS = (
    [f"h{i}" for i in range(1, 7)]
    + [f"sc{i}" for i in range(1, 8)]
    + [f"fig{i}" for i in range(1, 9)]
    + ["conventions", "provenance"]
)

CANDIDATES = ["chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome"]


def find_chromium(explicit):
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    env = os.environ.get("CHROMIUM")
    if env and os.access(env, os.X_OK):
        return env
    for c in CANDIDATES:
        p = shutil.which(c)
        if p:
            return p
    return None


class BrowserError(Exception):
    pass


class Chromium:
    """A headless Chromium driven over --remote-debugging-pipe."""

    def __init__(self, binary, width, height, timeout):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="ctax-chromium-")
        # Pipes: we write commands to fd 3 of the child, read responses from its fd 4.
        cmd_r, self.cmd_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        args = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--no-first-run",
            "--no-default-browser-check",
            "--mute-audio",
            "--hide-scrollbars",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "--remote-debugging-pipe",
            "about:blank",
        ]

        def child_fds():
            # Map our pipe ends onto fds 3 and 4 in the child (via close-on-exec copies at high
            # numbers, so neither end is clobbered when it already sits on 3 or 4). dup2 makes
            # 3 and 4 inheritable; every other fd Python opened is close-on-exec.
            import fcntl

            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
            b = fcntl.fcntl(resp_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=child_fds,
            close_fds=False,
        )
        os.close(cmd_r)
        os.close(resp_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def close(self):
        try:
            self.send("Browser.close", wait=False)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.cmd_w, self.resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline):
        import select

        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("timed out waiting for Chromium")
            ready, _, _ = select.select([self.resp_r], [], [], min(left, 1.0))
            if not ready:
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode(errors="replace")[-2000:]
                    raise BrowserError(f"Chromium exited ({self.proc.returncode}): {err}")
                continue
            chunk = os.read(self.resp_r, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium closed the DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None, wait=True):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        if not wait:
            return None
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == mid:
                if "error" in m:
                    raise BrowserError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session, timeout):
        deadline = time.monotonic() + timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method and e.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self.events.append(m)

    def drain(self, seconds):
        """Collects events for a short while (late console messages)."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read_message(deadline))
        except BrowserError:
            pass


def open_page(browser, url):
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for m in ("Page.enable", "Runtime.enable", "Log.enable"):
        browser.send(m, session=session)
    browser.send("Page.navigate", {"url": url}, session=session)
    browser.wait_event("Page.loadEventFired", session, browser.timeout)
    browser.drain(0.5)
    return session


def problems_from_events(events, session):
    out = []
    for e in events:
        if e.get("sessionId") != session:
            continue
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            out.append(f"console.{p.get('type')}: {text}")
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(f"uncaught exception: {d.get('text')} {d.get('exception', {}).get('description', '')}")
        elif m == "Page.javascriptDialogOpening":
            out.append(f"a script opened a {p.get('type')} dialog: {p.get('message')}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            en = p["entry"]
            out.append(f"log error ({en.get('source')}): {en.get('text')} {en.get('url', '')}")
    return out


def evaluate(browser, session, expr):
    r = browser.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True}, session=session)
    if "exceptionDetails" in r:
        raise BrowserError(f"evaluate failed: {r['exceptionDetails']}")
    return r["result"].get("value")


PAGE_PROBE = r"""
(() => {
  const required = %s;
  const figs = [];
  for (let i = 1; i <= 8; i++) {
    const f = document.getElementById('fig' + i);
    if (!f) { figs.push({n: i, exists: false}); continue; }
    const svg = f.querySelector('svg');
    const note = f.querySelector('.dropped');
    let box = null, marks = 0, texts = 0;
    if (svg) {
      const r = svg.getBoundingClientRect();
      box = {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height};
      marks = svg.querySelectorAll('path, rect, circle, polygon, polyline, line').length;
      texts = svg.querySelectorAll('text').length;
    }
    figs.push({n: i, exists: true, svg: !!svg, box, marks, texts,
               note: note ? note.textContent.trim() : null,
               fbox: (() => { const r = f.getBoundingClientRect(); return {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height}; })()});
  }
  const anchors = {};
  for (const id of required) {
    anchors[id] = document.querySelectorAll('[id="' + id + '"]').length;
  }
  const broken = [];
  for (const a of document.querySelectorAll('a[href^="#"]')) {
    const id = decodeURIComponent(a.getAttribute('href').slice(1));
    if (id && !document.getElementById(id)) broken.push(id);
  }
  const external = [];
  for (const e of performance.getEntriesByType('resource')) external.push(e.name);
  const scripts = document.querySelectorAll('script').length;
  const links = [...document.querySelectorAll('link[rel~="stylesheet"], link[href^="http"]')].map(l => l.href);
  const imgs = [...document.querySelectorAll('img')].map(i => i.src);
  return {figs, anchors, broken, external, scripts, links, imgs,
          title: document.title, height: document.documentElement.scrollHeight,
          width: document.documentElement.scrollWidth};
})()
"""


def screenshot(browser, session, path, clip=None):
    params = {"format": "png", "captureBeyondViewport": True}
    if clip:
        params["clip"] = {"x": clip["x"], "y": clip["y"], "width": clip["w"], "height": clip["h"], "scale": 1}
    data = browser.send("Page.captureScreenshot", params, session=session)["data"]
    with open(path, "wb") as f:
        f.write(base64.b64decode(data))


def check_page(args, binary):
    path = os.path.abspath(args.page)
    if os.path.isdir(path):
        path = os.path.join(path, "index.html")
    if not os.path.isfile(path):
        print(f"error: {path} does not exist", file=sys.stderr)
        return 1
    url = "file://" + path
    browser = Chromium(binary, args.width, 900, args.timeout)
    failures = []
    try:
        session = open_page(browser, url)
        probe = evaluate(browser, session, PAGE_PROBE % json.dumps(REQUIRED_ANCHORS))
        failures += problems_from_events(browser.events, session)
        expect_svg = None
        if args.expect_svg is not None:
            expect_svg = {int(x) for x in args.expect_svg.split(",") if x.strip()}
        for f in probe["figs"]:
            n = f["n"]
            if not f["exists"]:
                failures.append(f"figure #fig{n} missing")
                continue
            if f["svg"]:
                b = f["box"]
                if not b or b["w"] < 100 or b["h"] < 100:
                    failures.append(f"figure {n}: svg has an empty bounding box {b}")
                if f["marks"] < 10 or f["texts"] < 3:
                    failures.append(f"figure {n}: svg looks empty ({f['marks']} shapes, {f['texts']} texts)")
                if expect_svg is not None and n not in expect_svg:
                    failures.append(f"figure {n}: drawn but expected to be dropped")
            else:
                if not f["note"] or len(f["note"]) < 20:
                    failures.append(f"figure {n}: neither an svg nor a 'not drawn' note")
                if expect_svg is not None and n in expect_svg:
                    failures.append(f"figure {n}: expected an svg, found only a note")
        for id_, count in probe["anchors"].items():
            if count != 1:
                failures.append(f"anchor #{id_} found {count} times (want exactly 1)")
        for id_ in probe["broken"]:
            failures.append(f"in-page link #{id_} does not resolve")
        if probe["external"]:
            failures.append(f"page loaded external resources: {probe['external'][:5]}")
        if probe["scripts"]:
            failures.append(f"page contains {probe['scripts']} <script> element(s)")
        if probe["links"]:
            failures.append(f"page links stylesheets/resources: {probe['links'][:5]}")
        if probe["imgs"]:
            failures.append(f"page contains <img> elements: {probe['imgs'][:5]}")

        if args.screenshot:
            h = min(int(probe["height"]), 60000)
            browser.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": args.width, "height": h, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            screenshot(browser, session, args.screenshot)
        if args.shots_dir:
            os.makedirs(args.shots_dir, exist_ok=True)
            for f in probe["figs"]:
                if f.get("exists") and f.get("fbox") and f["fbox"]["h"] > 0:
                    screenshot(browser, session, os.path.join(args.shots_dir, f"fig{f['n']}.png"), f["fbox"])
        report = {
            "page": path,
            "title": probe["title"],
            "page_height": probe["height"],
            "figures": [
                {"n": f["n"], "svg": f.get("svg"), "box": f.get("box"), "shapes": f.get("marks"), "note": f.get("note")}
                for f in probe["figs"]
            ],
            "anchors_checked": len(probe["anchors"]),
            "links_checked": "all in-page",
            "failures": failures,
        }
        print(json.dumps(report, indent=1))
    except BrowserError as e:
        print(f"error: browser: {e}", file=sys.stderr)
        return 3
    finally:
        browser.close()
    if failures:
        for f in failures:
            print(f"FAIL: {f}", file=sys.stderr)
        return 1
    print("OK: no console errors, every figure present, every anchor resolves", file=sys.stderr)
    return 0


def self_test(args, binary):
    """Loads pages with known console errors / exceptions / failed loads and checks they are caught."""
    tmp = tempfile.mkdtemp(prefix="ctax-selftest-")
    bad = os.path.join(tmp, "bad.html")
    with open(bad, "w") as f:
        f.write(
            "<!DOCTYPE html><html><body><p>x</p>"
            "<script>console.error('deliberate console error');</script>"
            "<script>throw new Error('deliberate exception');</script>"
            "<img src='missing-file.png'>"
            "</body></html>"
        )
    good = os.path.join(tmp, "good.html")
    with open(good, "w") as f:
        f.write("<!DOCTYPE html><html><body><p>fine</p><script>console.log('hello');</script></body></html>")
    browser = Chromium(binary, args.width, 900, args.timeout)
    try:
        s_bad = open_page(browser, "file://" + bad)
        found = problems_from_events(browser.events, s_bad)
        s_good = open_page(browser, "file://" + good)
        found_good = problems_from_events(browser.events, s_good)
    except BrowserError as e:
        print(f"error: browser: {e}", file=sys.stderr)
        return 3
    finally:
        browser.close()
        shutil.rmtree(tmp, ignore_errors=True)
    want = ["deliberate console error", "deliberate exception", "missing-file.png"]
    missing = [w for w in want if not any(w in p for p in found)]
    print(json.dumps({"bad_page_problems": found, "good_page_problems": found_good}, indent=1))
    if missing or found_good:
        print(f"FAIL: self-test: not detected {missing}; false positives {found_good}", file=sys.stderr)
        return 1
    print("OK: self-test detected the console error, the exception and the failed load", file=sys.stderr)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("page", nargs="?", help="index.html or the directory holding it")
    ap.add_argument("--screenshot", help="write a full-page PNG here")
    ap.add_argument("--shots-dir", help="write one PNG per figure into this directory")
    ap.add_argument("--expect-svg", help="comma-separated figure numbers that must be drawn (others must be notes)")
    ap.add_argument("--chromium", help="browser binary (default: $CHROMIUM, then chromium on PATH)")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--self-test", action="store_true", help="check that console errors are detected")
    args = ap.parse_args()
    binary = find_chromium(args.chromium)
    if not binary:
        print("SKIP: no Chromium found (run tools/install_chromium.sh or set CHROMIUM)", file=sys.stderr)
        return 2
    if args.self_test:
        return self_test(args, binary)
    if not args.page:
        ap.error("page is required (or --self-test)")
    return check_page(args, binary)


if __name__ == "__main__":
    sys.exit(main())
