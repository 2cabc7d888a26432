"""`kgc`: the command line around the suites.

    kgc certify [pytest args]         run the conformance suites (every layer it can reach)
    kgc snapshot -o FILE [--hosts SPEC | --kubeconfig F]   record evidence as a bundle
                                      (cluster: --kubeconfig, --context or $KUBECONFIG)
    kgc evaluate BUNDLE...            judge bundles offline (the same verdicts as
                                      `pytest --snapshot BUNDLE`)
    kgc report                        allure-results -> HTML (Allure 3)
    kgc checks [--format md|json]     the check catalogue
    kgc checks ID                     one check: what it proves, evidence, remediation, keys
    kgc profile check FILE|NAME       validate a profile
    kgc cleanup --kubeconfig F (--run ID | --all)   remove what cluster runs left behind
    kgc rbac certify                  print the certification RBAC (kubectl apply -f -)
    kgc kubeconfig --service-account NS/NAME -o FILE   the account's kubeconfig (0600)
    kgc gate VERDICT [--profile P]    gate a verdict against the profile's release policy
    kgc diff OLD NEW                  what changed between two verdicts; exit 1 on regression
    kgc image check IMAGE --profile P certify a node image file (read-only, no mount)
    kgc fleet manifests|collect       the node layers in-cluster: DaemonSet, one merged report
    kgc node-run [--host-root /host]  the fleet image's entry point (a node's root in a pod)
    kgc guest ...                     the in-guest collector (what a GPU pod runs)
    kgc lab ...                       the built-in labs (a separate distribution: a plug-in)

Exit codes (the same for `pytest`; the README's table): 0 certified (for the layers run), 1
not certified (a target that does not answer is error verdicts), 2 bad input or usage (a bad
target spec or kubeconfig, refused credentials, an unwritable output: one line on stderr,
nothing written), 3 internal error.
Reports go under the current directory (./reports) unless --report-dir says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kgc import __version__, guest
from kgc.core import explain, logfilter, report
from kgc.core.bundle import BundleError, load_bundle, write_bundle
from kgc.core.engine import Context, Unavailable
from kgc.core.layer import Scope
from kgc.core.model import Status
from kgc.core.options import UnwritableOutput, check_writable
from kgc.core.profile import DEFAULT_PROFILE, ProfileError, load_profile
from kgc.core.registry import catalogue, load_layers
from kgc.core.target import ClusterTarget, NodeTarget, Refused, TargetError, Unreachable
from kgc.fleet import noderun
from kgc.fleet.cli import FleetUsage
from kgc.fleet.cli import register as register_fleet
from kgc.gate import html as html_report
from kgc.gate.cli import register as register_gating
from kgc.plugin import suites_dir


class UsageError(Exception):
    """Bad input: printed as one line, exit 2."""


def catalogue_markdown() -> str:
    lines = ["| id | layer | scope | severity | what it certifies |", "|---|---|---|---|---|"]
    layers = load_layers()
    for c in catalogue(layers):
        lines.append(f"| `{c.id}` | {c.layer} | {layers[c.layer].scope} | {c.severity} | "
                     f"{c.title} |")
    return "\n".join(lines) + "\n"


def cmd_checks(a: argparse.Namespace) -> int:
    if a.id:
        layers = load_layers()
        cat = {c.id: c for c in catalogue(layers)}
        if a.id not in cat:
            near = [c for c in cat if a.id in c] or [c for c in cat
                                                      if c.split(".")[0] == a.id.split(".")[0]]
            raise UsageError(f"no check {a.id!r}" + (f" (did you mean: {', '.join(near[:6])})"
                                                     if near else " (kgc checks lists them)"))
        chk = cat[a.id]
        if a.format == "json":
            r = explain.reads(chk)
            print(json.dumps({"id": chk.id, "layer": chk.layer, "title": chk.title,
                              "severity": str(chk.severity), "proves": chk.doc or chk.title,
                              "evidence_type": explain.evidence_type(chk),
                              "evidence": r["evidence"], "profile_keys": r["profile"],
                              "remediation": chk.remediation}, indent=2))
        else:
            print("\n".join(explain.explain(chk, layers[chk.layer])))
        return 0
    if a.write_readme:
        readme = Path(a.write_readme)
        try:
            text = readme.read_text()
        except OSError as exc:
            raise UsageError(f"{readme}: {exc.strerror or exc}") from None
        if "<!-- checks:start -->" not in text:
            raise UsageError(f"{readme}: no <!-- checks:start --> marker")
        new = re.sub(r"<!-- checks:start -->\n.*<!-- checks:end -->",
                     lambda _m: "<!-- checks:start -->\n" + catalogue_markdown()
                     + "<!-- checks:end -->", text, flags=re.S)
        readme.write_text(new)
        print(f"{readme}: catalogue {'updated' if new != text else 'already current'}")
        return 0
    if a.format == "json":
        layers = load_layers()
        print(json.dumps([
            {"id": c.id, "layer": c.layer, "scope": str(layers[c.layer].scope),
             "title": c.title, "severity": str(c.severity), "remediation": c.remediation}
            for c in catalogue(layers)], indent=2))
        return 0
    sys.stdout.write(catalogue_markdown())
    return 0


def _take(args: list[str], flag: str, takes_value: bool = True) -> str | bool | None:
    """Remove ``flag`` (``--flag V`` or ``--flag=V``) from a pass-through argument list."""
    for i, a in enumerate(args):
        if a == flag:
            del args[i]
            return args.pop(i) if takes_value and i < len(args) else True
        if takes_value and a.startswith(flag + "="):
            del args[i]
            return a.split("=", 1)[1]
    return None


CERTIFY_HELP = """usage: kgc certify [--html] [--history FILE] [kgc/pytest options] [-m LAYERS]

