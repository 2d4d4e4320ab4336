"""A truly no-op vLLM v1 KV connector: the ``noop_connector`` configuration of connector-tax.

Loaded by vLLM through ``kv_connector_module_path`` (``tools/`` must be on ``PYTHONPATH`` in the
API-server, EngineCore and worker processes; ``launch/common.sh`` does that)::

    --kv-transfer-config '{"kv_connector":"NoOpConnector",
                           "kv_connector_module_path":"noop_connector",
                           "kv_role":"kv_producer"}'

What it is for: "noop vs plain" must measure only what vLLM's connector *framework* costs (the
per-step metadata build, the worker-side bind/start_load/transfer-results cycle, per-layer hook
dispatch, per-request scheduler hooks), not any connector's own work. So every hook does nothing
and every behaviour switch is set to what a run without a connector does:

* The seven abstract methods of ``KVConnectorBase_V1`` are implemented as no-ops;
  ``get_num_new_matched_tokens`` returns ``(0, False)`` (never ``None``, which would make the
  scheduler skip the request).
* ``build_connector_meta`` returns one module-level, picklable, empty metadata singleton (the
  worker asserts the metadata is not ``None``; a singleton allocates nothing per step).
* ``SupportsHMA`` is subclassed and ``request_finished_all_groups`` returns ``(False, None)``:
  otherwise vLLM turns the hybrid KV-cache manager off for any configured connector (a
  behaviour change that only shows on hybrid/sliding-window models, but it is not "framework
  cost"). ``request_finished`` (used when HMA is not in effect) also returns ``(False, None)``.
* ``requires_kv_delivery`` is ``False`` (vLLM >= 0.3x): its default, ``is_kv_producer``, makes a
  producer's preempted requests drop in-flight output and recompute. On vLLM 0.26 the property
  does not exist and is simply never read.
* No override of ``get_required_kvcache_layout`` (keeps ``None``: no KV layout change) or
  ``requires_piecewise_for_cudagraph`` (keeps ``False``: no CUDA-graph downgrade).
* ``get_finished`` / ``get_transfer_results`` are inherited: the default returns "nothing
  finished", which is exactly what the framework does per step with any idle connector.

kv_role choice: ``kv_producer`` (the seed used ``kv_both``). Any *consumer* role (``kv_consumer``
or ``kv_both``) makes the scheduler defer block frees by one step under async scheduling
(``Scheduler.defer_block_free``, vLLM 0.26 and 0.32) and adds the
``vllm:num_requests_kv_fetch_by_stage`` gauge; ``kv_producer`` + ``requires_kv_delivery=False``
is the role with the fewest engine-visible side effects, i.e. closest to "no connector". The
launch script lets you pick the seed's role with ``CTAX_NOOP_KV_ROLE=kv_both``.

API drift: at import the module compares the installed ``KVConnectorBase_V1`` with the API this
file was written against (vLLM 0.32/0.33: seven abstract methods, a ``(vllm_config, role,
kv_cache_config)`` constructor, ``get_transfer_results``, ``SupportsHMA``,
``requires_kv_delivery``) and logs ONE warning line naming every difference. ``api_report()``
returns the same facts as a dict (``tools/preflight_check.py`` prints it as JSON).
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1 import base as _base
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

# A child of vLLM's "vllm" logger, so vLLM's handler/format apply.
logger = logging.getLogger("vllm.ctax.noop_connector")

#: The abstract methods of KVConnectorBase_V1 in vLLM 0.26, 0.32 and 0.33 (identical).
EXPECTED_ABSTRACT = frozenset(
    {
        "start_load_kv",
        "wait_for_layer_load",
        "save_kv_layer",
        "wait_for_save",
        "get_num_new_matched_tokens",
        "update_state_after_alloc",
        "build_connector_meta",
    }
)
#: Constructor parameters (after self) that the factory passes.
EXPECTED_CTOR = ("vllm_config", "role", "kv_cache_config")

_SupportsHMA = getattr(_base, "SupportsHMA", None)


def api_report() -> dict[str, Any]:
    """Facts about the installed connector API and how they differ from the 0.32/0.33 baseline."""
    actual = frozenset(getattr(KVConnectorBase_V1, "__abstractmethods__", ()))
    try:
        params = tuple(inspect.signature(KVConnectorBase_V1.__init__).parameters)[1:]
    except (TypeError, ValueError):
        params = ()
    has_transfer_results = hasattr(KVConnectorBase_V1, "get_transfer_results")
    has_kv_delivery = isinstance(
        inspect.getattr_static(KVConnectorBase_V1, "requires_kv_delivery", None), property
    )
    diffs: list[str] = []
    if actual != EXPECTED_ABSTRACT:
        added = sorted(actual - EXPECTED_ABSTRACT)
        removed = sorted(EXPECTED_ABSTRACT - actual)
        diffs.append(f"abstract methods changed (new: {added or '-'}, gone: {removed or '-'})")
    if params[:3] != EXPECTED_CTOR:
        diffs.append(f"constructor is {params}, expected {EXPECTED_CTOR}")
    if not has_transfer_results:
        diffs.append("no get_transfer_results (engine calls get_finished; normal for vLLM 0.26)")
    if _SupportsHMA is None:
        diffs.append("no SupportsHMA mix-in (HMA gets disabled for this connector)")
    if not has_kv_delivery:
        diffs.append("no requires_kv_delivery property (normal for vLLM 0.26)")
    return {
        "abstract_methods": sorted(actual),
        "abstract_methods_expected": actual == EXPECTED_ABSTRACT,
        "constructor_params": list(params),
        "has_get_transfer_results": has_transfer_results,
        "has_supports_hma": _SupportsHMA is not None,
        "has_requires_kv_delivery": has_kv_delivery,
        "drift": diffs,
    }


_REPORT = api_report()
if _REPORT["drift"]:
    logger.warning(
        "NoOpConnector: KV connector API differs from the vLLM 0.32/0.33 baseline: %s",
        "; ".join(_REPORT["drift"]),
    )
_UNEXPECTED = [d for d in _REPORT["drift"] if "normal for vLLM 0.26" not in d]


class NoOpConnectorMetadata(KVConnectorMetadata):
    """Empty per-step metadata. One module-level instance is reused every step."""


#: The singleton returned by every build_connector_meta() call (picklable: module-level class).
NOOP_METADATA = NoOpConnectorMetadata()

_BASES: tuple[type, ...] = (KVConnectorBase_V1,)
if _SupportsHMA is not None:
    _BASES = (KVConnectorBase_V1, _SupportsHMA)


class NoOpConnector(*_BASES):  # type: ignore[misc]
    """Loads nothing, saves nothing, reports nothing; see the module docstring."""

    def __init__(
        self,
        vllm_config: "VllmConfig",
        role: KVConnectorRole,
        kv_cache_config: "KVCacheConfig",
    ):
        if _UNEXPECTED:
            # Construct-time echo of unexpected drift, so it is next to the connector's own
            # "Creating v1 connector" line in each process's log.
            logger.warning("NoOpConnector(%s): API drift: %s", role, "; ".join(_UNEXPECTED))
        super().__init__(vllm_config, role, kv_cache_config)

    # vLLM >= 0.3x reads this; default is_kv_producer would change preemption semantics.
    @property
    def requires_kv_delivery(self) -> bool:
        return False

    # ---- scheduler side (EngineCore process) ----
    def get_num_new_matched_tokens(
        self, request: "Request", num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        return 0, False

    def update_state_after_alloc(
        self, request: "Request", blocks: "KVCacheBlocks", num_external_tokens: int
    ) -> None:
        return None

    def build_connector_meta(self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        return NOOP_METADATA

    def request_finished(
        self, request: "Request", block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        return False, None

    def request_finished_all_groups(
        self, request: "Request", block_ids: tuple[list[int], ...]
    ) -> tuple[bool, dict[str, Any] | None]:
        return False, None

    # ---- worker side (worker process, or EngineCore with the uni executor) ----
    def start_load_kv(self, forward_context: "ForwardContext", **kwargs: Any) -> None:
        return None

    def wait_for_layer_load(self, layer_name: str) -> None:
        return None

    def save_kv_layer(
        self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any
    ) -> None:
        return None

    def wait_for_save(self) -> None:
        return None


if __name__ == "__main__":  # python tools/noop_connector.py -> the API report as JSON
    import json

    print(json.dumps(api_report(), indent=1))
