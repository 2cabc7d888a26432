"""The in-guest collector: what a GPU pod (inside its Kata microVM) runs to prove where it is.

One read-only POSIX ``sh`` script, printed by ``kgc guest --script`` (or
``python3 -m kgc.guest --script``). Any image with ``sh`` can run it — no Python, no awk, no
coreutils needed: files are read and directories listed with shell builtins, symlinks are
resolved with ``cd -P``. Optional tools are used when the image has them: ``nvidia-smi``
(the GPU as the driver sees it), ``nproc``, ``uname``, ``timeout`` (bounds every external
command), ``dmesg`` and — only if ``python3`` with PyTorch is there — a small GPU-vs-CPU
matmul probe.

It prints one batched record stream (the same record grammar as the host collector in
:mod:`kgc.core.hostfs`, so recorded guest captures and host bundles share one parser):

    @@KGC-<hex>@@ V 3                 header (the boundary is random per script)
    @@KGC-<hex>@@ F /proc/cmdline     a file's lines, then "@@KGC-<hex>@@ R <0|1>", or
                                      "T <bytes> <limit>" (over the limit: not kept) or
                                      "U f" (not a regular file: not read)
    @@KGC-<hex>@@ X /sys/...\n...      a path whose name holds a newline (listed, not read)
    @@KGC-<hex>@@ FE                  the file records are complete
    @@KGC-<hex>@@ LS <root>           "l <link> -> <resolved target>" rows, then R 0
    @@KGC-<hex>@@ D /sys/...          a directory's entries, then R 0
    @@KGC-<hex>@@ C <name>            a command's output, then R <exit status>
    @@KGC-<hex>@@ END                 the collector finished

:func:`kgc.evidence.guest.parse_guest_output` turns that output (a pod's log) into
:class:`kgc.evidence.guest.GuestEvidence`.

    kgc guest --script                   # print the script (mount it from a ConfigMap)
    python3 -m kgc.guest --out DIR       # run it here, write DIR/guest-bundle.json + raw output
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

from kgc.core.hostfs import newline_name_fns, parse_output
from kgc.evidence.guest import parse_guest

# 3: T/U/X file records, FE (bounded, never silently cut); 4: the confidential-GPU records
# (cc_tee, cc_mode, cc_ready; cc_attest when a CDH resource is named). The record grammar
# (V 3) is unchanged: a kgc-guest/3 capture parses as before, with no CC evidence.
COLLECTOR = "kgc-guest/4"
PCI = "/sys/bus/pci/devices"
# a file's content is kept up to this many bytes; a longer one is a "T" record (truncated,
# with the bytes read), never a silently shortened file (1 MiB: a big guest's /proc/cpuinfo)
MAX_FILE_BYTES = 1024 * 1024
CMD_TIMEOUT_S = 120

# Files read (globs expanded by the shell in the guest).
FILES = (
    "/proc/cmdline",
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/proc/zoneinfo",
    "/proc/sys/kernel/osrelease",
    "/proc/version",
    "/etc/os-release",
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/possible",
    "/sys/devices/system/cpu/present",
    "/sys/devices/system/memory/block_size_bytes",
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
)
LINKS = (f"{PCI}/*/driver", f"{PCI}/*/iommu_group")
# /sys/devices/system/memory: the sizing layer counts online memory blocks
DIRS = (PCI, "/sys/kernel/iommu_groups", "/dev/vfio", "/proc/driver/nvidia/gpus",
        "/sys/devices/system/memory")

# The compute probe (only run when python3 exists). No single quotes: it is wrapped in them.
CUDA_CHECK = (
    "import json\n"
    "d = {}\n"
    "try:\n"
    "    import torch\n"
    "except Exception as e:\n"
    "    d['torch'] = None\n"
    "    d['error'] = type(e).__name__ + ': ' + str(e)\n"
    "    print(json.dumps(d))\n"
    "    raise SystemExit(0)\n"
    "try:\n"
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

# --- confidential GPUs (cheap and bounded, so always recorded): the TEE the guest can show
# (Kata's tests, tests/integration/kubernetes/confidential_common.sh: SNP by the kernel line
# "Memory Encryption Features active: ... SEV-SNP", TDX by the CPU's TDX_GUEST flag) and the
# GPU's CC state (NVIDIA's docs: "CC status: ON", "Confidential Compute GPUs Ready state:
# ready"). The kernel log is read through dmesg, else (only with `timeout` and `head`) from
# /dev/kmsg for at most 2 s and 4096 records; at most 4 matching lines are kept.
CC_DEVICES = ("/dev/sev-guest", "/dev/tdx_guest", "/sys/kernel/config/tsm/report")
CC_KERNEL_LINE = "Memory Encryption Features active"
_CC_KMSG = ("n=0; printf '%s\\n' \"$o\" | while IFS= read -r l; do case \"$l\" in "
            f"*'{CC_KERNEL_LINE}'*) n=$((n + 1)); [ \"$n\" -le 4 ] && "
            "printf 'kmsg %s\\n' \"$l\";; esac; done")
CC_TEE = (
    "for e in " + " ".join(CC_DEVICES) + "; do "
    'if ex "$R$e"; then echo "present $e"; else echo "absent $e"; fi; done; '
    "if command -v dmesg >/dev/null 2>&1 && o=$($T dmesg 2>/dev/null) && [ -n \"$o\" ]; then "
    f"echo 'log dmesg'; {_CC_KMSG}; "
    "elif command -v timeout >/dev/null 2>&1 && command -v head >/dev/null 2>&1 "
    "&& [ -r /dev/kmsg ]; then "
    f"o=$(timeout 2 head -n 4096 /dev/kmsg 2>/dev/null); echo 'log kmsg'; {_CC_KMSG}; "
    "else echo 'log none'; fi; true"
)
# The attestation fetch (only when the profile names a resource): the secret is held in a
# shell variable and never printed -- only the HTTP status and the length are (a digest of a
# short secret could be brute-forced, so none is kept); an error's body (the CDH's or the
# KBS's refusal) is printed, cut at 240 characters.
_CURL = ("o=$($T curl -sS -m 30 --max-filesize 1048576 -w \"${NL}%{http_code}\" \"$u\"); "
         "rc=$?; code=${o##*\"$NL\"}; body=${o%\"$NL\"*}; "
         "case \"$code\" in 2??) echo \"via curl rc $rc http $code bytes ${#body}\";; "
         "*) echo \"via curl rc $rc http $code\"; printf 'body %.240s\\n' \"$body\";; esac")
_WGET = ("o=$($T wget -q -T 30 -O - \"$u\"); rc=$?; "
         "echo \"via wget rc $rc bytes ${#o}\"")
_URL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/._-[]")


def cc_attest_command(url: str) -> str:
    """The ``cc_attest`` record's command for one guest-local CDH resource URL."""
    if not url.startswith("http://") or not set(url) <= _URL_CHARS or ".." in url:
        raise ValueError(f"unsupported CDH resource URL {url!r}")
    return (f"u='{url}'; echo \"url $u\"; "
            f"if command -v curl >/dev/null 2>&1; then {_CURL}; "
            f"elif command -v wget >/dev/null 2>&1; then {_WGET}; "
            "else echo 'curl, wget: not found'; exit 127; fi")


