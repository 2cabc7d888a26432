"""Layer ``runtime`` — containerd's real NRI state, the Kata handler and Kata's VFIO config.

The static :data:`QUERY` covers the default paths and joins the node's one batched
collection. A profile that moves paths (another config file, socket, Kata config, binary)
costs one extra round trip for exactly the paths the static query lacks.
"""

from kgc.core.engine import Context, Layer
from kgc.layers.runtime.checks import CHECKS
from kgc.layers.runtime.collect import (
    QUERY,
    RuntimeEvidence,
    extra_query,
    merge_snapshots,
    parse,
    query_for,
)


def gather(ctx: Context) -> RuntimeEvidence:
    snap = ctx.host()
    extra = extra_query(ctx.profile.runtime)
    if extra is not None and not ctx.offline:
        snap = merge_snapshots(snap, ctx.target.collect(extra))
    return parse(snap, ctx.profile)


LAYER = Layer(name="runtime", checks=CHECKS, gather=gather, query=QUERY)

__all__ = ["LAYER", "QUERY", "RuntimeEvidence", "parse", "query_for"]