Run the conformance suites (pytest over the installed suites, from the current directory;
reports under ./reports). Exit 0 certified for the layers run, 1 not, 2 bad input.

kgc certify's own options:
  --html                build the HTML report afterwards (reports/html, Allure 3)
  --history FILE        keep the Allure history in FILE (trends across nightly runs;
                        implies --html)
"""


def certify_help(suites: list[str]) -> str:
    """`kgc certify --help`: kgc's own options, then the plugin's (the pytest group
    "kata-gpu-conformance"), then the rest of pytest's help."""
    text = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *suites,
                           "--help"], capture_output=True, text=True, check=False,
                          timeout=120).stdout
    m = re.search(r"^kata-gpu-conformance:\n.*?(?=^\S.*:\n)", text, re.M | re.S)
    ours = m.group(0) if m else ""
    rest = text.replace(ours, "", 1) if ours else text
    return (CERTIFY_HELP + "\n" + ours.replace("kata-gpu-conformance:",
                                                "kgc's run options (the pytest plugin):", 1)
            + "\npytest's options:\n\n" + rest)


def cmd_certify(a: argparse.Namespace, extra: list[str]) -> int:
    """pytest over the installed suites, from the current directory. kgc's own options:
    ``--html`` builds the HTML report afterwards, ``--history FILE`` (implies --html) keeps
    the Allure history there (trends across nightly runs)."""
    extra = list(extra)
    if "-h" in extra or "--help" in extra:
        sys.stdout.write(certify_help([str(suites_dir())]))
        return 0
    history = _take(extra, "--history")
    html = bool(_take(extra, "--html", takes_value=False)) or bool(history)
    # the suites are the rootdir wherever the venv, the kubeconfig and the working directory
    # are: test ids and the report's tree start at the layer
    root = [] if any(x == "--rootdir" or x.startswith("--rootdir=") for x in extra) else [
        f"--rootdir={suites_dir()}"]
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *root, str(suites_dir()),
            *extra]
    rc = subprocess.call(args)
    if rc == 4:
        return 2  # pytest's own usage error -> kgc's bad-input code
    if html and rc in (0, 1):
        rdir = Path(str(_take(list(extra), "--report-dir") or "reports"))
        try:
            index = html_report.build(rdir / "allure-results", rdir / "html",
                                      history=Path(str(history)) if history else None)
        except report.ReportError as exc:
            print(f"kgc certify: {exc}", file=sys.stderr)
            return 2
        print(f"HTML report: {index}")
    return rc


