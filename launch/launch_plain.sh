#!/usr/bin/env bash
# connector-tax config "plain": no KV connector (baseline).
# Writes $CTAX_RUN_DIR/launch.sh, then execs vLLM. Environment contract: launch/common.sh.
# Usage: launch_plain.sh [--dry-run]
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctax_launch plain "$@"
