"""Layer ``nri`` — the live NRI probe: a real plugin registers on the node's NRI socket and
must OBSERVE pod/container events (and, on its own probe pod, have its adjustment applied).

It acts on the node (registers a plugin, starts one labelled probe pod through CRI), so it
runs only with ``--nri-probe``. The socket must be reachable from kgc: the machine running
kgc itself, or a remote node's socket forwarded with ``ssh -L`` and given as
``--nri-socket`` (see :mod:`kgc.layers.nri.collect`). A bundle replays its record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgc.core.engine import Context, Unavailable
from kgc.core.layer import Gate, Layer, Scope
from kgc.core.target import NodeTarget
from kgc.evidence.containerd import DEFAULT_NRI_SOCKET, get_path, nri_state
from kgc.evidence.containerd_load import cri_state, nri_edits, render_edits
from kgc.layers.nri.checks import CHECKS
from kgc.layers.nri.collect import NriEvidence, run_probe

REMOTE_HELP = (
    "the NRI socket is a unix socket on the node: run kgc on the node itself, or forward it "
    "(`ssh -N -L /tmp/kgc-nri.sock:/var/run/nri/nri.sock root@NODE` and, for the probe pod, "
    "`-L /tmp/kgc-cri.sock:/run/containerd/containerd.sock`) and pass "
    "--nri-socket /tmp/kgc-nri.sock --cri-socket /tmp/kgc-cri.sock"
)


def _runtime_facts(ctx: Context) -> dict[str, Any]:
    """NRI state and sandbox image as the runtime layer sees them (when it is loaded)."""
    if "runtime" not in ctx.layers:
        return {}
    try:
        rev = ctx.evidence("runtime")
    except Unavailable:
        return {}
    st = nri_state(rev)
    cfg = rev.effective
    sandbox = get_path(cfg, "plugins", "io.containerd.grpc.v1.cri", "sandbox_image") or get_path(
        cfg, "plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox"
    )
    cri = cri_state(rev)
    return {
        "enabled": st.enabled,
        "why": st.why,
        # the remedy computed from this node's config, and whether CRI really started
        "nri_fix": render_edits(nri_edits(rev, ctx.profile.runtime.nri_socket,
                                          DEFAULT_NRI_SOCKET)),
        "cri_loaded": cri.loaded,
        "cri_failure": cri.describe() if cri.loaded is False else "",
        "cri_fix": cri.fix() if cri.loaded is False else "",
        "disable_connections": st.disable_connections_value,
        "socket_path": st.socket_path,
        "sandbox_image": sandbox,
    }


def gather(ctx: Context) -> NriEvidence:
    np = ctx.profile.nri
    opts = ctx.options
    facts = _runtime_facts(ctx)
    socket_path = (
        opts.get("nri_socket") or facts.get("socket_path") or ctx.profile.runtime.nri_socket
    )
    t = ctx.target
    if isinstance(t, NodeTarget) and t.offline_tree:
        return NriEvidence(socket_path=socket_path, mode="unavailable",
                           unavailable=f"{t.name} is an offline tree, not a running node",
                           runtime_context=facts)
    if not (isinstance(t, NodeTarget) and t.sockets_reachable) and not opts.get("nri_socket"):
        return NriEvidence(socket_path=socket_path, mode="unavailable", unavailable=REMOTE_HELP,
                           runtime_context=facts)
    return run_probe(
        ctx.profile,
        socket_path,
        cri_socket=opts.get("cri_socket") or np.cri_socket,
        sandbox_image=opts.get("sandbox_image") or np.sandbox_image or facts.get("sandbox_image"),
        probe_image=opts.get("probe_image") or np.probe_image,
        runtime_context=facts,
    )


def _record(ev: NriEvidence) -> Mapping[str, Any]:
    return ev.to_dict()


def _replay(d: Mapping[str, Any]) -> NriEvidence:
    ev = NriEvidence.from_dict(dict(d))
    if ev.mode != "unavailable":
        ev.mode = "bundle"
    return ev


LAYER = Layer(
    name="nri",
    scope=Scope.NODE,
    title="a live NRI plugin observes real pod/container events and its adjustment applies",
    number=3,
    card="containerd + NRI",
    checks=CHECKS,
    markers=("host", "probe"),
    gather=gather,
    record=_record,
    replay=_replay,
    gate=Gate("nri_probe", "--nri-probe",
              "it registers an NRI plugin and starts a labelled probe pod on the node"),
)

__all__ = ["LAYER", "NriEvidence", "gather", "run_probe"]
