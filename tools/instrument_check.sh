#!/usr/bin/env bash
# Instrument check: is ctax-collect's latency the same as `vllm bench serve`'s on the same server?
#
# Starts ONE plain server (launch/launch_plain.sh, the sweeps' own launch path), warms it up with
# one discarded ctax cell, then alternates the two clients at the same rate and shape in the order
# given by --order (default ABBA: ctax, vllm bench, vllm bench, ctax), so that a linear drift of the
# server cancels between the two instruments. ctax runs fixed-rate arrivals; vllm bench gets
# `--burstiness 1000` (gamma inter-arrivals with CV ~3%, the closest it has to fixed-rate).
# Afterwards: `ctax instrument-check OUT` puts TTFT/TPOT p50/p90 with CIs side by side.
#
# Usage: tools/instrument_check.sh OUT [--rate R] [--input N] [--output M] [--cell-s S]
#                                      [--warmup-s W] [--warm-cell-s S0] [--order ABBA]
# Environment: the launch contract of launch/common.sh (CTAX_MODEL required, CTAX_VLLM,
#   CTAX_PORT, CTAX_DEVICE, CTAX_SERVED_NAME, CTAX_EXTRA_ARGS, ...), CTAX_COLLECT (default
#   target/release/ctax-collect), CTAX_VOCAB_HI (default 150000), CTAX_STARTUP_TIMEOUT (600 s).
# Output: OUT/server/ (launch.sh, vllm logs), OUT/warmup/, OUT/p<k>_ctax/ (collector run dirs),
#   OUT/p<k>_bench.json (vllm bench --save-detailed), OUT/p<k>_bench.log, OUT/check.json (the
#   parameters and per-position wall times).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: instrument_check.sh OUT [--rate R] [--input N] [--output M] [--cell-s S] [--warmup-s W] [--warm-cell-s S0] [--order ABBA]}
shift
rate=4 input=4096 output=256 cell_s=60 warmup_s=10 warm_cell_s=60 order=ABBA
while (($#)); do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    --cell-s) cell_s=$2; shift 2 ;;
    --warmup-s) warmup_s=$2; shift 2 ;;
    --warm-cell-s) warm_cell_s=$2; shift 2 ;;
    --order) order=$2; shift 2 ;;
    *) echo "instrument_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ "$order" =~ ^[AB]+$ ]] || { echo "instrument_check: --order must be letters A (ctax) and B (vllm bench)" >&2; exit 2; }
: "${CTAX_MODEL:?CTAX_MODEL (model directory) is required}"
collect=${CTAX_COLLECT:-$REPO/target/release/ctax-collect}
vllm=${CTAX_VLLM:-vllm}
port=${CTAX_PORT:-8000}
host=${CTAX_HOST:-127.0.0.1}
served=${CTAX_SERVED_NAME:-$(basename "$CTAX_MODEL")}
export CTAX_PORT=$port CTAX_HOST=$host CTAX_SERVED_NAME=$served
[[ -x "$collect" ]] || { echo "instrument_check: no collector at $collect (cargo build --release)" >&2; exit 2; }
if [[ -e "$out" ]] && [[ -n "$(ls -A "$out" 2>/dev/null)" ]]; then
  echo "instrument_check: $out is not empty (refusing to mix two checks)" >&2; exit 2
fi
mkdir -p "$out/server"
if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
  echo "instrument_check: port $port is already in use" >&2; exit 2
fi

server_pid=
stop_server() {
  [[ -n "$server_pid" ]] || return 0
  kill -INT -- "-$server_pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}
trap stop_server EXIT
trap 'stop_server; exit 130' INT TERM

t0=$(date +%s)
CTAX_RUN_DIR="$out/server" setsid "$REPO/launch/launch_plain.sh" \
  >"$out/server/vllm_stdout.log" 2>"$out/server/vllm_stderr.log" </dev/null &
server_pid=$!
deadline=$((SECONDS + ${CTAX_STARTUP_TIMEOUT:-600}))
until curl -sf "http://$host:$port/v1/models" >/dev/null 2>&1; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "instrument_check: the server exited during startup; log tail:" >&2
    tail -20 "$out/server/vllm_stderr.log" "$out/server/vllm_stdout.log" >&2; exit 1
  fi
  ((SECONDS < deadline)) || { echo "instrument_check: server not ready in time" >&2; exit 1; }
  sleep 2
done
ready_s=$(($(date +%s) - t0))
echo "[instrument] server ready after ${ready_s} s"

# One ctax cell as a plan file: fixed-rate arrivals, the first warmup_s seconds flagged warm-up.
plan() { # duration warmup seed
  printf '{"cells":[{"phase":"A","cell":{"rate":%s,"input_len":%s,"output_len":%s},"arrival":"fixed","duration_s":%s,"warmup_s":%s,"min_completed":0,"max_cell_s":%s,"inflight_cap":1024,"seed":%s}]}\n' \
    "$rate" "$input" "$output" "$1" "$2" "$(( $1 + $2 + 300 ))" "$3"
}
run_ctax() { # dir duration warmup seed
  plan "$2" "$3" "$4" > "$out/$(basename "$1").plan.json"
  "$collect" --url "http://$host:$port" --model "$served" --config plain --launch 0 \
    --plan "$out/$(basename "$1").plan.json" --out "$1" --no-progress \
    --vocab-lo 10 --vocab-hi "${CTAX_VOCAB_HI:-150000}" --request-timeout-s 600
}
echo "[instrument] warm-up cell (${warm_cell_s} s, discarded)"
run_ctax "$out/warmup" "$warm_cell_s" 0 1

positions=()
for ((k = 0; k < ${#order}; k++)); do
  p=$((k + 1)); inst=${order:k:1}
  start=$(date +%s.%N)
  if [[ $inst == A ]]; then
    echo "[instrument] position $p: ctax-collect"
    run_ctax "$out/p${p}_ctax" "$cell_s" "$warmup_s" "$((100 + p))"
  else
    echo "[instrument] position $p: vllm bench serve"
    n=$(python3 -c "import math; print(math.ceil($rate * ($cell_s + $warmup_s)))")
    "$vllm" bench serve --backend vllm --base-url "http://$host:$port" --endpoint /v1/completions \
      --model "$served" --tokenizer "$CTAX_MODEL" --dataset-name random \
      --random-input-len "$input" --random-output-len "$output" --random-range-ratio 0 \
      --ignore-eos --request-rate "$rate" --burstiness 1000 --num-prompts "$n" --seed "$((100 + p))" \
      --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
      --save-result --save-detailed --result-dir "$out" --result-filename "p${p}_bench.json" \
      > "$out/p${p}_bench.log" 2>&1 || { echo "instrument_check: vllm bench failed:" >&2; tail -30 "$out/p${p}_bench.log" >&2; exit 1; }
  fi
  end=$(date +%s.%N)
  positions+=("{\"position\":$p,\"instrument\":\"$inst\",\"wall_start\":$start,\"wall_end\":$end}")
done
stop_server
(IFS=,; printf '{"rate":%s,"input_len":%s,"output_len":%s,"cell_s":%s,"warmup_s":%s,"warm_cell_s":%s,"order":"%s","server_ready_s":%s,"positions":[%s]}\n' \
  "$rate" "$input" "$output" "$cell_s" "$warmup_s" "$warm_cell_s" "$order" "$ready_s" "${positions[*]}") > "$out/check.json"
echo "[instrument] done: $out (analyse with: ctax instrument-check $out)"
