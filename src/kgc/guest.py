"""The in-guest collector: what a GPU pod (inside its Kata microVM) runs to prove where it is.

It is the same batched, read-only collection as on a host — one POSIX sh script built from a
:class:`HostQuery` — aimed at the evidence the GPU-pod and sizing layers judge: vCPUs and
memory the guest sees, the GPU as a PCI device, nvidia-smi's structured report, whether the
kernel is a VM's, and a tiny CUDA computation compared against the CPU.

Standard library only: it must run in any pod image (and on a bare GPU machine) with just
``python3``, or as the generated script with just ``sh`` (``--script``).

    python3 -m kgc.guest --out DIR       # run here, write DIR/guest-bundle.json + raw output
    python3 -m kgc.guest --script        # print the script (for `kubectl exec ... sh -c`)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from kgc.core.hostfs import HostQuery, build_script, new_boundary, parse_output

PCI = "/sys/bus/pci/devices"

# One line of Python run inside the guest; no single quotes (it is wrapped in them).
_CUDA_CHECK = (
    "import json\n"
    "d = {}\n"
    "try:\n"
    "    import torch\n"
    "    d['torch'] = torch.__version__\n"
    "    d['available'] = torch.cuda.is_available()\n"
    "    if d['available']:\n"
    "        p = torch.cuda.get_device_properties(0)\n"
    "        d.update(name=p.name, total_memory=p.total_memory, multiprocessors=p.multi_processor_count, capability=str(p.major) + '.' + str(p.minor), device_count=torch.cuda.device_count())\n"
    "        g = torch.Generator().manual_seed(7)\n"
    "        a = torch.randn(512, 512, generator=g, dtype=torch.float64)\n"
    "        b = torch.randn(512, 512, generator=g, dtype=torch.float64)\n"
    "        c = (a.cuda() @ b.cuda()).cpu()\n"
    "        ref = a @ b\n"
    "        d['matmul_max_abs_err'] = float((c - ref).abs().max())\n"
    "        d['matmul_ok'] = bool(torch.allclose(c, ref, rtol=1e-9, atol=1e-9))\n"
    "except Exception as e:\n"
    "    d['error'] = type(e).__name__ + ': ' + str(e)\n"
    "print(json.dumps(d))\n"
).replace("'", '"')

GUEST_QUERY = HostQuery(
    files=(
        "/proc/cmdline",
        "/proc/meminfo",
        "/proc/cpuinfo",
        "/proc/sys/kernel/osrelease",
        "/proc/version",
        "/etc/os-release",
        "/sys/devices/system/cpu/online",
        "/sys/devices/system/cpu/possible",
        "/sys/class/dmi/id/sys_vendor",
        "/sys/class/dmi/id/product_name",
        "/sys/class/dmi/id/product_version",
        "/sys/class/dmi/id/board_vendor",
        "/sys/class/dmi/id/bios_vendor",
        "/sys/hypervisor/type",
        "/proc/driver/nvidia/version",
        "/proc/driver/nvidia/gpus/*/information",
        f"{PCI}/*/vendor",
        f"{PCI}/*/device",
        f"{PCI}/*/class",
        f"{PCI}/*/subsystem_vendor",
        f"{PCI}/*/subsystem_device",
        f"{PCI}/*/resource",
        f"{PCI}/*/numa_node",
        f"{PCI}/*/current_link_speed",
        f"{PCI}/*/current_link_width",
    ),
    links=(f"{PCI}/*/driver", f"{PCI}/*/iommu_group"),
    dirs=(PCI, "/sys/kernel/iommu_groups", "/dev/vfio", "/proc/driver/nvidia/gpus"),
    commands=(
        ("uname", "uname -a"),
        ("nproc", "nproc --all; nproc"),
        ("virt", "systemd-detect-virt 2>/dev/null || echo unknown"),
        ("dev_nvidia", "ls -1 /dev | grep -E '^nvidia' || true"),
        ("nvidia_smi_xml", "nvidia-smi -q -x"),
        ("nvidia_smi", "nvidia-smi"),
        (
            "nvidia_smi_csv",
            "nvidia-smi --query-gpu=name,uuid,pci.bus_id,memory.total,driver_version --format=csv",
        ),
        ("lspci", "command -v lspci >/dev/null && lspci -nnk || echo KGC-NO-LSPCI"),
        ("cuda_check", "python3 -c '" + _CUDA_CHECK + "'"),
    ),
)


def script() -> tuple[str, str]:
    boundary = new_boundary()
    return build_script(GUEST_QUERY, boundary), boundary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kgc.guest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write guest-bundle.json and guest-raw.txt here")
    ap.add_argument("--script", action="store_true", help="print the collector script and exit")
    ap.add_argument("--label", default="", help="free text stored with the evidence (where/when)")
    a = ap.parse_args(argv)
    text, boundary = script()
    if a.script:
        sys.stdout.write(text)
        return 0
    if a.out is None:
        ap.error("--out or --script is required")
    t0 = time.monotonic()
    proc = subprocess.run(
        ["sh", "-c", text], capture_output=True, text=True, timeout=600, check=False
    )
    wall = time.monotonic() - t0
    snap = parse_output(proc.stdout, boundary)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "guest-raw.txt").write_text(proc.stdout)
    doc = {
        "format": "kgc-bundle/1",
        "target": "guest",
        "label": a.label,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "collector_wall_s": round(wall, 3),
        "collector_rc": proc.returncode,
        "host": snap.to_dict(),
    }
    (a.out / "guest-bundle.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
    print(
        f"collected {len(snap.files)} files, {len(snap.commands)} commands in {wall:.2f}s "
        f"(complete={snap.complete})"
    )
    return 0 if snap.complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
