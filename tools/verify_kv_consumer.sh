#!/usr/bin/env bash
# Pre-flight for mooncake_consumer (seed): start the dummy bootstrap server
# (tools/dummy_bootstrap.py, on $CTAX_MOONCAKE_BOOTSTRAP_PORT, default 8998), launch vLLM with
# MooncakeConnector kv_role=kv_consumer pointed at it (bootstrap_server_address), require
# /v1/models 200 with the model id, then ONE request without kv_transfer_params, max_tokens=4,
# 200 in < 30 s, engine healthy. A consumer needs no peer to start in current vLLM; the log
# reports how often the dummy was contacted (expected 0). Without an importable
# mooncake.engine the config is skipped at once with the exact ImportError (no launch).
# Log: $CTAX_PREFLIGHT_DIR/verify_mooncake_consumer.log. Last stdout line: the decision JSON.
set -euo pipefail
# shellcheck source=launch/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../launch/common.sh"
[[ $# -eq 0 ]] || { echo "usage: $0   (configured by environment, see launch/common.sh)" >&2; exit 2; }
exec "$(ctax_python)" "$CTAX_REPO/tools/verify_server.py" --config mooncake_consumer \
  --requests 1 --max-tokens 4 --request-timeout 30 --dummy-bootstrap