def _profile(name: str) -> Any:
    return load_profile(name)


def _snapshot_layers(spec: str | None, layers: dict[str, Any], scope: Scope) -> list[str] | None:
    """``--layers a,b``: layers of the target's scope, or a UsageError (exit 2). Only layers
    that gather their own evidence (cluster layers, nri, reboot) are left out when not named;
    a node's host snapshot (what iommu, vfio, persistence, runtime judge) is one batched
    collection and always recorded."""
    if spec is None:
        return None
    names = [n.strip() for n in spec.split(",") if n.strip()]
    ours = [n for n, lay in layers.items() if lay.scope is scope]
    bad = [n for n in names if n not in ours]
    if not names or bad:
        raise UsageError(f"--layers {spec!r}: {', '.join(bad) or 'no layer named'} — a "
                         f"{scope.value} snapshot records: {', '.join(ours)}")
    return names


NODE_OPTIONS = ("hosts", "root", "sudo", "ssh_config", "ssh_identity_file",
                "ssh_accept_new_host_keys", "nri_probe", "nri_socket", "cri_socket",
                "allow_reboot")


def _snapshot_cluster(a: argparse.Namespace) -> ClusterTarget | None:
    """The cluster a snapshot records, or None for a node. ``--kubeconfig`` asks for the
    cluster; else a node option (``--hosts``, ``--root`` ...) asks for a node; else
    ``--context`` or ``$KUBECONFIG`` name the cluster kubectl would reach (its files
    merged); with none of these the snapshot records this machine."""
    if not a.kubeconfig and (any(getattr(a, o) for o in NODE_OPTIONS)
                             or not (a.context or os.environ.get("KUBECONFIG"))):
        return None
    cluster = ClusterTarget.for_run(a.kubeconfig, a.context)
    if cluster is None:
        raise UsageError(f"--context {a.context}: no kubeconfig to find it in ($KUBECONFIG "
                         "unset, no ~/.kube/config); pass --kubeconfig FILE")
    return cluster


def cmd_snapshot(a: argparse.Namespace) -> int:
    """Record a target's evidence. Bad input (the spec, the kubeconfig, refused credentials,
    an unwritable ``-o``) is one line and exit 2 with nothing written; a target that does not
    answer is recorded as that failure (exit 1), so ``kgc evaluate`` of the bundle gives the
    same ``error`` as the live run, never a skip for evidence it does not hold."""
    profile = _profile(a.profile)
    layers = load_layers()
    out = Path(a.output)
    target: Any = _snapshot_cluster(a)
    options: dict[str, Any] = {}
    if target is None:
        target = NodeTarget(spec=a.hosts or "local://", root=a.root or "", sudo=a.sudo,
                            ssh_config=a.ssh_config, ssh_identity_file=a.ssh_identity_file,
                            host_keys="accept-new" if a.ssh_accept_new_host_keys else "strict"
                            ).validate()
        options = {"nri_probe": a.nri_probe, "nri_socket": a.nri_socket,
                   "cri_socket": a.cri_socket, "allow_reboot": a.allow_reboot,
                   "reboot_timeout_s": a.reboot_timeout}
    wanted = _snapshot_layers(a.layers, layers, target.scope)  # bad input: before any I/O
    check_writable(out, "-o", directory=False)
    ctx = Context(target=target, profile=profile, layers=layers, options=options)
    host = None
    try:
        if target.scope is Scope.NODE:
            host = ctx.host()
        else:
            target.probe()  # refused credentials: TargetError, exit 2, no bundle
    except TargetError as exc:
        if isinstance(exc, Refused):
            raise
        u = ctx.failed(exc)
        # every layer's outcome as the live run gives it (a gated layer not asked for
        # stays a skip), so offline judging says exactly what the live run said
        outcomes = {name: _outcome(ctx, name) for name, lay in layers.items()
                    if lay.scope is target.scope and (wanted is None or name in wanted
                                                      or lay.record is None)}
        write_bundle(out, scope=target.scope, target=target.name,
                     failure={"reason": u.reason, "remediation": u.remediation or ""},
                     unavailable={k: v for k, v in outcomes.items() if v is not None})
        print(f"kgc snapshot: {exc}", file=sys.stderr)
        if exc.remediation:
            print(f"  fix: {exc.remediation}", file=sys.stderr)
        print(f"{out}: the failure recorded (kgc evaluate judges every check error)",
              file=sys.stderr)
        return 1
    parts = ctx.record(wanted)
    skipped, unavailable = [], {}
    for name, lay in layers.items():
        if wanted is not None and name not in wanted:
            continue
        if lay.record is not None and lay.scope is target.scope and name not in parts:
            try:
                ctx.evidence(name)
            except Unavailable as u:
                skipped.append(f"{name} ({u.status}: {u.reason})")
                if u.status is Status.ERROR:
                    unavailable[name] = _recorded(u)
    write_bundle(out, scope=target.scope, target=target.name, host=host, parts=parts,
                 unavailable=unavailable)
    what = (f"{len(host.files)} files, {len(host.links)} links, {len(host.dirs)} dirs, "
            f"{len(host.commands)} commands" if host is not None else "")
    # the layers judged from that host evidence, then those recorded as parts of their own
    from_host = [name for name, lay in layers.items() if host is not None
                 and lay.scope is target.scope and lay.record is None
                 and (wanted is None or name in wanted)]
    recorded = ([f"{', '.join(from_host)} (host evidence)"] if from_host else []) + list(parts)
    print(f"{out}: {what}{'; ' if what else ''}layers {', '.join(recorded) or '(none)'} from "
          f"{target.name} in {target.round_trips} round trip(s)")
    for s in skipped:
        print(f"  not recorded: {s}")
    return 0


