#!/usr/bin/env bash
# connector-tax config "nixl_both": NixlConnector kv_both, UCX backend, own side-channel port (needs nixl).
# Writes $CTAX_RUN_DIR/launch.sh, then execs vLLM. Environment contract: launch/common.sh.
# Usage: launch_nixl_both.sh [--dry-run]
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctax_launch nixl_both "$@"
