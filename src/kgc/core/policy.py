"""The verdict policy: what a release gate accepts (the profile's ``policy:`` section).

A verdict file (``kgc-verdict/1``) says what each check found. The policy says what that
means for a release:

- which failures **block** it — by severity (``block_severities``) or by check id glob
  (``block_checks``), minus the known issues it **waives** (``waive``: glob -> why);
- how a ``warn`` counts: ``pass`` (a warn is certified with a note), ``per-check`` (a warn on
  a blocking check blocks like a fail) or ``per-layer`` (a required layer counts as judged
  only when at least one of its checks passed: warnings alone do not certify a layer);
- how a ``skip`` counts: ``per-layer`` (a required layer needs at least one judged check on
  every target) or ``per-check`` (no check of a required layer may skip, except the globs in
  ``skip_allowed`` — Sonobuoy's "a certification run may not skip any test");
- which **layers** a certification requires (``require_layers``; unset = every layer this
  build of kgc has) and which an image check requires (``image_require_layers``: the layers
  that can be judged from files). A run that left a required layer out (not in
  ``run.layers_judged``) cannot gate green;
- whether results from a lab stand-in (``simulated: true``) and results replayed from a
  bundle (``origin: bundle``) are accepted. A result that is not accepted neither passes nor
  blocks: its layer is simply not judged by it.

The model is strict like every profile section (unknown keys refused, frozen) and has no
dependency on the rest of kgc. It is a profile section, so it lives in core beside
:mod:`kgc.core.profile`, which embeds it; the gate (``kgc.gate``, above core) applies it.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SeverityName = Literal["blocker", "critical", "normal", "minor", "trivial"]
SEVERITIES: tuple[str, ...] = ("blocker", "critical", "normal", "minor", "trivial")

# A check-id glob: the id alphabet plus fnmatch's * ? [ ] (no path or shell syntax).
_GLOB = re.compile(r"^[A-Za-z0-9_.\-*?\[\]!]+$")
# The layers an image check can judge from files alone (kgc image check).
FILE_LAYERS: tuple[str, ...] = ("persistence", "runtime")


def _globs(values: tuple[str, ...]) -> tuple[str, ...]:
    for v in values:
        if not _GLOB.match(v):
            raise ValueError(f"{v!r} is not a check-id glob (letters, digits, . _ - * ? [ ])")
    return values


class Policy(BaseModel):
    """Release gating rules (profile section ``policy:``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # a fail or error of a check with one of these severities blocks the release
    block_severities: tuple[SeverityName, ...] = ("blocker", "critical", "normal")
    # check-id globs whose fail or error blocks whatever their severity
    block_checks: tuple[str, ...] = ()
    # check-id glob -> why it does not block (a known issue with its ticket): shown, never
    # blocking. A waiver covers fail, error, warn and skip of the matching checks.
    waive: dict[str, str] = Field(default_factory=dict)
    warn: Literal["pass", "per-check", "per-layer"] = "pass"
    skip: Literal["per-layer", "per-check"] = "per-layer"
    # with skip: per-check, check-id globs that may skip (e.g. a check for hardware the
    # platform does not have)
    skip_allowed: tuple[str, ...] = ()
    # layers a certification requires (None: every layer this build of kgc has)
    require_layers: tuple[str, ...] | None = None
    # layers a node-image check (`kgc image check`) requires: those judged from files
    image_require_layers: tuple[str, ...] = FILE_LAYERS
    accept_simulated: bool = False
    accept_replayed: bool = True

    @field_validator("block_checks", "skip_allowed")
    @classmethod
    def _check_globs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _globs(v)

    @field_validator("waive")
    @classmethod
    def _check_waive(cls, v: dict[str, str]) -> dict[str, str]:
        _globs(tuple(v))
        for k, why in v.items():
            if not why.strip():
                raise ValueError(f"waiver {k!r} needs a reason (a known issue, a ticket)")
        return v

    @field_validator("require_layers", "image_require_layers")
    @classmethod
    def _check_layers(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        for name in v:
            if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
                raise ValueError(f"{name!r} is not a layer name")
        return v

    # -- pure helpers (no I/O) ----------------------------------------------------------
    def waiver(self, check: str) -> str | None:
        for pat, why in self.waive.items():
            if fnmatch.fnmatchcase(check, pat):
                return f"{pat}: {why}"
        return None

    def blocks_on_failure(self, check: str, severity: str) -> bool:
        """Does a fail/error of this check block (before waivers)?"""
        return severity in self.block_severities or any(
            fnmatch.fnmatchcase(check, p) for p in self.block_checks)

    def may_skip(self, check: str) -> bool:
        return any(fnmatch.fnmatchcase(check, p) for p in self.skip_allowed)

    def required(self, all_layers: tuple[str, ...], image: bool) -> tuple[str, ...]:
        if image:
            return self.image_require_layers
        return all_layers if self.require_layers is None else self.require_layers
