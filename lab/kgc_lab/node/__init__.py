"""Node-image lab: a small Debian bookworm node booted in QEMU (TCG) with an emulated IOMMU.

The lab is real: a root filesystem built with debootstrap from Debian's archive, its own
kernel and initramfs (the initramfs is built in a chroot on the host, never inside the slow
emulated guest), systemd, udev, sshd, driverctl. Stand-in devices take the place of GPUs:
the machine is the product's (:mod:`kgc.image.qemu`, the one `kgc image check --boot`
boots an image on; its docstring has the table of guest addresses, roles and ids that
profiles/lab.yaml names).

Boot: the lab acts as the boot loader. It reads the image's own boot entry
(``/boot/loader/entries/debian.conf``, BLS type 1) and boots that kernel, initramfs and
command line with ``-kernel/-initrd/-append``; a reboot inside the guest re-runs the same
entry. Configuration that changes the initramfs or the command line is therefore baked into
an image *variant* (built from the cached base tree, cached by content hash) before boot.

Everything heavy lives under ``${KGC_CACHE:-~/.cache/kgc}/node/``.
"""

from __future__ import annotations

from kgc_lab.node.lab import (  # noqa: F401
    Hardware,
    NodeVM,
    Variant,
    build_base,
    build_variant,
    cache_root,
    register,
)
from kgc_lab.node.runner import certify_stage  # noqa: F401,E402
from kgc_lab.node.scenarios import SCENARIO_SPECS, SCENARIOS, VARIANTS  # noqa: F401,E402
