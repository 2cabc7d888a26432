"""``cluster.keda``: what the KEDA latency layer runs and the budgets it judges against.

Strict like every profile model (unknown keys refused, frozen: :class:`kgc.core.profile.Strict`).
The Kata RuntimeClass and the GPU resource are the platform's (``platform`` in the profile).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from kgc.core.profile import DEFAULT_GPU_RESOURCES, DEFAULT_KATA_RUNTIME_CLASS, Strict

Phase = Literal["decision", "creation", "scheduling", "sandbox", "start", "ready"]
Measure = Literal[
    "decision", "creation", "scheduling", "sandbox", "start", "ready", "startup", "e2e"
]


def _positive_values(v: dict[str, float]) -> dict[str, float]:
    for k, x in v.items():
        if not x > 0:
            raise ValueError(f"{k}: a budget must be > 0 seconds, got {x}")
    return v


def _sandbox_budget() -> dict[Phase, float]:
    return {"sandbox": 10.0}


class KedaBudgets(Strict):
    """What a certified scale-up may take. Percentiles are nearest-rank (see
    :mod:`kgc.layers.keda.stats`)."""

    # trigger raised -> pod Ready, p95 over every pod of every repetition (Kata class)
    e2e_p95_s: float = Field(default=60.0, gt=0)
    # per-phase p95 budgets (Kata class); phases without a budget are only reported
    phase_p95_s: dict[Phase, float] = Field(default_factory=lambda: _sandbox_budget())
    # Kata / baseline of `ratio_measure` at `ratio_stat`; None: report the ratio only
    ratio_max: float | None = Field(default=1.5, gt=0)
    ratio_measure: Measure = "e2e"
    ratio_stat: Literal["p50", "p95", "max"] = "p50"
    # optional per-phase ratio budgets, e.g. {sandbox: 4.0}
    phase_ratio_max: dict[Measure, float] = Field(default_factory=dict)
    # the decision phase (KEDA polling / HPA sync) "dominates" when its p50 is at least this
    # share of the end-to-end p50: the configuration, not the runtime, then bounds latency
    decision_dominance: float = Field(default=0.5, gt=0, le=1)
    # how late (beyond the API's 1 s truncation and the clock offset's uncertainty) a watch
    # event may arrive before the timing precision is reported as degraded
    watch_lag_tolerance_s: float = Field(default=0.5, ge=0)

    # the baseline class's own p95 budgets per measure (e.g. {startup: 5.0}): the cluster
    # apart from Kata -- scheduler, CNI, image, kubelet; empty: keda.baseline-budgets skips
    baseline_p95_s: dict[Measure, float] = Field(default_factory=dict)

    _pos = field_validator("phase_p95_s", "phase_ratio_max", "baseline_p95_s")(
        _positive_values)


class KedaTimeouts(Strict):
    """Every bounded wait of the live run, in seconds."""

    endpoint_s: float = Field(default=60.0, gt=0)  # the run's trigger endpoint answers
    activation_s: float = Field(default=120.0, gt=0)  # trigger -> ScaledObject Active
    ready_s: float = Field(default=300.0, gt=0)  # trigger -> all K pods Ready
    scale_down_s: float = Field(default=600.0, gt=0)  # trigger lowered -> no pod left
    cleanup_s: float = Field(default=120.0, gt=0)  # the run's namespace is gone


class KedaGpu(Strict):
    """GPU requests of the measured pods; off by default so the layer runs on clusters
    without free GPUs."""

    per_pod: int = Field(default=0, ge=0)


class KedaEndpoint(Strict):
    """Where the ``metrics-api`` trigger reads the value the run controls.

    ``deploy`` (real clusters): the run deploys a small HTTP endpoint in its own namespace
    -- a pod running ``image`` (any image with ``python3``; the script is stdlib only and
    comes in a ConfigMap) behind a Service; KEDA reads
    ``http://<service>.<namespace>.svc.<cluster_domain>:<port>/metric`` and the run sets
    the value through the API server's service proxy (so kgc needs no network path to pod
    IPs). Mirror the image into your registry on air-gapped clusters.
    ``url``: an endpoint the run does not deploy, at ``url``; ``GET url`` answers
    ``{"value": N}`` and ``PUT url`` with ``{"value": N}`` sets it, reachable from kgc and
    from KEDA (e.g. a shared endpoint outside the cluster, or a test cluster whose pods
    never run: whoever runs that cluster writes its endpoint's URL here)."""

    mode: Literal["deploy", "url"] = "deploy"
    image: str = "python:3.13-alpine"
    port: int = Field(default=8080, ge=1, le=65535)
    cluster_domain: str = "cluster.local"
    url: str | None = None
    # where the endpoint pod may run (e.g. the system node pool); empty: anywhere
    node_selector: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _url(self) -> KedaEndpoint:
        if self.mode == "url" and not self.url:
            raise ValueError("endpoint.mode url needs endpoint.url")
        if self.mode != "url" and self.url:
            raise ValueError(f"endpoint.url is only read with mode url (mode is {self.mode})")
        if not self.image:
            raise ValueError("endpoint.image must name an image with python3")
        return self


_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _label_key(k: str) -> str | None:
    """Why ``k`` is not a Kubernetes label key (``[prefix/]name``), or None."""
    prefix, _, name = k.rpartition("/")
    if "/" in k and (not prefix or len(prefix) > 253 or not _DNS_PREFIX.match(prefix)):
        return f"label key {k!r}: the prefix must be a DNS subdomain"
    if not _LABEL_NAME.match(name):
        return (f"label key {k!r}: the name must be 1-63 characters [A-Za-z0-9-_.], "
                "beginning and ending alphanumeric")
    return None


class KedaToleration(Strict):
    """A toleration of the measured pods (the Kubernetes fields, snake_case)."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = None

    @model_validator(mode="after")
    def _fields(self) -> KedaToleration:
        if self.key and (why := _label_key(self.key)):
            raise ValueError(why)
        if not self.key and self.operator != "Exists":
            raise ValueError("a toleration without a key must use operator Exists (it "
                             "tolerates every taint)")
        if self.operator == "Exists" and self.value:
            raise ValueError(f"operator Exists takes no value (got {self.value!r})")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("toleration_seconds is only read with effect NoExecute")
        return self

    def manifest(self) -> dict[str, object]:
        out: dict[str, object] = {"operator": self.operator}
        if self.key:
            out["key"] = self.key
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


class KedaPlacement(Strict):
    """Where one class's measured pods may run: a ``nodeSelector`` and the tolerations of
    the taints on those nodes (e.g. a Kata GPU pool, or a runc pool to compare against);
    empty: wherever the scheduler puts them."""

    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[KedaToleration, ...] = ()

    @field_validator("node_selector")
    @classmethod
    def _selector(cls, v: dict[str, str]) -> dict[str, str]:
        for k, x in v.items():
            if why := _label_key(k):
                raise ValueError(why)
            if x and not _LABEL_NAME.match(x):
                raise ValueError(f"label value {x!r} of {k}: at most 63 characters "
                                 "[A-Za-z0-9-_.], beginning and ending alphanumeric")
        return v


class KedaPlacements(Strict):
    """``placement.kata`` and ``placement.baseline``: each class's own node pool."""

    kata: KedaPlacement = KedaPlacement()
    baseline: KedaPlacement = KedaPlacement()


class KedaProfile(Strict):
    """The KEDA scale-up latency layer (hooked in as ``cluster.keda``)."""

    # views of the platform (filled by the profile, not keys of this section): the measured
    # Kata pods' RuntimeClass and the resource their GPU request names
    runtime_class: str = Field(default=DEFAULT_KATA_RUNTIME_CLASS, exclude=True)
    gpu_resource: str = Field(default=DEFAULT_GPU_RESOURCES[0], exclude=True)
    # how GPUs are requested (platform.gpu.request.mode): the measured pods request the
    # extended resource, which DRA serves under dra-extended; under claim they cannot ask
    gpu_request_mode: str = Field(default="device-plugin", exclude=True)
    # the layer's own class (its purpose: the cluster apart from Kata, to compare against);
    # None: the baseline pods name no runtimeClassName (the cluster's default handler)
    baseline_runtime_class: str | None = "runc"
    compare_baseline: bool = True
    repetitions: int = Field(default=5, ge=1, le=200)
    replicas: int = Field(default=3, ge=1, le=100)  # K: each repetition scales 0 -> K -> 0
    # metrics-api: a number the run sets on an HTTP endpoint (see ``endpoint``);
    # kubernetes-workload: the number of marker pods the run creates in its namespace
    # (no endpoint image needed, the marker pods run ``image``)
    trigger: Literal["metrics-api", "kubernetes-workload"] = "metrics-api"
    endpoint: KedaEndpoint = KedaEndpoint()
    # the run's own ScaledObjects: set pollingInterval to the platform's production value
    # (KEDA's default is 30 s); cooldownPeriod only affects the scale back to zero between
    # repetitions (KEDA's default is 300 s), so a short one keeps the run short
    polling_interval_s: int = Field(default=30, ge=1)
    cooldown_period_s: int = Field(default=30, ge=0)
    # kube-controller-manager's --horizontal-pod-autoscaler-sync-period (it paces the HPA's
    # 1 -> K step), for control planes whose API does not show it (managed clusters: no
    # controller-manager pod in kube-system). Read from the pod when visible (that wins);
    # unset and not visible: the Kubernetes default 15 s is assumed and the verdict says so.
    hpa_sync_period_s: float | None = Field(default=None, gt=0)
    image: str = "registry.k8s.io/pause:3.10"
    # where each class's pods run (nodeSelector + tolerations); default: anywhere
    placement: KedaPlacements = KedaPlacements()
    gpu: KedaGpu = KedaGpu()
    budgets: KedaBudgets = KedaBudgets()
    timeouts: KedaTimeouts = KedaTimeouts()

    @model_validator(mode="after")
    def _gpu_request_is_expressible(self) -> KedaProfile:
        if self.gpu.per_pod and self.gpu_request_mode == "claim":
            raise ValueError(
                "gpu.per_pod: the measured Deployments request GPUs by the extended resource "
                f"{self.gpu_resource}, and under platform.gpu.request.mode: claim no node "
                "offers it (the GPUs are claimed from a DeviceClass): set gpu.per_pod: 0, or "
                "mode: dra-extended (a DeviceClass naming the resource in "
                "spec.extendedResourceName serves the plain request)")
        return self

    @field_validator("runtime_class")
    @classmethod
    def _rc(cls, v: str) -> str:
        if not v:
            raise ValueError("must name the Kata RuntimeClass")
        return v

    @model_validator(mode="after")
    def _waits_fit(self) -> KedaProfile:
        t = self.timeouts
        if t.activation_s <= self.polling_interval_s:
            raise ValueError(
                f"timeouts.activation_s ({t.activation_s:g}) must exceed polling_interval_s "
                f"({self.polling_interval_s}): KEDA looks at the trigger only once per "
                "pollingInterval")
        if t.ready_s < t.activation_s:
            raise ValueError(f"timeouts.ready_s ({t.ready_s:g}) must be at least "
                             f"timeouts.activation_s ({t.activation_s:g})")
        if t.scale_down_s <= self.cooldown_period_s:
            raise ValueError(
                f"timeouts.scale_down_s ({t.scale_down_s:g}) must exceed cooldown_period_s "
                f"({self.cooldown_period_s}): KEDA scales to zero only after the cooldown")
        if not self.compare_baseline and (self.placement.baseline != KedaPlacement()
                                          or self.budgets.baseline_p95_s):
            raise ValueError("placement.baseline and budgets.baseline_p95_s are only read "
                             "with compare_baseline: true")
        if self.compare_baseline and self.baseline_runtime_class == self.runtime_class:
            raise ValueError(f"baseline_runtime_class equals runtime_class "
                             f"({self.runtime_class!r}): nothing to compare")
        return self
