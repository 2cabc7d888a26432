"""``kgc lab ...`` (also ``kgc-lab``, ``python -m kgc_lab.cli``): the one entry to the labs.
Only this module and the labs import lab code; the product's commands never do.

    kgc lab node build|start|stop|reboot|list|ssh|scenarios|bench   QEMU node images
    kgc lab containerd list|run|up                                  real containerd + NRI
    kgc lab cluster up|down|status                                  Kubernetes control plane
    kgc lab run --scenario NAME [--report-dir DIR] [--json]         one documented scenario
                                                                    (prints its verdict table)
    kgc lab certify [--stage NAME]                                  the main job
    kgc lab cleanup [--dry-run] [--orphans] [--cri-socket PATH]     stop all the labs left

Exit codes: 0 ok; 1 a scenario differs from its documentation, a stage failed, cleanup
left something or (status) the lab is not up; 2 usage, or the lab cannot run here; 130
interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from kgc_lab import LAB_MODULES
from kgc_lab.common import LabError, LabUnavailable


def _cmd_run(a: argparse.Namespace) -> int:
    from kgc_lab.scenarios import scenarios

    sc = scenarios()[a.scenario]
    out = sc.run(Path(a.report_dir), bool(a.keep))
    if a.json:
        print(json.dumps({"scenario": sc.name, "lab": sc.lab,
                          "verdict_json": str(out.verdict_json),
                          "matches_documented": out.matches,
                          "mismatches": dict(out.mismatches)}, indent=1))
    else:
        print("\n".join(scenario_table(sc.name, out.verdict_json, out.mismatches)))
    if not out.matches:
        print(f"kgc lab run: scenario {sc.name}: verdicts differ from the documented ones",
              file=sys.stderr)
        return 1
    return 0


def scenario_table(name: str, verdict_json: Path, mismatches: Any) -> list[str]:
    """What `kgc lab run` prints: the verdict table it judged (the console's table), each
    check that differs from the documented verdict, and where the verdict is."""
    from kgc.core import report

    doc = json.loads(Path(verdict_json).read_text())
    lines = [f"kgc lab run: scenario {name}", *report.summary_table(doc.get("results", []))]
    for check, why in dict(mismatches).items():
        lines.append(f"  DIFFERS from the documented verdict: {check}: {why}")
    lines.append(f"documented verdicts: {'match' if not mismatches else 'DIFFER'}; "
                 f"verdict: {verdict_json}")
    return lines


def _cmd_cleanup(a: argparse.Namespace) -> int:
    from kgc_lab.cleanup import cleanup

    rep = cleanup(dry_run=a.dry_run, orphans_only=a.orphans, lab=a.lab,
                  cri_sockets=tuple(a.cri_socket or ()), grace_s=a.grace)
    if a.json:
        print(json.dumps(rep.to_dict(), indent=1))
    else:
        for line in rep.lines():
            print(line)
    return 0 if rep.clean else 1


def register(subparsers: Any) -> None:
    """Add ``kgc lab cleanup``."""
    cl = subparsers.add_parser("cleanup", help="stop every process, VM, containerd, mount and "
                               "socket the labs left (also after a killed run)")
    cl.add_argument("--dry-run", action="store_true", help="only say what would be done")
    cl.add_argument("--orphans", action="store_true",
                    help="only labs whose run is gone (leave labs of live runs alone)")
    cl.add_argument("--lab", choices=("node", "node-build", "containerd", "cluster"),
                    help="only this lab")
    cl.add_argument("--cri-socket", action="append", metavar="PATH",
                    help="also sweep NRI probe pods off this runtime (repeatable)")
    cl.add_argument("--grace", type=float, default=10.0,
                    help="seconds between SIGTERM and SIGKILL (default 10)")
    cl.add_argument("--json", action="store_true")
    cl.set_defaults(func=_cmd_cleanup)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    from kgc_lab.scenarios import scenarios

    ap = argparse.ArgumentParser(
        prog="kgc lab", description="Labs: QEMU node images, containerd, Kubernetes cluster",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="lab_cmd", required=True, metavar="LAB_COMMAND")
    for name in LAB_MODULES:
        importlib.import_module(name).register(sub)
    known = scenarios()
    run = sub.add_parser("run", help="run one named lab scenario and write its verdict.json")
    run.add_argument("--scenario", required=True, choices=sorted(known), metavar="NAME",
                     help="one of: " + ", ".join(f"{n} ({s.lab})" for n, s in known.items()))
    run.add_argument("--report-dir", default="reports",
                     help="where verdict.json goes (default: ./reports)")
    run.add_argument("--keep", action="store_true", help="leave the lab running afterwards")
    run.add_argument("--json", action="store_true",
                     help="print the outcome as JSON instead of the verdict table")
    run.set_defaults(func=_cmd_run)
    register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(args.func(args))
    except LabUnavailable as exc:
        print(f"kgc lab: lab unavailable: {exc}", file=sys.stderr)
        return 2
    except LabError as exc:
        print(f"kgc lab: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
