#!/usr/bin/env bash
# Pre-flight for multi_mooncake_lmcache (seed): launch vLLM with
# MultiConnector(MooncakeConnector kv_both + LMCacheConnectorV1), send 5 sequential requests
# (max_tokens=32, random content); all 5 must complete in < 60 s in total and the engine must stay
# healthy (/health 200, process alive, no fatal log line, no finished_reason="error" increase —
# the seed's vllm:engine_core_failed_total does not exist). Missing mooncake or lmcache: skipped
# at once with the exact ImportError (no launch).
# Also the named variant multi_mooncake_lmcache_nhd (argument 1; VLLM_KV_CACHE_LAYOUT=NHD).
# Log: $CTAX_PREFLIGHT_DIR/verify_<config>.log. Last stdout line: the decision JSON.
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../launch/common.sh"
config=${1:-multi_mooncake_lmcache}
case "$config" in multi_mooncake_lmcache|multi_mooncake_lmcache_nhd) ;; *)
  echo "usage: $0 [multi_mooncake_lmcache|multi_mooncake_lmcache_nhd]  (configured by environment, see launch/common.sh)" >&2; exit 2 ;;
esac
[[ $# -le 1 ]] || { echo "usage: $0 [config]" >&2; exit 2; }
exec "$(ctax_python)" "$CTAX_REPO/tools/verify_server.py" --config "$config" \
  --requests 5 --max-tokens 32 --request-timeout 60 --total-timeout 60
