"""`kgc lab ...` (also `kgc-lab`): the built-in labs' command line. Only this module and the
labs import lab code; the product's commands never do."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from kgc.lab import LAB_MODULES


def _lab_modules() -> list[Any]:
    return [importlib.import_module(name) for name in LAB_MODULES]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kgc lab", description="the built-in labs")
    labsub = ap.add_subparsers(dest="lab_cmd", required=True, metavar="LAB_COMMAND")
    scenarios: dict[str, Any] = {}
    for mod in _lab_modules():
        if hasattr(mod, "register"):
            mod.register(labsub)
        scenarios.update(getattr(mod, "SCENARIOS", {}))
    run = labsub.add_parser("run", help="run one named lab scenario and write its verdicts")
    run.add_argument("--scenario", required=True, choices=sorted(scenarios),
                     help="one of: " + ", ".join(sorted(scenarios)))
    run.add_argument("--report-dir", default=str(Path("reports")))
    run.set_defaults(func=lambda a: scenarios[a.scenario](a))
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(a.func(a))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
