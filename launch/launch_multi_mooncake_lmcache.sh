#!/usr/bin/env bash
# connector-tax config "multi_mooncake_lmcache": MultiConnector(MooncakeConnector kv_both + LMCacheConnectorV1) (needs both packages).
# Writes $CTAX_RUN_DIR/launch.sh, then execs vLLM. Environment contract: launch/common.sh.
# Usage: launch_multi_mooncake_lmcache.sh [--dry-run]
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctax_launch multi_mooncake_lmcache "$@"