_SMI_CSV = "--query-gpu=name,uuid,pci.bus_id,memory.total,driver_version --format=csv"


def _need(tool: str, body: str) -> str:
    """Run ``body`` only when ``tool`` exists; otherwise say so and exit 127 (as sh does)."""
    return (f"if command -v {tool} >/dev/null 2>&1; then {body}; "
            f"else echo '{tool}: not found'; exit 127; fi")


# (name, sh command); each runs in a subshell with stdin from /dev/null, stderr merged.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("collector", f"echo {COLLECTOR}"),
    ("uname", "uname -a"),
    ("uname_r", "uname -r"),
    ("nproc", "nproc --all; nproc"),
    ("virt", "systemd-detect-virt 2>/dev/null || echo unknown"),
    ("dev_nvidia", 'for e in "$R"/dev/nvidia*; do ex "$e" && printf \'%s\\n\' "${e##*/}"; '
                   "done; true"),
    ("nvidia_smi_xml", _need("nvidia-smi", "$T nvidia-smi -q -x")),
    ("nvidia_smi", _need("nvidia-smi", "$T nvidia-smi")),
    ("nvidia_smi_csv", _need("nvidia-smi", f"$T nvidia-smi {_SMI_CSV}")),
    ("lspci", "command -v lspci >/dev/null && lspci -nnk || echo KGC-NO-LSPCI"),
    ("dmesg_pci", "for x in dmesg grep tail; do command -v $x >/dev/null 2>&1 || exit 127; "
                  "done; "
                  "o=$($T dmesg 2>&1) || { printf '%s\\n' \"$o\" | head -n 3; exit 1; }; "
                  "printf '%s\\n' \"$o\" | grep -E 'BAR [0-9]|vfio|NVRM|no space|iommu' "
                  "| tail -n 200; true"),
    ("cc_tee", CC_TEE),
    ("cc_mode", _need("nvidia-smi", "$T nvidia-smi conf-compute -f")),
    ("cc_ready", _need("nvidia-smi", "$T nvidia-smi conf-compute -grs")),
    ("cuda_check", "if command -v python3 >/dev/null 2>&1; then $T python3 -c '"
                   + CUDA_CHECK + "'; else echo '{\"python3\": false}'; fi"),
)


