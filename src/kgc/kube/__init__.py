"""kgc's Kubernetes framework: what the cluster layers (GPU pod, VM sizing, KEDA latency)
use to talk to a cluster. It connects, creates, waits and observes; it never judges — no
asserts, no verdicts (evaluators judge the evidence it collects).

Modelled on kubernetes ``test/e2e/framework``: a core owning the client and a per-run
namespace, waits on described conditions whose timeout says what it waited for.

    from kgc import kube
    k = kube.connect(kubeconfig, context)              # Kube (KubeError if unusable)
    with kube.Run.for_profile(k, profile.cluster) as run:
        run.create(kube.builders.config_map("collector", {...}, labels=run.labels))
        with kube.PodWatcher(k, run.namespace) as w:   # lists first: start before trigger
            run.create(kube.builders.pod("gpu", [...], labels=run.labels, ...))
            pod = kube.wait_for_pod(k, run.namespace, "gpu", kube.pod_ready(), 120)
        timeline = w.timelines["gpu"]

Modules: ``client`` (connect, Kube, KubeError), ``run`` (Run, cleanup), ``wait``
(wait_for, watch_until, WaitTimeout, pod conditions), ``watch`` (PodWatcher, EventWatcher),
``builders`` (plain-dict manifests), ``pods`` (run_pods: a batch of pods to their end, with
their events and logs).
"""

from kgc.kube import builders
from kgc.kube.client import Kube, KubeError, connect
from kgc.kube.config import KubeRefused, KubeUnreachable
from kgc.kube.pods import PodOutcome, run_pods
from kgc.kube.run import Run, Terminated, cleanup, create_object, with_labels
from kgc.kube.wait import (
    Condition,
    NotYet,
    WaitTimeout,
    describe_pod,
    pod_condition,
    pod_phase,
    pod_ready,
    pod_scheduled,
    pod_unschedulable,
    wait_for,
    wait_for_deleted,
    wait_for_pod,
    wait_for_pods,
    watch_until,
)
from kgc.kube.watch import EventWatcher, ObservedEvent, PodTimeline, PodWatcher, Stamp

__all__ = [
    "Condition",
    "EventWatcher",
    "Kube",
    "KubeError",
    "KubeRefused",
    "KubeUnreachable",
    "NotYet",
    "ObservedEvent",
    "PodOutcome",
    "PodTimeline",
    "PodWatcher",
    "Run",
    "Stamp",
    "Terminated",
    "WaitTimeout",
    "builders",
    "cleanup",
    "connect",
    "create_object",
    "describe_pod",
    "pod_condition",
    "pod_phase",
    "pod_ready",
    "pod_scheduled",
    "pod_unschedulable",
    "run_pods",
    "wait_for",
    "wait_for_deleted",
    "wait_for_pod",
    "wait_for_pods",
    "watch_until",
    "with_labels",
]
