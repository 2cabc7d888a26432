"""Layer ``nri`` — the live NRI probe: a real plugin registers on the node's NRI socket and
must OBSERVE pod/container events (and, on its own probe pod, have its adjustment applied).

``gather`` runs the probe where the socket is reachable: a ``local://`` target directly;
a remote node through a forwarded socket given as the ``nri_socket`` option (see
:mod:`kgc.layers.nri.collect`); a bundle replays its recorded ``nri`` evidence.
"""

from __future__ import annotations

from typing import Any

from kgc.core.engine import Context, Layer
from kgc.core.target import LiveTarget, TargetError
from kgc.layers.nri.checks import CHECKS
from kgc.layers.nri.collect import NriEvidence, run_probe

REMOTE_HELP = (
    "the NRI socket is a unix socket on the node: run kgc on the node itself, or forward it "
    "(`ssh -N -L /tmp/kgc-nri.sock:/var/run/nri/nri.sock root@NODE` and, for the probe pod, "
    "`-L /tmp/kgc-cri.sock:/run/containerd/containerd.sock`) and pass the options "
    "nri_socket=/tmp/kgc-nri.sock cri_socket=/tmp/kgc-cri.sock"
)


def _runtime_facts(ctx: Context) -> dict[str, Any]:
    """NRI state and sandbox image as the runtime layer sees them (when it is loaded)."""
    if "runtime" not in ctx.layers:
        return {}
    from kgc.evidence.containerd import get_path, nri_state

    try:
        rev = ctx.evidence("runtime")
    except TargetError:
        return {}
    st = nri_state(rev)
    cfg = rev.effective
    sandbox = get_path(cfg, "plugins", "io.containerd.grpc.v1.cri", "sandbox_image") or get_path(
        cfg, "plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox"
    )
    return {
        "enabled": st.enabled,
        "why": st.why,
        "disable_connections": st.disable_connections_value,
        "socket_path": st.socket_path,
        "sandbox_image": sandbox,
    }


def gather(ctx: Context) -> NriEvidence:
    np = ctx.profile.nri
    if ctx.offline:
        rec = ctx.bundle_extra("nri")
        if isinstance(rec, dict):
            ev = NriEvidence.from_dict(rec)
            ev.mode = "bundle"
            return ev
        return NriEvidence(
            socket_path="",
            mode="unavailable",
            unavailable="the evidence bundle has no recorded `nri` entry",
        )
    opts = ctx.options
    facts = _runtime_facts(ctx)
    socket_path = (
        opts.get("nri_socket") or facts.get("socket_path") or ctx.profile.runtime.nri_socket
    )
    target = ctx.target
    local = (
        isinstance(target, LiveTarget)
        and target.spec in ("local://", "local", "")
        and not target.root
    )
    if not local and not opts.get("nri_socket"):
        why = (
            REMOTE_HELP
            if not (isinstance(target, LiveTarget) and target.root)
            else ("the target is an offline tree (KGC_ROOT), not a running node")
        )
        return NriEvidence(
            socket_path=socket_path, mode="unavailable", unavailable=why, runtime_context=facts
        )
    return run_probe(
        ctx.profile,
        socket_path,
        cri_socket=opts.get("cri_socket") or np.cri_socket,
        sandbox_image=opts.get("sandbox_image") or np.sandbox_image or facts.get("sandbox_image"),
        probe_image=opts.get("probe_image") or np.probe_image,
        runtime_context=facts,
    )


LAYER = Layer(name="nri", checks=CHECKS, gather=gather, query=None)

__all__ = ["LAYER", "NriEvidence", "gather", "run_probe"]
