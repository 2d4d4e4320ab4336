#!/usr/bin/env python3
"""How much a columnar lossless encoding of the request records would save (DESIGN.md §8).

For each requests_*.jsonl(.zst|.cols) given (or found under the directories given), compares its size
now with a lossless re-encoding: the records without their `events` as JSONL, plus the event
times as nanosecond deltas (from the first token, then from the previous event) in 8 byte
planes (little-endian i64, byte i of every delta together), plus the per-event token counts,
each compressed with `zstd -19`. Checks that decoding gives back the original file byte for byte before it counts it (the
collector writes compact JSON, keys in a fixed order).
Prints the totals per file kind and overall. Needs the `zstd` command line tool.

Adopted at stop 40 as request columns (`ctax archive --columns`, `collector/schema/src/request_columns.rs`,
DESIGN.md §2.7). A `.cols` file is read through `target/release/ctax cat` (build it first); its
size "now" is the columns' size, so on an archive already re-encoded the probe compares the
columns with themselves, re-encoded in Python.
"""
import json
import os
import struct
import subprocess
import sys


def zstd(data: bytes) -> int:
    return len(subprocess.run(["zstd", "-19", "-q", "-c"], input=data,
                              capture_output=True, check=True).stdout)


CTAX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "ctax")


def read(path: str) -> bytes:
    if path.endswith(".cols"):
        return subprocess.run([CTAX, "cat", path], capture_output=True, check=True).stdout
    if path.endswith(".zst"):
        return subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    with open(path, "rb") as f:
        return f.read()


def encode(raw: bytes):
    """The records with `events` left in place as a placeholder, plus `n_events` (-1 where
    `events` is null), the deltas and the counts."""
    heads, deltas, counts = [], [], bytearray()
    for line in raw.decode().splitlines():
        r = json.loads(line)
        events = r["events"]
        r["events"] = None
        r["n_events"] = -1 if events is None else len(events)
        prev = r.get("t_first_token_ns") or r["t_send_ns"]
        for t, c in events or []:
            if not 0 <= c <= 255:
                sys.exit(f"an event carries {c} tokens: the probe keeps counts in one byte")
            deltas.append(t - prev)
            prev = t
            counts.append(c)
        heads.append(json.dumps(r, separators=(",", ":"), ensure_ascii=False))
    b = struct.pack(f"<{len(deltas)}q", *deltas)
    planes = b"".join(bytes(b[i::8]) for i in range(8))
    return ("\n".join(heads) + "\n").encode(), planes, bytes(counts), len(deltas)


def decode_check(raw: bytes, heads: bytes, planes: bytes, counts: bytes, n: int) -> None:
    """Decodes and re-serialises every record as the collector writes it (compact JSON, keys in
    their order) and requires the bytes of the original file, line for line."""
    b = bytearray(8 * n)
    for i in range(8):
        b[i::8] = planes[i * n:(i + 1) * n]
    deltas = struct.unpack(f"<{n}q", bytes(b))
    k = 0
    out = []
    for head in heads.decode().splitlines():
        r = json.loads(head)
        m = r.pop("n_events")
        prev = r.get("t_first_token_ns") or r["t_send_ns"]
        ev = []
        for _ in range(max(m, 0)):
            prev += deltas[k]
            ev.append([prev, counts[k]])
            k += 1
        r["events"] = None if m < 0 else ev
        out.append(json.dumps(r, separators=(",", ":"), ensure_ascii=False))
    if k != n or ("\n".join(out) + "\n").encode() != raw:
        sys.exit("round trip differs from the original bytes")


def main() -> None:
    files = []
    for a in sys.argv[1:]:
        if os.path.isdir(a):
            for d, _, names in os.walk(a):
                if "superseded" in d:
                    continue
                files += [os.path.join(d, x) for x in names
                          if x.startswith("requests_") and ".jsonl" in x]
        else:
            files.append(a)
    if not files:
        sys.exit("usage: raw_encoding_probe.py RUN_DIR_OR_ROOT... (requests_*.jsonl[.zst|.cols] under them)")
    now = new = events = 0
    for f in sorted(files):
        raw = read(f)
        heads, planes, counts, n = encode(raw)
        decode_check(raw, heads, planes, counts, n)
        now += os.path.getsize(f) if f.endswith((".zst", ".cols")) else zstd(raw)
        new += zstd(heads) + zstd(planes) + zstd(counts)
        events += n
    print(f"{len(files)} request files, {events} events: zstd now {now / 1e6:.2f} MB, "
          f"records + byte-plane deltas {new / 1e6:.2f} MB ({100 * (new / now - 1):+.1f}%), "
          f"{8 * new / max(events, 1):.1f} bits per event")


if __name__ == "__main__":
    main()
