"""One record/replay for evidence dataclasses: ``dump`` to the bundle's JSON, ``load`` back.

The cluster layers (gpu, sizing, keda) record their evidence as frozen dataclasses; a bundle
holds them as JSON objects whose keys are the field names. :func:`dump` and :func:`load` do
that from the fields and their type hints (nested records, ``X | None``, ``tuple[X, ...]``,
``list[X]``, ``Mapping[str, X]``, ``Literal[...]``, ``str``/``int``/``float``/``bool`` and
``Any`` for raw JSON such as an API object), so no layer hand-writes a converter.

``load`` is the strict side: a bundle is input, and evidence of the wrong shape must never
become a verdict. Every refusal is one :class:`~kgc.core.model.EvidenceError` line naming
the field path (``keda.kata.repetitions[0].pods[2].observed.ready.mono: expected a number,
got 'x'``); ``bool`` is never an integer, numbers are finite, ``Any`` is JSON (string keys,
finite numbers, bounded depth). Which keys may be left out is the record's declaration:

* :class:`Rules` on the class (``recorded_as``): ``keys=DEFAULT`` — a key may be absent when
  its field has a default; ``keys=OPTIONAL`` — only when its type is ``X | None`` (it reads
  as ``None``); ``closed`` refuses unknown keys; ``tag`` is a fixed ``(key, value)`` the
  record carries first (a format version) and ``load`` requires;
* :func:`key` on a field (``field(metadata=key(...))``): ``required`` (present even though
  it has a default), ``optional`` (absent or null gives the default), ``one_of`` /
  ``keys_one_of`` (allowed values / mapping keys), ``minimum``, ``check`` (a semantic check
  of the loaded value), ``omit_if_none`` (left out of the dump while the named field is
  ``None``: a field added later keeps older records byte-identical) and ``load``/``dump``
  for a type another module records itself.

Why not pydantic's ``TypeAdapter`` or ``dacite``: both read stdlib dataclasses, but neither
keeps the records' contract — dacite takes ``True`` for an ``int`` and ``nan`` for a number
and fills any ``Optional`` key that is absent; pydantic's strict mode refuses a JSON list for
a ``tuple`` field and its lax mode turns ``"1"`` into ``1``; neither knows a key that must be
present although its field has a default, and their messages are not the one-line field
paths the bundle loaders promise. The rules here are those the hand-written converters had.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from kgc.core.model import EvidenceError

T = TypeVar("T")
R = TypeVar("R", bound="Record")

DEFAULT: Literal["default"] = "default"
OPTIONAL: Literal["optional"] = "optional"
MAX_DEPTH = 32  # raw JSON deeper than this is refused (and never recursed into)


@dataclass(frozen=True)
class Rules:
    """How one record class's JSON object is read (see the module docstring)."""

    keys: Literal["default", "optional"] = DEFAULT
    closed: bool = False
    tag: tuple[str, str] | None = None


@dataclass(frozen=True)
class Key:
    """How one field is read and written (built by :func:`key`)."""

    required: bool = False
    optional: bool = False
    one_of: tuple[str, ...] = ()
    keys_one_of: tuple[str, ...] = ()
    minimum: float | None = None
    check: Callable[[Any, str], None] | None = None
    omit_if_none: str | None = None
    # left out of the dump while at its default: a field added later keeps the bundles
    # written before it (and every bundle that does not use it) byte-for-byte what they were
    omit_if_default: bool = False
    load: Callable[[Any, str], Any] | None = None
    dump: Callable[[Any], Any] | None = None


_PLAIN = Key()


def key(**kw: Any) -> dict[str, Key]:
    """A field's ``metadata``: ``field(default=(), metadata=key(optional=True))``."""
    return {"record": Key(**kw)}


class Record:
    """Base of an evidence dataclass: ``to_dict``/``from_dict`` are :func:`dump`/:func:`load`.
    ``record_name`` is the path a top-level record's errors start with."""

    recorded_as: ClassVar[Rules] = Rules()
    record_name: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dump(self)
        return out

    @classmethod
    def from_dict(cls: type[R], d: Any, where: str | None = None) -> R:
        return load(cls, d, cls.record_name if where is None else where)


