#!/usr/bin/env bash
# connector-tax config "mooncake_consumer": MooncakeConnector kv_consumer, mooncake_protocol tcp (needs mooncake-transfer-engine; starts without a peer).
# Writes $CTAX_RUN_DIR/launch.sh, then execs vLLM. Environment contract: launch/common.sh.
# Usage: launch_mooncake_consumer.sh [--dry-run]
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctax_launch mooncake_consumer "$@"
