"""Node-image lab: a small Debian bookworm node booted in QEMU (TCG) with an emulated IOMMU.

The lab is real: a root filesystem built with debootstrap from Debian's archive, its own
kernel and initramfs (the initramfs is built in a chroot on the host, never inside the slow
emulated guest), systemd, udev, sshd, driverctl. Stand-in devices take the place of GPUs:

==============  ===========  =========  ==================================================
guest address   device       ids        role (profiles/lab.yaml)
==============  ===========  =========  ==================================================
0000:00:02.0    virtio-net   1af4:1000  SSH NIC, host keeps it
0000:00:03.0    virtio-blk   1af4:1001  root disk, host keeps it
0000:00:04.0    edu          1234:11e8  target "accel0": driverless accelerator
0000:00:05.0    pcie-pci-br  1b36:000e  bridge; its bus 01 is one IOMMU group
0000:01:01.0    e1000        8086:100e  target "gpu0" (competing host driver e1000)
0000:01:02.0    e1000        8086:100e  target "gpu0-fn1" (same group, like HDMI audio)
0000:00:06.0    e1000e       8086:10d3  host keeps it ("host-nic")
0000:00:08.0+   edu ...      1234:11e8  benchmark only: extra accelerators (multifunction)
==============  ===========  =========  ==================================================

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
