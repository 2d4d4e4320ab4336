#!/usr/bin/env bash
# connector-tax config "mooncake_producer": MooncakeConnector kv_producer, mooncake_protocol tcp (needs mooncake-transfer-engine).
# Writes $CTAX_RUN_DIR/launch.sh, then execs vLLM. Environment contract: launch/common.sh.
# Usage: launch_mooncake_producer.sh [--dry-run]
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctax_launch mooncake_producer "$@"
