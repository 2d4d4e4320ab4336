#!/usr/bin/env bash
# Install / remove / inspect the connector-tax step-timing vLLM plugin (patches/ctax_step_timing)
# in a Python environment, without network and without touching vLLM's own files.
#
# Usage: patches/apply.sh install|remove|status [PYTHON] [--target DIR]
#   PYTHON        interpreter whose environment receives the plugin (default: $CTAX_PYTHON,
#                 else the python next to $CTAX_VLLM, else python3)
#   --target DIR  install into DIR instead of PYTHON's site-packages (e.g. /tmp/site on the GPU
#                 machine, where vLLM lives on PYTHONPATH)
#
# install: copies the package to <site>/ctax_step_timing/ and writes
#          <site>/ctax_step_timing-<ver>.dist-info/{METADATA,entry_points.txt,RECORD,INSTALLER}
#          (entry point: vllm.general_plugins: ctax_step_timing = ctax_step_timing:register).
#          Idempotent: an identical installation is left alone; an older one is replaced.
# remove:  deletes exactly what install wrote (every ctax_step_timing-*.dist-info and the
#          package directory); a no-op when nothing is installed.
# status:  prints "installed <version> <site>" (exit 0) or "not installed <site>" (exit 1), and
#          whether importlib.metadata sees the entry point.
# The plugin does nothing unless AGENTIC_STEP_LOG_PATH is set in the vLLM server's environment.
# Exit codes: 0 ok / installed, 1 not installed (status) or failure, 2 usage error.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PKG=ctax_step_timing
SRC="$HERE/$PKG"

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[[ $# -ge 1 ]] || usage
ACTION=$1; shift
PY=""
TARGET=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --target) [[ $# -ge 2 ]] || usage; TARGET=$2; shift 2 ;;
    --target=*) TARGET=${1#--target=}; shift ;;
    -h|--help) usage ;;
    *) [[ -z "$PY" ]] || usage; PY=$1; shift ;;
  esac
done
case "$ACTION" in install|remove|status) ;; *) usage ;; esac

if [[ -z "$PY" ]]; then
  if [[ -n "${CTAX_PYTHON:-}" ]]; then PY=$CTAX_PYTHON
  elif [[ -n "${CTAX_VLLM:-}" && -x "$(dirname "$CTAX_VLLM")/python" ]]; then PY="$(dirname "$CTAX_VLLM")/python"
  else PY=python3
  fi
fi
command -v "$PY" >/dev/null 2>&1 || { echo "apply.sh: interpreter not found: $PY" >&2; exit 2; }

VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$SRC/__init__.py")
[[ -n "$VERSION" ]] || { echo "apply.sh: cannot read __version__ from $SRC/__init__.py" >&2; exit 1; }

if [[ -n "$TARGET" ]]; then
  SITE=$TARGET
else
  SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
fi
DIST="$SITE/$PKG-$VERSION.dist-info"

entry_point_visible() {
  # Prints the entry point if importlib.metadata (what vLLM uses) finds it from $SITE.
  PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" "$PY" - "$PKG" <<'EOF' 2>/dev/null || true
import sys
from importlib.metadata import entry_points
eps = [e for e in entry_points(group="vllm.general_plugins") if e.name == sys.argv[1]]
print(" ".join(f"{e.name}={e.value}" for e in eps))
EOF
}

record_file() {
  # RECORD lines: path,sha256=<urlsafe-b64>,size (relative to SITE), as pip writes them.
  "$PY" - "$SITE" "$PKG" "$DIST" <<'EOF'
import base64, hashlib, os, sys
site, pkg, dist = sys.argv[1:4]
rows = []
for root in (os.path.join(site, pkg), dist):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            p = os.path.join(dirpath, f)
            rel = os.path.relpath(p, site)
            if rel.endswith("RECORD"):
                continue
            data = open(p, "rb").read()
            h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{rel},sha256={h},{len(data)}")
rows.append(os.path.relpath(os.path.join(dist, "RECORD"), site) + ",,")
open(os.path.join(dist, "RECORD"), "w").write("\n".join(rows) + "\n")
EOF
}

is_current() {
  [[ -d "$DIST" && -d "$SITE/$PKG" ]] || return 1
  diff -rq -x __pycache__ "$SRC" "$SITE/$PKG" >/dev/null 2>&1
}

do_remove() {
  local removed=0 d
  shopt -s nullglob
  for d in "$SITE/$PKG"-*.dist-info; do rm -rf -- "$d"; removed=1; done
  shopt -u nullglob
  if [[ -d "$SITE/$PKG" ]]; then rm -rf -- "${SITE:?}/$PKG"; removed=1; fi
  return $((1 - removed))
}

case "$ACTION" in
  install)
    if is_current; then
      echo "already installed $VERSION $SITE (up to date)"
      exit 0
    fi
    mkdir -p "$SITE"
    do_remove || true
    mkdir -p "$SITE/$PKG" "$DIST"
    # Copy the package sources only (no caches).
    (cd "$SRC" && find . -name __pycache__ -prune -o -type f -name '*.py' -print) | while read -r f; do
      mkdir -p "$SITE/$PKG/$(dirname "$f")"
      cp -- "$SRC/$f" "$SITE/$PKG/$f"
    done
    printf 'Metadata-Version: 2.1\nName: ctax-step-timing\nVersion: %s\nSummary: connector-tax per-step timing plugin for vLLM (active only with AGENTIC_STEP_LOG_PATH)\n' \
      "$VERSION" > "$DIST/METADATA"
    printf '[vllm.general_plugins]\nctax_step_timing = ctax_step_timing:register\n' > "$DIST/entry_points.txt"
    printf 'connector-tax patches/apply.sh\n' > "$DIST/INSTALLER"
    printf '%s\n' "$PKG" > "$DIST/top_level.txt"
    record_file
    ep=$(entry_point_visible)
    if [[ -z "$ep" ]]; then
      echo "apply.sh: installed into $SITE but importlib.metadata does not see the entry point" >&2
      exit 1
    fi
    echo "installed $VERSION $SITE (entry point: $ep)"
    ;;
  remove)
    if do_remove; then echo "removed $PKG from $SITE"; else echo "not installed $SITE (nothing to remove)"; fi
    ;;
  status)
    shopt -s nullglob
    dists=("$SITE/$PKG"-*.dist-info)
    shopt -u nullglob
    if [[ ${#dists[@]} -gt 0 && -d "$SITE/$PKG" ]]; then
      v=${dists[0]##*/$PKG-}; v=${v%.dist-info}
      state="up to date"; is_current || state="differs from $SRC"
      ep=$(entry_point_visible)
      echo "installed $v $SITE ($state; entry point: ${ep:-NOT VISIBLE})"
      exit 0
    fi
    echo "not installed $SITE"
    exit 1
    ;;
esac
