"""The cluster lab's answer for the sizing layer's pods (``kgc.io/collector=sizing``).

kwok runs no microVM, so a sizing pod in the lab cannot read a real guest. The lab's
responder (:mod:`kgc.lab.cluster.simulate`) asks :func:`choose` what such a pod reports, and
the answer is always RECORDED real evidence: the sizing model predicts the VM the pod would
get from the Kata configuration the lab's simulated nodes run (:data:`LAB_KATA`, the NVIDIA Go
configuration), and the capture in ``fixtures/guest/sizing/`` of a real QEMU guest booted at
exactly that size (``python -m kgc.lab.guests record``) becomes the pod's log. When no
capture has that size, the pod fails with a log that says so — the lab never edits or invents
a guest. Verdicts on these pods are marked simulated (the lab profile, and the kwok node).

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
from kgc.layers.sizing.model import KATA_PRESETS, KataSizing, PodShape, SizingInputError, VmSize
from kgc.layers.sizing.model import expected_vm as _expected_vm

KIND = "sizing"
LAB_KATA_PRESET = "qemu-nvidia-gpu"
LAB_KATA: KataSizing = KATA_PRESETS[LAB_KATA_PRESET]
"""The Kata configuration the lab's simulated Kata nodes run (every Kata RuntimeClass of the
lab): Kata's shipped ``configuration-qemu-nvidia-gpu.toml`` — Go runtime, static sizing,
default_vcpus=1, default_memory=8192. ``profiles/lab.yaml`` describes the same under
``cluster.sizing.kata``."""


def fixtures_dir() -> Path:
    env = os.environ.get("KGC_SIZING_CAPTURES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[4] / "fixtures" / "guest" / "sizing"


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
        vm = doc["capture"]["vm"]
        out.append(Capture(p.name.removesuffix(".bundle.json"), p, int(vm["vcpus"]),
                           int(vm["memory_mib"]), int(vm["boot_vcpus"]),
                           int(vm["boot_memory_mib"]), HostSnapshot.from_dict(doc["host"]),
                           str(doc.get("collected_at", ""))))
    return tuple(out)


def _boot(vm: VmSize) -> tuple[int, int]:
    return (vm.boot_vcpus or vm.vcpus, vm.boot_memory_mib or vm.memory_mib)


def matching(vm: VmSize, pool: tuple[Capture, ...] | None = None) -> Capture | None:
    """The capture of a guest booted exactly as Kata would boot this VM (final and boot
    sizes equal), or None."""
    want = (vm.vcpus, vm.memory_mib, *_boot(vm))
    for c in pool if pool is not None else captures():
        if c.size == want:
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
    vm: VmSize | None = None


def lab_kata(runtime_class: str | None, kata_classes: tuple[str, ...]) -> KataSizing | None:
    return LAB_KATA if runtime_class in kata_classes else None


@functools.cache
def _lab_kata_classes() -> tuple[str, ...]:
    from kgc.lab.cluster.lab import lab_cluster_profile

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
    try:
        vm = _expected_vm(PodShape.from_manifest(pod), kata)
    except SizingInputError as exc:
        return Choice(f"kgc lab: cannot size this pod: {exc}\n", 1, "unsizable pod")
    if vm.refusal:
        return Choice(f"kgc lab: Kata would refuse this sandbox: {vm.refusal}\n", 1,
                      "sandbox refused", vm=vm)
    cap = matching(vm, pool)
    if cap is None:
        have = ", ".join(c.describe() for c in (pool if pool is not None else captures()))
        msg = (f"kgc lab: no recorded guest capture of a {vm.vcpus} vCPU / {vm.memory_mib} MiB "
               f"VM (booted {_boot(vm)[0]}/{_boot(vm)[1]}), the size the sizing model predicts "
               f"for this pod under {kata.source}; recorded: {have}. Record one with "
               "`python -m kgc.lab.guests record` (a real QEMU guest) into "
               "fixtures/guest/sizing/")
        return Choice(msg + "\n", 1, "no recorded capture of the predicted size", vm=vm)
    note = (f"recorded QEMU guest {cap.describe()}, captured {cap.collected_at}, for the VM "
            f"the model predicts under {kata.source}")
    return Choice(capture_log(cap), 0, note, cap, vm)


def choose(pod: dict[str, Any]) -> Any:
    """The responder's chooser for ``kgc.io/collector=sizing`` pods."""
    from kgc.lab.cluster.simulate import SimOutput

    c = decide(pod)
    return SimOutput(text=c.text, exit_code=c.exit_code, note=c.note)


def register() -> None:
    from kgc.lab.cluster.simulate import register_chooser

    register_chooser(KIND, choose)


def _register_on_import() -> None:
    # the responder imports this module (simulate.CHOOSER_MODULES) to have it register
    try:
        from kgc.lab.cluster.simulate import register_chooser
    except ModuleNotFoundError as exc:  # a build without the responder
        if exc.name != "kgc.lab.cluster.simulate":
            raise
        return
    register_chooser(KIND, choose)


_register_on_import()

__all__ = ["KIND", "LAB_KATA", "Capture", "Choice", "capture_log", "captures", "choose",
           "decide", "matching", "register", "render_output"]
