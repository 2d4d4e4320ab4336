#!/usr/bin/env bash
# The project's test command (README): installs what the tests need (tools/setup.sh), builds the
# workspace once (release profile, the only profile), runs every test with the real vLLM CPU
# server, Chromium and Slurm REQUIRED (a missing one fails instead of skipping), then the static
# checks.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
bash tools/setup.sh
export CTAX_VLLM_VENV=${CTAX_VLLM_VENV:-$REPO/.venv-vllm}
export CTAX_TINY_MODEL=${CTAX_TINY_MODEL:-$REPO/.cache/tiny-llama}
export CTAX_REQUIRE_VLLM=1 CTAX_REQUIRE_BROWSER=1 CTAX_REQUIRE_SLURM=1
t0=$SECONDS
cargo build --release --workspace
echo "[test] build: $((SECONDS - t0)) s"
# Tests that start real vLLM servers must not overlap (2 cores); run test binaries one at a time.
cargo test --release --workspace -- --test-threads=2
echo "[test] cargo test: $((SECONDS - t0)) s"
bash tools/static_checks.sh
echo "[test] all passed in $((SECONDS - t0)) s"
