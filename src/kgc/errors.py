"""The errors every part of kgc raises, at the bottom of the import graph.

:class:`EvidenceError` is raised by evidence parsers in every layer, and by ``kgc.kube``
too (a recorded node origin of the wrong shape), while ``kgc.kube`` sits below
``kgc.core`` and never imports it (tests/import_rules.yaml). ``kgc.core.model`` re-exports
it, so ``from kgc.core.model import EvidenceError`` keeps working.
"""

from __future__ import annotations


class EvidenceError(ValueError):
    """Recorded or collected evidence is malformed (a bundle part of the wrong shape, a
    field of the wrong type). The engine turns it into an ``error`` verdict for every check
    of the layer, naming what was wrong; it is never a pass and never a crash."""
