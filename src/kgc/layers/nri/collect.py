"""Live NRI evidence: run the kgc probe against the node's NRI socket and trigger events.

The probe must run where the socket is (a unix socket does not cross the network):
``local://`` targets run it directly. For a remote node, either run ``kgc`` on the node, or
forward the socket over ssh and pass its local path as the ``nri_socket`` option::

    ssh -N -L /tmp/kgc-nri.sock:/var/run/nri/nri.sock root@node &
    ssh -N -L /tmp/kgc-cri.sock:/run/containerd/containerd.sock root@node &

(the CRI socket only when the probe should start its own probe pod; ``cri_socket``).
Recorded evidence replays from a bundle's ``nri`` entry.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kgc.core.hostfs import (
    want_bool,
    want_list,
    want_mapping,
    want_number,
    want_str,
)
from kgc.core.model import EvidenceError
from kgc.core.profile import Profile
from kgc.cri.client import CriClient, CriError, ProbePod
from kgc.nri.probe import ADJUST_ENV, PROBE_LABEL, NriProbe, ObservedEvent, ProbeError


@dataclass
class NriEvidence:
    socket_path: str
    mode: str = "live"  # live | bundle | unavailable
    unavailable: str = ""
    runtime_context: dict[str, Any] = field(default_factory=dict)
    socket_exists: bool = False
    connect_error: str = ""
    handshake: dict[str, Any] = field(default_factory=dict)
    probe_error: str = ""
    trigger: str = "cri"
    trigger_error: str = ""
    pod: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    adjustment: dict[str, Any] = field(default_factory=dict)
    latencies_ms: dict[str, float] = field(default_factory=dict)
    cleanup_errors: list[str] = field(default_factory=list)
    waited_s: float = 0.0
    # the CRI runtime's own status (Status RPC): its conditions, or why it did not answer
    # ("unknown service runtime.v1.RuntimeService": containerd runs without its CRI plugin)
    cri_status: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any, where: str = "nri") -> NriEvidence:
        """Load a recorded ``nri`` bundle entry. Anything of the wrong shape raises one
        :class:`EvidenceError` line naming the field; unknown keys are ignored."""
        d = want_mapping(d, where)
        if "socket_path" not in d:
            raise EvidenceError(f"{where}.socket_path: missing")
        kw: dict[str, Any] = {}
        for name in ("socket_path", "mode", "unavailable", "connect_error", "probe_error",
                     "trigger", "trigger_error"):
            if name in d:
                kw[name] = want_str(d[name], f"{where}.{name}")
        if "socket_exists" in d:
            kw["socket_exists"] = want_bool(d["socket_exists"], f"{where}.socket_exists")
        if "waited_s" in d:
            kw["waited_s"] = want_number(d["waited_s"], f"{where}.waited_s")
        for name in ("runtime_context", "handshake", "pod", "adjustment", "cri_status"):
            if name in d:
                kw[name] = dict(want_mapping(d[name], f"{where}.{name}"))
        hs = kw.get("handshake", {})
        if "handshake_ms" in hs:
            want_number(hs["handshake_ms"], f"{where}.handshake.handshake_ms", optional=True)
        if "synchronized" in hs:
            want_bool(hs["synchronized"], f"{where}.handshake.synchronized")
        if "latencies_ms" in d:
            lat = want_mapping(d["latencies_ms"], f"{where}.latencies_ms")
            kw["latencies_ms"] = {k: want_number(v, f"{where}.latencies_ms[{k!r}]")
                                  for k, v in lat.items()}
        if "cleanup_errors" in d:
            w = f"{where}.cleanup_errors"
            kw["cleanup_errors"] = [want_str(x, f"{w}[{i}]")
                                    for i, x in enumerate(want_list(d["cleanup_errors"], w))]
        if "events" in d:
            w = f"{where}.events"
            kw["events"] = [_event(x, f"{w}[{i}]")
                            for i, x in enumerate(want_list(d["events"], w))]
        return cls(**kw)

    # -- derived ---------------------------------------------------------------------
    @property
    def token(self) -> str:
        return str(self.pod.get("token", ""))

    def own_events(self) -> list[dict[str, Any]]:
        if self.trigger == "cri":
            return [
                e for e in self.events if e.get("pod_labels", {}).get(PROBE_LABEL) == self.token
            ]
        return list(self.events)


_EVENT_TEXT = ("via", "pod_id", "pod_name", "pod_namespace", "container_id", "container_name")


def _event(x: Any, where: str) -> dict[str, Any]:
    e = dict(want_mapping(x, where))
    if "event" not in e:
        raise EvidenceError(f"{where}.event: missing")
    want_str(e["event"], f"{where}.event")
    for k in _EVENT_TEXT:
        if k in e:
            want_str(e[k], f"{where}.{k}")
    if "pod_labels" in e:
        labels = want_mapping(e["pod_labels"], f"{where}.pod_labels")
        for k, v in labels.items():
            want_str(v, f"{where}.pod_labels[{k!r}]")
    if "adjusted" in e:
        want_bool(e["adjusted"], f"{where}.adjusted")
    if "t_ms" in e:
        want_number(e["t_ms"], f"{where}.t_ms")
    return e


def _event_dict(ev: ObservedEvent, t0: float) -> dict[str, Any]:
    d = ev.to_dict()
    d["t_ms"] = round((ev.at - t0) * 1000.0, 3)
    d.pop("at", None)
    return d


def cri_status(cri_socket: str | None) -> dict[str, Any]:
    """The CRI runtime's conditions, or the error it answered with (never raises)."""
    if not cri_socket or not Path(cri_socket).exists():
        return {"error": f"CRI socket {cri_socket} not found"}
    try:
        with CriClient(cri_socket, timeout_s=5.0) as c:
            return {"conditions": c.status()}
    except CriError as exc:
        return {"error": str(exc)}


