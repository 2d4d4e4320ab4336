#!/usr/bin/env bash
# connector-tax config "lmcache_only": LMCacheConnectorV1, local CPU backend via LMCACHE_* env (needs lmcache).
# Writes $CTAX_RUN_DIR/launch.sh, then execs vLLM. Environment contract: launch/common.sh.
# Usage: launch_lmcache_only.sh [--dry-run]
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctax_launch lmcache_only "$@"
