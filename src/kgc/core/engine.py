"""The engine: one :class:`Context` per target (a node, a cluster, or a bundle of either)
gets each layer's evidence once and judges checks against the profile.

Collection never loses a verdict: whatever goes wrong while evidence is gathered becomes
an ``error`` (or, for a layer whose explicit flag was not given, a ``skip`` naming the flag)
for every check of that layer, with a remediation that fits the failure:

- the target could not be reached  -> the transport's own remediation;
- recorded evidence is malformed    -> re-record it;
- the collector itself crashed      -> a kgc defect, with the exception.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgc.core.bundle import Bundle
from kgc.core.hostfs import FileNotRead, HostQuery, HostSnapshot
from kgc.core.layer import Layer, Scope
from kgc.core.model import Check, EvidenceError, Outcome, Registry, Status, Verdict
from kgc.core.profile import Profile
from kgc.core.registry import catalogue, load_layers
from kgc.core.target import ClusterTarget, NodeTarget, TargetError, Unreachable

Target = NodeTarget | ClusterTarget | Bundle

SUITE_DEFECT = ("This is a defect in kgc, not in the node: report it with the evidence "
                "bundle (`kgc snapshot`) and the message above.")
NOT_READ = ("Make {path} a plain configuration file -- a regular file under the collector's "
            "limit, its name without a newline -- or remove it, then run again; kgc judges no "
            "node from part of a file.")
RERECORD = ("Record the evidence again with this kgc version (`kgc snapshot`); a bundle that "
            "was edited or written by another tool is not judged.")


class Unavailable(Exception):
    """A layer's evidence could not be had: every check of the layer gets this outcome."""

    def __init__(self, status: Status, reason: str, remediation: str | None = None,
                 category: str = "environment") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.remediation = remediation
        self.category = category  # environment | node | suite

    def outcome(self) -> Outcome:
        return Outcome(self.status, self.reason, {"evidence_unavailable": self.category},
                       self.remediation)


def host_query(layers: Mapping[str, Layer], profile: Profile) -> HostQuery:
    """The union of every snapshot layer's query: one script, one round trip per node."""
    q = HostQuery()
    for lay in layers.values():
        lq = lay.query_for(profile)
        if lq is not None:
            q = q | lq
    return q


