"""`kgc`: the command line around the suites.

    kgc checks [--format md|json]     the check catalogue, from the registry
    kgc certify [pytest args]         run the conformance suites (default: -m host)
    kgc snapshot [--hosts SPEC] -o F  record a node's host evidence as a bundle
    kgc evaluate BUNDLE...            judge bundles offline (no pytest), print verdicts
    kgc report                        allure-results -> reports/html/index.html (Allure 3)
    kgc profile check FILE            validate a profile
    kgc lab ...                       the labs (node images, containerd, cluster)
    kgc guest --out DIR               the in-guest collector (what a GPU pod runs)

Exit codes: 0 ok / certified, 1 not certified, 2 usage or profile error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kgc import __version__
from kgc.core import report
from kgc.core.engine import Context, catalogue, load_layers
from kgc.core.profile import DEFAULT_PROFILE, ProfileError, load_profile
from kgc.core.target import BundleTarget, LiveTarget, TargetError, write_bundle

REPO_ROOT = Path(__file__).resolve().parents[2]


class UsageError(Exception):
    pass


def _lab_modules() -> list[Any]:
    from kgc.lab import LAB_MODULES

    mods = []
    for name in LAB_MODULES:
        try:
            mods.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return mods


def catalogue_markdown() -> str:
    lines = ["| id | layer | severity | what it certifies |", "|---|---|---|---|"]
    for c in catalogue():
        lines.append(f"| `{c.id}` | {c.layer} | {c.severity} | {c.title} |")
    return "\n".join(lines) + "\n"


def cmd_checks(a: argparse.Namespace) -> int:
    reg = catalogue()
    if a.write_readme:
        import re

        readme = REPO_ROOT / "README.md"
        text = readme.read_text()
        new = re.sub(r"<!-- checks:start -->\n.*<!-- checks:end -->",
                     lambda _m: "<!-- checks:start -->\n" + catalogue_markdown()
                     + "<!-- checks:end -->", text, flags=re.S)
        readme.write_text(new)
        print(f"{readme}: catalogue {'updated' if new != text else 'already current'}")
        return 0
    if a.format == "json":
        print(
            json.dumps(
                [
                    {
                        "id": c.id,
                        "layer": c.layer,
                        "title": c.title,
                        "severity": str(c.severity),
                        "remediation": c.remediation,
                    }
                    for c in reg
                ],
                indent=2,
            )
        )
        return 0
    sys.stdout.write(catalogue_markdown())
    return 0


def cmd_certify(a: argparse.Namespace, extra: list[str]) -> int:
    args = [sys.executable, "-m", "pytest", str(REPO_ROOT / "conformance")]
    if not any(x == "-m" or x.startswith("-m") for x in extra):
        args += ["-m", "host and not destructive"]
    args += extra
    return subprocess.call(args, cwd=REPO_ROOT)


def cmd_snapshot(a: argparse.Namespace) -> int:
    profile = load_profile(a.profile)
    layers = load_layers()
    target = LiveTarget(
        spec=a.hosts,
        root=a.root or "",
        sudo=a.sudo,
        ssh_config=a.ssh_config,
        ssh_identity_file=a.ssh_identity_file,
    )
    options = {"nri_socket": a.nri_socket, "cri_socket": a.cri_socket}
    ctx = Context(target=target, profile=profile, layers=layers, options=options)
    try:
        snap = ctx.host()
    except TargetError as exc:
        print(f"kgc snapshot: {exc}", file=sys.stderr)
        return 1
    extra: dict[str, Any] = {}
    if a.with_nri:
        # the live probe: registers on the node's NRI socket and starts one labelled probe
        # pod through CRI, removed afterwards; its evidence replays offline like the rest
        extra["nri"] = ctx.evidence("nri").to_dict()
    out = write_bundle(Path(a.output), target.name, snap, extra)
    print(
        f"{out}: {len(snap.files)} files, {len(snap.links)} links, {len(snap.dirs)} dirs, "
        f"{len(snap.commands)} commands from {target.name} in {target.round_trips} round trip(s)"
    )
    return 0


def evaluate_bundles(paths: list[Path], profile_name: str) -> list[dict[str, Any]]:
    profile = load_profile(profile_name)
    layers = load_layers()
    host_layers = [n for n, lay in layers.items() if lay.query is not None]
    out = []
    for p in paths:
        ctx = Context(target=BundleTarget(p), profile=profile, layers=layers)
        out += [v.to_dict() for v in ctx.judge_all(host_layers)]
    return out


def cmd_evaluate(a: argparse.Namespace) -> int:
    try:
        results = evaluate_bundles([Path(p) for p in a.bundles], a.profile)
    except TargetError as exc:
        print(f"kgc evaluate: {exc}", file=sys.stderr)
        return 2
    if a.json:
        print(
            json.dumps(
                {"overall": report.overall(results), "results": results}, indent=2, default=str
            )
        )
    else:
        for line in report.summary_table(results):
            print(line)
        print(f"overall: {report.overall(results).upper()}")
    return 0 if report.overall(results) == "pass" else 1


def cmd_report(a: argparse.Namespace) -> int:
    try:
        index = report.generate_html(Path(a.results), Path(a.out))
    except report.ReportError as exc:
        print(f"kgc report: {exc}", file=sys.stderr)
        return 1
    print(index)
    return 0


def cmd_profile(a: argparse.Namespace) -> int:
    p = load_profile(a.file)
    print(f"{p.source}: ok ({p.name}: {len(p.host.passthrough.targets)} target selector(s))")
    return 0


def cmd_guest(a: argparse.Namespace, extra: list[str]) -> int:
    from kgc import guest

    return guest.main(extra)


def build_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    ap = argparse.ArgumentParser(prog="kgc", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", action="version", version=f"kgc {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    p = sub.add_parser("checks", help="list the check catalogue")
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("--write-readme", action="store_true",
                   help="refresh the catalogue section of README.md")
    p.set_defaults(func=cmd_checks)

    p = sub.add_parser("certify", help="run the conformance suites (extra args go to pytest)")
    p.set_defaults(func=cmd_certify, passthrough=True)

    p = sub.add_parser("snapshot", help="record a node's host evidence into a bundle")
    p.add_argument("--hosts", default="local://", help="testinfra host spec (default local://)")
    p.add_argument("-o", "--output", required=True, help="bundle file to write (JSON)")
    p.add_argument("--profile", default=DEFAULT_PROFILE)
    p.add_argument("--root", default=None, help="read host files under this directory")
    p.add_argument("--sudo", action="store_true")
    p.add_argument("--ssh-config", default=None)
    p.add_argument("--ssh-identity-file", default=None)
    p.add_argument("--with-nri", action="store_true",
                   help="also run the live NRI probe and record what it observed")
    p.add_argument("--nri-socket", default=None)
    p.add_argument("--cri-socket", default=None)
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("evaluate", help="judge evidence bundles offline")
    p.add_argument("bundles", nargs="+")
    p.add_argument("--profile", default=DEFAULT_PROFILE)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("report", help="build the HTML report from allure-results (Allure 3)")
    p.add_argument("--results", default=str(REPO_ROOT / "reports" / "allure-results"))
    p.add_argument("--out", default=str(REPO_ROOT / "reports" / "html"))
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("profile", help="profile tools")
    psub = p.add_subparsers(dest="profile_cmd", required=True)
    pc = psub.add_parser("check", help="validate a profile file or built-in name")
    pc.add_argument("file")
    pc.set_defaults(func=cmd_profile)

    p = sub.add_parser("guest", help="in-guest collector (args go to python -m kgc.guest)")
    p.set_defaults(func=cmd_guest, passthrough=True)

    lab = sub.add_parser("lab", help="labs: QEMU node images, containerd, Kubernetes cluster")
    labsub = lab.add_subparsers(dest="lab_cmd", required=True, metavar="LAB_COMMAND")
    scenarios: dict[str, Any] = {}
    for mod in _lab_modules():
        if hasattr(mod, "register"):
            mod.register(labsub)
        scenarios.update(getattr(mod, "SCENARIOS", {}))
    run = labsub.add_parser("run", help="run one named lab scenario and write its verdicts")
    run.add_argument(
        "--scenario",
        required=True,
        choices=sorted(scenarios),
        help="one of: " + ", ".join(sorted(scenarios)),
    )
    run.add_argument("--report-dir", default=str(REPO_ROOT / "reports"))
    run.set_defaults(func=lambda a: scenarios[a.scenario](a))
    return ap, sub


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap, _ = build_parser()
    # `certify` and `guest` hand the rest of the line to another program
    for i, tok in enumerate(argv):
        if tok in ("certify", "guest") and all(x.startswith("-") for x in argv[:i]):
            a = ap.parse_args(argv[: i + 1])
            return int(a.func(a, argv[i + 1 :]))
    a = ap.parse_args(argv)
    try:
        return int(a.func(a))
    except ProfileError as exc:
        print(f"kgc: {exc}", file=sys.stderr)
        return 2
    except UsageError as exc:
        ap.error(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
