#!/usr/bin/env bash
# connector-tax variant "mooncake_both_nhd": mooncake_both with VLLM_KV_CACHE_LAYOUT=NHD (not a seed config; DESIGN.md §9.1).
# mooncake_both: MooncakeConnector kv_both, mooncake_protocol tcp (needs mooncake-transfer-engine).
# Writes $CTAX_RUN_DIR/launch.sh, then execs vLLM. Environment contract: launch/common.sh.
# Usage: launch_mooncake_both_nhd.sh [--dry-run]
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctax_launch mooncake_both_nhd "$@"