@dataclass
class Context:
    """Everything one target's checks see. I/O happens only in the layers' collectors."""

    target: Target
    profile: Profile
    layers: Mapping[str, Layer] = field(default_factory=load_layers)
    options: Mapping[str, Any] = field(default_factory=dict)
    _host: HostSnapshot | None = None
    _host_error: TargetError | None = None
    _evidence: dict[str, Any] = field(default_factory=dict)
    _unavailable: dict[str, Unavailable] = field(default_factory=dict)
    # the target did not answer (probed once): every layer not yet had gets this same error
    _failure: Unavailable | None = None
    _checks: Registry | None = None

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def scope(self) -> Scope:
        return self.target.scope

    @property
    def offline(self) -> bool:
        return isinstance(self.target, Bundle)

    # -- the node's one snapshot ----------------------------------------------------------
    def host(self) -> HostSnapshot:
        """The node's one batched snapshot for all snapshot layers (collected once)."""
        if self._host is None:
            if self._host_error is not None:
                raise self._host_error
            t = self.target
            if isinstance(t, Bundle):
                if t.host is None:
                    raise TargetError(f"{t.path}: a {t.scope} bundle has no host snapshot")
                snap = t.host
            elif isinstance(t, NodeTarget):
                try:
                    snap = t.collect(host_query(self.layers, self.profile))
                except TargetError as exc:
                    self._host_error = exc
                    raise
            else:
                raise TargetError(f"{t.name} is a cluster, it has no host snapshot")
            for lay in self.layers.values():
                if lay.redact is not None:
                    snap = lay.redact(snap, self.profile)
            self._host = snap
        return self._host

    # -- evidence per layer ------------------------------------------------------------------
    def evidence(self, layer: str) -> Any:
        """The layer's evidence, gathered (or replayed) once; raises :class:`Unavailable`."""
        if layer in self._unavailable:
            raise self._unavailable[layer]
        if layer not in self._evidence:
            try:
                self._evidence[layer] = self._gather(self.layers[layer])
            except Unavailable as u:
                self._unavailable[layer] = u
                raise
            except TargetError as exc:
                self._unavailable[layer] = self.failed(exc)
                if isinstance(exc, Unreachable):
                    self._failure = self._unavailable[layer]
                raise self._unavailable[layer] from None
            except FileNotRead as exc:
                self._unavailable[layer] = Unavailable(
                    Status.ERROR, f"the {layer} layer needs the content of {exc.path}, which "
                    f"the evidence does not hold whole: {exc.why}", NOT_READ.format(path=exc.path),
                    "node")
                raise self._unavailable[layer] from None
            except EvidenceError as exc:
                self._unavailable[layer] = Unavailable(
                    Status.ERROR, f"the {layer} evidence is malformed: {exc}", RERECORD, "suite")
                raise self._unavailable[layer] from None
            except Exception as exc:  # noqa: BLE001 - every crash becomes an error verdict
                self._unavailable[layer] = Unavailable(
                    Status.ERROR,
                    f"collecting the {layer} evidence crashed: {type(exc).__name__}: {exc}",
                    SUITE_DEFECT, "suite")
                raise self._unavailable[layer] from None
        return self._evidence[layer]

    def failed(self, exc: TargetError) -> Unavailable:
        """The error every check of a layer gets when the target failed it (the same text
        live and replayed from a bundle that recorded the failure)."""
        rem = exc.remediation or getattr(self.target, "remediation", None)
        return Unavailable(Status.ERROR, f"evidence could not be collected: {exc}", rem)

    def _probe(self, lay: Layer) -> None:
        """A target that did not answer is asked once: later layers share its error. A
        cluster is probed (its API server's version) before its first layer gathers; a node's
        first transport failure is its probe. A bundle replays what its recording met: each
        layer's recorded outcome, else the target's recorded failure."""
        t = self.target
        if isinstance(t, Bundle):
            recorded = t.unavailable.get(lay.name)
            if recorded is not None:
                raise Unavailable(*recorded)
            if t.failure is not None:
                raise Unavailable(Status.ERROR, *t.failure)
            return
        if self._failure is not None:
            raise self._failure
        if isinstance(t, ClusterTarget):
            t.probe()

    def _gather(self, lay: Layer) -> Any:
        t = self.target
        if lay.scope is not t.scope:
            raise Unavailable(Status.SKIP, f"layer {lay.name} is {lay.scope}-scoped; "
                              f"{t.name} is a {t.scope}")
        if isinstance(t, Bundle):
            self._probe(lay)
            if lay.parse is not None:
                return lay.parse(self.host(), self.profile)
            part = t.part(lay.name)
            if part is None:
                how = f" (recorded without {lay.gate.flag})" if lay.gate else ""
                raise Unavailable(Status.SKIP, f"the bundle {t.path.name} holds no {lay.name} "
                                  f"evidence{how}")
            assert lay.replay is not None
            return lay.replay(part)
        if lay.gate is not None and not self.options.get(lay.gate.option):
            raise Unavailable(Status.SKIP, f"not run: needs {lay.gate.flag} ({lay.gate.why})")
        self._probe(lay)
        if lay.parse is not None:
            return lay.parse(self.host(), self.profile)
        assert lay.gather is not None
        return lay.gather(self)

    def describe(self) -> dict[str, str]:
        """Environment facts the layers whose evidence was had tell about this target."""
        out: dict[str, str] = {}
        for n, ev in self._evidence.items():
            lay = self.layers[n]
            if lay.describe is None:
                continue
            try:
                facts = lay.describe(ev)
            except Exception as exc:  # noqa: BLE001 - the panel never breaks a run
                facts = {f"{n}.describe_error": f"{type(exc).__name__}: {exc}"}
            out.update({k: str(v) for k, v in facts.items() if v not in (None, "")})
        return out

    def record(self, names: Iterable[str] | None = None) -> dict[str, Mapping[str, Any]]:
        """The probe layers' records for a bundle (only layers whose evidence was had)."""
        out: dict[str, Mapping[str, Any]] = {}
        for n in names if names is not None else self.layers:
            lay = self.layers[n]
            if lay.record is None or lay.scope is not self.scope:
                continue
            try:
                ev = self.evidence(n)
            except Unavailable:
                continue
            out[n] = lay.record(ev)
        return out

    # -- judging -----------------------------------------------------------------------------
    def check(self, check_id: str) -> Check:
        if self._checks is None:
            self._checks = catalogue(self.layers)
        return self._checks.get(check_id)

    def simulated(self, chk: Check) -> str | None:
        """Why this check's evidence comes from a stand-in, or None when it is real.

        Whoever runs the suite, a cluster layer's evidence answers from what it recorded
        (the node objects a pod ran on, the pod's own events: :mod:`kgc.kube.origin`):
        per check, a ``stand_ins_for(check_id)`` method returning the stand-ins that one
        check's verdict rests on (e.g. ``["pod gpu-0 on kwok node kgc-gpu-1"]``), else a
        layer-wide ``stand_ins()``; ``[]`` when every subject is real, ``None`` when it
        cannot tell (older records). Only what cannot be told falls back to the profile:
        in a profile that declares its cluster simulated (``cluster.simulated``: the lab)
        every such verdict is marked; elsewhere it is not (nothing shows a stand-in)."""
        for pattern, why in self.profile.simulated.items():
            if fnmatch.fnmatchcase(chk.id, pattern):
                return why
        lay = self.layers.get(chk.layer)
        if lay is None or lay.scope is not Scope.CLUSTER:
            return None
        ev = self._evidence.get(chk.layer)
        per_check = getattr(ev, "stand_ins_for", None)
        probe = getattr(ev, "stand_ins", None)
        named = (per_check(chk.id) if callable(per_check)
                 else probe() if callable(probe) else None)
        if isinstance(named, list | tuple) and all(isinstance(n, str) for n in named):
            return f"evidence from stand-ins: {', '.join(named)}" if named else None
        if self.profile.cluster.simulated:
            return "the cluster's nodes and pods are simulated (kwok), not real microVMs"
        return None

    def judge(self, check_id: str) -> Verdict:
        chk = self.check(check_id)
        try:
            ev = self.evidence(chk.layer)
        except Unavailable as u:
            out = u.outcome()
            v = Check(chk.id, chk.layer, chk.title, chk.severity, chk.remediation,
                      lambda _e, _p: out).judge(None, None, self.name)
        else:
            v = chk.judge(ev, self.profile, self.name)
        return v.with_origin(self.target.origin, self.simulated(chk))

    def judge_all(self, layer_names: Iterable[str] | None = None) -> list[Verdict]:
        names = [n for n in self.layers if self.layers[n].scope is self.scope] \
            if layer_names is None else list(layer_names)
        return [self.judge(chk.id) for n in names for chk in self.layers[n].checks]


def error_verdict(chk: Check, target: str, reason: str, remediation: str) -> Verdict:
    out = Outcome(Status.ERROR, reason, {}, remediation)
    return Check(chk.id, chk.layer, chk.title, chk.severity, chk.remediation,
                 lambda _e, _p: out).judge(None, None, target)
