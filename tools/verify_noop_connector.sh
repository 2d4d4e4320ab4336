#!/usr/bin/env bash
# Pre-flight for noop_connector (seed): launch with the no-op connector loaded through
# kv_connector_module_path, send 5 sequential requests (max_tokens=32), each must return 200 in
# < 30 s, and the engine must stay healthy. Log: $CTAX_PREFLIGHT_DIR/verify_noop_connector.log.
# Environment: the launch contract (launch/common.sh) + tools/verify_server.py's CTAX_VERIFY_*.
# Last stdout line: {"config","decision":"include"|"skip","reason","log","seconds"}; exit 0.
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../launch/common.sh"
[[ $# -eq 0 ]] || { echo "usage: $0   (configured by environment, see launch/common.sh)" >&2; exit 2; }
exec "$(ctax_python)" "$CTAX_REPO/tools/verify_server.py" --config noop_connector \
  --requests 5 --max-tokens 32 --request-timeout 30