def _path(pattern: str) -> str:
    if not pattern.startswith("/"):
        raise ValueError(f"paths must be absolute: {pattern!r}")
    for ch in "'\"`$\\;&|<>()\n ":
        if ch in pattern:
            raise ValueError(f"unsupported character {ch!r} in path {pattern!r}")
    return '"$R"' + pattern


def new_boundary() -> str:
    return f"@@KGC-{secrets.token_hex(8)}@@"


def build_script(boundary: str | None = None, cdh_url: str | None = None) -> str:
    """The collector script. Read-only; its size does not grow with the number of devices.
    ``cdh_url``: a confidential data hub resource to fetch (``GpuCcProfile.attestation_url``),
    recorded as ``cc_attest``; None: no fetch."""
    b = boundary or new_boundary()
    if not b.startswith("@@KGC-") or "'" in b:
        raise ValueError(f"bad boundary {b!r}")
    out = [
        "#!/bin/sh",
        f"# {COLLECTOR}: kata-gpu-conformance in-guest collector (read-only). Prints records",
        "# for kgc.evidence.guest.parse_guest_output. KGC_ROOT prefixes every path read.",
        'R="${KGC_ROOT:-}"',
        f"B='{b}'",
        f"M={MAX_FILE_BYTES}",
        "export LC_ALL=C",
        "T=''",
        f'command -v timeout >/dev/null 2>&1 && T="timeout ${{KGC_CMD_TIMEOUT:-{CMD_TIMEOUT_S}}}"',
        'ex() { [ -e "$1" ] || [ -L "$1" ]; }',
        "NL='\n'",
        newline_name_fns(),
        # one file: its lines, then R 0 (R 1: it cannot be opened); a file past M bytes
        # stops being read there and ends with T (never a silently shortened file); a FIFO
        # or device is not opened (U). Shell builtins only.
        "rd() {",
        "  printf '%s F %s\\n' \"$B\" \"${1#\"$R\"}\"",
        "  if [ -e \"$1\" ] && [ ! -f \"$1\" ]; then printf '%s U f\\n' \"$B\"; return; fi",
        "  n=0; c=0",
        '  if [ -r "$1" ] && { while IFS= read -r l || [ -n "$l" ]; do',
        '    n=$((n + ${#l} + 1)); [ "$n" -gt "$M" ] && { c=1; break; }; printf \'%s\\n\' "$l";',
        '    done < "$1"; } 2>/dev/null',
        "  then if [ \"$c\" = 1 ]; then printf '%s T %s %s\\n' \"$B\" \"$n\" \"$M\"; "
        "else printf '%s R 0\\n' \"$B\"; fi",
        "  else printf '%s R 1\\n' \"$B\"; fi",
        "}",
        "printf '%s V 3\\n' \"$B\"",
    ]
    for pat in FILES:
        out.append(f'for p in {_path(pat)}; do ex "$p" || continue; [ -d "$p" ] && continue; '
                   'case "${p#"$R"}" in *"$NL"*) odd "$p"; continue;; esac; rd "$p"; done')
    out.append("printf '%s FE\\n' \"$B\"")
    out.append("printf '%s LS %s\\n' \"$B\" \"$R\"")
    for pat in LINKS:
        out.append(f'for p in {_path(pat)}; do [ -L "$p" ] || continue; '
                   't=$(cd -P -- "$p" 2>/dev/null && pwd -P) && printf \'l %s -> %s\\n\' "$p" "$t"; '
                   "done")
    out.append("printf '%s R 0\\n' \"$B\"")
    for pat in DIRS:
        out.append(
            f'for p in {_path(pat)}; do [ -d "$p" ] || continue; '
            'printf \'%s D %s\\n\' "$B" "${p#"$R"}"; '
            'for e in "$p"/* "$p"/.[!.]* "$p"/..?*; do ex "$e" && printf \'%s\\n\' "${e##*/}"; '
            "done; printf '%s R 0\\n' \"$B\"; done"
        )
    commands = COMMANDS if cdh_url is None else (*COMMANDS, ("cc_attest",
                                                            cc_attest_command(cdh_url)))
    for name, cmd in commands:
        out.append(f"printf '%s C %s\\n' \"$B\" '{name}'; ( {cmd} ) </dev/null 2>&1; rc=$?; "
                   "printf '\\n%s R %s\\n' \"$B\" \"$rc\"")
    out.append("printf '%s END\\n' \"$B\"")
    return "\n".join(out) + "\n"


