#!/usr/bin/env bash
# Submits one connector-tax sweep to Slurm as N shards (hosts), with the stage barrier between
# Phase A and Phase B (DESIGN.md "Shards"):
#   1. shard.sbatch A   array 1-N: `ctax run --shard K/N` = pre-flight + the K-th part of Phase A
#   2. reference.sbatch after every task of 1: `ctax merge` the N roots, `ctax reference-rates`
#   3. shard.sbatch B   array 1-N after 2: Phase B of part K at those reference rates
#   4. report.sbatch    after every task of 3: `ctax merge`, `ctax analyze`, `ctax report`
# Usage:
#   launch/slurm/submit.sh --profile NAME|FILE --root DIR --shards N [--gpus 0,1]
#                          [--run-args "ARGS for every ctax run"] [--port-span P] [SBATCH ARGS...]
# DIR must be on a filesystem every node sees. SBATCH ARGS go to every job (e.g.
# --partition=gpu --gres=gpu:2 --time=04:00:00 --cpus-per-task=32). Shard K writes
# DIR/shard_K; the merged sweep is DIR/merged (report in DIR/merged/report). Submitting again
# with the same arguments resumes (complete launches are skipped; DIR/phase_a and DIR/merged
# are rebuilt). Environment: CTAX_BIN (default <repo>/target/release/ctax).
# Prints the four job ids, one line each ("phase_a 123" ...).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$REPO/launch/slurm"
profile="" root="" shards="" gpus="" run_args="" port_span=1000
sbatch_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --run-args) run_args=$2; shift 2 ;;
    --port-span) port_span=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) sbatch_args+=("$1"); shift ;;
  esac
done
[[ -n "$profile" && -n "$root" && -n "$shards" ]] || { echo "submit.sh: --profile, --root and --shards are required" >&2; exit 2; }
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: --shards must be a positive number" >&2; exit 2; }
[[ "$port_span" =~ ^[0-9]+$ ]] || { echo "submit.sh: --port-span must be a number" >&2; exit 2; }
mkdir -p "$root/slurm"
root=$(cd "$root" && pwd)
if [[ -f "$profile" ]]; then profile=$(cd "$(dirname "$profile")" && pwd)/$(basename "$profile"); fi
export CTAX_REPO="$REPO" CTAX_PROFILE="$profile" CTAX_ROOT="$root" CTAX_SHARDS="$shards" \
  CTAX_GPUS="$gpus" CTAX_RUN_ARGS="$run_args" CTAX_PORT_SPAN="$port_span" \
  CTAX_BIN="${CTAX_BIN:-$REPO/target/release/ctax}"
[[ -x "$CTAX_BIN" ]] || { echo "submit.sh: $CTAX_BIN not found (cargo build --release, or set CTAX_BIN)" >&2; exit 2; }
common=(--parsable --export=ALL --chdir="$root" "${sbatch_args[@]}")
a=$(sbatch "${common[@]}" --job-name=ctax-A --array="1-$shards" --output="$root/slurm/%x_%a_%A.log" \
  "$HERE/shard.sbatch" A)
a=${a%%;*}
r=$(sbatch "${common[@]}" --job-name=ctax-ref --dependency="afterok:$a" --output="$root/slurm/%x_%j.log" \
  "$HERE/reference.sbatch")
r=${r%%;*}
b=$(sbatch "${common[@]}" --job-name=ctax-B --array="1-$shards" --dependency="afterok:$r" \
  --output="$root/slurm/%x_%a_%A.log" "$HERE/shard.sbatch" B)
b=${b%%;*}
m=$(sbatch "${common[@]}" --job-name=ctax-report --dependency="afterok:$b" --output="$root/slurm/%x_%j.log" \
  "$HERE/report.sbatch")
m=${m%%;*}
printf 'phase_a %s\nreference %s\nphase_b %s\nreport %s\n' "$a" "$r" "$b" "$m"