def _recorded(u: Unavailable) -> dict[str, str]:
    return {"status": str(u.status), "reason": u.reason, "remediation": u.remediation or "",
            "category": u.category}


def _outcome(ctx: Context, layer: str) -> dict[str, str] | None:
    """What the live run says about a layer that has no evidence (None: it had some)."""
    try:
        ctx.evidence(layer)
    except Unavailable as u:
        return _recorded(u)
    return None


def evaluate_bundles(paths: list[str], profile_name: str,
                     layer_names: list[str] | None = None) -> list[dict[str, Any]]:
    """The verdicts `pytest --snapshot PATHS` gives: every layer of each bundle's scope."""
    return evaluate_run(paths, profile_name, layer_names)[0]


def evaluate_run(paths: list[str], profile_name: str, layer_names: list[str] | None = None,
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The verdicts of ``paths`` and the ``run`` section a verdict file needs for `kgc gate`
    (profile, its digest, targets, the layers selected and judged, the selection), filled
    as the pytest plugin fills them (:func:`kgc.core.report.run_identity`)."""
    started = time.time()
    profile = _profile(profile_name)
    layers = load_layers()
    if layer_names:
        unknown = sorted(set(layer_names) - set(layers))
        if unknown:
            raise UsageError(f"unknown layer(s): {', '.join(unknown)} "
                             f"(layers: {', '.join(layers)})")
    bundles = []
    for p in paths:
        try:
            bundles.append(load_bundle(p, layers))
        except BundleError as exc:
            raise UsageError(str(exc)) from None
    out: list[dict[str, Any]] = []
    selected: set[str] = set()
    targets: dict[str, str] = {}
    for b in bundles:
        ctx = Context(target=b, profile=profile, layers=layers)
        names = [n for n, lay in layers.items() if lay.scope is b.scope
                 and (not layer_names or n in layer_names)]
        selected.update(names)
        targets.setdefault(b.name, b.scope.value)
        out += [v.to_dict() for v in ctx.judge_all(names)]
    order = list(layers)
    chosen = [n for n in order if n in selected]
    judged = [n for n in order if any(r["layer"] == n and r["status"] != "skip" for r in out)]
    run = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "duration_s": round(time.time() - started, 3),
        "kgc_version": __version__,
        "profile": profile.name,
        "profile_source": profile.source,
        "targets": list(targets),
        "layers": chosen,
        "layers_judged": judged,
        **report.run_identity(profile, targets, chosen, out, registry=layers),
        "scope": report.scope_note(chosen, judged, order),
        "command": ["kgc", "evaluate", *paths],
        "bundles": [str(p) for p in paths],
    }
    return out, run


def cmd_evaluate(a: argparse.Namespace) -> int:
    results, run = evaluate_run(a.bundles, a.profile,
                                [x for x in (a.layers or "").split(",") if x] or None)
    status, why = report.overall_and_reason(results)
    if a.output:
        try:
            report.write_verdict_json(Path(a.output), results, run)
        except OSError as exc:
            raise UsageError(f"-o {a.output}: cannot write: {exc.strerror or exc}") from None
    if a.json:
        print(json.dumps(report.verdict_doc(results, run), indent=2, default=str))
    else:
        for line in report.summary_table(results):
            print(line)
        det = report.details(results)
        if det:
            print("\n== what to fix (fail, error, warn) ==")
            print("\n".join(det))
        judged = run["layers_judged"]
        print(f"overall: {status.upper()} {report.scope_note(judged, judged, list(load_layers()))}"
              f" — {why}")
        if a.output:
            print(f"verdict: {a.output} (kgc gate {a.output})")
    return 0 if status == "pass" else 1


def cmd_report(a: argparse.Namespace) -> int:
    try:
        index = html_report.build(Path(a.results), Path(a.out),
                                  Path(a.verdict) if a.verdict else None, profile=a.profile,
                                  history=Path(a.history) if a.history else None)
    except report.ReportError as exc:
        print(f"kgc report: {exc}", file=sys.stderr)
        return 2
    print(index)
    return 0


def cmd_profile(a: argparse.Namespace) -> int:
    p = _profile(a.file)
    print(f"{p.source}: ok ({p.name}: {len(p.host.passthrough.targets)} target selector(s))")
    return 0


def cmd_guest(a: argparse.Namespace, extra: list[str]) -> int:
    return int(guest.main(extra))


def cmd_node_run(a: argparse.Namespace, extra: list[str]) -> int:
    return int(noderun.main(extra))


# Commands other distributions add through the entry-point group ``kgc.commands`` (name ->
# ``main(argv) -> int``); the product imports none of them and dispatches whatever is
# installed. For the ones a user of a checkout expects, the line to say when it is missing:
PLUGIN_GROUP = "kgc.commands"
PLUGIN_HINTS = {"lab": ("the built-in labs: node images, containerd, cluster",
                        "kata-gpu-conformance-lab")}


def _plugins() -> dict[str, str]:
    """Installed plug-in commands: name -> the distribution that brings it."""
    from importlib.metadata import entry_points

    return {ep.name: (ep.dist.name if ep.dist else "?") for ep in entry_points(group=PLUGIN_GROUP)}


def _plugin_main(name: str) -> Any:
    """The ``main`` a distribution registered for ``kgc NAME``; None when none loads (an
    entry point left behind by an older install of a moved module is skipped)."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=PLUGIN_GROUP, name=name):
        try:
            return ep.load()
        except ImportError:
            continue
    return None


def cmd_plugin(name: str, extra: list[str]) -> int:
    """`kgc NAME ...` for a plug-in command: its ``main`` gets the rest of the line."""
    plug_main = _plugin_main(name)
    if plug_main is None:
        dist = PLUGIN_HINTS[name][1] if name in PLUGIN_HINTS else "the distribution that has it"
        print(f"kgc {name}: not installed: pip install {dist} (from a checkout: make bootstrap)",
              file=sys.stderr)
        return 2
    return int(plug_main(extra))


# --------------------------------------------------------------------------- kgc cleanup
def cmd_cleanup(a: argparse.Namespace) -> int:
    """Delete what cluster runs left (a SIGKILLed run cannot tear itself down): the run
    namespaces and cluster-scoped objects labelled with the profile's run label, and say
    what was removed."""
    # startup: kgc.kube loads the Kubernetes client (~1 s), which only cluster work needs
    from kgc.kube import KubeError, WaitTimeout, cleanup

    if not (a.run or a.all):
        raise UsageError("kgc cleanup needs --run ID or --all")
    label = _profile(a.profile).cluster.label
    cluster = ClusterTarget(a.kubeconfig, a.context).validate()
    cluster.probe()  # refused: exit 2; unreachable: exit 1 (main)
    k = cluster.connect()
    what = f"{label}={a.run}" if a.run else f"{label} (every run)"
    try:
        with k:
            removed = cleanup(k, label, run_id=a.run, all_runs=bool(a.all), wait_s=a.wait)
    except KubeError as exc:
        print(f"kgc cleanup: {exc}", file=sys.stderr)
        if exc.remediation:
            print(f"  fix: {exc.remediation}", file=sys.stderr)
        return 1
    except WaitTimeout as exc:
        print(f"kgc cleanup: deleted, but {exc}", file=sys.stderr)
        return 1
    for item in removed:
        print(f"removed {item}")
    print(f"kgc cleanup: {len(removed)} object(s) labelled {what} removed from {k.name}"
          + (" (namespaces gone)" if removed and a.wait > 0 else ""))
    return 0


# --------------------------------------------------------------------------- kgc rbac
RBAC = {"certify": ("kgc-certify.yaml", "the certification role of the cluster layers: "
                    "ServiceAccount kgc-system/kgc-certify, its ClusterRole and the admission "
                    "policy that confines it"),
        "certify-namespaced": ("kgc-certify-namespaced.yaml", "the same without the "
                               "cluster-wide pod list (teams that read only their own "
                               "namespaces)")}


def rbac_text(name: str) -> str:
    """The shipped manifest (package data kgc/data/rbac; generated outside the product,
    docs/rbac.md says how; a self-test keeps them equal to the generator's output)."""
    from importlib.resources import files

    return (files("kgc") / "data" / "rbac" / RBAC[name][0]).read_text()


def cmd_rbac(a: argparse.Namespace) -> int:
    sys.stdout.write(rbac_text(a.role))
    return 0


def cmd_kubeconfig(a: argparse.Namespace) -> int:
    """A kubeconfig for the ServiceAccount, from the current context (TokenRequest API)."""
    # startup: kgc.kube loads the Kubernetes client (~1 s), which only cluster work needs
    from kgc.kube.sakubeconfig import (
        KubeError,
        parse_account,
        service_account_kubeconfig,
        write_private,
    )

    out = Path(a.output)
    if out.is_dir():
        raise UsageError(f"-o {out}: a directory, not a file")
    try:
        parse_account(a.service_account)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # the kubeconfig and context as every command checks them: a missing or invalid file,
    # an unknown context, refused credentials are bad input (exit 2, one line), a server
    # that does not answer exit 1 (main)
    cluster = ClusterTarget(a.kubeconfig, a.context).validate()
    cluster.probe()
    check_writable(out, "-o", directory=False)
    try:
        doc = service_account_kubeconfig(a.service_account, kubeconfig=a.kubeconfig,
                                         context=a.context, duration_s=int(a.duration))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except KubeError as exc:
        print(f"kgc kubeconfig: {exc}", file=sys.stderr)
        if exc.remediation:
            print(f"  fix: {exc.remediation}", file=sys.stderr)
        return 1
    try:
        write_private(out, doc)
    except OSError as exc:
        raise UsageError(f"-o {out}: cannot write: {exc.strerror or exc}") from None
    print(f"{out}: ServiceAccount {a.service_account} on {doc['clusters'][0]['name']} "
          f"(token valid {int(a.duration)} s, mode 0600)")
    return 0


def _cluster_access_parsers(sub: Any) -> None:
    p = sub.add_parser("rbac", help="print the certification RBAC (kubectl apply -f -)")
    p.add_argument("role", choices=sorted(RBAC), help="; ".join(
        f"{k}: {v[1]}" for k, v in RBAC.items()))
    p.set_defaults(func=cmd_rbac)
    p = sub.add_parser("kubeconfig", help="write a ServiceAccount's kubeconfig from the "
                       "current context (a bound token from the TokenRequest API)")
    p.add_argument("--service-account", required=True, metavar="NS/NAME",
                   help="the account (e.g. kgc-system/kgc-certify, from kgc rbac certify)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="kubeconfig to write (mode 0600; replaced if it exists)")
    p.add_argument("--kubeconfig", default=None, help="whose context names the cluster "
                   "(default: $KUBECONFIG's files merged, else ~/.kube/config, as kubectl)")
    p.add_argument("--context", default=None,
                   help="kubeconfig context (default: its current-context)")
    p.add_argument("--duration", type=float, default=7200, metavar="S",
                   help="token lifetime in seconds (default 7200; the API server may "
                   "shorten it)")
    p.set_defaults(func=cmd_kubeconfig)


def _cleanup_parser(sub: Any) -> None:
    p = sub.add_parser("cleanup", help="remove the namespaces and objects cluster runs left")
    p.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG's files merged, "
                   "else ~/.kube/config (as kubectl)")
    p.add_argument("--context", default=None, help="kubeconfig context (default: its "
                   "current-context)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--run", default=None, metavar="ID", help="only this run's objects")
    which.add_argument("--all", action="store_true", help="every run's objects")
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help="whose platform.run_label marks a run's objects (default kgc.io/run)")
    p.add_argument("--wait", type=float, default=120.0, metavar="S",
                   help="wait up to S seconds until the namespaces are gone (0: do not wait)")
    p.set_defaults(func=cmd_cleanup)