def run_probe(
    profile: Profile,
    socket_path: str,
    cri_socket: str | None,
    sandbox_image: str | None,
    probe_image: str | None,
    log_root: Path | None = None,
    runtime_context: dict[str, Any] | None = None,
) -> NriEvidence:
    """Connect the probe, trigger (or wait for) pod/container events, and clean up."""
    np = profile.nri
    ev = NriEvidence(
        socket_path=socket_path, trigger=np.trigger, runtime_context=runtime_context or {}
    )
    ev.socket_exists = Path(socket_path).exists()
    ev.cri_status = cri_status(cri_socket)
    token = uuid.uuid4().hex
    adjust = np.allow_adjustment and np.trigger == "cri" and bool(probe_image)
    probe = NriProbe(
        socket_path,
        name=np.plugin_name,
        index=np.plugin_index,
        adjust_token=token if adjust else None,
    )
    t0 = time.monotonic()
    try:
        try:
            hs = probe.connect(timeout_s=5.0)
        except ProbeError as exc:
            ev.connect_error = str(exc)
            ev.handshake = probe.handshake.to_dict()
            return ev
        ev.handshake = hs.to_dict()
        if np.trigger == "cri":
            _trigger(
                ev, probe, profile, cri_socket, sandbox_image, probe_image, token, adjust, log_root
            )
        else:
            got = probe.wait_for(lambda e: True, np.event_timeout_s)
            ev.waited_s = np.event_timeout_s if got is None else round(time.monotonic() - t0, 3)
        ev.probe_error = probe.error
    finally:
        probe.close()
        ev.events = [_event_dict(e, t0) for e in probe.events]
    return ev


def _trigger(
    ev: NriEvidence,
    probe: NriProbe,
    profile: Profile,
    cri_socket: str | None,
    sandbox_image: str | None,
    probe_image: str | None,
    token: str,
    adjust: bool,
    log_root: Path | None,
) -> None:
    np = profile.nri
    if not cri_socket or not Path(cri_socket).exists():
        ev.trigger_error = f"CRI socket {cri_socket} not found: cannot start a probe pod"
        return
    if not sandbox_image:
        ev.trigger_error = (
            "no sandbox image known for the probe pod (set nri.sandbox_image in the profile)"
        )
        return
    own_dir = log_root is None
    log_dir = Path(tempfile.mkdtemp(prefix="kgc-nri-logs-")) if log_root is None else log_root
    try:
        _run_pod(ev, probe, np, cri_socket, sandbox_image, probe_image, token, adjust, log_dir)
    finally:
        if own_dir:
            shutil.rmtree(log_dir, ignore_errors=True)


def _run_pod(
    ev: NriEvidence,
    probe: NriProbe,
    np: Any,
    cri_socket: str,
    sandbox_image: str,
    probe_image: str | None,
    token: str,
    adjust: bool,
    log_dir: Path,
) -> None:
    with CriClient(cri_socket) as client:
        pod = ProbePod(
            client,
            sandbox_image=sandbox_image,
            image=probe_image or "",
            log_dir=log_dir,
            labels={PROBE_LABEL: token},
        )
        ev.pod = {
            "name": pod.name,
            "namespace": pod.namespace,
            "token": token,
            "image": probe_image,
        }
        ev.adjustment = {
            "requested": adjust,
            "env": ADJUST_ENV,
            "expected": token if adjust else None,
        }
        mine = lambda e: e.pod_labels.get(PROBE_LABEL) == token  # noqa: E731
        try:
            pod.run_sandbox()
            ev.pod["id"] = pod.pod_id
            got = probe.wait_for(
                lambda e: mine(e) and e.event == "RUN_POD_SANDBOX", np.event_timeout_s
            )
            if got is not None:
                ev.latencies_ms["run_pod_sandbox"] = round(
                    (got.at - pod.timings["run_pod_sandbox_call"]) * 1e3, 3
                )
            if probe_image:
                pod.create_container()
                ev.pod["container_id"] = pod.container_id
                got = probe.wait_for(
                    lambda e: mine(e) and e.event == "CREATE_CONTAINER", np.event_timeout_s
                )
                if got is not None:
                    ev.latencies_ms["create_container"] = round(
                        (got.at - pod.timings["create_container_call"]) * 1e3, 3
                    )
                pod.start_container()
                if adjust:
                    rc, out = pod.exec(["/bin/sh", "-c", f'printf %s "${ADJUST_ENV}"'])
                    ev.adjustment["exec_rc"] = rc
                    ev.adjustment["seen"] = out
        except CriError as exc:
            ev.trigger_error = str(exc)
        finally:
            ev.cleanup_errors = pod.remove()
