"""`kgc gate`: a verdict file judged against the profile's release policy.

:func:`load_verdict` opens and validates a ``kgc-verdict/1`` file completely (one
:class:`VerdictError` line on anything corrupt, foreign or empty); :func:`evaluate` is pure:
the verdict and the policy in, a :class:`GateResult` out (green or not, the blocking findings
first with their remediation, then what was not run or not accepted).

The gate judges what was really run, not what the file's headline says: the profile's
content (``run.profile_digest`` against the digest of the policy's profile, loaded here), the
selection (every check of a required layer the policy would block on must have a result on
every target of its scope: ``-k`` cannot drop a blocker) and the targets (every target in
``run.targets`` needs results for the required layers of its scope). A verdict written before
kgc recorded the digest and the selection is refused: run it again.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kgc import __version__
from kgc.core.policy import SEVERITIES, Policy
from kgc.core.profile import builtin_profiles, load_profile
from kgc.core.registry import load_layers
from kgc.core.report import SCHEMA, STATUSES, profile_digest

MAX_VERDICT_BYTES = 256 * 1024 * 1024
BAD = ("fail", "error")
# worst first: what a (target, check) pair counts as when a file holds it twice
STATUS_RANK = {"error": 0, "fail": 1, "warn": 2, "skip": 3, "pass": 4}


class VerdictError(Exception):
    """A verdict file that cannot be gated. ``str()`` is one line naming the file."""


@dataclass(frozen=True)
class VerdictDoc:
    path: str
    run: Mapping[str, Any]
    overall: str
    incomplete: bool
    results: tuple[Mapping[str, Any], ...]

    @property
    def profile(self) -> str:
        return str(self.run.get("profile") or "")

    @property
    def image(self) -> bool:
        """Written by ``kgc image check`` from the image's files (``--boot`` verdicts are
        node runs: they are gated like one)."""
        img = self.run.get("image")
        return isinstance(img, Mapping) and img.get("mode") != "boot"

    @property
    def layers_judged(self) -> tuple[str, ...]:
        return tuple(self.run.get("layers_judged") or ())

    @property
    def digest(self) -> str:
        """``run.profile_digest`` (empty: written before kgc recorded it)."""
        return str(self.run.get("profile_digest") or "")

    @property
    def selection(self) -> Mapping[str, Any] | None:
        sel = self.run.get("selection")
        return sel if isinstance(sel, Mapping) else None

    def listed_targets(self) -> list[str]:
        """``run.targets``: every target the run says it had (with or without results).
        Only a verdict that records its selection names them as its results do (older
        pytest runs put the target's address there), so only then are they read."""
        if self.selection is None:
            return []
        return list(dict.fromkeys(self.run.get("targets") or ()))

    def targets(self) -> list[str]:
        """Every target with a result, then those ``run.targets`` lists without one."""
        return list(dict.fromkeys([r["target"] for r in self.results]
                                  + self.listed_targets()))

    def by_target(self) -> dict[str, dict[str, Mapping[str, Any]]]:
        """target -> check -> result: the worst one when a file holds a pair twice, and the
        same one whatever order the file holds them in (ties broken by the result's
        text)."""
        out: dict[str, dict[str, Mapping[str, Any]]] = {}
        for r in self.results:
            cur = out.setdefault(r["target"], {})
            old = cur.get(r["check"])
            if old is None or _worse(r, old):
                cur[r["check"]] = r
        for t in self.listed_targets():
            out.setdefault(t, {})
        return out


def _order(r: Mapping[str, Any]) -> tuple[int, str]:
    return (STATUS_RANK[r["status"]], json.dumps(r, sort_keys=True, default=str))


def _worse(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Does ``a`` win over ``b`` for one (target, check) pair: worse status first."""
    return _order(a) < _order(b)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return "a number"
    if isinstance(v, str):
        return "text"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    return type(v).__name__


def _want(cond: bool, path: str, msg: str) -> None:
    if not cond:
        raise VerdictError(f"{path}: {msg}")


def _result(p: str, i: int, r: Any) -> Mapping[str, Any]:
    w = f"results[{i}]"
    _want(isinstance(r, dict), p, f"{w} must be an object, got {_kind(r)}")
    for key in ("check", "layer", "target", "status", "severity", "reason"):
        v = r.get(key)
        _want(isinstance(v, str), p, f"{w}.{key} must be text, got {_kind(v)}"
              if key in r else f"{w} has no `{key}`")
    _want(bool(r["check"].strip()) and bool(r["target"].strip()), p,
          f"{w}: empty check id or target")
    _want(r["check"].startswith(r["layer"] + "."), p,
          f"{w}: check {r['check'][:60]!r} is not in its layer {r['layer'][:40]!r}")
    _want(r["status"] in STATUSES, p,
          f"{w}.status {r['status'][:20]!r} is not one of {', '.join(STATUSES)}")
    _want(r["severity"] in SEVERITIES, p,
          f"{w}.severity {r['severity'][:20]!r} is not one of {', '.join(SEVERITIES)}")
    for key in ("remediation", "title", "simulated_why"):
        _want(r.get(key) is None or isinstance(r.get(key), str), p,
              f"{w}.{key} must be text, got {_kind(r.get(key))}")
    _want("origin" in r and isinstance(r["origin"], str), p,
          f"{w}.origin must be text (live or bundle)" if "origin" in r else
          f"{w} has no `origin` (written before kgc marked replayed results): run it again")
    _want("simulated" in r and isinstance(r["simulated"], bool), p,
          f"{w}.simulated must be true or false" if "simulated" in r else
          f"{w} has no `simulated` (written before kgc marked stand-ins): run it again")
    _want(isinstance(r.get("evidence", {}), dict), p,
          f"{w}.evidence must be an object, got {_kind(r.get('evidence'))}")
    return r


def _selection(p: str, sel: Any) -> None:
    """``run.selection`` (kgc.core.report.run_identity): the fields the gate reads."""
    _want(isinstance(sel, dict), p, f"run.selection must be an object, got {_kind(sel)}")
    for key in ("markers", "keywords"):
        _want(isinstance(sel.get(key, ""), str), p,
              f"run.selection.{key} must be text, got {_kind(sel.get(key))}")
    tg = sel.get("targets", {})
    _want(isinstance(tg, dict) and all(isinstance(v, str) for v in tg.values()), p,
          "run.selection.targets must map each target to its scope (text)")
    nr = sel.get("checks_not_run", {})
    _want(isinstance(nr, dict) and all(isinstance(v, list) and all(isinstance(x, str)
                                                                   for x in v)
                                       for v in nr.values()), p,
          "run.selection.checks_not_run must map each target to a list of check ids")


def parse_verdict(data: bytes, path: str = "verdict") -> VerdictDoc:
    """Validate a verdict document completely; raises :class:`VerdictError` (one line)."""
    p = path
    if not data.strip():
        raise VerdictError(f"{p}: empty file (no verdict in it)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VerdictError(f"{p}: not UTF-8 text (byte {exc.start}): not a kgc verdict") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise VerdictError(f"{p}: not JSON ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:120] if str(exc) else ''})") from None
    _want(isinstance(doc, dict), p, f"not a kgc verdict (top level is {_kind(doc)})")
    schema = doc.get("schema")
    if schema != SCHEMA:
        fmt = doc.get("format")
        if isinstance(fmt, str) and fmt.startswith("kgc-bundle/"):
            raise VerdictError(f"{p}: an evidence bundle ({fmt[:30]}), not a verdict: judge it "
                               "first (kgc evaluate, or pytest --snapshot)")
        raise VerdictError(
            f"{p}: not a kgc verdict (schema {str(schema)[:40]!r}; expected {SCHEMA!r})"
            if schema is not None else f"{p}: not a kgc verdict (no `schema` field)")
    run = doc.get("run")
    _want(isinstance(run, dict), p, f"`run` must be an object, got {_kind(run)}")
    stages = run.get("stages")
    if "layers" not in run and isinstance(stages, dict) and stages:
        # several runs merged into one report, each judged under a profile of its own: no
        # one policy can gate the merge; each run's own verdict can be
        raise VerdictError(
            f"{p}: merged from {len(stages)} runs ({', '.join(map(str, list(stages)[:6]))}), "
            "each judged under its own profile: not one run the gate can judge; gate each "
            "run's own verdict.json")
    for key in ("layers", "layers_judged", "targets"):
        v = run.get(key)
        _want(isinstance(v, list) and all(isinstance(x, str) for x in v), p,
              f"run.{key} must be a list of text, got {_kind(v)}" if key in run
              else f"run has no `{key}`")
    _want(isinstance(run.get("profile"), str), p, "run.profile must be text")
    _want(isinstance(run.get("profile_digest", ""), str), p,
          f"run.profile_digest must be text, got {_kind(run.get('profile_digest'))}")
    if "selection" in run:
        _selection(p, run["selection"])
    env = run.get("environment", {})
    _want(isinstance(env, dict), p, f"run.environment must be an object, got {_kind(env)}")
    overall = doc.get("overall")
    _want(overall in ("pass", "fail"), p, f"`overall` must be pass or fail, got {_kind(overall)}")
    inc = doc.get("incomplete", False)
    _want(isinstance(inc, bool), p, f"`incomplete` must be true or false, got {_kind(inc)}")
    results = doc.get("results")
    _want(isinstance(results, list), p, f"`results` must be a list, got {_kind(results)}")
    rs = tuple(_result(p, i, r) for i, r in enumerate(results))
    counts = doc.get("counts")
    if counts is not None:
        _want(isinstance(counts, dict), p, f"`counts` must be an object, got {_kind(counts)}")
        real = dict.fromkeys(STATUSES, 0)
        for r in rs:
            real[r["status"]] += 1
        told = {k: counts.get(k) for k in STATUSES}
        _want(told == real, p, f"`counts` {told} do not match the results {real}: the file "
              "was edited or truncated")
    return VerdictDoc(p, run, overall, inc, rs)


def load_verdict(path: str | Path) -> VerdictDoc:
    p = Path(path)
    try:
        if p.is_dir():
            raise VerdictError(f"{p}: a directory, not a verdict file (reports/verdict.json?)")
        with open(p, "rb") as fh:
            data = fh.read(MAX_VERDICT_BYTES + 1)
    except FileNotFoundError:
        raise VerdictError(f"{p}: no such file") from None
    except OSError as exc:
        raise VerdictError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_VERDICT_BYTES:
        raise VerdictError(f"{p}: larger than {MAX_VERDICT_BYTES // 2**20} MiB: not a verdict")
    return parse_verdict(data, str(p))


# -- the gate ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    """One thing the gate reports. ``kind``: ``check`` (a result), ``layer`` (a required
    layer not judged) or ``run`` (the run as a whole)."""

    kind: str
    text: str
    target: str = ""
    check: str = ""
    layer: str = ""
    status: str = ""
    severity: str = ""
    reason: str = ""
    remediation: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.target, self.check or self.layer or self.text)


@dataclass(frozen=True)
class GateResult:
    green: bool
    profile: str
    verdict: str
    required: tuple[str, ...]
    judged: Mapping[str, tuple[str, ...]]  # layer -> targets it was judged on
    blocking: tuple[Finding, ...]
    not_run: tuple[Finding, ...]
    not_accepted: tuple[Finding, ...]
    waived: tuple[Finding, ...]
    not_blocking: tuple[Finding, ...]
    image: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["judged"] = {k: list(v) for k, v in self.judged.items()}
        d["status"] = "certified" if self.green else "not certified"
        return d


def _accept(r: Mapping[str, Any], policy: Policy) -> str | None:
    """Why a result is not accepted (None: accepted)."""
    if r["simulated"] and not policy.accept_simulated:
        return f"simulated ({r.get('simulated_why') or 'a lab stand-in'})"
    if r["origin"] == "bundle" and not policy.accept_replayed:
        return "replayed from a bundle (policy accepts live results only)"
    return None


def _check_finding(r: Mapping[str, Any], text: str) -> Finding:
    return Finding("check", text, r["target"], r["check"], r["layer"], r["status"],
                   r["severity"], r["reason"], r.get("remediation") or "")


def _target_scopes(doc: VerdictDoc, scopes: Mapping[str, str]) -> dict[str, str]:
    """target -> node | cluster: from the scope of the layers its results belong to, else
    from ``run.selection.targets`` (a target with no result at all); "" when neither says."""
    out: dict[str, str] = {}
    for r in doc.results:
        sc = scopes.get(r["layer"])
        if sc and r["target"] not in out:
            out[r["target"]] = sc
    told = (doc.selection or {}).get("targets") or {}
    for t in doc.targets():
        out.setdefault(t, str(told.get(t) or ""))
    return out


RERUN = ("Run the suites again with this kgc (kgc certify, or pytest --pyargs kgc.conformance, "
         "with --profile the policy's profile) and gate the verdict.json it writes.")
WHOLE_LAYERS = (
    "Judge every check of the required layers: run without -k, with -m naming whole layers\n"
    "only (kgc certify, or pytest --pyargs kgc.conformance -m LAYER). A check that cannot\n"
    "apply to this platform is waived (policy.waive) or allowed to skip (policy.skip_allowed)\n"
    "in the profile, where the release policy shows it — never deselected.")

NOT_ACCEPTED = (
    "Judge it on evidence the policy accepts: a live run against real nodes (a real kubelet "
    "starting real Kata microVMs), not a stand-in's (kwok) and not a replayed bundle where "
    "the policy accepts live results only.")


def _run_findings(doc: VerdictDoc, profile: str, digest: str) -> list[Finding]:
    """What the run as a whole must show before any result counts: that it finished, that
    it was judged against the policy's profile (by name and by content) and that it says
    what it selected."""
    out: list[Finding] = []
    if doc.incomplete:
        out.append(Finding("run", "the run did not finish (verdict marked incomplete): "
                           "run it again to the end"))
    if doc.profile != profile:
        out.append(Finding(
            "run", f"the verdict was judged against profile {doc.profile or '(none)'!r}, not "
            f"{profile!r}: a certification for {profile!r} needs a run with --profile {profile}"))
    elif not doc.digest:
        out.append(Finding(
            "run", "the verdict was written before kgc recorded the profile digest "
            "(run.profile_digest): it cannot show which profile content judged it — run it "
            "again", remediation=RERUN))
    elif doc.digest != digest:
        ver = str(doc.run.get("kgc_version") or "")
        note = (f"; judged by kgc {ver}, this is kgc {__version__} (a newer kgc may fill in "
                "new profile defaults)" if ver and ver != __version__ else "")
        out.append(Finding(
            "run", f"the verdict was judged against a profile named {profile!r} whose content "
            f"is not the policy's profile {profile!r} (digest {doc.digest[:23]}… in the "
            f"verdict, {digest[:23]}… here{note}): an edited or lenient copy under that name "
            "does not certify under it",
            remediation=f"Judge the run with the policy's own profile (--profile {profile}, "
            "the same file the gate reads) and gate that verdict; if the run's profile is the "
            "one that should decide, gate with it: kgc gate VERDICT --profile FILE."))
    if doc.selection is None:
        out.append(Finding(
            "run", "the verdict was written before kgc recorded the run's selection "
            "(run.selection: -m, -k, the checks not run): it cannot show that nothing was "
            "left out — run it again", remediation=RERUN))
    if not doc.results:
        out.append(Finding("run", "the verdict holds no result: nothing was judged"))
    return out


def _missing_checks(doc: VerdictDoc, policy: Policy, lay: str, target: str,
                    catalogue: Mapping[str, str] | Sequence[str]) -> list[Finding]:
    """The checks of required layer ``lay`` that left no result on ``target`` and that the
    policy needs judged: every one under ``skip: per-check``, else each whose failure would
    block (its severity or ``block_checks``) — a blocker deselected with ``-k`` is never a
    pass. Waived checks and ``skip_allowed`` ones may be absent. ``catalogue``: this build's
    check ids of the layer -> severity (a bare list: severity unknown, counted as
    blocking). A layer with no result at all on the target is one layer finding instead
    (except under ``skip: per-check``)."""
    mine = [r for r in doc.results if r["target"] == target]
    have = {r["check"] for r in mine if _accept(r, policy) is None}
    # a check whose only results are not accepted (simulated: a stand-in's evidence;
    # replayed under a live-only policy) was not judged on evidence that may certify
    refused = {r["check"]: why for r in mine if (why := _accept(r, policy))}
    ran = any(r["layer"] == lay and r["target"] == target for r in doc.results)
    if not ran and policy.skip != "per-check":
        return []
    sel = doc.selection or {}
    how = " ".join(f"{flag} {str(sel[key])[:80]!r}" for flag, key in
                   (("-m", "markers"), ("-k", "keywords")) if sel.get(key))
    out: list[Finding] = []
    for cid in catalogue:
        sev = str(catalogue[cid]) if isinstance(catalogue, Mapping) else ""
        if cid in have or policy.may_skip(cid) or policy.waiver(cid):
            continue
        if policy.skip == "per-check":
            why = "policy skip: per-check needs every check of a required layer"
        elif not sev or policy.blocks_on_failure(cid, sev):
            why = (f"a {sev} check the policy blocks on: it must be judged" if sev else
                   "a check the policy may block on: it must be judged")
        else:
            continue
        if cid in refused:
            out.append(Finding(
                "check", f"{cid} on {target}: no accepted verdict (its result is "
                f"{refused[cid]}; {why})", target=target, check=cid, layer=lay,
                status="missing", severity=sev, remediation=NOT_ACCEPTED))
            continue
        out.append(Finding(
            "check", f"{cid} on {target}: no verdict (not run: left out of the selection"
            + (f" {how}" if how else "") + f"; {why})", target=target, check=cid, layer=lay,
            status="missing", severity=sev, remediation=WHOLE_LAYERS))
    return out


def _skip_summary(rs: Sequence[Mapping[str, Any]]) -> str:
    reasons = list(dict.fromkeys(r["reason"].split(" [simulated")[0] for r in rs))
    more = f" (+{len(reasons) - 2} other reasons)" if len(reasons) > 2 else ""
    return "; ".join(reasons[:2]) + more


def evaluate(doc: VerdictDoc, policy: Policy, profile: str,
             layers: Mapping[str, str],
             checks: Mapping[str, Mapping[str, str] | Sequence[str]] | None = None,
             *, digest: str) -> GateResult:
    """Gate a verdict. ``profile``/``digest``: the name and the :func:`profile_digest
    <kgc.core.report.profile_digest>` of the profile the policy comes from (the verdict must
    have been judged against that very content); ``layers``: every layer this build has ->
    its scope (node/cluster), in report order; ``checks``: layer -> its check ids -> severity
    (:func:`layer_catalogue`), for the checks of a required layer that left no verdict
    (without it only whole layers are checked: every command line passes it)."""
    blocking: list[Finding] = _run_findings(doc, profile, digest)
    not_run: list[Finding] = []
    not_acc: list[Finding] = []
    waived: list[Finding] = []
    soft: list[Finding] = []
    required = policy.required(tuple(layers), doc.image)

    accepted: list[Mapping[str, Any]] = []
    for r in doc.results:
        why_not = _accept(r, policy)
        st = r["status"]
        where = f"{r['check']} on {r['target']}"
        if why_not:
            not_acc.append(_check_finding(r, f"{where} ({st}): not accepted, {why_not}"))
            continue
        accepted.append(r)
        if st == "pass":
            continue
        w = policy.waiver(r["check"])
        if w:
            waived.append(_check_finding(r, f"{where} ({st}) waived: {w}"))
            continue
        blocks = policy.blocks_on_failure(r["check"], r["severity"])
        if st in BAD:
            if blocks:
                blocking.append(_check_finding(r, f"{where} ({st}, {r['severity']})"))
            else:
                soft.append(_check_finding(r, f"{where} ({st}, {r['severity']}: severity "
                                           "does not block under this policy)"))
        elif st == "warn":
            if blocks and policy.warn == "per-check":
                blocking.append(_check_finding(r, f"{where} (warn on a blocking check; "
                                               "policy warn: per-check)"))
            else:
                soft.append(_check_finding(r, f"{where} (warn)"))
        elif st == "skip" and policy.skip == "per-check" and r["layer"] in required \
                and not policy.may_skip(r["check"]):
            blocking.append(_check_finding(r, f"{where} skipped in required layer "
                                           f"{r['layer']} (policy skip: per-check)"))

    # -- required layers: judged on every target of their scope ---------------------------
    tscope = _target_scopes(doc, layers)
    for t, tsc in tscope.items():
        if not tsc and not any(r["target"] == t for r in doc.results):
            blocking.append(Finding(
                "run", f"target {t} is in run.targets but has no result and no recorded "
                "scope: it was never judged", target=t, remediation=RERUN))
    judged: dict[str, list[str]] = {}
    for lay in required:
        sc = layers.get(lay)
        targets = [t for t, s in tscope.items() if sc is None or s == sc]
        if lay not in layers:
            blocking.append(Finding("layer", f"required layer {lay}: not in this build of kgc "
                                    f"(layers: {', '.join(layers)})", layer=lay))
            continue
        if not targets:
            blocking.append(Finding("layer", f"required layer {lay} was not judged: the run "
                                    f"had no {sc} target", layer=lay))
            continue
        for t in targets:
            miss = _missing_checks(doc, policy, lay, t, checks.get(lay, ())) \
                if checks is not None else []
            blocking += miss
            mine = [r for r in accepted if r["layer"] == lay and r["target"] == t]
            alls = [r for r in doc.results if r["layer"] == lay and r["target"] == t]
            done = [r for r in mine if r["status"] != "skip"]
            if policy.warn == "per-layer":
                ok = any(r["status"] == "pass" for r in mine) or (
                    bool(done) and any(r["status"] in BAD for r in done))
            else:
                ok = bool(done)
            if ok and any(f.remediation == NOT_ACCEPTED for f in miss):
                continue  # checks it blocks on rest on stand-ins: named above, never "ok"
            if ok and lay in doc.layers_judged:
                judged.setdefault(lay, []).append(t)
                continue
            if ok:
                msg = (f"required layer {lay} on {t}: results exist but run.layers_judged "
                       "omits it (an inconsistent verdict)")
            elif not alls:
                msg = f"required layer {lay} was not run on {t} (no result: deselected?)"
            elif not mine:
                msg = (f"required layer {lay} on {t}: no accepted result ("
                       f"{len(alls)} not accepted: {_accept(alls[0], policy)})")
            elif not done:
                msg = (f"required layer {lay} was not judged on {t}: all {len(mine)} checks "
                       f"skipped — {_skip_summary(mine)}")
            else:
                msg = (f"required layer {lay} on {t}: no check passed ({len(done)} warned; "
                       "policy warn: per-layer)")
            blocking.append(Finding("layer", msg, target=t, layer=lay))

    # -- what else was not run (informational) -------------------------------------------
    for lay in layers:
        if lay in required:
            continue
        for t, s in tscope.items():
            if s and layers[lay] != s:
                continue
            rs = [r for r in doc.results if r["layer"] == lay and r["target"] == t]
            if rs and all(r["status"] == "skip" for r in rs):
                not_run.append(Finding("layer", f"{lay} on {t}: {len(rs)} skipped — "
                                       f"{_skip_summary(rs)}", target=t, layer=lay))
            elif not rs and (s or any(r["target"] == t for r in doc.results)):
                not_run.append(Finding("layer", f"{lay} on {t}: not run", target=t, layer=lay))

    # the most severe first: run, then check failures by severity, then layers
    sev = {s: i for i, s in enumerate(SEVERITIES)}
    order = {"run": 0, "layer": 1, "check": 2}
    blocking.sort(key=lambda f: (order[f.kind], STATUS_RANK.get(f.status, 9),
                                 sev.get(f.severity, 9), f.target, f.check or f.layer))
    return GateResult(
        green=not blocking,
        profile=profile,
        verdict=doc.path,
        required=required,
        judged={k: tuple(v) for k, v in judged.items()},
        blocking=tuple(blocking),
        not_run=tuple(not_run),
        not_accepted=tuple(not_acc),
        waived=tuple(waived),
        not_blocking=tuple(soft),
        image=doc.image,
        meta={k: doc.run.get(k) for k in ("started_at", "kgc_version", "profile", "targets")},
    )


# -- the one-screen summary ---------------------------------------------------------------
def _short(text: str, width: int, lines: int) -> list[str]:
    out: list[str] = []
    for para in text.splitlines() or [""]:
        out += textwrap.wrap(para, width) or [""]
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 2] + " …"
    return out


def render(res: GateResult, width: int = 100, budget: int = 40) -> str:
    """What `kgc gate` prints: one screen (about ``budget`` lines), blocking findings first
    — the run, then required layers not judged, then failed checks with their fix."""
    head = "CERTIFIED" if res.green else "NOT CERTIFIED"
    what = "node image" if res.image else "run"
    lines = [f"kgc gate: {head} — profile {res.profile}, {what} {res.verdict}"]
    req = ", ".join(f"{lay} {'ok' if lay in res.judged else 'NOT JUDGED'}"
                    for lay in res.required) or "(none)"
    lines.append(f"required layers: {req}")
    tail: list[str] = []
    if res.not_run or res.not_accepted:
        items = [f.text for f in res.not_run] + [f.text for f in res.not_accepted]
        tail.append(f"not run / not accepted ({len(items)}):")
        tail += ["  - " + _short(t, width - 4, 1)[0] for t in items[:4]]
        if len(items) > 4:
            tail.append(f"  … and {len(items) - 4} more (kgc gate --json)")
    if res.waived:
        tail.append(f"waived ({len(res.waived)}): " + "; ".join(
            f.check for f in res.waived[:5]) + (" …" if len(res.waived) > 5 else ""))
    if res.not_blocking:
        tail.append(f"not blocking ({len(res.not_blocking)}): " + "; ".join(
            f"{f.check} {f.status}" for f in res.not_blocking[:5])
            + (" …" if len(res.not_blocking) > 5 else ""))
    tail.append(f"exit {0 if res.green else 1}: {head.lower()} under the policy of "
                f"profile {res.profile}")
    if res.blocking:
        lines.append(f"blocking ({len(res.blocking)}):")
        room = budget - len(lines) - len(tail) - 1
        shown = 0
        last_fix = ""
        for i, f in enumerate(res.blocking, 1):
            block = [f"  {i}. " + _short(f.text, width - 6, 1)[0]]
            if f.kind == "check" and f.reason:
                block += [f"     {ln}" for ln in _short(f.reason, width - 5, 1)]
            if f.remediation and f.remediation == last_fix:
                block.append("     fix: as above")  # e.g. every check a -k left out
            elif f.remediation:
                # line breaks kept and lines never re-wrapped: a TOML snippet stays pasteable
                fix = f.remediation.splitlines() or [""]
                block.append(f"     fix: {fix[0]}")
                block += [f"          {ln}" for ln in fix[1:4]]
                if len(fix) > 4:
                    block.append(f"          (… {len(fix) - 4} more line(s): kgc gate --json)")
            if shown >= 3 and len(block) > room:
                break
            last_fix = f.remediation or last_fix
            lines += block
            room -= len(block)
            shown += 1
        if shown < len(res.blocking):
            lines.append(f"  … and {len(res.blocking) - shown} more (kgc gate --json)")
    return "\n".join(lines + tail)


def layer_catalogue() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """This build's layers: name -> scope (report order), and name -> its check ids ->
    severity."""
    layers = load_layers()
    return ({n: str(lay.scope) for n, lay in layers.items()},
            {n: {c.id: str(c.severity) for c in lay.checks} for n, lay in layers.items()})


def gate_profile(doc: VerdictDoc, name: str | None) -> Any:
    """The profile whose policy gates ``doc``: ``name`` (--profile), else the profile the
    verdict names — the built-in of that name, else its file if it is here. A built-in name
    always means the shipped content: a copy that took the name (the verdict's own
    ``profile_source``) never chooses the gate's policy. Raises :class:`VerdictError` when
    the verdict's profile is neither built in nor here (ProfileError for a bad ``name``)."""
    if name:
        return load_profile(name)
    if doc.profile in builtin_profiles():
        return load_profile(doc.profile)
    src = str(doc.run.get("profile_source") or "")
    if src and Path(src).is_file():
        return load_profile(src)
    raise VerdictError(f"{doc.path}: judged against profile {doc.profile or '(none)'!r}, which "
                       "is not built in and whose file is not here: give --profile NAME|PATH")


def gate_file(path: str | Path, profile: Any) -> GateResult:
    """Load and gate one verdict file against a loaded profile (its digest computed here,
    from the content the gate itself loaded)."""
    doc = load_verdict(path)
    scopes, checks = layer_catalogue()
    return evaluate(doc, profile.policy, profile.name, scopes, checks,
                    digest=profile_digest(profile))


# -- the report's headline ------------------------------------------------------------------
SIMULATED_REASON = "simulated results: prove the suite, not a {scope}"


def headline(res: GateResult, doc: VerdictDoc, scopes: Mapping[str, str]) -> dict[str, Any]:
    """The HTML report's first words, from the gate's own result, so the report never says
    another word than `kgc gate` on the same verdict: ``word`` (CERTIFIED / NOT CERTIFIED),
    ``reason`` (why, in one line: "passed for LAYERS only" when only required layers were
    missing, "simulated results: …" when every result is a lab stand-in the policy does not
    accept) and ``blocking`` (each finding, with the check and target it links to).
    ``scopes``: layer -> node/cluster (:func:`layer_catalogue`)."""
    word = "CERTIFIED" if res.green else "NOT CERTIFIED"
    judged = [lay for lay in res.required if lay in res.judged]
    if res.green:
        reason = (f"every required layer judged and passing under the release policy of "
                  f"profile {res.profile}: {', '.join(res.required) or '(none)'}")
    elif doc.results and all(r["simulated"] for r in doc.results) and any(
            "simulated" in f.text for f in res.not_accepted):
        cluster = any(scopes.get(r["layer"]) == "cluster" for r in doc.results)
        reason = SIMULATED_REASON.format(scope="cluster" if cluster else "node")
    elif res.blocking and all(f.kind == "layer" for f in res.blocking):
        reason = (f"passed for {', '.join(judged)} only" if judged else
                  "no required layer was judged") + (
            f" (not judged: {', '.join(lay for lay in res.required if lay not in judged)})")
    else:
        kinds = {k: [f for f in res.blocking if f.kind == k] for k in ("run", "check", "layer")}
        said = ([kinds["run"][0].text] if kinds["run"] else []) + [
            f"{len(fs)} {what}" for fs, what in (
                (kinds["check"], "blocking check result(s)"),
                (kinds["layer"], "required layer finding(s)")) if fs]
        reason = "; ".join(said) + f" (policy of profile {res.profile})"
    # the report lists the run first, then the checks to fix (each links to its result),
    # then the layers left unjudged
    order = {"run": 0, "check": 1, "layer": 2}
    shown = sorted(res.blocking, key=lambda f: order[f.kind])
    return {
        "word": word,
        "reason": reason,
        "profile": res.profile,
        "blocking": [{"kind": f.kind, "text": f.text, "check": f.check, "target": f.target,
                      "layer": f.layer, "status": f.status, "severity": f.severity,
                      "reason": f.reason, "remediation": f.remediation}
                     for f in shown],
    }
