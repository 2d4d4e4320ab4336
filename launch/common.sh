# shellcheck shell=bash
# connector-tax: shared launch logic for the eight configurations. Sourced by
# launch/launch_<config>.sh, launch/print_command.sh and tools/verify_*.sh; not run directly.
#
# Contract (environment in; every CTAX_* has a default except CTAX_MODEL):
#   CTAX_VLLM                   vllm executable (default: vllm, resolved on PATH)
#   CTAX_MODEL                  model directory (required)
#   CTAX_SERVED_NAME            --served-model-name (default: basename of CTAX_MODEL)
#   CTAX_HOST / CTAX_PORT       bind address (default 127.0.0.1 / 8000)
#   CTAX_RUN_DIR                run directory; launch.sh is written there (required unless dry-run)
#   CTAX_DEVICE                 cuda | cpu (default cuda). cpu: VLLM_TARGET_DEVICE=cpu,
#                               VLLM_CPU_KVCACHE_SPACE (GiB, default 1), no GPU-only flags
#   CTAX_TP                     --tensor-parallel-size (default 1)
#   CTAX_MAX_MODEL_LEN          default 200000
#   CTAX_MAX_NUM_BATCHED_TOKENS default 8192
#   CTAX_GPU_MEM_UTIL           default 0.9 (cuda only)
#   CTAX_PREFIX_CACHING         1|0 (default 1)     CTAX_CHUNKED_PREFILL 1|0 (default 1)
#   CTAX_LOAD_FORMAT            default dummy (random weights; "auto" for real weights)
#   CTAX_EXTRA_ARGS             appended verbatim, split on whitespace (no quoting, no globbing)
#   CTAX_STEP_LOG               if set: exported as AGENTIC_STEP_LOG_PATH (step-timing plugin);
#                               if unset, AGENTIC_STEP_LOG_PATH is unset for the server
#   CTAX_HOST_IP                VLLM_HOST_IP for connector configs (default 127.0.0.1)
#   CTAX_MOONCAKE_BOOTSTRAP_PORT  VLLM_MOONCAKE_BOOTSTRAP_PORT (default 8998)
#   CTAX_MOONCAKE_PROTOCOL      mooncake_protocol (default tcp)
#   CTAX_MOONCAKE_DEVICE_NAME   device_name (default: unset = Mooncake's default)
#   CTAX_MOONCAKE_BOOTSTRAP_ADDR  bootstrap_server_address host:port (default unset; vLLM >= 0.3x
#                               producers register there instead of starting their own server)
#   CTAX_NIXL_HOST / CTAX_NIXL_PORT  VLLM_NIXL_SIDE_CHANNEL_HOST/PORT (default 127.0.0.1 / 5600)
#   CTAX_NIXL_BACKENDS          comma list for extra_config.backends (default UCX)
#   CTAX_LMCACHE_CHUNK_SIZE     LMCACHE_CHUNK_SIZE (default 256)
#   CTAX_LMCACHE_LOCAL_CPU      LMCACHE_LOCAL_CPU (default True)
#   CTAX_LMCACHE_MAX_LOCAL_CPU_SIZE  LMCACHE_MAX_LOCAL_CPU_SIZE in GB (default 5.0)
#   CTAX_LMCACHE_CONFIG_FILE    LMCACHE_CONFIG_FILE (default unset)
#   CTAX_LMCACHE_KV_ROLE        kv_role of LMCacheConnectorV1 (default kv_both)
#   CTAX_NOOP_KV_ROLE           kv_role of the no-op connector (default kv_producer; seed: kv_both)
#   CTAX_VLLM_PORT              VLLM_PORT: first of vLLM's internal ports (it scans upward from
#                               it); unset = vLLM's default (kernel-chosen ports). Every config.
#   CTAX_LMCACHE_INTERNAL_API_PORT  LMCACHE_INTERNAL_API_SERVER_PORT_START (LMCache's own API
#                               server, off by default; uses it and the next TP ports if enabled)
#   CTAX_RPC_DIR                VLLM_RPC_BASE_PATH (created): vLLM's and LMCache's ZMQ IPC
#                               sockets; unset = vLLM's default (the temp directory)
#   (ctax run --gpus gives each slot its own value of every port above, CUDA_VISIBLE_DEVICES,
#   CTAX_RPC_DIR and VLLM_CACHE_ROOT; see DESIGN.md "Slots")
#   CTAX_DRY_RUN=1 or --dry-run write launch.sh (if CTAX_RUN_DIR is set) and print it; no exec
# PYTHONPATH gets <repo>/tools prepended for every config (the no-op connector is imported from
# there in the API-server, EngineCore and worker processes); an existing PYTHONPATH is kept.

