"""The cluster lab's answer for the sizing layer's pods (``kgc.io/collector=sizing``).

kwok runs no microVM, so a sizing pod in the lab cannot read a real guest. The lab's
responder (:mod:`kgc_lab.cluster.simulate`) asks :func:`choose` what such a pod reports, and
the answer is always RECORDED real evidence: the capture in ``fixtures/guest/sizing/`` of a
real QEMU guest (``python -m kgc_lab.guests record``) booted at the size Kata gives the pod
under the configuration the lab's simulated nodes run (:data:`LAB_KATA`, the NVIDIA Go
configuration) becomes the pod's log.

That size is NOT asked of kgc's sizing model (the thing the lab tests): it is looked up by
the pod's limits in :data:`LAB_VMS`, a table worked out by hand from Kata's rules for that
configuration, and the capture is the one whose own recorded VM (and preset) is that size.
So a wrong model makes the lab's sizing verdict fail instead of serving the guest the wrong
model expects (tests/sizing/test_lab_scenario_offline.py). A pod whose limits the table does
not know, or a size no capture has, fails with a log that says so — the lab never edits or
invents a guest. Verdicts on these pods are marked simulated (the lab profile, and the kwok
node).

A capture holds the collector's parsed records (``kgc-bundle/1``'s ``host``); the log is
those records written back in the collector's record format (:func:`render_output`), a
lossless re-encoding: parsing it gives the recorded snapshot back, byte for byte
(tests/sizing/test_sim_sizing.py proves it for every capture).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgc.core.hostfs import HostSnapshot
from kgc.layers.sizing.model import KATA_PRESETS, KataSizing, VmSize

KIND = "sizing"
LAB_KATA_PRESET = "qemu-nvidia-gpu"
LAB_KATA: KataSizing = KATA_PRESETS[LAB_KATA_PRESET]
"""The Kata configuration the lab's simulated Kata nodes run (every Kata RuntimeClass of the
lab): Kata's shipped ``configuration-qemu-nvidia-gpu.toml`` — Go runtime, static sizing,
default_vcpus=1, default_memory=8192. ``profiles/lab.yaml`` describes the same under
``cluster.sizing.kata``."""


Limits = tuple[tuple[str, str | None, str | None], ...]  # (kind, limits.cpu, limits.memory)


@dataclass(frozen=True)
class LabVm:
    """The VM Kata gives one lab shape under :data:`LAB_KATA`, worked out by hand."""

    shape: str
    limits: Limits  # per container, the raw strings of the pod spec
    vcpus: int
    memory_mib: int
    rule: str  # the arithmetic, for the pod's log and the reader

    @property
    def size(self) -> tuple[int, int, int, int]:
        return (self.vcpus, self.memory_mib, self.vcpus, self.memory_mib)  # static: boot = final


# Kata's Go runtime with static_sandbox_resource_mgmt = true (configuration-qemu-nvidia-gpu.
# toml: default_vcpus = 1, default_memory = 8192) sizes the VM once, before it boots, from the
# sandbox's limits: vCPUs = ceil(default_vcpus + sum of CPU limits), memory = default_memory +
# sum of memory limits (MiB); a container without a CPU limit adds no vCPU, one without a
# memory limit no memory. Written out per shape of the lab's matrix (profiles/lab.yaml uses
# the default one, kgc.layers.sizing.profile.DEFAULT_SHAPES) and the limit-less probe.
LAB_VMS: tuple[LabVm, ...] = (
    LabVm("probe", (("app", None, None),), 1, 8192, "no limits: ceil(1) = 1, 8192 MiB"),
    LabVm("one-container", (("app", "2", "2Gi"),), 3, 10240,
          "ceil(1 + 2) = 3, 8192 + 2048 = 10240 MiB"),
    LabVm("two-containers", (("app", "500m", "1Gi"), ("app", "500m", "1Gi")), 2, 10240,
          "ceil(1 + 0.5 + 0.5) = 2, 8192 + 1024 + 1024 = 10240 MiB"),
    LabVm("memory-only", (("app", None, "1Gi"),), 1, 9216,
          "ceil(1) = 1 (no CPU limit), 8192 + 1024 = 9216 MiB"),
    LabVm("fractional-cpu", (("app", "250m", "256Mi"),), 2, 8448,
          "ceil(1 + 0.25) = 2, 8192 + 256 = 8448 MiB"),
    LabVm("gpu", (("app", "4", "16Gi"),), 5, 24576,
          "ceil(1 + 4) = 5, 8192 + 16384 = 24576 MiB (the GPU adds no vCPU or memory)"),
)


def pod_limits(pod: Mapping[str, Any]) -> Limits:
    """The pod's containers as (kind, limits.cpu, limits.memory), the raw strings of its spec
    (nothing parsed, nothing computed), in a stable order."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    out: list[tuple[str, str | None, str | None]] = []
    for key in ("initContainers", "containers"):
        items = spec.get(key) if isinstance(spec, Mapping) else None
        for c in items if isinstance(items, list) else ():
            kind = ("app" if key == "containers" else
                    "sidecar" if _m(c).get("restartPolicy") == "Always" else "init")
            lim = _m(_m(_m(c).get("resources")).get("limits"))
            cpu, mem = lim.get("cpu"), lim.get("memory")
            out.append((kind, cpu if isinstance(cpu, str) else None,
                        mem if isinstance(mem, str) else None))
    return _ordered(out)


