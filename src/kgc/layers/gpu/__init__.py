"""Layer ``gpu`` — GPU pods get their GPU inside a real microVM.

PROVISIONAL (the lead owns this file): it exports the layer's names and a placeholder
``LAYER`` with an EMPTY registry, so that ``kgc.core.engine.load_layers`` (which imports every
layer module and reads ``LAYER``) keeps working and the catalogue does not change until the
live collection is wired. The real layer is ``Layer("gpu", CHECKS, gather, host=False)``
with ``gather`` building a :class:`GpuRunEvidence` and judging :func:`inputs` of it.
"""

from kgc.core.engine import Context, Layer
from kgc.core.model import Registry
from kgc.core.target import TargetError
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


def _not_wired(ctx: Context) -> GpuRunEvidence:
    raise TargetError("the gpu layer's live collection is not wired yet")


LAYER = Layer(name="gpu", checks=Registry(), gather=_not_wired, host=False)

__all__ = [
    "CHECKS", "LAYER", "SCOPE", "Cause", "CheckInput", "ClusterGpuEvidence", "GpuPodEvidence",
    "GpuProfile", "GpuRunEvidence", "NodeInfo", "PluginPod", "PodSubject", "RuntimeClassInfo",
    "classify", "event_from_api", "inputs", "node_from_api", "plugin_pod_from_api",
    "pod_ran", "pod_from_api", "runtime_class_from_api", "settings",
]
