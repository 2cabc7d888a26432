"""Blank text is missing evidence: the one rule the cluster layers' records share.

A value the API, a guest or a bundle gave as ``""`` or as whitespace says nothing: a node
whose ``status.nodeInfo.kernelVersion`` is ``""`` has an unknown kernel, not a kernel named
``""`` that a guest's kernel differs from. Checks test optional evidence with ``is None``,
so the records turn blank text into ``None`` when they are built (from the API, from a
guest's output, or from a bundle) and no check can mistake it for a value.

Only *optional* text fields (typed ``... | None``) are cleared: a required field keeps its
type, and its evaluator decides what an empty value means. Error texts (``create_error``,
``log_error``) are optional too but their presence is what counts, so a record that keeps
them opts out by name (``keep_blank``).

A record owned by this module's users inherits :class:`BlankIsMissing`; a record another
module builds (the guest's :class:`~kgc.evidence.guest.GuestEvidence`) is passed through
:func:`without_blanks` where a layer takes it in.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")


def present(value: object) -> str | None:
    """``value`` when it is a string carrying something, else ``None`` (not a string,
    empty, or whitespace only). The value itself is kept verbatim."""
    return value if isinstance(value, str) and value.strip() else None


def _optional_text(f: dataclasses.Field[Any]) -> bool:
    # annotations are strings under ``from __future__ import annotations``
    t = f.type if isinstance(f.type, str) else repr(f.type)
    return "str" in t and "None" in t and "tuple" not in t and "Mapping" not in t \
        and "dict" not in t


def clear_blanks(obj: Any, keep: tuple[str, ...] = ()) -> None:
    """In a frozen dataclass's ``__post_init__``: every optional text field that is blank
    becomes ``None`` (fields named in ``keep`` stay as they are)."""
    for f in dataclasses.fields(obj):
        if f.name in keep or not _optional_text(f):
            continue
        v = getattr(obj, f.name)
        if isinstance(v, str) and present(v) is None:
            object.__setattr__(obj, f.name, None)


def without_blanks(obj: T, keep: tuple[str, ...] = ()) -> T:
    """A copy of a frozen dataclass (and of the dataclasses it holds, directly or in
    tuples) whose blank optional text fields are ``None``; ``obj`` itself when nothing is
    blank. For records another module owns (the guest's), cleared where a layer takes them
    in."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return obj
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if f.name in keep:
            continue
        if isinstance(v, str):
            if _optional_text(f) and present(v) is None:
                changes[f.name] = None
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            nv = without_blanks(v, keep)
            if nv is not v:
                changes[f.name] = nv
        elif isinstance(v, tuple) and any(dataclasses.is_dataclass(x) for x in v):
            nt = tuple(without_blanks(x, keep) for x in v)
            if any(a is not b for a, b in zip(nt, v, strict=True)):
                changes[f.name] = nt
    return dataclasses.replace(obj, **changes) if changes else obj  # type: ignore[type-var]


class BlankIsMissing:
    """Base of a frozen dataclass record whose blank optional text is missing: every path
    that builds the record (an API builder, ``from_dict``, a test) goes through
    ``__post_init__``, so the rule holds at one place. ``keep_blank`` names optional text
    fields whose presence, even blank, is the evidence (an error text)."""

    keep_blank: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        clear_blanks(self, self.keep_blank)