# ------------------------------------------------------------------------------- dump
def dump(obj: Any) -> Any:
    """A record (or any value a record holds) as JSON-able data: a dataclass becomes an
    object of its fields (in declaration order), tuples become lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        plan = _plan(type(obj))
        rules = _rules(type(obj))
        out: dict[str, Any] = {rules.tag[0]: rules.tag[1]} if rules.tag else {}
        for f in plan:
            if f.key.omit_if_none and getattr(obj, f.key.omit_if_none) is None:
                continue
            v = getattr(obj, f.name)
            if f.key.omit_if_default and f.has_default and v == f.absent():
                continue
            out[f.name] = f.key.dump(v) if f.key.dump is not None and v is not None else dump(v)
        return out
    if isinstance(obj, Mapping):
        return {k: dump(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [dump(x) for x in obj]
    return obj


# ------------------------------------------------------------------------------- load
def load(cls: type[T], data: Any, where: str) -> T:
    """``data`` (a bundle's JSON) as a ``cls`` record; :class:`EvidenceError` naming the
    field path (starting at ``where``) on anything of the wrong shape."""
    return _record(cls, data, where)


@dataclass(frozen=True)
class _Field:
    name: str
    hint: Any
    key: Key
    has_default: bool
    default: Any  # the value, or a zero-argument factory when ``factory``
    factory: bool
    nullable: bool

    def absent(self) -> Any:
        if self.factory:
            return self.default()
        return self.default if self.has_default else None


def _rules(cls: type) -> Rules:
    r = getattr(cls, "recorded_as", None)
    return r if isinstance(r, Rules) else Rules()


_PLANS: dict[type, tuple[_Field, ...]] = {}


def _plan(cls: type) -> tuple[_Field, ...]:
    """A record class's fields with their hints and keys, read once per class."""
    if cls in _PLANS:
        return _PLANS[cls]
    hints = get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        k = f.metadata.get("record", _PLAIN)
        has_value = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        out.append(_Field(f.name, hints[f.name], k, has_value or has_factory,
                          f.default_factory if has_factory else f.default, has_factory,
                          _nullable(hints[f.name])))
    _PLANS[cls] = tuple(out)
    return _PLANS[cls]


def _nullable(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp)


def _record(cls: type[T], data: Any, path: str) -> T:
    m = obj(data, path)
    rules = _rules(cls)
    if rules.tag is not None:
        name, want = rules.tag
        got = _str(_present(m, name, path), _join(path, name))
        if got != want:
            raise EvidenceError(f"{_join(path, name)}: expected {want!r}, got {got!r}")
    kw: dict[str, Any] = {}
    for f in _plan(cls):
        p = _join(path, f.name)
        if f.name not in m:
            may = f.key.optional or (f.has_default if rules.keys == DEFAULT else f.nullable)
            if f.key.required or not may:
                raise EvidenceError(f"{p}: missing")
            kw[f.name] = f.absent()
            continue
        v = m[f.name]
        if v is None and f.key.optional:
            kw[f.name] = f.absent()
            continue
        kw[f.name] = _field(f, v, p)
    if rules.closed:
        known = {f.name for f in _plan(cls)} | ({rules.tag[0]} if rules.tag else set())
        extra = sorted(str(k) for k in m if k not in known)
        if extra:
            raise EvidenceError(f"{path or 'record'}: unknown field {extra[0]!r}")
    return cls(**kw)


def _field(f: _Field, v: Any, p: str) -> Any:
    k = f.key
    if k.load is not None:
        out = None if v is None and f.nullable else k.load(v, p)
    else:
        out = _value(f.hint, v, p, k)
    if out is not None:
        if k.one_of:
            _choice(out, p, k.one_of)
        if k.minimum is not None and out < k.minimum:
            raise EvidenceError(f"{p}: negative ({out})" if k.minimum == 0
                                else f"{p}: must be >= {k.minimum:g}, got {out}")
    if k.check is not None:
        k.check(out, p)
    return out


def _value(tp: Any, v: Any, p: str, k: Key = _PLAIN) -> Any:  # noqa: PLR0911, PLR0912
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return json_value(v, p)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"record: {p}: only X | None unions are recorded, not {tp!r}")
        if v is None and len(inner) < len(args):
            return None
        return _value(inner[0], v, p, k)
    if origin is Literal:
        return _choice(_str(v, p), p, tuple(str(a) for a in args))
    if tp is str:
        return _str(v, p)
    if tp is bool:
        if not isinstance(v, bool):
            raise EvidenceError(f"{p}: expected true/false, got {_short(v)}")
        return v
    if tp is int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise EvidenceError(f"{p}: expected an integer, got {_short(v)}")
        return v
    if tp is float:
        return number(v, p)
    if origin in (tuple, list):
        if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
            raise TypeError(f"record: {p}: only tuple[X, ...] is recorded, not {tp!r}")
        items = [_value(args[0], x, f"{p}[{i}]") for i, x in enumerate(array(v, p))]
        return tuple(items) if origin is tuple else items
    if origin in (Mapping, dict):
        out: dict[str, Any] = {}
        for key_, x in obj(v, p).items():
            if not isinstance(key_, str):
                raise EvidenceError(f"{p}: key {_short(key_)} is not a string")
            if k.keys_one_of:
                _choice(key_, f"{p}[{key_!r}]", k.keys_one_of)
            out[key_] = _value(args[1], x, _join(p, key_))
        return out
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _record(tp, v, p)
    raise TypeError(f"record: {p}: no reading for {tp!r}")


