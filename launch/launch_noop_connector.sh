#!/usr/bin/env bash
# connector-tax config "noop_connector": NoOpConnector (tools/noop_connector.py) via kv_connector_module_path, kv_role ${CTAX_NOOP_KV_ROLE:-kv_producer}.
# Writes $CTAX_RUN_DIR/launch.sh, then execs vLLM. Environment contract: launch/common.sh.
# Usage: launch_noop_connector.sh [--dry-run]
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctax_launch noop_connector "$@"
