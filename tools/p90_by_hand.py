#!/usr/bin/env python3
"""Independent check of a report's per-launch TTFT and TPOT p90s against the raw requests.

    python3 tools/p90_by_hand.py ROOT SUMMARY_JSON CTAX

For every launch-cell in SUMMARY_JSON's `per_launch` (the report's `data/summary.json` of ROOT),
finds the run directory of ROOT that holds its requests file (`<stamp>_<config>_l<launch>/
requests_<phase>_<cell>.jsonl[.cols|.zst]`), prints the records with `CTAX cat` (the archive's
lossless decoder, checked byte for byte when the archive was written; DESIGN.md §7.1), and
recomputes, with numpy and none of the tool's analysis code:

  - the measured requests: not warm-up, status "ok";
  - TTFT = (t_first_token_ns - t_send_ns) / 1e6 ms, its count and numpy's default (linear) p90;
  - TPOT = (t_last_token_ns - t_first_token_ns) / 1e6 / (completion_tokens - 1) ms over the
    requests with more than one token, and its linear p90.

Prints every disagreement (relative 1e-6) and `checked N values in M launch-cells, K bad`;
exits 1 when any value disagrees, a launch-cell's requests file is missing or ambiguous, or
nothing was checked. It needs numpy (the CPU vLLM venv of tools/setup.sh has it).
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

STAMP = re.compile(r"^\d{8}-\d{6}_")


def run_dirs_by_launch(root):
    """`<config>_l<launch>` -> the run directories of that launch (a launch's Phase A and its
    Phase B run in directories of their own)."""
    by = {}
    for d in sorted(os.listdir(root)):
        if STAMP.match(d):
            by.setdefault(STAMP.sub("", d), []).append(d)
    return by


def requests_file(root, by_launch, key, launch):
    """Every requests file of this launch-cell in ROOT (the caller wants exactly one)."""
    found = []
    for d in by_launch.get(f"{key['config']}_l{launch}", []):
        for ext in (".jsonl.cols", ".jsonl.zst", ".jsonl"):
            f = os.path.join(root, d, f"requests_{key['phase']}_{key['cell']}{ext}")
            if os.path.exists(f):
                found.append(f)
    return found


def measured(ctax, path):
    """TTFT and TPOT (ms) of the measured requests of one requests file."""
    out = subprocess.run([ctax, "cat", path], capture_output=True, text=True, check=True).stdout
    ttft, tpot = [], []
    for n, line in enumerate(out.splitlines(), 1):
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"{path}: record {n}: {e}")
        if r.get("warmup") or r.get("status") != "ok":
            continue
        ttft.append((r["t_first_token_ns"] - r["t_send_ns"]) / 1e6)
        if r["completion_tokens"] > 1:
            tpot.append(
                (r["t_last_token_ns"] - r["t_first_token_ns"]) / 1e6 / (r["completion_tokens"] - 1)
            )
    return {"ttft_ms": ttft, "tpot_ms": tpot}


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    root, summary, ctax = sys.argv[1:]
    with open(summary) as f:
        per_launch = json.load(f)["per_launch"]
    by_launch = run_dirs_by_launch(root)
    checked = bad = 0
    for p in per_launch:
        key, launch = p["key"], p["launch"]
        where = f"{key['config']} l{launch} {key['phase']}/{key['cell']}"
        files = requests_file(root, by_launch, key, launch)
        if len(files) != 1:
            print(f"{where}: {len(files)} requests files in {root}: {files}")
            bad += 1
            continue
        mine = measured(ctax, files[0])
        for metric, values in mine.items():
            stats = p.get(metric) or {}
            checked += 1
            if stats.get("n") != len(values):
                print(f"{where} {metric}: n {stats.get('n')} in the report, {len(values)} by hand")
                bad += 1
                continue
            est = (stats.get("p90") or {}).get("est")
            ref = float(np.percentile(values, 90)) if values else None
            if (est is None) != (ref is None) or (ref is not None and not close(est, ref)):
                print(f"{where} {metric}: p90 {est} in the report, {ref} by numpy")
                bad += 1
    print(f"checked {checked} values in {len(per_launch)} launch-cells, {bad} bad")
    sys.exit(1 if bad or not checked else 0)


if __name__ == "__main__":
    main()
