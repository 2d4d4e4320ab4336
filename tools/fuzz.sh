#!/usr/bin/env bash
# Fuzzing of the three parsers that read what other programs wrote (DESIGN.md §10):
#   sse   — collector/src/sse.rs (SSE framing) and the RequestRecord built from its frames
#   prom  — collector/src/prom.rs (Prometheus text) and the MetricsSample built from it
#   jsonl — collector/schema/src/jsonl.rs (the raw JSONL reader: RequestRecord, MetricsSample,
#           StepRecord lines with file:line:field errors, the bounded line reader)
#   columns — collector/schema/src/{columns,request_columns,number_columns}.rs (the archive's
#           .cols encodings: hostile files decode to an error, never a panic, hang or blow-up;
#           what the encoders accept decodes back byte for byte)
# Not part of the test command (it takes minutes); the test suite runs the seeds only.
#
# Usage: bash tools/fuzz.sh [RUNS] [TARGET...]     RUNS default 10000000; all targets by default
# Installs cargo-fuzz (crates.io) if it is missing. Builds with libFuzzer + AddressSanitizer on
# the stable toolchain: cargo-fuzz passes -Z flags (-Zsanitizer=address), which stable rustc
# accepts under RUSTC_BOOTSTRAP=1 (no nightly toolchain needed). Findings land in
# fuzz/artifacts/<target>/; the grown corpus in fuzz/corpus/<target>/ (both git-ignored; the
# committed seeds are fuzz/seeds/<target>/). Per-target logs and a summary line with the exact
# execution count and exec/s go to fuzz/logs/.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
RUNS=${1:-10000000}
if [ $# -gt 0 ]; then shift; fi
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=(sse prom jsonl columns); fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --version 0.13.2
fi
export RUSTC_BOOTSTRAP=1
# FUZZ_SANITIZER=none builds without AddressSanitizer: ~20x the executions per second (the
# targets are safe Rust, so panics, hangs and memory blow-ups are the findings either way).
SAN_ARGS=()
if [ -n "${FUZZ_SANITIZER:-}" ]; then SAN_ARGS=(-s "$FUZZ_SANITIZER"); fi
for t in "${TARGETS[@]}"; do cargo fuzz build -O "${SAN_ARGS[@]}" "$t"; done
BIN=fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/release
mkdir -p fuzz/logs
for t in "${TARGETS[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    log="fuzz/logs/$t.log"
    echo "[fuzz] $t: $RUNS executions"
    start=$SECONDS
    # -timeout: an input taking > 10 s is a hang and a finding; -rss_limit_mb: > 2 GiB is one too.
    # The binary cargo-fuzz built, run directly (what `cargo fuzz run -O` runs).
    "$BIN/$t" "fuzz/corpus/$t" "fuzz/seeds/$t" \
        -runs="$RUNS" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="fuzz/artifacts/$t/" >"$log" 2>&1 || {
        echo "[fuzz] $t FAILED (finding in fuzz/artifacts/$t/, log $log):"
        tail -n 40 "$log"
        exit 1
    }
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -n 1)
    line="[fuzz] $t: ${execs} executions in $((SECONDS - start)) s (${rate} exec/s), ${cov}, no crash, no hang"
    echo "$line" | tee -a fuzz/logs/summary.txt
done