CTAX_LAUNCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CTAX_REPO=$(cd "$CTAX_LAUNCH_DIR/.." && pwd)
CTAX_CONFIGS=(plain noop_connector mooncake_producer mooncake_consumer mooncake_both nixl_both
  lmcache_only multi_mooncake_lmcache)
# Named variants (not the seed's; DESIGN.md §9.1): <seed config>_nhd is that config with
# VLLM_KV_CACHE_LAYOUT=NHD, which vLLM 0.26 takes before any connector's layout requirement.
# Mooncake asks for HND, and LMCache 0.5.6 without its CUDA extension dies on HND at its first
# KV store, so multi_mooncake_lmcache can only run (and H4 be tested) as these variants.
CTAX_VARIANTS=(mooncake_both_nhd multi_mooncake_lmcache_nhd)
# Environment variables (by name pattern) recorded in launch.sh when present.
CTAX_ENV_PATTERN='^(VLLM_[A-Z0-9_]*|LMCACHE_[A-Z0-9_]*|UCX_[A-Z0-9_]*|MC_[A-Z0-9_]*|NCCL_[A-Z0-9_]*|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|PYTORCH_[A-Z0-9_]*|TORCH_[A-Z0-9_]*|OMP_NUM_THREADS|HF_HUB_OFFLINE|HF_HOME|TRANSFORMERS_OFFLINE|AGENTIC_STEP_LOG_PATH|PYTHONPATH|LD_PRELOAD|LD_LIBRARY_PATH|WITH_NVIDIA_PEERMEM)$'

ctax_die() { echo "ctax launch: $*" >&2; exit 2; }

ctax_is_config() {
  local c
  for c in "${CTAX_CONFIGS[@]}" "${CTAX_VARIANTS[@]}"; do [[ "$c" == "$1" ]] && return 0; done
  return 1
}

