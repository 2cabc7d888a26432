"""Layer ``gpu`` — GPU pods get their GPU inside a real microVM.

PROVISIONAL (the lead owns this file). The registry imports every package named in
``LAYER_MODULES`` and reads its ``LAYER``, so this package must define one as soon as it
exists. Until the live collection is wired, ``LAYER`` carries an EMPTY registry (nothing in
the catalogue, the README table or the suites changes) and a ``gather`` that records a run
with no pods and the note that it was not wired. The real catalogue is
:data:`kgc.layers.gpu.checks.CHECKS`, judged per :func:`kgc.layers.gpu.checks.inputs`.
"""

from collections.abc import Mapping
from typing import Any

from kgc.core.layer import Layer, Scope
from kgc.core.model import Registry
from kgc.layers.gpu.checks import CHECKS, SCOPE, CheckInput, PodSubject, inputs, settings
from kgc.layers.gpu.classify import Cause, classify, pod_ran
from kgc.layers.gpu.evidence import (
    ClusterGpuEvidence,
    GpuPodEvidence,
    GpuRunEvidence,
    NodeInfo,
    PluginPod,
    RuntimeClassInfo,
    event_from_api,
    node_from_api,
    plugin_pod_from_api,
    pod_from_api,
    runtime_class_from_api,
)
from kgc.layers.gpu.profile import GpuProfile


def _not_wired(ctx: Any) -> GpuRunEvidence:
    why = "the gpu layer's live collection is not wired into this build yet"
    return GpuRunEvidence(ClusterGpuEvidence(None, None, errors={"runtime_classes": why,
                                                                 "nodes": why}), (), (why,))


def _record(ev: GpuRunEvidence) -> Mapping[str, Any]:
    return ev.to_dict()


LAYER = Layer(
    name="gpu",
    scope=Scope.CLUSTER,
    title="GPU pods get their GPU inside a real microVM (Kata RuntimeClass, VFIO passthrough)",
    checks=Registry(),  # provisional: CHECKS is wired by the lead with the live collection
    markers=("cluster",),
    gather=_not_wired,
    record=_record,
    replay=GpuRunEvidence.from_dict,
)


__all__ = [
    "CHECKS", "LAYER", "SCOPE", "Cause", "CheckInput", "ClusterGpuEvidence", "GpuPodEvidence",
    "GpuProfile", "GpuRunEvidence", "NodeInfo", "PluginPod", "PodSubject", "RuntimeClassInfo",
    "classify", "event_from_api", "inputs", "node_from_api", "plugin_pod_from_api",
    "pod_ran", "pod_from_api", "runtime_class_from_api", "settings",
]
