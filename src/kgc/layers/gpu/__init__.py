"""Layer ``gpu`` — GPU pods get their GPU inside a real microVM (Kata RuntimeClass, VFIO).

Judged once per cluster. The evidence is one :class:`GpuRunEvidence` (gathered live by
:mod:`kgc.layers.gpu.collect`, or replayed from a bundle): the preflight facts
(RuntimeClasses, nodes, device-plugin pods) and every GPU pod of the run with its status,
events and in-guest collector output.

The catalogue (:data:`LAYER`'s registry) judges that whole evidence per check id:

- preflight checks (``SCOPE[id] == "cluster"``) judge ``run.cluster`` once;
- per-pod checks judge each pod (with its run, for ``gpu.unique``) and are combined with
  :func:`kgc.core.model.aggregate` (``noun="pod"``): the worst pod decides, the deciding
  pods are named, every pod's own outcome (with its node and pod) stays in the evidence.

The verdict's target is the cluster; the node and the pod are in its evidence. The pure
per-subject evaluators are :data:`kgc.layers.gpu.checks.CHECKS` (see ``inputs``).
"""

from collections.abc import Mapping
from typing import Any

from kgc.core.layer import Layer, Scope
from kgc.core.model import Check, Outcome, Registry, aggregate
from kgc.layers.gpu import cc as _cc  # noqa: F401  (registers the gpu.cc-* checks)
from kgc.layers.gpu import dra_pod as _dra_pod  # noqa: F401  (registers the gpu.dra-* pod checks)
from kgc.layers.gpu.checks import CHECKS, SCOPE, CheckInput, PodSubject, inputs, settings
from kgc.layers.gpu.classify import Cause, classify, pod_ran
from kgc.layers.gpu.collect import gather, preflight
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

NO_POD = "no-pod"


def judge_run(check: Check, run: GpuRunEvidence, profile: Any) -> Outcome:
    """One check (by id) on a whole run: the cluster once, or every pod aggregated."""
    per_subject = CHECKS.get(check.id)  # the pure evaluator of one subject
    if SCOPE[check.id] == "cluster":
        return per_subject.evaluate(run.cluster, profile)
    results = [(ci.subject, per_subject.evaluate(ci.evidence, profile))
               for ci in inputs(run) if ci.check.id == check.id]
    if len(results) == 1 and results[0][0] == NO_POD:
        return results[0][1]  # no pod at all: the check's own reason says why
    return aggregate(results, noun="pod")


def _whole(check: Check) -> Check:
    def evaluate(run: Any, profile: Any) -> Outcome:
        if not isinstance(run, GpuRunEvidence):
            raise TypeError(f"{check.id} judges a GpuRunEvidence, got {type(run).__name__}")
        return judge_run(check, run, profile)

    return Check(check.id, check.layer, check.title, check.severity, check.remediation,
                 evaluate, check.doc)


def catalogue() -> Registry:
    reg = Registry()
    for c in CHECKS:
        reg.add(_whole(c))
    return reg


def _record(ev: GpuRunEvidence) -> Mapping[str, Any]:
    return ev.to_dict()


LAYER = Layer(
    name="gpu",
    scope=Scope.CLUSTER,
    title="GPU pods get their GPU inside a real microVM (Kata RuntimeClass, VFIO passthrough)",
    number=4,
    card="GPU pod passthrough",
    checks=catalogue(),
    markers=("cluster",),
    gather=gather,
    record=_record,
    replay=GpuRunEvidence.from_dict,
)


__all__ = [
    "CHECKS", "LAYER", "NO_POD", "SCOPE", "Cause", "CheckInput", "ClusterGpuEvidence",
    "GpuPodEvidence", "GpuProfile", "GpuRunEvidence", "NodeInfo", "PluginPod", "PodSubject",
    "RuntimeClassInfo", "catalogue", "classify", "event_from_api", "gather", "inputs",
    "judge_run", "node_from_api", "plugin_pod_from_api", "pod_ran", "pod_from_api",
    "preflight", "runtime_class_from_api", "settings",
]
