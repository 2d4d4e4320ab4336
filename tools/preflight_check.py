#!/usr/bin/env python3
"""Fast pre-flight facts about a vLLM installation, BEFORE any server is launched.

Run it with the interpreter that runs vLLM (the python next to the `vllm` executable):

    python tools/preflight_check.py [--config C ...] [--kv-json JSON] [--out FILE] [--compact]

Prints one JSON object (the last thing on stdout; ``--compact`` puts it on one line):

* ``vllm``: version, git commit (``vllm._version``), file, python, torch (+CUDA) versions.
* ``registry``: the connector names vLLM's ``KVConnectorFactory`` knows.
* ``kv_transfer_config_fields``: the fields of ``KVTransferConfig`` (and the legacy
  ``kv_rank``/``kv_parallel_size``/``kv_ip``/``kv_buffer_size`` that are present).
* ``connector_api``: ``KVConnectorBase_V1``'s abstract-method set, constructor, presence of
  ``get_transfer_results`` / ``SupportsHMA`` / ``requires_kv_delivery`` and the differences from
  the 0.32/0.33 baseline (``tools/noop_connector.api_report``).
* ``hooks``: the attributes the step-timing plugin and the launch scripts rely on
  (``Scheduler._build_kv_connector_meta``, MRV2 module, ...).
* ``step_timing_plugin``: whether the ``ctax_step_timing`` entry point is visible.
* ``packages``: for mooncake / nixl / lmcache: the exact import vLLM performs, run in a
  subprocess of this interpreter; ``ok`` and the exact exception text when it fails; dist versions.
* ``configs``: per config: ``ready`` (every required package imports and its
  ``--kv-transfer-config`` JSON validates against this vLLM's ``KVTransferConfig`` and resolves to
  a connector class), ``reason`` (exact text when not ready), ``kv_json``, ``supports_hma``.

The JSON of each config is taken from ``launch/print_command.sh`` (the launch scripts are the
single source of truth). ``--kv-json`` validates one extra JSON string (reported under
``kv_json_check``). ``--packages-only`` reports just ``packages`` and per-config readiness from
them, without importing vLLM (what the verify scripts run first, to skip in well under a second).
Exit status 0 unless the arguments are wrong (2).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CONFIGS = [
    "plain", "noop_connector", "mooncake_producer", "mooncake_consumer", "mooncake_both",
    "nixl_both", "lmcache_only", "multi_mooncake_lmcache",
]
# The import each connector performs when it is constructed (vLLM 0.26 .. 0.33).
PACKAGES = {
    "mooncake": {
        "import": "from mooncake.engine import TransferEngine",
        "dists": ["mooncake-transfer-engine", "mooncake-transfer-engine-cuda13",
                  "mooncake-transfer-engine-non-cuda"],
    },
    "nixl": {
        "import": "from nixl._api import nixl_agent",
        "dists": ["nixl", "nixl-cu12", "nixl-cu13"],
    },
    "lmcache": {
        "import": "from lmcache.integration.vllm.vllm_v1_adapter import LMCacheConnectorV1Impl",
        "dists": ["lmcache"],
    },
}
REQUIRES = {
    "plain": [],
    "noop_connector": [],
    "mooncake_producer": ["mooncake"],
    "mooncake_consumer": ["mooncake"],
    "mooncake_both": ["mooncake"],
    "nixl_both": ["nixl"],
    "lmcache_only": ["lmcache"],
    "multi_mooncake_lmcache": ["mooncake", "lmcache"],
}
# Named variants (launch/common.sh CTAX_VARIANTS): checked only when named with --config.
VARIANTS = ["mooncake_both_nhd", "multi_mooncake_lmcache_nhd"]
REQUIRES.update({v: REQUIRES[v.removesuffix("_nhd")] for v in VARIANTS})
LEGACY_FIELDS = ["kv_rank", "kv_parallel_size", "kv_ip", "kv_buffer_size"]


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def check_package(name: str, timeout: float) -> dict:
    spec = PACKAGES[name]
    res: dict = {"import": spec["import"], "ok": False, "error": None, "seconds": None,
                 "versions": {d: v for d in spec["dists"] if (v := dist_version(d))}}
    t0 = time.monotonic()
    code = (
        "import sys, traceback\n"
        "try:\n"
        f"    {spec['import']}\n"
        "except BaseException as e:\n"
        "    print('CTAX_IMPORT_ERROR ' + type(e).__name__ + ': ' + str(e).replace(chr(10), ' | '))\n"
        "    sys.exit(3)\n"
    )
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=timeout)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("CTAX_IMPORT_ERROR ")]
        if p.returncode == 0:
            res["ok"] = True
        elif lines:
            res["error"] = lines[-1][len("CTAX_IMPORT_ERROR "):]
        else:
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [""]
            res["error"] = f"import exited with status {p.returncode}: {tail[0]}"
    except subprocess.TimeoutExpired:
        res["error"] = f"import did not finish within {timeout:.0f} s"
    res["seconds"] = round(time.monotonic() - t0, 2)
    return res


def kv_json_for(config: str) -> tuple[str | None, str | None]:
    """The --kv-transfer-config value launch/print_command.sh produces (None for plain)."""
    env = dict(os.environ)
    env.setdefault("CTAX_MODEL", "/model")
    env.pop("CTAX_RUN_DIR", None)
    try:
        p = subprocess.run(["bash", os.path.join(REPO, "launch", "print_command.sh"), config],
                           capture_output=True, text=True, env=env, timeout=30)
    except Exception as e:  # pragma: no cover
        return None, _err(e)
    if p.returncode != 0:
        return None, (p.stderr.strip() or f"print_command.sh exited {p.returncode}")
    for line in p.stdout.splitlines():
        if line.startswith("exec "):
            argv = shlex.split(line)
            if "--kv-transfer-config" in argv:
                return argv[argv.index("--kv-transfer-config") + 1], None
            return None, None
    return None, "no exec line in print_command.sh output"


def validate_kv_json(text: str) -> dict:
    """Parse like `vllm serve --kv-transfer-config` does and resolve the connector class."""
    out: dict = {"ok": False, "error": None, "connector_class": None, "supports_hma": None}
    try:
        from pydantic import TypeAdapter
        from vllm.config.kv_transfer import KVTransferConfig

        cfg = TypeAdapter(KVTransferConfig).validate_json(text)
    except Exception as e:
        out["error"] = "KVTransferConfig rejected it: " + _err(e).replace("\n", " | ")
        return out
    try:
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

        cls = KVConnectorFactory.get_connector_class(cfg)
        out["connector_class"] = f"{cls.__module__}.{cls.__qualname__}"
        try:
            out["supports_hma"] = bool(KVConnectorFactory.supports_hma_config(cfg))
        except Exception as e:
            out["supports_hma"] = None
            out["hma_error"] = _err(e)
        out["ok"] = True
    except Exception as e:
        out["error"] = "connector class did not resolve: " + _err(e).replace("\n", " | ")
    return out


def vllm_facts() -> dict:
    facts: dict = {"python": sys.version.split()[0], "executable": sys.executable}
    try:
        import vllm

        facts["version"] = getattr(vllm, "__version__", None)
        facts["file"] = os.path.dirname(vllm.__file__)
        try:
            v = importlib.import_module("vllm._version")
            facts["commit"] = getattr(v, "__commit_id__", None) or getattr(v, "commit_id", None)
        except Exception:
            facts["commit"] = None
    except Exception as e:
        facts["error"] = _err(e)
        return facts
    try:
        import torch

        facts["torch"] = torch.__version__
        facts["torch_cuda"] = torch.version.cuda
        facts["cuda_available"] = bool(torch.cuda.is_available())
    except Exception as e:
        facts["torch_error"] = _err(e)
    return facts


def api_facts() -> dict:
    out: dict = {}
    try:
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

        out["registry"] = sorted(KVConnectorFactory._registry)
    except Exception as e:
        out["registry_error"] = _err(e)
    try:
        from vllm.config.kv_transfer import KVTransferConfig

        names = [f.name for f in dataclasses.fields(KVTransferConfig)]
        out["kv_transfer_config_fields"] = names
        out["kv_transfer_config_legacy_fields_present"] = [n for n in LEGACY_FIELDS if n in names]
    except Exception as e:
        out["kv_transfer_config_error"] = _err(e)
    try:
        if HERE not in sys.path:
            sys.path.insert(0, HERE)
        import noop_connector

        out["connector_api"] = noop_connector.api_report()
    except Exception as e:
        out["connector_api_error"] = _err(e)
    hooks: dict = {}
    try:
        from vllm.v1.core.sched.scheduler import Scheduler

        for name in ("schedule", "update_from_output", "_build_kv_connector_meta", "shutdown",
                     "get_request_counts"):
            hooks[f"Scheduler.{name}"] = name in Scheduler.__dict__
    except Exception as e:
        hooks["Scheduler_error"] = _err(e)
    import importlib.util

    for mod in ("vllm.v1.worker.gpu.kv_connector", "vllm.v1.worker.kv_connector_model_runner_mixin"):
        try:
            hooks[mod] = importlib.util.find_spec(mod) is not None
        except Exception as e:
            hooks[mod] = _err(e)
    try:
        from vllm.v1.engine.core import EngineCore

        hooks["EngineCore.step"] = "step" in EngineCore.__dict__
        hooks["EngineCore.step_with_batch_queue"] = "step_with_batch_queue" in EngineCore.__dict__
    except Exception as e:
        hooks["EngineCore_error"] = _err(e)
    out["hooks"] = hooks
    try:
        from importlib.metadata import entry_points

        eps = [f"{e.name}={e.value}" for e in entry_points(group="vllm.general_plugins")]
        out["general_plugins"] = eps
        out["step_timing_plugin"] = {
            "installed": any(e.startswith("ctax_step_timing=") for e in eps),
            "version": dist_version("ctax-step-timing"),
        }
    except Exception as e:
        out["general_plugins_error"] = _err(e)
    return out


def packages_only(configs: list[str], a) -> int:
    needed = sorted({p for c in configs for p in REQUIRES[c]})
    pk = {p: check_package(p, a.import_timeout) for p in needed}
    cfg = {}
    for c in configs:
        missing = [p for p in REQUIRES[c] if not pk[p]["ok"]]
        cfg[c] = {"ready": not missing, "reason": "; ".join(
            f"required package {p} not importable: `{PACKAGES[p]['import']}` -> {pk[p]['error']}"
            for p in missing) or None}
    print(json.dumps({"packages": pk, "configs": cfg}, indent=None if a.compact else 1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", action="append", choices=CONFIGS + VARIANTS,
                    help="check only these configs (repeatable; default the eight seed configs)")
    ap.add_argument("--kv-json", help="also validate this --kv-transfer-config JSON")
    ap.add_argument("--import-timeout", type=float, default=180.0)
    ap.add_argument("--out", help="also write the JSON to this file")
    ap.add_argument("--compact", action="store_true", help="one-line JSON")
    ap.add_argument("--packages-only", action="store_true",
                    help="only the package imports (no vLLM import; < 1 s when they fail)")
    a = ap.parse_args()
    configs = a.config or CONFIGS
    t0 = time.monotonic()
    if a.packages_only:
        return packages_only(configs, a)
    report: dict = {"checked_unix_ms": int(time.time() * 1000), "vllm": vllm_facts()}
    report.update(api_facts())
    needed = sorted({p for c in configs for p in REQUIRES[c]})
    report["packages"] = {p: check_package(p, a.import_timeout) for p in needed}
    cfg_out: dict = {}
    for c in configs:
        entry: dict = {"ready": True, "reason": None, "kv_json": None, "supports_hma": None}
        missing = [p for p in REQUIRES[c] if not report["packages"][p]["ok"]]
        if missing:
            entry["ready"] = False
            entry["reason"] = "; ".join(
                f"required package {p} not importable: `{PACKAGES[p]['import']}` -> "
                f"{report['packages'][p]['error']}" for p in missing)
        kv, err = kv_json_for(c)
        entry["kv_json"] = kv
        if err:
            entry["ready"] = False
            entry["reason"] = (entry["reason"] + "; " if entry["reason"] else "") + err
        elif kv is not None:
            v = validate_kv_json(kv)
            entry["connector_class"] = v["connector_class"]
            entry["supports_hma"] = v["supports_hma"]
            if not v["ok"]:
                entry["ready"] = False
                entry["reason"] = (entry["reason"] + "; " if entry["reason"] else "") + v["error"]
        cfg_out[c] = entry
    report["configs"] = cfg_out
    if a.kv_json:
        report["kv_json_check"] = validate_kv_json(a.kv_json)
    report["seconds"] = round(time.monotonic() - t0, 2)
    text = json.dumps(report, indent=None if a.compact else 1, sort_keys=False)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
