"""Layer ``runtime`` — containerd's real NRI state, the Kata handler and Kata's VFIO config.

The layer's query is derived from the profile (:func:`query_for`: config file, socket,
Kata config, binary paths) and joins the node's one batched collection, so a profile that
moves paths costs no extra round trip, and a bundle records exactly what was judged.
"""

from kgc.core.engine import Context, Layer
from kgc.core.profile import Profile
from kgc.layers.runtime.checks import CHECKS
from kgc.layers.runtime.collect import QUERY, RuntimeEvidence, parse, query_for


def gather(ctx: Context) -> RuntimeEvidence:
    return parse(ctx.host(), ctx.profile)


def _query(profile: Profile):  # type: ignore[no-untyped-def]
    return query_for(profile.runtime)


LAYER = Layer(name="runtime", checks=CHECKS, gather=gather, query=_query)

__all__ = ["LAYER", "QUERY", "RuntimeEvidence", "parse", "query_for"]
