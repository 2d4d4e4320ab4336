#!/usr/bin/env bash
# Pre-flight for multi_mooncake_lmcache (seed): launch vLLM with
# MultiConnector(MooncakeConnector kv_both + LMCacheConnectorV1), send 5 sequential requests
# (max_tokens=32, random content); all 5 must complete in < 60 s in total and the engine must stay
# healthy (/health 200, process alive, no fatal log line, no finished_reason="error" increase —
# the seed's vllm:engine_core_failed_total does not exist). Missing mooncake or lmcache: skipped
# at once with the exact ImportError (no launch).
# Log: $CTAX_PREFLIGHT_DIR/verify_multi_mooncake_lmcache.log. Last stdout line: the decision JSON.
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../launch/common.sh"
[[ $# -eq 0 ]] || { echo "usage: $0   (configured by environment, see launch/common.sh)" >&2; exit 2; }
exec "$(ctax_python)" "$CTAX_REPO/tools/verify_server.py" --config multi_mooncake_lmcache \
  --requests 5 --max-tokens 32 --request-timeout 60 --total-timeout 60
