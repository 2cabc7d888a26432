"""The live driver of the KEDA latency layer: it owns two scale-to-zero workloads, drives
them 0 → K → 0 with a trigger it controls, and records what the watches saw.

What one run does (every object labelled with the run, torn down by ``kgc.kube.Run`` on
exit, failure, Ctrl-C and SIGTERM)::

    preflight     KEDA's API group served (CRD scaledobjects.keda.sh), the external metrics
                  APIService Available, the RuntimeClasses; the operator's Deployment when
                  the cluster shows one
    endpoint      mode deploy: ConfigMap + Deployment + Service in the run namespace
                  (``endpoint_server.py`` on the profile's image); url: the profile's
    workloads     two identical Deployments (replicas 0), the Kata class and the baseline
                  class, each under a ScaledObject (minReplicaCount 0, metrics-api trigger,
                  AverageValue target 1: value K -> K replicas); wait until both are Ready
                  (the operator is alive and has made their HPAs)
    repetitions   N times: open watches (pods, Deployments, HPAs, ScaledObjects, Events) at
                  a resourceVersion listed before the trigger -> raise the value to K ->
                  wait (bounded) for activation, then for K Ready pods per class -> lower
                  the value to 0 -> wait (bounded) until no pod of either class is left
    record        a ``KedaEvidence`` (see the recording contract in evidence.py)

Every timestamp is the client's receipt time of a watch event (``time.monotonic()`` and
``time.time()``, taken as the event is decoded, see ``kgc.kube.watch``), next to the API's
own whole-second timestamp. A wait that gives up becomes a ``Stall`` naming the phase; a
repetition that stalled ends the run (the next one would stall the same way, as long).

The concerns live in their own modules; this one runs them in order (``measure``) and turns
the cluster's refusals into an error record (``gather``):

    workloads     the measured Deployments and ScaledObjects (pure manifests), the waits on them
    trigger       the trigger endpoint or marker pods, and setting the value
    preflight     KEDA, its metrics adapter and operator, the RuntimeClasses, the HPA sync period
    watches       the watch of one repetition (``ScaleWatcher``, a ``RoleState`` per class)
    stalls        what a wait that gave up was stuck in (pure)
    repetition    one 0 -> K -> 0 of every class
    phases, stats the evaluators' phase computation and statistics (pure, in the checks)
    timeline      the artefacts (CSVs, timeline SVG, per-phase table)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import urllib3
from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.kube.origin import NodeOrigin
from kgc.layers.keda.checks import keda_profile
from kgc.layers.keda.evidence import (
    ClassRun,
    KedaEvidence,
    Preflight,
    Repetition,
    ScalingConfig,
    Stall,
)
from kgc.layers.keda.observe import scaling_config
from kgc.layers.keda.phases import estimate_clock_offset
from kgc.layers.keda.preflight import hpa_sync_period, preflight
from kgc.layers.keda.profile import KedaProfile
from kgc.layers.keda.repetition import repetition
from kgc.layers.keda.trigger import HttpTrigger, TriggerError, now, set_value, setup, wait_endpoint
from kgc.layers.keda.workloads import (
    KEDA_GROUP,
    KEDA_VERSION,
    SO_PLURAL,
    create,
    runtime_classes,
    scaled_object_manifest,
    wait_scaled_objects_ready,
    workload_manifest,
    workload_name,
)

log = logging.getLogger("kgc.keda")


def node_origins(k: kube.Kube, names: Iterable[str]) -> tuple[NodeOrigin, ...] | None:
    """The origin of every node a measured pod ran on (a real kubelet or a stand-in, see
    :mod:`kgc.kube.origin`), from one list of the nodes after the run (``list`` is what
    the certification role grants); a node that is gone by then is "not seen". None when
    the credentials may not list nodes: nothing is recorded then."""
    want = sorted(set(names))
    if not want:
        return ()
    try:
        listed: Any = k.core.list_node(_request_timeout=30)
    except ApiException as exc:
        if exc.status not in (401, 403):
            raise
        log.info("keda: node origins not recorded: list nodes refused (%s %s)",
                 exc.status, exc.reason)
        return None
    raw = {n.metadata.name: k.api.sanitize_for_serialization(n) for n in listed.items or []}
    return tuple(NodeOrigin.of(name, raw.get(name)) for name in want)


def _pod_nodes(reps: Mapping[str, Sequence[Repetition]]) -> set[str]:
    return {p.node for rs in reps.values() for rep in rs for p in rep.pods if p.node}


def measure(k: kube.Kube, profile: Any) -> KedaEvidence:
    """Preflight, then the whole run. Raises only what ``gather`` turns into an error."""
    kp = keda_profile(profile)
    pf = preflight(k, kp)
    if pf.missing or pf.keda_installed is False or pf.operator_ready is False:
        return KedaEvidence("preflight-failed", preflight=pf)
    roles = list(runtime_classes(kp))
    cluster = getattr(profile, "cluster", None)
    run = (kube.Run.for_profile(k, cluster) if cluster is not None else kube.Run(k))
    clock: list[tuple[float, float, float]] = []
    reps: dict[str, list[Repetition]] = {r: [] for r in roles}
    configs: dict[str, ScalingConfig] = {}
    with run:
        su = setup(k, run, kp, clock)
        for role in roles:
            create(run, workload_manifest(role, kp), clock)
            create(run, scaled_object_manifest(role, kp, su.url), clock)
        try:
            if kp.trigger == "metrics-api" and kp.endpoint.mode == "deploy":
                wait_endpoint(k, run.namespace, kp.timeouts.endpoint_s)
            set_value(su.trigger, 0, kp.timeouts.endpoint_s)
        except (kube.WaitTimeout, TriggerError) as exc:
            stall = Stall("trigger", kp.timeouts.endpoint_s, kp.timeouts.endpoint_s,
                          f"the trigger endpoint never answered: {exc}", None, now())
            return _evidence(pf, kp, roles, {r: [Repetition(1, kp.replicas, None,
                                                            stalls=(stall,))] for r in roles},
                             {}, clock, ())
        try:
            wait_scaled_objects_ready(k, run.namespace, roles, kp.timeouts.endpoint_s)
        except kube.WaitTimeout as exc:
            pf = Preflight(pf.keda_installed, pf.keda_version, pf.missing, False,
                           "; ".join(x for x in (pf.message, str(exc)) if x))
            return KedaEvidence("preflight-failed", preflight=pf)
        sync, source = hpa_sync_period(k, kp)
        try:
            for i in range(1, kp.repetitions + 1):
                by_role, go_on = repetition(k, run, kp, su, i, roles)
                for r in roles:
                    reps[r].append(by_role[r])
                if not go_on:
                    log.info("keda: repetition %d stalled; the run ends here", i)
                    break
        finally:
            if isinstance(su.trigger, HttpTrigger):
                try:  # a shared (url) endpoint is left at 0 for whoever comes next
                    su.trigger.put(0)
                except TriggerError as exc:
                    log.warning("keda: could not reset the trigger endpoint: %s", exc)
        for r in roles:
            name = workload_name(r)
            so = k.call("get", SO_PLURAL, k.custom.get_namespaced_custom_object, KEDA_GROUP,
                        KEDA_VERSION, run.namespace, SO_PLURAL, name)
            hpas: Any = k.call("list", "horizontalpodautoscalers",
                               k.autoscaling.list_namespaced_horizontal_pod_autoscaler,
                               run.namespace)
            hpa = next((k.api.sanitize_for_serialization(h) for h in hpas.items or []
                        if h.spec.scale_target_ref.name == name), None)
            configs[r] = scaling_config(so, hpa, hpa_sync_period_s=sync,
                                        hpa_sync_source=source)
        nodes = node_origins(k, _pod_nodes(reps))
    return _evidence(pf, kp, roles, reps, configs, clock, nodes)


def _evidence(pf: Preflight, kp: KedaProfile, roles: Sequence[str],
              reps: Mapping[str, list[Repetition]], configs: Mapping[str, ScalingConfig],
              clock: Sequence[tuple[float, float, float]],
              nodes: tuple[NodeOrigin, ...] | None) -> KedaEvidence:
    rcs = runtime_classes(kp)
    runs = {r: ClassRun(role=r, runtime_class=rcs[r], repetitions=tuple(reps[r]),
                        config=configs.get(r, ScalingConfig()), deployment=workload_name(r),
                        scaled_object=workload_name(r)) for r in roles}
    return KedaEvidence("done", preflight=pf, kata=runs.get("kata"),
                        baseline=runs.get("baseline"), clock=estimate_clock_offset(clock),
                        nodes=nodes)


def gather(ctx: Any) -> KedaEvidence:
    """The layer's ``gather``: connect (a ``TargetError`` names the kubeconfig problem),
    measure; the cluster's refusals and failures become ``status: error`` with the one-line
    message (they are the cluster's answer, not a kgc defect)."""
    k = ctx.target.connect()
    try:
        return measure(k, ctx.profile)
    except kube.KubeError as exc:
        return KedaEvidence("error", f"{exc}" + (f" -- {exc.remediation}"
                                                 if exc.remediation else ""))
    except ApiException as exc:
        return KedaEvidence("error", f"the API server answered {exc.status} {exc.reason}: "
                            f"{_api_message(exc)}")
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        return KedaEvidence("error", f"lost the API server {k.server}: "
                            f"{type(exc).__name__}: {exc}")
    except kube.WaitTimeout as exc:
        return KedaEvidence("error", str(exc))
    except TriggerError as exc:
        return KedaEvidence("error", str(exc))
    finally:
        k.close()


def _api_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return str(exc.reason or "")
    return str(body.get("message") or exc.reason or "") if isinstance(body, dict) else ""
