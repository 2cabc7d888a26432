"""The release-gating subcommands of `kgc`: ``gate``, ``diff`` and ``image``.

:func:`register` adds them to kgc's argument parser. Each command maps its own bad input
(a corrupt, foreign or empty verdict; an image it cannot read; a bad profile) to exit 2 with
one line on stderr and nothing written, and a defect of its own to exit 3.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from kgc.core.options import add_deprecated
from kgc.core.profile import DEFAULT_PROFILE, Profile, ProfileError, load_profile
from kgc.core.report import profile_digest
from kgc.gate import diff as gdiff
from kgc.gate.gate import (
    VerdictDoc,
    VerdictError,
    evaluate,
    gate_profile,
    layer_catalogue,
    load_verdict,
    render,
)
from kgc.image.boot_qemu import boot_check
from kgc.image.check import ImageError, main_check


class _BadInput(Exception):
    pass


def _emit(text: str) -> None:
    """Print; a reader that went away (`kgc gate v.json | head`) is not an error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _guarded(name: str, fn: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    def run(a: argparse.Namespace) -> int:
        try:
            return fn(a)
        except (VerdictError, ProfileError, _BadInput) as exc:
            print(f"kgc {name}: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
        except Exception as exc:  # noqa: BLE001 - reported as a kgc defect (exit 3), not hidden
            traceback.print_exc(file=sys.stderr)
            print(f"kgc {name}: internal error ({type(exc).__name__}: {exc}): a defect in kgc",
                  file=sys.stderr)
            return 3

    return run


def profile_for(doc: VerdictDoc, name: str | None) -> Profile:
    try:
        return gate_profile(doc, name)
    except VerdictError as exc:
        raise _BadInput(str(exc)) from None


def cmd_gate(a: argparse.Namespace) -> int:
    doc = load_verdict(a.verdict)
    prof = profile_for(doc, a.profile)
    scopes, checks = layer_catalogue()
    # the digest of the profile loaded here: a verdict judged with other content under
    # this name is refused
    res = evaluate(doc, prof.policy, prof.name, scopes, checks, digest=profile_digest(prof))
    _emit(json.dumps(res.to_dict(), indent=2, default=str) if a.json else render(res))
    return 0 if res.green else 1


def cmd_diff(a: argparse.Namespace) -> int:
    old = load_verdict(a.old)
    new = load_verdict(a.new)
    prof = profile_for(new, a.profile)
    scopes, checks = layer_catalogue()
    d = gdiff.diff(old, new, prof.policy, prof.name, scopes, checks,
                   digest=profile_digest(prof), timing=a.timing)
    for w in d.warnings:
        print(f"kgc diff: {w}", file=sys.stderr)
    _emit(json.dumps(d.to_dict(), indent=2, default=str) if a.json else gdiff.render(d))
    return 1 if d.regressed else 0


def cmd_image(a: argparse.Namespace) -> int:
    if a.image_cmd != "check":
        raise _BadInput("usage: kgc image check IMAGE --profile P")
    if a.boot:
        try:
            return boot_check(a)
        except ImageError as exc:
            raise _BadInput(str(exc)) from None
    prof = load_profile(a.profile)
    try:
        return main_check(a.image, prof, a.report_dir, a.hardware, a.layers, a.keep_tree,
                          a.json, sys.argv[1:], a.timeout)
    except ImageError as exc:
        raise _BadInput(str(exc)) from None


def register(sub: Any) -> None:
    """Add `kgc gate`, `kgc diff` and `kgc image` to kgc's subcommand parser."""
    p = sub.add_parser("gate", help="gate a verdict.json against the profile's release policy "
                       "(exit 0 certified, 1 not, 2 bad input)")
    p.add_argument("verdict", help="a verdict.json (kgc-verdict/1)")
    p.add_argument("--profile", default=None, metavar="NAME|PATH",
                   help="policy from this profile (default: the one the verdict was judged "
                   "against)")
    p.add_argument("--json", action="store_true", help="the gate's result as JSON")
    p.set_defaults(func=_guarded("gate", cmd_gate))

    p = sub.add_parser("diff", help="compare two verdicts; exit 1 when NEW regressed under "
                       "the policy")
    p.add_argument("old", help="the earlier verdict.json")
    p.add_argument("new", help="the later verdict.json (gated: exit 1 when it regressed)")
    p.add_argument("--profile", default=None, metavar="NAME|PATH",
                   help="policy from this profile (default: the one NEW was judged against)")
    p.add_argument("--timing", action="store_true",
                   help="also show figures that are timing noise (kernel log timestamps, "
                   "waits, durations)")
    p.add_argument("--json", action="store_true", help="the comparison as JSON")
    p.set_defaults(func=_guarded("diff", cmd_diff))

    p = sub.add_parser("image", help="certify a node image file (qcow2 or raw), read-only")
    isub = p.add_subparsers(dest="image_cmd", required=True)
    c = isub.add_parser("check", help="judge every check that can be judged from the image's "
                        "files; the others skip")
    c.add_argument("image", help="qcow2 or raw disk image (partitioned, or a bare ext4)")
    c.add_argument("--profile", default=DEFAULT_PROFILE,
                   help=f"the profile the image is judged with (default {DEFAULT_PROFILE})")
    c.add_argument("--hardware", default=None, metavar="BUNDLE",
                   help="PCI inventory of the platform: a `kgc snapshot` bundle of one of its "
                   "nodes (without it, per-device persistence checks skip)")
    c.add_argument("--layers", default=None,
                   help="node layers to judge from files (default: persistence,runtime)")
    c.add_argument("--report-dir", default=os.path.join("reports"),
                   help="where verdict.json and allure-results go (default ./reports)")
    c.add_argument("--keep-tree", action="store_true",
                   help="keep the extracted tree (its path is in verdict.json)")
    c.add_argument("--json", action="store_true", help="print the verdict as JSON")
    c.add_argument("--timeout", type=float, default=600, metavar="S",
                   help="the bound on the whole check (default 600 s): past it, one line and "
                   "exit 2, nothing written")
    c.add_argument("--boot", action="store_true",
                   help="boot the image in QEMU (q35, emulated IOMMU, stand-in "
                   "devices) through its own boot loader, run the host layers and the real "
                   "reboot test over SSH, power off (QEMU, OVMF for UEFI images, mtools)")
    c.add_argument("--ssh-identity-file", dest="ssh_key", default=None, metavar="FILE",
                   help="--boot: a private key the image already trusts (default: inject an "
                   "ephemeral one with a cloud-init NoCloud seed)")
    add_deprecated(c, "--ssh-key", "--ssh-identity-file", "ssh_key", "FILE")
    c.add_argument("--boot-host-key", default=None, metavar="FILE.pub",
                   help="--boot with --ssh-identity-file: the image's SSH host public key "
                   "(pinned)")
    c.add_argument("--ssh-user", default="root",
                   help="--boot: the user to log in as (default root)")
    c.add_argument("--boot-timeout", type=float, default=900, metavar="S",
                   help="--boot: how long the first boot may take (default 900 s)")
    c.add_argument("--reboot-timeout", type=float, default=900, metavar="S",
                   help="--boot: how long the reboot test waits for the node (default 900 s)")
    c.set_defaults(func=_guarded("image", cmd_image))