def script(boundary: str | None = None) -> tuple[str, str]:
    """(script text, its boundary)."""
    b = boundary or new_boundary()
    return build_script(b), b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kgc.guest",
                                 description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write guest-bundle.json and guest-raw.txt here")
    ap.add_argument("--script", action="store_true", help="print the collector script and exit")
    ap.add_argument("--shell", default="sh", help="shell to run the script with (default: sh)")
    ap.add_argument("--label", default="", help="free text stored with the evidence (where/when)")
    ap.add_argument("--cdh-url", default=None,
                    help="also fetch this confidential data hub resource (status and length "
                         "only), e.g. http://127.0.0.1:8006/cdh/resource/<repo>/<type>/<tag>")
    a = ap.parse_args(argv)
    try:
        boundary = new_boundary()
        text = build_script(boundary, a.cdh_url)
    except ValueError as exc:
        ap.error(str(exc))
    if a.script:
        sys.stdout.write(text)
        return 0
    if a.out is None:
        ap.error("--out or --script is required")

    t0 = time.monotonic()
    proc = subprocess.run(
        [*a.shell.split(), "-c", text], capture_output=True, text=True, timeout=600, check=False
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
        "guest": parse_guest(snap).to_dict(),
    }
    (a.out / "guest-bundle.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
    print(
        f"collected {len(snap.files)} files, {len(snap.commands)} commands in {wall:.2f}s "
        f"(complete={snap.complete})"
    )
    return 0 if snap.complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
