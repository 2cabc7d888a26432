"""A read-only host run writes nothing anywhere on the node (issue 9), measured on a booted
lab VM: the whole filesystem -- every file, link and directory on every disk-backed or tmpfs
mount except /proc, /sys, /dev and /run -- is listed (path, size, mtime, mode, link target)
before and after the host layers run over SSH, outside the suite's own temp directory
(/tmp/kgc-*). Directories carry their mtime, so even a write that was cleaned up again (a
work directory made and removed in /var/tmp) shows.

An SSH login itself writes login records (wtmp/lastlog, the journal): what one plain SSH
session changes is measured first on the same node (``noise``). lab/tests/node judges the
result (test_node_no_writes.py); it runs on the good scenario's VM (lab/tests/node/conftest)."""

from __future__ import annotations

from dataclasses import dataclass

from kgc.core.engine import Context
from kgc.core.model import Verdict
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc_lab.node.lab import NodeVM
from kgc_lab.node.runner import lab_profile

# every mounted filesystem that can hold files, minus kernel views and /run (runtime state
# of services and login sessions, rebuilt at every boot); the suite's own temp dirs pruned
LISTING = r"""
set -e
mounts=$(awk '{print $2, $3}' /proc/mounts | while read -r m t; do
  case "$t" in proc|sysfs|devtmpfs|devpts|cgroup|cgroup2|securityfs|pstore|bpf|debugfs) continue;;
    tracefs|mqueue|hugetlbfs|configfs|fusectl|autofs|binfmt_misc|efivarfs|nsfs) continue;; esac
  case "$m" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*|/run|/run/*) continue;; esac
  echo "$m"
done | sort -u)
for m in $mounts; do
  find "$m" -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run \
    -o -path '/tmp/kgc-*' -o -path '/var/tmp/kgc-*' \) -prune -o \
    \( -type f -o -type l -o -type d \) -printf '%p %s %T@ %m %l\n' 2>/dev/null
done | sort -u
"""

# A bare-metal node with CPU microcode packages boots an initramfs that starts with an
# uncompressed "early" cpio (the microcode) before the compressed main archive; for such an
# image unmkinitramfs (under lsinitramfs) copies the main archive into ${TMPDIR:-/var/tmp}.
# The lab image has no microcode, so give its initramfs an early segment the same way
# (the VM boots its kernel and initrd from the host: this changes nothing for the boot).
EARLY_MICROCODE = r"""
set -e
k=$(uname -r); d=$(mktemp -d)
mkdir -p "$d/kernel/x86/microcode"
echo stand-in > "$d/kernel/x86/microcode/GenuineIntel.bin"
(cd "$d" && find . | cpio -o -H newc --quiet) > /root/early.cpio
cat /root/early.cpio "/boot/initrd.img-$k" > /boot/initrd.new
mv /boot/initrd.new "/boot/initrd.img-$k"
rm -rf "$d" /root/early.cpio
sync
"""


@dataclass
class NoWrites:
    noise: set[str]  # what one plain SSH login changed
    written: set[str]  # what the host run changed beyond that (must be empty)
    verdicts: list[Verdict]
    round_trips: int


def _listing(vm: NodeVM) -> set[str]:
    return set(vm.ssh(LISTING, timeout=600).stdout.splitlines())


def _changed(a: set[str], b: set[str]) -> set[str]:
    return {line.split(" ", 1)[0] for line in a ^ b}


def whole_filesystem_run(vm: NodeVM) -> NoWrites:
    """Give the node's initramfs an early segment, measure one SSH login's writes, run every
    host layer over SSH, and list what the run changed beyond the login's noise."""
    vm.ssh(EARLY_MICROCODE)
    a = _listing(vm)
    vm.ssh("true")
    b = _listing(vm)
    noise = _changed(a, b)
    layers = load_layers()
    host = [n for n in ("iommu", "vfio", "persistence", "runtime") if n in layers]
    target = NodeTarget(vm.spec, ssh_config=str(vm.ssh_config), timeout_s=60)
    verdicts = Context(target, lab_profile(), layers).judge_all(host)
    c = _listing(vm)
    # /tmp: the suite's own temp directory (kgc-initramfs.*) is made and removed there
    written = _changed(b, c) - noise - {"/tmp"} - {
        p for p in _changed(b, c) if p.startswith("/var/log/journal/")}
    return NoWrites(noise, written, verdicts, target.round_trips)