# The Python interpreter that runs vLLM: $CTAX_PYTHON, else the shebang of the vllm script,
# else a "python" next to it, else python3.
ctax_python() {
  if [[ -n "${CTAX_PYTHON:-}" ]]; then printf '%s' "$CTAX_PYTHON"; return; fi
  local v=${CTAX_VLLM:-vllm} first
  [[ "$v" == */* ]] || v=$(command -v "$v" 2>/dev/null || true)
  if [[ -n "$v" && -f "$v" ]]; then
    IFS= read -r first < "$v" || true
    if [[ "$first" == '#!'*python* ]]; then
      first=${first#\#!}; first=${first%% *}
      if [[ -x "$first" ]]; then printf '%s' "$first"; return; fi
    fi
    if [[ -x "$(dirname "$v")/python" ]]; then printf '%s' "$(dirname "$v")/python"; return; fi
  fi
  printf '%s' python3
}

# Single-quote a value for a shell script ('...' with embedded quotes escaped).
ctax_q() {
  local s=$1
  if [[ "$s" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then printf '%s' "$s"; return; fi
  printf "'%s'" "${s//\'/\'\\\'\'}"
}

ctax_check_role() {
  case "$1" in kv_producer|kv_consumer|kv_both) ;; *) ctax_die "invalid kv_role '$1'" ;; esac
}

ctax_bool_flag() {  # ctax_bool_flag VALUE FLAG -> --FLAG or --no-FLAG
  case "$1" in
    1|true|True|yes|on) printf -- '--%s' "$2" ;;
    0|false|False|no|off) printf -- '--no-%s' "$2" ;;
    *) ctax_die "expected 1 or 0 for $2, got '$1'" ;;
  esac
}

ctax_resolve_defaults() {
  : "${CTAX_VLLM:=vllm}"
  [[ -n "${CTAX_MODEL:-}" ]] || ctax_die "CTAX_MODEL (model directory) is required"
  # Absolute paths, so launch.sh re-runs from any directory (a non-directory model is a hub id).
  if [[ -d "$CTAX_MODEL" ]]; then CTAX_MODEL=$(cd "$CTAX_MODEL" && pwd); fi
  if [[ -n "${CTAX_STEP_LOG:-}" && "$CTAX_STEP_LOG" != /* ]]; then CTAX_STEP_LOG="$PWD/$CTAX_STEP_LOG"; fi
  : "${CTAX_SERVED_NAME:=$(basename "$CTAX_MODEL")}"
  : "${CTAX_HOST:=127.0.0.1}"
  : "${CTAX_PORT:=8000}"
  : "${CTAX_DEVICE:=cuda}"
  : "${CTAX_TP:=1}"
  : "${CTAX_MAX_MODEL_LEN:=200000}"
  : "${CTAX_MAX_NUM_BATCHED_TOKENS:=8192}"
  : "${CTAX_GPU_MEM_UTIL:=0.9}"
  : "${CTAX_PREFIX_CACHING:=1}"
  : "${CTAX_CHUNKED_PREFILL:=1}"
  : "${CTAX_LOAD_FORMAT:=dummy}"
  : "${CTAX_EXTRA_ARGS:=}"
  : "${CTAX_HOST_IP:=127.0.0.1}"
  : "${CTAX_MOONCAKE_BOOTSTRAP_PORT:=8998}"
  : "${CTAX_MOONCAKE_PROTOCOL:=tcp}"
  : "${CTAX_NIXL_HOST:=127.0.0.1}"
  : "${CTAX_NIXL_PORT:=5600}"
  : "${CTAX_NIXL_BACKENDS:=UCX}"
  : "${CTAX_LMCACHE_CHUNK_SIZE:=256}"
  : "${CTAX_LMCACHE_LOCAL_CPU:=True}"
  : "${CTAX_LMCACHE_MAX_LOCAL_CPU_SIZE:=5.0}"
  : "${CTAX_LMCACHE_KV_ROLE:=kv_both}"
  : "${CTAX_NOOP_KV_ROLE:=kv_producer}"
  case "$CTAX_DEVICE" in cuda|cpu) ;; *) ctax_die "CTAX_DEVICE must be cuda or cpu, got '$CTAX_DEVICE'" ;; esac
  [[ "$CTAX_PORT" =~ ^[0-9]+$ ]] || ctax_die "CTAX_PORT must be a number"
  [[ "$CTAX_MOONCAKE_BOOTSTRAP_PORT" =~ ^[0-9]+$ ]] || ctax_die "CTAX_MOONCAKE_BOOTSTRAP_PORT must be a number"
  [[ "$CTAX_NIXL_PORT" =~ ^[0-9]+$ ]] || ctax_die "CTAX_NIXL_PORT must be a number"
  [[ -z "${CTAX_VLLM_PORT:-}" || "$CTAX_VLLM_PORT" =~ ^[0-9]+$ ]] || ctax_die "CTAX_VLLM_PORT must be a number"
  [[ -z "${CTAX_LMCACHE_INTERNAL_API_PORT:-}" || "$CTAX_LMCACHE_INTERNAL_API_PORT" =~ ^[0-9]+$ ]] \
    || ctax_die "CTAX_LMCACHE_INTERNAL_API_PORT must be a number"
  ctax_check_role "$CTAX_LMCACHE_KV_ROLE"
  ctax_check_role "$CTAX_NOOP_KV_ROLE"
}

# --- connector JSON (vLLM 0.26 .. 0.33 KVTransferConfig: no kv_rank/kv_parallel_size/kv_ip/
# --- kv_buffer_size — 0.3x rejects them, 0.26 ignores them for these connectors)

ctax_json_mooncake_extra() {
  local extra
  extra=$(printf '"mooncake_protocol":"%s"' "$CTAX_MOONCAKE_PROTOCOL")
  [[ -n "${CTAX_MOONCAKE_DEVICE_NAME:-}" ]] && extra+=$(printf ',"device_name":"%s"' "$CTAX_MOONCAKE_DEVICE_NAME")
  [[ -n "${CTAX_MOONCAKE_BOOTSTRAP_ADDR:-}" ]] && extra+=$(printf ',"bootstrap_server_address":"%s"' "$CTAX_MOONCAKE_BOOTSTRAP_ADDR")
  printf '{%s}' "$extra"
}

ctax_json_mooncake() {  # ROLE
  ctax_check_role "$1"
  printf '{"kv_connector":"MooncakeConnector","kv_role":"%s","kv_connector_extra_config":%s}' \
    "$1" "$(ctax_json_mooncake_extra)"
}

ctax_json_nixl() {  # ROLE
  local backends
  backends=$(printf '%s' "$CTAX_NIXL_BACKENDS" | awk -F, '{for(i=1;i<=NF;i++){printf "%s\"%s\"", (i>1?",":""), $i}}')
  printf '{"kv_connector":"NixlConnector","kv_role":"%s","kv_connector_extra_config":{"backends":[%s]}}' \
    "$1" "$backends"
}

ctax_json_lmcache() {
  printf '{"kv_connector":"LMCacheConnectorV1","kv_role":"%s"}' "$CTAX_LMCACHE_KV_ROLE"
}

ctax_json_noop() {
  printf '{"kv_connector":"NoOpConnector","kv_connector_module_path":"noop_connector","kv_role":"%s"}' \
    "$CTAX_NOOP_KV_ROLE"
}

ctax_env_mooncake() {
  export VLLM_HOST_IP="$CTAX_HOST_IP"
  export VLLM_MOONCAKE_BOOTSTRAP_PORT="$CTAX_MOONCAKE_BOOTSTRAP_PORT"
}

ctax_env_nixl() {
  export VLLM_HOST_IP="$CTAX_HOST_IP"
  export VLLM_NIXL_SIDE_CHANNEL_HOST="$CTAX_NIXL_HOST"
  export VLLM_NIXL_SIDE_CHANNEL_PORT="$CTAX_NIXL_PORT"
}

ctax_env_lmcache() {
  export LMCACHE_CHUNK_SIZE="$CTAX_LMCACHE_CHUNK_SIZE"
  export LMCACHE_LOCAL_CPU="$CTAX_LMCACHE_LOCAL_CPU"
  export LMCACHE_MAX_LOCAL_CPU_SIZE="$CTAX_LMCACHE_MAX_LOCAL_CPU_SIZE"
  if [[ -n "${CTAX_LMCACHE_CONFIG_FILE:-}" ]]; then export LMCACHE_CONFIG_FILE="$CTAX_LMCACHE_CONFIG_FILE"; fi
  if [[ -n "${CTAX_LMCACHE_INTERNAL_API_PORT:-}" ]]; then
    export LMCACHE_INTERNAL_API_SERVER_PORT_START="$CTAX_LMCACHE_INTERNAL_API_PORT"
  fi
}

# Sets CTAX_KV_JSON (empty for plain) and exports the connector's environment.
ctax_config_setup() {
  local config=$1
  CTAX_KV_JSON=""
  case "$config" in
    plain) ;;
    noop_connector) CTAX_KV_JSON=$(ctax_json_noop) ;;
    mooncake_producer) ctax_env_mooncake; CTAX_KV_JSON=$(ctax_json_mooncake kv_producer) ;;
    mooncake_consumer) ctax_env_mooncake; CTAX_KV_JSON=$(ctax_json_mooncake kv_consumer) ;;
    mooncake_both) ctax_env_mooncake; CTAX_KV_JSON=$(ctax_json_mooncake kv_both) ;;
    nixl_both) ctax_env_nixl; CTAX_KV_JSON=$(ctax_json_nixl kv_both) ;;
    lmcache_only) ctax_env_lmcache; CTAX_KV_JSON=$(ctax_json_lmcache) ;;
    multi_mooncake_lmcache)
      ctax_env_mooncake; ctax_env_lmcache
      CTAX_KV_JSON=$(printf '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[%s,%s]}}' \
        "$(ctax_json_mooncake kv_both)" "$(ctax_json_lmcache)")
      ;;
    *_nhd)
      ctax_config_setup "${config%_nhd}"
      export VLLM_KV_CACHE_LAYOUT=NHD
      return
      ;;
    *) ctax_die "unknown config '$config' (known: ${CTAX_CONFIGS[*]} ${CTAX_VARIANTS[*]})" ;;
  esac
  if [[ -n "${VLLM_KV_CACHE_LAYOUT:-}" ]]; then
    # Kept (the user's choice, recorded in launch.sh), but it is not the seed's engine.
    echo "ctax launch: warning: VLLM_KV_CACHE_LAYOUT=$VLLM_KV_CACHE_LAYOUT is set in the environment: $config runs with that KV layout, not its own (the _nhd variants set it on purpose)" >&2
  fi
}

# Builds CTAX_CMD (array) and exports the server environment.
ctax_build() {
  local config=$1
  ctax_resolve_defaults
  ctax_config_setup "$config"

  export PYTHONPATH="$CTAX_REPO/tools${PYTHONPATH:+:$PYTHONPATH}"
  # vLLM's internal ports and IPC directory (one per GPU slot; every config alike).
  if [[ -n "${CTAX_VLLM_PORT:-}" ]]; then export VLLM_PORT="$CTAX_VLLM_PORT"; fi
  if [[ -n "${CTAX_RPC_DIR:-}" ]]; then
    mkdir -p "$CTAX_RPC_DIR" 2>/dev/null || ctax_die "cannot create CTAX_RPC_DIR $CTAX_RPC_DIR"
    export VLLM_RPC_BASE_PATH="$CTAX_RPC_DIR"
  fi
  if [[ -n "${CTAX_STEP_LOG:-}" ]]; then
    export AGENTIC_STEP_LOG_PATH="$CTAX_STEP_LOG"
  else
    unset AGENTIC_STEP_LOG_PATH
  fi
  CTAX_UNSET_NOTE=""
  if [[ "${PYTORCH_CUDA_ALLOC_CONF:-}" == *expandable_segments:True* ]]; then
    # vLLM rejects it with any KV connector; drop it for every config so plain stays comparable.
    echo "ctax launch: unsetting PYTORCH_CUDA_ALLOC_CONF=$PYTORCH_CUDA_ALLOC_CONF (connectors reject expandable_segments)" >&2
    unset PYTORCH_CUDA_ALLOC_CONF
    CTAX_UNSET_NOTE="PYTORCH_CUDA_ALLOC_CONF"
  fi
  if [[ "$CTAX_DEVICE" == cpu ]]; then
    export VLLM_TARGET_DEVICE=cpu
    export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
  fi

  local vllm_bin=$CTAX_VLLM
  if [[ "$vllm_bin" != */* ]]; then
    vllm_bin=$(command -v "$vllm_bin" 2>/dev/null || printf '%s' "$vllm_bin")
  fi
  CTAX_CMD=("$vllm_bin" serve "$CTAX_MODEL"
    --served-model-name "$CTAX_SERVED_NAME"
    --host "$CTAX_HOST" --port "$CTAX_PORT"
    --tensor-parallel-size "$CTAX_TP"
    --max-model-len "$CTAX_MAX_MODEL_LEN"
    "$(ctax_bool_flag "$CTAX_PREFIX_CACHING" enable-prefix-caching)"
    "$(ctax_bool_flag "$CTAX_CHUNKED_PREFILL" enable-chunked-prefill)"
    --max-num-batched-tokens "$CTAX_MAX_NUM_BATCHED_TOKENS"
    --load-format "$CTAX_LOAD_FORMAT")
  if [[ "$CTAX_DEVICE" == cuda ]]; then
    CTAX_CMD+=(--gpu-memory-utilization "$CTAX_GPU_MEM_UTIL")
  fi
  if [[ -n "$CTAX_KV_JSON" ]]; then
    CTAX_CMD+=(--kv-transfer-config "$CTAX_KV_JSON")
  fi
  if [[ -n "$CTAX_EXTRA_ARGS" ]]; then
    local -a extra
    set -f
    # shellcheck disable=SC2206  # intentional word splitting of a flag string
    extra=($CTAX_EXTRA_ARGS)
    set +f
    CTAX_CMD+=("${extra[@]}")
  fi
}