def _m(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _ordered(rows: Any) -> Limits:
    return tuple(sorted(rows, key=lambda t: (t[0], t[1] or "", t[2] or "")))


def lab_vm(pod: Mapping[str, Any]) -> LabVm | None:
    """The hand-worked VM of the lab shape with exactly this pod's limits, or None."""
    want = pod_limits(pod)
    return next((v for v in LAB_VMS if _ordered(v.limits) == want), None)


def fixtures_dir() -> Path:
    env = os.environ.get("KGC_SIZING_CAPTURES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "fixtures" / "guest" / "sizing"


@dataclass(frozen=True)
class Capture:
    name: str
    path: Path
    vcpus: int
    memory_mib: int
    boot_vcpus: int
    boot_memory_mib: int
    snapshot: HostSnapshot
    collected_at: str
    preset: str = ""  # the Kata configuration it was recorded for (capture.spec.preset)
    shape: str = ""  # the pod shape (capture.spec.shape)

    @property
    def size(self) -> tuple[int, int, int, int]:
        return (self.vcpus, self.memory_mib, self.boot_vcpus, self.boot_memory_mib)

    def describe(self) -> str:
        hot = (f", booted {self.boot_vcpus}/{self.boot_memory_mib} and hot-plugged"
               if (self.boot_vcpus, self.boot_memory_mib) != (self.vcpus, self.memory_mib)
               else "")
        return f"{self.name} ({self.vcpus} vCPU / {self.memory_mib} MiB{hot})"


@functools.cache
def captures(root: Path | None = None) -> tuple[Capture, ...]:
    """Every recorded capture, by name."""
    d = root or fixtures_dir()
    out = []
    for p in sorted(d.glob("*.bundle.json")):
        doc = json.loads(p.read_text())
        vm, spec = doc["capture"]["vm"], doc["capture"].get("spec") or {}
        out.append(Capture(p.name.removesuffix(".bundle.json"), p, int(vm["vcpus"]),
                           int(vm["memory_mib"]), int(vm["boot_vcpus"]),
                           int(vm["boot_memory_mib"]), HostSnapshot.from_dict(doc["host"]),
                           str(doc.get("collected_at", "")), str(spec.get("preset", "")),
                           str(spec.get("shape", ""))))
    return tuple(out)


def _boot(vm: VmSize) -> tuple[int, int]:
    return (vm.boot_vcpus or vm.vcpus, vm.boot_memory_mib or vm.memory_mib)


def matching(vm: VmSize, pool: tuple[Capture, ...] | None = None) -> Capture | None:
    """The capture of a guest booted exactly as Kata would boot this VM (final and boot
    sizes equal), or None."""
    return recorded((vm.vcpus, vm.memory_mib, *_boot(vm)), pool)


def recorded(size: tuple[int, int, int, int], pool: tuple[Capture, ...] | None = None,
             preset: str | None = None) -> Capture | None:
    """The capture whose own recorded VM is ``size`` (vCPUs, MiB, boot vCPUs, boot MiB),
    recorded for ``preset`` when given, or None."""
    for c in pool if pool is not None else captures():
        if c.size == size and (preset is None or c.preset == preset):
            return c
    return None


# -- the collector's record format -------------------------------------------------------------
def _lines(content: str) -> list[str]:
    if content == "":
        return []
    body = content[:-1] if content.endswith("\n") else content
    return body.split("\n")


def render_output(snap: HostSnapshot, boundary: str) -> str:
    """A snapshot written in the collector's record format (what :func:`kgc.core.hostfs.
    parse_output` reads): files, link listing, directories, stats, commands, then END."""
    b = boundary
    out = [f"{b} V 2"]
    for path, content in snap.files.items():
        out += [f"{b} F {path}", *_lines(content), f"{b} R 0"]
    for path, err in snap.errors.items():
        if err.startswith("unreadable (exit "):
            out += [f"{b} F {path}", f"{b} R {err[len('unreadable (exit '):-1]}"]
        elif err.startswith("directory unreadable (exit "):
            out += [f"{b} D {path}", f"{b} R {err[len('directory unreadable (exit '):-1]}"]
        elif err == "stat failed":
            out += [f"{b} S {path}", "?"]
    if snap.links:
        out.append(f"{b} LS ")
        out += [f"l {p} -> {t}" for p, t in snap.links.items()]
        out.append(f"{b} R 0")
    for path, entries in snap.dirs.items():
        out += [f"{b} D {path}", *entries, f"{b} R 0"]
    for path, st in snap.stats.items():
        out += [f"{b} S {path}", f"{st.kind}|{st.mode}|{st.owner}|{st.group}|{st.size}"]
    for name, cmd in snap.commands.items():
        out += [f"{b} C {name}", *cmd.output.split("\n"), f"{b} R {cmd.rc}"]
    if snap.complete:
        out.append(f"{b} END")
    return "\n".join(out) + "\n"


def boundary_for(capture: Capture) -> str:
    return "@@KGC-" + hashlib.sha256(capture.name.encode()).hexdigest()[:16] + "@@"


def capture_log(capture: Capture) -> str:
    return render_output(capture.snapshot, boundary_for(capture))


# -- the chooser -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Choice:
    """What a sizing pod reports in the lab: its log, its exit code, and why."""

    text: str
    exit_code: int
    note: str
    capture: Capture | None = None
    vm: LabVm | None = None


def lab_kata(runtime_class: str | None, kata_classes: tuple[str, ...]) -> KataSizing | None:
    return LAB_KATA if runtime_class in kata_classes else None


@functools.cache
def _lab_kata_classes() -> tuple[str, ...]:
    from kgc_lab.cluster.lab import lab_cluster_profile

    cp = lab_cluster_profile()
    lab_rcs = getattr(cp.lab, "kata_runtime_classes", None)  # the lab's Kata RuntimeClasses
    return tuple(lab_rcs) if lab_rcs else (str(getattr(cp, "runtime_class", "kata")),)


def decide(pod: Mapping[str, Any], kata_classes: tuple[str, ...] | None = None,
           pool: tuple[Capture, ...] | None = None) -> Choice:
    """The recorded guest a sizing pod gets in the lab (pure apart from reading fixtures)."""
    classes = kata_classes if kata_classes is not None else _lab_kata_classes()
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    rc = spec.get("runtimeClassName") if isinstance(spec, Mapping) else None
    kata = lab_kata(rc if isinstance(rc, str) else None, classes)
    if kata is None:
        msg = (f"kgc lab: runtimeClassName {rc!r} is not one of the lab's Kata RuntimeClasses "
               f"({', '.join(classes)}): the lab simulates Kata microVMs only, it has no "
               "recorded guest for this pod")
        return Choice(msg + "\n", 1, "not a Kata pod")
    vm = lab_vm(pod)
    if vm is None:
        known = "; ".join(f"{v.shape} {list(v.limits)}" for v in LAB_VMS)
        msg = (f"kgc lab: no hand-worked VM size for a pod with limits {list(pod_limits(pod))} "
               f"under {kata.source}: the lab knows {known} (kgc_lab.cluster.sim_sizing."
               "LAB_VMS; it never asks kgc's sizing model, which is what the lab tests)")
        return Choice(msg + "\n", 1, "no hand-worked size for these limits")
    cap = recorded(vm.size, pool, LAB_KATA_PRESET)
    if cap is None:
        have = ", ".join(c.describe() for c in (pool if pool is not None else captures()))
        msg = (f"kgc lab: no recorded guest capture of a {vm.vcpus} vCPU / {vm.memory_mib} MiB "
               f"VM ({vm.shape}: {vm.rule}) recorded for {LAB_KATA_PRESET}; recorded: {have}. "
               "Record one with `python -m kgc_lab.guests record` (a real QEMU guest) into "
               "fixtures/guest/sizing/")
        return Choice(msg + "\n", 1, "no recorded capture of that size", vm=vm)
    note = (f"recorded QEMU guest {cap.describe()}, captured {cap.collected_at}, for the VM "
            f"Kata gives {vm.shape} under {kata.source} ({vm.rule}; worked out by hand, not "
            "by kgc's model)")
    return Choice(capture_log(cap), 0, note, cap, vm)


def choose(pod: dict[str, Any]) -> Any:
    """The responder's chooser for ``kgc.io/collector=sizing`` pods."""
    from kgc_lab.cluster.simulate import SimOutput

    c = decide(pod)
    return SimOutput(text=c.text, exit_code=c.exit_code, note=c.note)


def register() -> None:
    from kgc_lab.cluster.simulate import register_chooser

    register_chooser(KIND, choose)


def _register_on_import() -> None:
    # the responder imports this module (simulate.CHOOSER_MODULES) to have it register
    try:
        from kgc_lab.cluster.simulate import register_chooser
    except ModuleNotFoundError as exc:  # a build without the responder
        if exc.name != "kgc_lab.cluster.simulate":
            raise
        return
    register_chooser(KIND, choose)


_register_on_import()

__all__ = ["KIND", "LAB_KATA", "LAB_VMS", "Capture", "Choice", "LabVm", "capture_log",
           "captures", "choose", "decide", "lab_vm", "matching", "pod_limits", "recorded",
           "register", "render_output"]
