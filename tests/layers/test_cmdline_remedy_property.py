"""Property (issue 18.2, kernel command line): when an IOMMU check fails for a command line
reason, its fix edits the boot loader line that is there (GRUB_CMDLINE_LINUX /
GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, as Debian's grub reads it), the edited file
is still valid shell that grub-mkconfig can source (checked by sourcing it with /bin/sh), and
the command line the next boot gets from it makes iommu.cmdline pass.

The next boot's command line is composed as grub-mkconfig's 10_linux composes the default
entry: ``${GRUB_CMDLINE_LINUX} ${GRUB_CMDLINE_LINUX_DEFAULT}`` after the image and root
(grub 2 util/grub.d/10_linux.in, linux_entry "${GRUB_CMDLINE_LINUX}
${GRUB_CMDLINE_LINUX_DEFAULT}"). The words are the ones real nodes carry (quiet, splash,
console=ttyS0,115200n8, iommu=pt) and the IOMMU switches the checks judge.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.core.hostfs import HostSnapshot
from kgc.core.model import Status
from kgc.core.profile import load_profile
from kgc.core.target import NodeTarget
from kgc.evidence.vfio_config import apply_edits
from kgc.layers import iommu
from systree import SysTree

PROFILE = load_profile("generic-nvidia-passthrough")
WORDS = ("quiet", "splash", "console=ttyS0,115200n8", "iommu=pt", "intel_iommu=off",
         "intel_iommu=on", "iommu=off", "intel_iommu=sm_on", "nomodeset")
LINE = st.lists(st.sampled_from(WORDS), max_size=4)
SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _grub(linux: list[str] | None, default: list[str] | None) -> str:
    out = "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\n"
    if default is not None:
        out += f'GRUB_CMDLINE_LINUX_DEFAULT="{" ".join(default)}"\n'
    if linux is not None:
        out += f'GRUB_CMDLINE_LINUX="{" ".join(linux)}"\n'
    return out


def _sourced(grub: str, tmp: Path) -> tuple[str, str]:
    """What grub-mkconfig sees: the file sourced by /bin/sh (a syntax error fails here)."""
    f = tmp / "grub"
    f.write_text(grub)
    res = subprocess.run(["sh", "-c", '. "$1" && printf "%s\\n%s" "$GRUB_CMDLINE_LINUX" '
                          '"$GRUB_CMDLINE_LINUX_DEFAULT"', "sh", str(f)],
                         capture_output=True, text=True, check=True)
    linux, _, default = res.stdout.partition("\n")
    return linux, default


def _boot(grub: str, tmp: Path) -> str:
    linux, default = _sourced(grub, tmp)
    return " ".join(["BOOT_IMAGE=/vmlinuz-6.1.0-50-amd64", "root=/dev/sda1", "ro", linux,
                     default]).strip()


def _base(tmp: Path) -> HostSnapshot:
    t = SysTree(tmp / "node")
    t.cpu("intel").acpi("DMAR", "APIC").kconfig().cmdline("placeholder")
    t.pci("0000:41:00.0", "10de", "2331", "030200", "nvidia")
    return NodeTarget("local://", root=str(t.root)).collect(iommu.QUERY)


def _with(snap: HostSnapshot, grub: str, running: str) -> HostSnapshot:
    return dataclasses.replace(snap, files={**snap.files, "/etc/default/grub": grub,
                                            "/proc/cmdline": running + "\n"})


@SETTINGS
@given(linux=st.one_of(st.none(), LINE), default=st.one_of(st.none(), LINE))
def test_cmdline_fix_gives_valid_grub_and_a_passing_next_boot(  # type: ignore[no-untyped-def]
        tmp_path_factory, linux, default) -> None:
    tmp = tmp_path_factory.mktemp("grub")
    base = _base(tmp)
    grub = _grub(linux, default)
    running = _boot(grub, tmp)  # the node booted from this config
    c = iommu.LAYER.checks.get("iommu.cmdline")
    v = c.judge(iommu.parse(_with(base, grub, running)), PROFILE, "node")
    if v.status is Status.PASS:
        return
    steps = v.evidence.get("fix")
    assert steps, (v.reason, "a command line failure without a machine fix")
    assert steps[-1] == {"run": "reboot"} and "update-grub" in steps[-2]["run"]
    fixed = apply_edits({"/etc/default/grub": grub}, steps)["/etc/default/grub"]
    assert fixed.count("GRUB_CMDLINE_LINUX=") <= 1, fixed  # no duplicate variable
    nxt = _boot(fixed, tmp)  # also proves the edited file is valid shell
    again = c.judge(iommu.parse(_with(base, fixed, nxt)), PROFILE, "node")
    assert again.status is Status.PASS, (grub, fixed, again.reason)
    # nothing the user had that the fix did not have to touch is lost
    keep = {w for w in (linux or []) + (default or []) if "iommu" not in w}
    assert keep <= set(nxt.split()), (grub, fixed)
    if "intel_iommu=sm_on" in (linux or []) + (default or []):  # scalable mode stays on
        assert any("sm_on" in w.split("=", 1)[-1].split(",") for w in nxt.split()
                   if w.startswith("intel_iommu=")), (grub, fixed)
    en = iommu.LAYER.checks.get("iommu.enabled").judge(
        iommu.parse(_with(base, fixed, nxt)), PROFILE, "node")
    assert "kernel command line" not in en.reason, en.reason