# Prints the re-runnable launch script for the current environment and CTAX_CMD.
ctax_render() {
  local config=$1 name a line
  printf '#!/usr/bin/env bash\n'
  printf '# connector-tax launch script: config=%s\n' "$config"
  printf '# written %s by launch/launch_%s.sh on %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$config" "$(hostname 2>/dev/null || echo '?')"
  printf '# Re-run: bash launch.sh > vllm_stdout.log 2> vllm_stderr.log\n'
  printf 'set -e\n'
  while IFS= read -r name; do
    [[ "$name" =~ $CTAX_ENV_PATTERN ]] || continue
    printf 'export %s=%s\n' "$name" "$(ctax_q "${!name}")"
  done < <(compgen -e | LC_ALL=C sort)
  [[ -n "${AGENTIC_STEP_LOG_PATH:-}" ]] || printf 'unset AGENTIC_STEP_LOG_PATH\n'
  [[ -z "$CTAX_UNSET_NOTE" ]] || printf 'unset %s\n' "$CTAX_UNSET_NOTE"
  line="exec"
  for a in "${CTAX_CMD[@]}"; do line+=" $(ctax_q "$a")"; done
  printf '%s\n' "$line"
}

# Entry point of launch_<config>.sh: ctax_launch CONFIG [--dry-run]
ctax_launch() {
  local config=$1; shift
  local dry=${CTAX_DRY_RUN:-0}
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --dry-run) dry=1; shift ;;
      -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$CTAX_LAUNCH_DIR/common.sh"; exit 0 ;;
      *) ctax_die "unknown argument '$1' (use CTAX_EXTRA_ARGS for vLLM flags)" ;;
    esac
  done
  ctax_is_config "$config" || ctax_die "unknown config '$config'"
  ctax_build "$config"
  local script
  script=$(ctax_render "$config")
  if [[ -n "${CTAX_RUN_DIR:-}" ]]; then
    mkdir -p "$CTAX_RUN_DIR"
    printf '%s\n' "$script" > "$CTAX_RUN_DIR/launch.sh.tmp"
    chmod +x "$CTAX_RUN_DIR/launch.sh.tmp"
    mv -f "$CTAX_RUN_DIR/launch.sh.tmp" "$CTAX_RUN_DIR/launch.sh"
  elif [[ "$dry" != 1 ]]; then
    ctax_die "CTAX_RUN_DIR is required (launch.sh is written there)"
  fi
  if [[ "$dry" == 1 ]]; then
    printf '%s\n' "$script"
    exit 0
  fi
  if [[ "${CTAX_CMD[0]}" != */* ]] || [[ ! -x "${CTAX_CMD[0]}" ]]; then
    echo "ctax launch: vllm executable not found: ${CTAX_CMD[0]} (set CTAX_VLLM)" >&2
    exit 127
  fi
  exec "${CTAX_CMD[@]}"
}