# ------------------------------------------------------------------------------- readers
def obj(v: Any, path: str) -> Mapping[str, Any]:
    """``v`` when it is a JSON object, else the error naming ``path``."""
    if not isinstance(v, Mapping):
        raise EvidenceError(f"{path or 'record'}: expected an object, got {_type_name(v)}")
    return v


def number(v: Any, path: str) -> float:
    """A finite JSON number (never ``true``/``false``) as a float."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise EvidenceError(f"{path}: expected a number, got {_short(v)}")
    f = float(v)
    if not math.isfinite(f):
        raise EvidenceError(f"{path}: expected a finite number, got {v!r}")
    return f


def json_value(v: Any, path: str, depth: int = 0) -> Any:
    """A JSON-shaped value (a raw API object): string keys, finite numbers, bounded depth."""
    if depth > MAX_DEPTH:
        raise EvidenceError(f"{path}: nested too deeply")
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return number(v, path)
    if isinstance(v, list | tuple):
        return [json_value(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v)]
    if isinstance(v, Mapping):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise EvidenceError(f"{path}: object key {_short(k)} is not a string")
            out[k] = json_value(x, _join(path, k), depth + 1)
        return out
    raise EvidenceError(f"{path}: not a JSON value ({_type_name(v)})")


def _present(m: Mapping[str, Any], name: str, path: str) -> Any:
    if name not in m:
        raise EvidenceError(f"{_join(path, name)}: missing")
    return m[name]


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str):
        raise EvidenceError(f"{path}: expected a string, got {_type_name(v)}")
    return v


def array(v: Any, path: str) -> list[Any] | tuple[Any, ...]:
    """``v`` when it is a JSON list, else the error naming ``path``."""
    if not isinstance(v, list | tuple):
        raise EvidenceError(f"{path}: expected a list, got {_type_name(v)}")
    return v


def _choice(v: Any, path: str, allowed: tuple[str, ...]) -> Any:
    if v not in allowed:
        raise EvidenceError(f"{path}: {_short(v)} is not one of {', '.join(allowed)}")
    return v


_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_./-]+")


def _join(path: str, key_: str) -> str:
    """``pods[0]`` + ``name`` -> ``pods[0].name``; a key that is not a plain word is quoted
    (``files['a b']``), so a recorded key can never break the one-line error."""
    if not _SIMPLE_KEY.fullmatch(key_):
        return f"{path}[{key_!r}]"
    return f"{path}.{key_}" if path else key_


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


__all__ = ["DEFAULT", "OPTIONAL", "Key", "Record", "Rules", "array", "dump", "json_value", "key",
           "load", "number", "obj"]
