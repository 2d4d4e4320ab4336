#!/usr/bin/env bash
# Print (and, if CTAX_RUN_DIR is set, write) the launch.sh a config would run; never starts vLLM.
# Usage: launch/print_command.sh <config>   (configs: see launch/common.sh CTAX_CONFIGS)
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[[ $# -eq 1 ]] || { echo "usage: $0 <config>  (one of: ${CTAX_CONFIGS[*]} ${CTAX_VARIANTS[*]})" >&2; exit 2; }
ctax_launch "$1" --dry-run
