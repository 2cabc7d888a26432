"""Evaluator helpers shared by several host layers (pure, no I/O)."""

from __future__ import annotations

from kgc.core.model import Outcome, skipped
from kgc.core.profile import Profile


def no_targets(profile: Profile) -> Outcome:
    """The skip every per-target check gives on a node without passthrough targets."""
    sels = ", ".join(s.describe() for s in profile.host.passthrough.targets) or "(none)"
    return skipped(
        f"no PCI device on this node matches the profile's targets ({sels}); "
        "see iommu.targets-present"
    )
