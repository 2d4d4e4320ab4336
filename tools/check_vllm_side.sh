#!/usr/bin/env bash
# Static and contract checks of the vLLM-facing files (launch/, tools/, patches/); no vLLM needed.
#
# Usage: tools/check_vllm_side.sh
#   1. bash -n on launch/*.sh, patches/*.sh and the vLLM-facing tools/*.sh
#   2. shellcheck -x on the same files (skipped with a note when shellcheck is not installed)
#   3. py_compile of every .py (byte code goes to a temp dir, nothing is written to the tree)
#   4. launch/print_command.sh for all 8 configs: the launch.sh it prints must end in one exec
#      line whose --kv-transfer-config (absent for plain) is JSON with the expected connector and
#      kv_role, and without the keys current vLLM rejects (kv_rank, kv_parallel_size, kv_ip,
#      kv_buffer_size); PYTHONPATH must start with <repo>/tools and keep an existing PYTHONPATH;
#      on CTAX_DEVICE=cpu --gpu-memory-utilization must be absent.
# Prints one line per failure and "check_vllm_side: OK" at the end; exit 1 on any failure.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The vLLM-facing files only (tools/ also holds other people's scripts).
mapfile -t SH < <(ls launch/*.sh patches/*.sh tools/install_vllm_cpu.sh tools/capture_env.sh \
  tools/verify_*.sh tools/check_vllm_side.sh 2>/dev/null)
mapfile -t PY < <(ls tools/noop_connector.py tools/preflight_check.py tools/verify_server.py \
  tools/dummy_bootstrap.py tools/make_tiny_model.py tools/make_standin_model.py \
  patches/*.py patches/ctax_step_timing/*.py 2>/dev/null)

for f in "${SH[@]}"; do bash -n "$f" || bad "bash -n $f"; done
if command -v shellcheck >/dev/null 2>&1; then
  shellcheck -x "${SH[@]}" || bad "shellcheck"
else
  echo "note: shellcheck not installed; skipped"
fi
python3 - "${PY[@]}" <<'EOF' || bad "py_compile"
import os, py_compile, sys, tempfile
d = tempfile.mkdtemp()
ok = True
for i, f in enumerate(sys.argv[1:]):
    try:
        py_compile.compile(f, cfile=os.path.join(d, f"{i}.pyc"), doraise=True)
    except py_compile.PyCompileError as e:
        print(e); ok = False
sys.exit(0 if ok else 1)
EOF

python3 - "$REPO" <<'EOF' || bad "launch contract"
import json, os, shlex, subprocess, sys
repo = sys.argv[1]
expect = {
    "plain": None,
    "noop_connector": ("NoOpConnector", "kv_producer"),
    "mooncake_producer": ("MooncakeConnector", "kv_producer"),
    "mooncake_consumer": ("MooncakeConnector", "kv_consumer"),
    "mooncake_both": ("MooncakeConnector", "kv_both"),
    "nixl_both": ("NixlConnector", "kv_both"),
    "lmcache_only": ("LMCacheConnectorV1", "kv_both"),
    "multi_mooncake_lmcache": ("MultiConnector", "kv_both"),
}
legacy = {"kv_rank", "kv_parallel_size", "kv_ip", "kv_buffer_size"}
ok = True
def walk(cfg):
    yield cfg
    for c in cfg.get("kv_connector_extra_config", {}).get("connectors", []):
        yield from walk(c)
for device in ("cuda", "cpu"):
    for config, want in expect.items():
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTAX_")}
        env.update(CTAX_MODEL="/model", CTAX_DEVICE=device, PYTHONPATH="/keep/me")
        p = subprocess.run(["bash", f"{repo}/launch/print_command.sh", config], env=env,
                           capture_output=True, text=True)
        where = f"{config} ({device})"
        if p.returncode != 0:
            print(f"{where}: print_command failed: {p.stderr.strip()}"); ok = False; continue
        lines = p.stdout.strip().splitlines()
        execs = [ln for ln in lines if ln.startswith("exec ")]
        if len(execs) != 1 or not lines[-1].startswith("exec "):
            print(f"{where}: expected one final exec line"); ok = False; continue
        argv = shlex.split(execs[0])[1:]
        if argv[1:3] != ["serve", "/model"]:
            print(f"{where}: not 'vllm serve /model': {argv[:3]}"); ok = False
        pp = [ln for ln in lines if ln.startswith("export PYTHONPATH=")]
        if not pp or not pp[0].split("=", 1)[1].strip("'").startswith(f"{repo}/tools:") \
                or "/keep/me" not in pp[0]:
            print(f"{where}: PYTHONPATH must be <repo>/tools:<existing>: {pp}"); ok = False
        if (device == "cpu") == ("--gpu-memory-utilization" in argv):
            print(f"{where}: --gpu-memory-utilization presence wrong for {device}"); ok = False
        kv = argv[argv.index("--kv-transfer-config") + 1] if "--kv-transfer-config" in argv else None
        if want is None:
            if kv is not None:
                print(f"{where}: plain must have no --kv-transfer-config"); ok = False
            continue
        if kv is None:
            print(f"{where}: missing --kv-transfer-config"); ok = False; continue
        cfg = json.loads(kv)
        if (cfg.get("kv_connector"), cfg.get("kv_role")) != want:
            print(f"{where}: got {cfg.get('kv_connector')}/{cfg.get('kv_role')}, want {want}"); ok = False
        for c in walk(cfg):
            if legacy & set(c):
                print(f"{where}: legacy keys {sorted(legacy & set(c))}"); ok = False
            if c.get("kv_connector") and not c.get("kv_role"):
                print(f"{where}: a connector without kv_role"); ok = False
            if c.get("kv_connector") == "MooncakeConnector" and \
                    c.get("kv_connector_extra_config", {}).get("mooncake_protocol") != "tcp":
                print(f"{where}: Mooncake without mooncake_protocol tcp"); ok = False
sys.exit(0 if ok else 1)
EOF

if [[ $fail == 0 ]]; then echo "check_vllm_side: OK"; else echo "check_vllm_side: FAILED"; fi
exit $fail
