"""Layer ``keda``: KEDA scale-up latency per phase, Kata vs the baseline runtime.

Provisional, export-only: the lead owns this file and wires the layer into the engine.
"""

from kgc.layers.keda.checks import CHECKS, analyse, keda_profile
from kgc.layers.keda.evidence import KedaEvidence
from kgc.layers.keda.profile import KedaProfile

__all__ = ["CHECKS", "KedaEvidence", "KedaProfile", "analyse", "keda_profile"]
