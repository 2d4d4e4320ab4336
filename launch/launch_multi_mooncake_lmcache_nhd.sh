#!/usr/bin/env bash
# connector-tax variant "multi_mooncake_lmcache_nhd": multi_mooncake_lmcache with VLLM_KV_CACHE_LAYOUT=NHD (not a seed config; DESIGN.md §9.1).
# multi_mooncake_lmcache: MultiConnector(MooncakeConnector kv_both + LMCacheConnectorV1) (needs both packages).
# Writes $CTAX_RUN_DIR/launch.sh, then execs vLLM. Environment contract: launch/common.sh.
# Usage: launch_multi_mooncake_lmcache_nhd.sh [--dry-run]
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctax_launch multi_mooncake_lmcache_nhd "$@"
