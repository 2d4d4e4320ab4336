#!/usr/bin/env bash
# Generic pre-flight for a config without a dedicated script (plain, mooncake_producer,
# mooncake_both, nixl_both, lmcache_only): package import check (skip at once with the exact
# ImportError), launch, /v1/models 200, 5 sequential requests (max_tokens=32, each 200 in < 30 s),
# engine health, stop. mooncake_consumer, noop_connector and multi_mooncake_lmcache are handed to
# their dedicated scripts (the seed's criteria); a named variant (<config>_nhd, launch/common.sh) is
# verified like its seed config.
# Usage: tools/verify_config.sh <config>
# Log: $CTAX_PREFLIGHT_DIR/verify_<config>.log. Last stdout line: the decision JSON; exit 0
# (2 on usage errors).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=launch/common.sh
. "$HERE/../launch/common.sh"
[[ $# -eq 1 ]] || { echo "usage: $0 <config>  (one of: ${CTAX_CONFIGS[*]} ${CTAX_VARIANTS[*]})" >&2; exit 2; }
ctax_is_config "$1" || { echo "verify_config: unknown config '$1' (one of: ${CTAX_CONFIGS[*]} ${CTAX_VARIANTS[*]})" >&2; exit 2; }
case "$1" in
  mooncake_consumer) exec bash "$HERE/verify_kv_consumer.sh" ;;
  noop_connector) exec bash "$HERE/verify_noop_connector.sh" ;;
  multi_mooncake_lmcache|multi_mooncake_lmcache_nhd) exec bash "$HERE/verify_multi_connector.sh" "$1" ;;
esac
exec "$(ctax_python)" "$CTAX_REPO/tools/verify_server.py" --config "$1" \
  --requests "${CTAX_VERIFY_REQUESTS:-5}" --max-tokens "${CTAX_VERIFY_MAX_TOKENS:-32}" \
  --request-timeout "${CTAX_VERIFY_REQUEST_TIMEOUT:-30}"