PASSTHROUGH = {"certify": cmd_certify, "guest": cmd_guest, "node-run": cmd_node_run}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kgc", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--version", action="version", version=f"kgc {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    p = sub.add_parser("checks", help="list the check catalogue, or explain one check")
    p.add_argument("id", nargs="?", default=None, metavar="ID",
                   help="explain this check: what it proves, the evidence it reads, its "
                   "remediation, the profile keys it uses")
    p.add_argument("--format", choices=("md", "json"), default="md",
                   help="md: a Markdown table (or text for one ID); json")
    p.add_argument("--write-readme", metavar="README", nargs="?", const="README.md",
                   help="refresh the catalogue section of a README (default ./README.md)")
    p.set_defaults(func=cmd_checks)

    sub.add_parser("certify", help="run the conformance suites (extra args go to pytest)",
                   add_help=False)

    p = sub.add_parser("snapshot", help="record a node's or a cluster's evidence as a bundle")
    p.add_argument("-o", "--output", required=True, help="bundle file to write (JSON, 0600)")
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help=f"profile NAME|PATH (default {DEFAULT_PROFILE}; a bundle records "
                   "what the profile asks to read)")
    p.add_argument("--hosts", default=None, help="node target (default local://)")
    p.add_argument("--root", default=None, help="read host files under this directory")
    p.add_argument("--sudo", action="store_true", help="read the node's files with sudo")
    p.add_argument("--ssh-config", default=None, help="ssh_config file for ssh:// targets")
    p.add_argument("--ssh-identity-file", default=None,
                   help="private key for ssh:// targets")
    p.add_argument("--ssh-accept-new-host-keys", action="store_true",
                   help="INSECURE: accept SSH host keys not yet known")
    p.add_argument("--nri-probe", action="store_true",
                   help="also run the live NRI probe (registers a plugin, starts a probe pod)")
    p.add_argument("--nri-socket", default=None,
                   help="NRI socket of the node (default: the profile's)")
    p.add_argument("--cri-socket", default=None,
                   help="CRI socket of the node (default: the profile's)")
    p.add_argument("--allow-reboot", action="store_true",
                   help="DESTRUCTIVE: also run and record the reboot test")
    p.add_argument("--reboot-timeout", type=float, default=600, metavar="S",
                   help="--allow-reboot: how long to wait for the node (default 600 s)")
    p.add_argument("--kubeconfig", default=None,
                   help="record the cluster layers of this cluster instead of a node (without "
                   "node options, --context or $KUBECONFIG also mean the cluster, its files "
                   "merged as kubectl merges them)")
    p.add_argument("--context", default=None, help="kubeconfig context (default: its "
                   "current-context)")
    p.add_argument("--layers", default=None,
                   help="record only these layers (comma-separated; default: every layer of "
                   "the target's scope; a node's host snapshot is always recorded)")
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("evaluate", help="judge evidence bundles offline")
    p.add_argument("bundles", nargs="+", metavar="BUNDLE",
                   help="evidence bundles (kgc snapshot -o FILE)")
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help=f"profile NAME|PATH to judge with (default {DEFAULT_PROFILE})")
    p.add_argument("--layers", default=None, help="only these layers (comma-separated)")
    p.add_argument("--json", action="store_true",
                   help="print the whole verdict (run, overall, counts, results) as JSON")
    p.add_argument("-o", "--output", default=None, metavar="FILE",
                   help="also write the verdict (kgc-verdict/1) to FILE: what `kgc gate` reads")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("report", help="build the HTML report from allure-results (Allure 3)")
    p.add_argument("--results", default=os.path.join("reports", "allure-results"),
                   help="allure-results of the run (default reports/allure-results)")
    p.add_argument("--out", default=os.path.join("reports", "html"),
                   help="the report's directory (default reports/html)")
    p.add_argument("--verdict", default=None,
                   help="the run's verdict.json (default: beside the results directory)")
    p.add_argument("--history", default=None, metavar="FILE",
                   help="Allure history file kept between runs (trends across nights)")
    p.add_argument("--profile", default=None,
                   help="the policy for the report's quality gate (default: the run's profile)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("profile", help="profile tools")
    psub = p.add_subparsers(dest="profile_cmd", required=True)
    pc = psub.add_parser("check", help="validate a profile file or built-in name")
    pc.add_argument("file", metavar="FILE|NAME", help="a profile file or a built-in name")
    pc.set_defaults(func=cmd_profile)

    _cleanup_parser(sub)
    _cluster_access_parsers(sub)

    # -- release gating (kgc.gate / kgc.image): kgc gate, kgc diff, kgc image ---------

    register_gating(sub)
    # -- end release gating -----------------------------------------------------------

    register_fleet(sub)
    sub.add_parser("node-run", help="the fleet image's entry point: the node layers against "
                   "a node's root mounted at /host (args: kgc node-run --help)", add_help=False)

    sub.add_parser("guest", help="in-guest collector (args go to python -m kgc.guest)",
                   add_help=False)
    # plug-in commands (never one that shadows a built-in), listed in --help; main() hands
    # them the rest of the line
    installed = _plugins()
    names = sorted((set(PLUGIN_HINTS) | set(installed)) - set(sub.choices))
    for name in names:
        what = PLUGIN_HINTS[name][0] if name in PLUGIN_HINTS else f"from {installed[name]}"
        if name not in installed:
            what += f" (not installed: pip install {PLUGIN_HINTS[name][1]})"
        sub.add_parser(name, help=what, add_help=False)
    ap.set_defaults(plugin_commands=frozenset(names))
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logfilter.install()  # the client's and credential plugins' logs, redacted
    # `certify`, `guest`, `node-run` and the plug-in commands hand the rest of the line to
    # another program
    first = None
    for i, tok in enumerate(argv):
        if not tok.startswith("-"):
            if tok in PASSTHROUGH:
                return PASSTHROUGH[tok](argparse.Namespace(), argv[i + 1:])
            first = i
            break
    ap = build_parser()
    if first is not None and argv[first] in ap.get_default("plugin_commands"):
        return cmd_plugin(argv[first], argv[first + 1:])
    a = ap.parse_args(argv)
    try:
        return int(a.func(a))
    except (ProfileError, UsageError, FleetUsage, UnwritableOutput) as exc:
        print(f"kgc: {str(exc).replace(chr(10), ' ')}", file=sys.stderr)
        return 2
    except Unreachable as exc:  # a valid target that did not answer: the run failed
        print(f"kgc: {exc}", file=sys.stderr)
        if exc.remediation:
            print(f"  fix: {exc.remediation}", file=sys.stderr)
        return 1
    except TargetError as exc:  # a bad spec or kubeconfig, refused credentials
        print(f"kgc: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception:  # noqa: BLE001 - a defect of kgc's own: the documented exit 3
        import traceback

        traceback.print_exc()
        print("kgc: internal error (a defect in kgc): report it with the traceback above",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
