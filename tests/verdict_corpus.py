"""The verdict corpus: named evidence scenarios for every layer and the complete verdicts
(status, reason, remediation, expected, found, evidence) each check gives on them.

``tests/data/verdict_corpus.json`` holds the evidence (host snapshots collected through the
real collector from /sys- and /etc-shaped trees, containerd output recorded from the real
binaries, NRI and reboot records) and the verdicts; ``tests/test_verdict_corpus.py``
re-judges the evidence and wants the same verdicts, word for word. Any change to what a
check says on any of these nodes shows up there -- that is what lets mutation testing
(benchmarks/mutation.py) notice a changed reason, remedy or branch.

Regenerate after an intended change, then review the diff of the JSON:

    .venv/bin/python tests/verdict_corpus.py

Every scenario also states, by hand, the statuses it is about (``expect``); the generator
refuses to write a corpus that contradicts them, so the file is never a blind recording.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "layers"))
CORPUS = HERE / "data" / "verdict_corpus.json"
DATA = HERE / "nri" / "data"

from fakehost import FakeHost, lab_devices  # noqa: E402

from kgc.core.hostfs import CommandResult, HostSnapshot, StatResult  # noqa: E402
from kgc.core.profile import Profile, load_profile  # noqa: E402
from kgc.core.target import NodeTarget  # noqa: E402
from systree import GOOD_KCONFIG, SysTree, intel_good  # noqa: E402

Builder = Callable[[Path], Any]


@dataclasses.dataclass
class Scenario:
    name: str
    layers: tuple[str, ...]
    build: Builder  # tmp dir -> evidence (HostSnapshot, or a record dict for nri/reboot)
    profile: str = "generic-nvidia-passthrough"
    patch: dict[str, Any] = dataclasses.field(default_factory=dict)
    expect: dict[str, str] = dataclasses.field(default_factory=dict)


def profile_for(name: str, patch: dict[str, Any]) -> Profile:
    key = (name, json.dumps(patch, sort_keys=True))
    if key not in _PROFILES:
        _PROFILES[key] = _profile_for(name, patch)
    return _PROFILES[key]


_PROFILES: dict[tuple[str, str], Profile] = {}


def _profile_for(name: str, patch: dict[str, Any]) -> Profile:
    base = load_profile(REPO / "profiles" / f"{name}.yaml")
    if not patch:
        return base
    doc = base.model_dump(mode="json", by_alias=True, exclude={"source"})

    def merge(a: dict[str, Any], b: dict[str, Any]) -> None:
        for k, v in b.items():
            if isinstance(v, dict) and isinstance(a.get(k), dict):
                merge(a[k], v)
            else:
                a[k] = v

    merge(doc, patch)
    return Profile.model_validate(doc)


# -- host trees --------------------------------------------------------------------------------
def _collect(root: Path) -> HostSnapshot:
    from kgc.core.engine import host_query
    from kgc.core.registry import load_layers

    q = host_query(load_layers(("kgc.layers.iommu", "kgc.layers.vfio",
                                "kgc.layers.persistence")), load_profile())
    snap = NodeTarget("local://", root=str(root)).collect(q)
    return _fixed(snap)


def _fixed(snap: HostSnapshot, **cmds: CommandResult) -> HostSnapshot:
    """Replace the commands whose answer depends on the machine running the generator."""
    c = dict(snap.commands)
    c.setdefault("pci_modalias_drivers", CommandResult(4, "KGC-NO-MODPROBE modprobe is not "
                                                          "installed on the node"))
    if c["pci_modalias_drivers"].output.startswith("KGC-NO-MODULE-INDEX"):
        c["pci_modalias_drivers"] = CommandResult(4, "KGC-NO-MODPROBE modprobe is not "
                                                     "installed on the node")
    c.update(cmds)
    return dataclasses.replace(snap, commands=c)


def tree(fn: Callable[[SysTree], Any], **cmds: CommandResult) -> Builder:
    def build(tmp: Path) -> HostSnapshot:
        t = SysTree(tmp / "node")
        fn(t)
        return _fixed(_collect(t.root), **cmds)

    return build


def good(fn: Callable[[SysTree], Any] | None = None, **cmds: CommandResult) -> Builder:
    def build(tmp: Path) -> HostSnapshot:
        t = intel_good(tmp / "node")
        if fn:
            fn(t)
        return _fixed(_collect(t.root), **cmds)

    return build


def edit(b: Builder, fn: Callable[[dict[str, Any]], None]) -> Builder:
    def build(tmp: Path) -> HostSnapshot:
        d = b(tmp).to_dict()
        fn(d)
        return HostSnapshot.from_dict(d)

    return build


MODPROBE = "options vfio-pci ids=1234:11e8,8086:100e\nsoftdep e1000 pre: vfio-pci\n"
VFIO_KO = ("usr/lib/modules/6.1.0-50-amd64/kernel/drivers/vfio/pci/vfio-pci.ko\n"
           "usr/lib/modules/6.1.0-50-amd64/kernel/drivers/vfio/vfio.ko\n")
E1000_KO = "usr/lib/modules/6.1.0-50-amd64/kernel/drivers/net/ethernet/intel/e1000/e1000.ko\n"
LOADER = "/boot/loader/entries/debian.conf"


def fake(drivers: dict[str, str | None] | None = None, *, overrides: dict[str, str] | None = None,
         files: dict[str, str] | None = None, initramfs: str | None = None,
         vfio_nodes: tuple[str, ...] = ("2", "3"), modules: tuple[str, ...] = ("e1000",),
         cmdline: str = "root=/dev/vda intel_iommu=on iommu=pt", no_groups: bool = False,
         tweak: Callable[[list[Any]], None] | None = None, **cmds: CommandResult) -> Builder:
    def build(tmp: Path) -> HostSnapshot:
        d = {"accel0": "vfio-pci", "gpu0": "vfio-pci", "gpu0_fn1": "vfio-pci"}
        d.update(drivers or {})
        devs = lab_devices(**d)
        for x in devs:
            if overrides and x.bdf in overrides:
                x.override = overrides[x.bdf]
            if no_groups:
                x.group = None
        if tweak:
            tweak(devs)
        fs = {LOADER: f"linux /vmlinuz\noptions {cmdline}\n"}
        fs.update(files or {})
        h = FakeHost(tmp / "node", devs, files=fs, vfio_nodes=vfio_nodes,
                     modules_loaded=modules, initramfs=initramfs, cmdline=cmdline)
        from kgc.core.engine import host_query
        from kgc.core.registry import load_layers

        q = host_query(load_layers(("kgc.layers.iommu", "kgc.layers.vfio",
                                    "kgc.layers.persistence")), load_profile())
        return _fixed(h.collect(q), **cmds)

    return build


# -- containerd ------------------------------------------------------------------------------
def ctd(config: str | None, version: str | None = "containerd x 1.7.24", dump: str | None = None,
        dump_rc: int = 0, stats: dict[str, StatResult] | None = None,
        files: dict[str, str] | None = None, offline: bool = False,
        shim_cmd: str | None = None, package: str | None = None,
        links: dict[str, str] | None = None, version_rc: int = 0,
        plugins: str | None = None, journal: str | None = None) -> Builder:
    def build(tmp: Path) -> HostSnapshot:
        fs = dict(files or {})
        if config is not None:
            fs["/etc/containerd/config.toml"] = config
        cmds: dict[str, CommandResult] = {}
        if offline:
            for c in ("containerd_version", "containerd_config_dump", "kata_shim_path"):
                cmds[c] = CommandResult(3, "KGC-OFFLINE-TREE\n")
        else:
            if version is not None:
                cmds["containerd_version"] = CommandResult(version_rc, version)
            if dump is not None:
                cmds["containerd_config_dump"] = CommandResult(dump_rc, dump)
            if shim_cmd is not None:
                cmds["kata_shim_path"] = CommandResult(0 if shim_cmd else 1, shim_cmd)
            if plugins is not None:
                cmds["containerd_plugins"] = CommandResult(0 if plugins else 1, plugins)
            if journal is not None:
                cmds["containerd_journal"] = CommandResult(0, journal)
        if package is not None:
            cmds["containerd_package"] = CommandResult(0, package)
        return HostSnapshot(files=fs, stats=dict(stats or {}), commands=cmds,
                            links=dict(links or {}))

    return build


SOCK = {"/var/run/nri/nri.sock": StatResult("socket", "600", "root", "root", 0),
        "/run/containerd/containerd.sock": StatResult("socket", "660", "root", "root", 0)}
NRI_ON = '[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n'
SEED = ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_nri = true\n\n' + NRI_ON
        + '  socket_path = "/var/run/nri/nri.sock"\n')
# runc is listed too: containerd 1.7 refuses its CRI plugin when the runtimes table lacks
# the default runtime (issue 18.1; fixtures/containerd/1.7.24/kata-only vs ok-kata-runc)
KATA_V2 = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n'
           '  runtime_type = "io.containerd.kata.v2"\n'
           '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata.options]\n'
           '  ConfigPath = "/opt/kata/share/defaults/kata-containers/configuration.toml"\n'
           '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
           '  runtime_type = "io.containerd.runc.v2"\n')
KATA_CFG = "/opt/kata/share/defaults/kata-containers/configuration.toml"
KATA_OK = ('[hypervisor.qemu]\ndefault_memory = 8192\ncold_plug_vfio = "root-port"\n'
           'pcie_root_port = 8\nenable_annotations = ["enable_iommu"]\n'
           '[runtime]\nstatic_sandbox_resource_mgmt = true\n')
SHIM = "/usr/local/bin/containerd-shim-kata-v2"
SHIM_OK = {SHIM: StatResult("regular file", "755", "root", "root", 4096)}


def rec(d: dict[str, Any]) -> Builder:
    return lambda tmp: d


TOKEN = "tok"
EV_SANDBOX = {"event": "RUN_POD_SANDBOX", "via": "StateChange", "pod_name": "kgc-nri-probe-x",
              "pod_namespace": "kgc-nri", "pod_labels": {"kgc.io/nri-probe": TOKEN},
              "adjusted": False, "t_ms": 5}
EV_CREATE = {"event": "CREATE_CONTAINER", "via": "CreateContainer", "pod_name": "kgc-nri-probe-x",
             "pod_namespace": "kgc-nri", "pod_labels": {"kgc.io/nri-probe": TOKEN},
             "adjusted": True, "t_ms": 9}
NRI_GOOD = {"socket_path": "/var/run/nri/nri.sock", "socket_exists": True,
            "handshake": {"plugin": "99-kgc-probe", "synchronized": True, "handshake_ms": 2.0,
                          "runtime_name": "containerd", "runtime_version": "1.7.24"},
            "pod": {"name": "kgc-nri-probe-x", "token": TOKEN, "image": "kgc.local/p:1"},
            "adjustment": {"requested": True, "env": "KGC_NRI_PROBE", "expected": TOKEN,
                           "seen": TOKEN},
            "events": [EV_SANDBOX, EV_CREATE]}


def nri(**kw: Any) -> Builder:
    d = json.loads(json.dumps(NRI_GOOD))
    d.update(kw)
    return rec(d)


ROW = {"vendor": "1234", "device": "11e8", "class": "00ff00", "driver": "vfio-pci"}
KEPT = {"vendor": "8086", "device": "10d3", "class": "020000", "driver": "e1000e"}


def reboot(status: str = "done", before: dict[str, Any] | None = None,
           after: dict[str, Any] | None = None, **kw: Any) -> Builder:
    d = {"status": status, "message": "rebooted" if status == "done" else f"{status} message",
         "boot_id_before": "a", "boot_id_after": "b", "waited_s": 12.5, "timeout_s": 600.0,
         "before": before if before is not None else {"0000:00:04.0": ROW, "0000:00:06.0": KEPT},
         "after": after if after is not None else {"0000:00:04.0": ROW, "0000:00:06.0": KEPT}}
    d.update(kw)
    return rec(d)


UDEV_ORDER = (
    '/etc/udev/rules.d/10-a.rules:KERNEL=="0000:01:01.0", ATTR{driver_override}="e1000"\n'
    '/etc/udev/rules.d/20-b.rules:KERNEL=="0000:99:00.0", ATTR{driver_override}="vfio-pci"\n'
    '/etc/udev/rules.d/30-c.rules:ATTR{vendor}=="0x10de", ATTR{driver_override}="vfio-pci"\n'
    '/etc/udev/rules.d/40-d.rules:ATTR{vendor}=="0x8086", ATTR{device}=="0x1111", '
    'ATTR{driver_override}="vfio-pci"\n'
    '/etc/udev/rules.d/50-e.rules:ACTION=="add", ATTR{driver_override}="vfio-pci"\n'
    '/etc/udev/rules.d/60-f.rules:ATTR{vendor}=="0x8086", ATTR{device}=="0x100e", '
    'ATTR{driver_override}="vfio-pci"\n'
)


def _mode(mode: str) -> dict[str, Any]:
    return {"host": {"iommu": {"mode": mode}}}


H = ("iommu",)
VP = ("vfio", "persistence")
R = ("runtime",)
P, F, W, S, E = "pass", "fail", "warn", "skip", "error"
# binding: dra on the lab profile: the stand-ins' host driver is e1000; gpu0 (01:01.0) is the
# target and its second function (01:02.0) the group peer the DRA driver leaves unbound
DRA = {"platform": {"gpu": {"binding": "dra", "host_driver": "e1000"}},
       "host": {"passthrough": {"targets": [
           {"name": "accel0", "vendor": "1234", "device": "11e8"},
           {"name": "gpu0", "address": "0000:01:01.0"}]}}}
DRA_ROW = {"vendor": "1234", "device": "11e8", "class": "00ff00", "driver": "e1000",
           "iommu_group": "2"}
dump2 = (DATA / "containerd-2.1.9-v2-kata.dump").read_text()
dump2_bad = (DATA / "containerd-2.1.9-v3-misplaced-kata.dump").read_text()
dump17 = (DATA / "containerd-1.7.24-v2-kata.dump").read_text()
v2kata = (DATA / "v2-kata.toml").read_text()
CTD_FIX = HERE.parent / "fixtures" / "containerd"
v3bad = (DATA / "v3-misplaced-kata.toml").read_text()


def _rm(path: str) -> Callable[[dict[str, Any]], None]:
    def f(d: dict[str, Any]) -> None:
        d["files"].pop(path, None)

    return f


def _err(path: str) -> Callable[[dict[str, Any]], None]:
    def f(d: dict[str, Any]) -> None:
        d["files"].pop(path, None)
        d["errors"][path] = "unreadable (exit 1)"

    return f


def _cmd(name: str, rc: int, out: str) -> Callable[[dict[str, Any]], None]:
    def f(d: dict[str, Any]) -> None:
        d["commands"][name] = {"rc": rc, "output": out}

    return f


SCENARIOS: list[Scenario] = [
    # -- iommu --------------------------------------------------------------------------
    Scenario("iommu-intel-good", H, good(), expect=dict.fromkeys(
        ["iommu.platform", "iommu.enabled", "iommu.cmdline", "iommu.mode",
         "iommu.interrupt-remapping", "iommu.targets-present", "iommu.targets-grouped",
         "iommu.kernel-support"], P)),
    Scenario("iommu-no-dmar", H, tree(lambda t: (t.kconfig().cmdline("ro intel_iommu=on"),
                                                 t.pci("0000:41:00.0", "10de", "2331", "030200",
                                                       "nvidia"))),
             expect={"iommu.platform": F, "iommu.enabled": F, "iommu.targets-grouped": F}),
    Scenario("iommu-vm-no-viommu", H, tree(lambda t: (
        t.write("proc/cpuinfo", "vendor_id\t: GenuineIntel\nflags\t\t: fpu vmx hypervisor\n"),
        t.write("sys/class/dmi/id/sys_vendor", "QEMU\n"), t.kconfig(),
        t.pci("0000:41:00.0", "10de", "2331", "030200", "nvidia"))),
             expect={"iommu.platform": F, "iommu.enabled": F}),
    Scenario("iommu-vm-unknown-vendor", H, tree(lambda t: (
        t.write("proc/cpuinfo", "vendor_id\t: SomeCPU\nflags\t\t: fpu hypervisor\n"),
        t.write("sys/class/dmi/id/product_name", "KVM\n"))),
             expect={"iommu.platform": F}),
    Scenario("iommu-vm-amd-no-ivrs", H, tree(lambda t: (
        t.write("proc/cpuinfo", "vendor_id\t: AuthenticAMD\nflags\t\t: fpu svm hypervisor\n"),
        t.kconfig().cmdline("ro iommu=pt"))),
             expect={"iommu.platform": F, "iommu.enabled": F}),
    Scenario("iommu-metal-dmi-not-vm", H, tree(lambda t: (
        t.write("sys/class/dmi/id/sys_vendor", "Amazon EC2\n"),
        t.write("sys/class/dmi/id/product_name", "c5.metal\n"), t.kconfig())),
             expect={"iommu.platform": F}),
    Scenario("iommu-not-on-cmdline", H, tree(lambda t: (
        t.acpi("DMAR").kconfig().cmdline("BOOT_IMAGE=/vmlinuz ro quiet"),
        t.pci("0000:41:00.0", "10de", "2331", "030200", "nvidia"))),
             expect={"iommu.enabled": F, "iommu.cmdline": F, "iommu.mode": F}),
    Scenario("iommu-not-compiled-in", H, tree(lambda t: (
        t.acpi("DMAR").cmdline("ro intel_iommu=on"),
        t.kconfig("CONFIG_IOMMU_SUPPORT=y\n# CONFIG_INTEL_IOMMU is not set\nCONFIG_VFIO_PCI=m\n"))),
             expect={"iommu.enabled": F, "iommu.kernel-support": F}),
    Scenario("iommu-no-vfio-pci-built", H, good(lambda t: t.kconfig(
        GOOD_KCONFIG.replace("CONFIG_VFIO_PCI=m", "# CONFIG_VFIO_PCI is not set"))),
             expect={"iommu.kernel-support": F}),
    Scenario("iommu-off-on-cmdline", H, tree(lambda t: t.acpi("DMAR").kconfig().cmdline(
        "ro intel_iommu=off")), expect={"iommu.enabled": F, "iommu.cmdline": F}),
    Scenario("iommu-iommu-off", H, tree(lambda t: t.acpi("DMAR").kconfig().cmdline(
        "ro iommu=off intel_iommu=on")), expect={"iommu.enabled": F, "iommu.cmdline": F}),
    Scenario("iommu-default-on-kernel", H, tree(lambda t: (
        t.acpi("DMAR").cmdline("ro").kconfig(GOOD_KCONFIG.replace(
            "# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set", "CONFIG_INTEL_IOMMU_DEFAULT_ON=y")),
        t.group("1", "DMA-FQ").pci("0000:41:00.0", "10de", "2331", "030200", "vfio-pci", "1"))),
             expect={"iommu.cmdline": P, "iommu.enabled": P}),
    Scenario("iommu-active-without-on", H, good(lambda t: t.cmdline("BOOT_IMAGE=/vmlinuz ro")),
             expect={"iommu.cmdline": W}),
    Scenario("iommu-amd-on-is-noop", H, tree(lambda t: (
        t.cpu("amd").acpi("IVRS").kconfig().irq_remap().cmdline("ro amd_iommu=on iommu=pt"),
        t.group("3", "identity").pci("0000:c1:00.0", "10de", "2331", "030200", "vfio-pci", "3"))),
             expect={"iommu.platform": P, "iommu.cmdline": W, "iommu.mode": P}),
    Scenario("iommu-amd-off", H, tree(lambda t: t.cpu("amd").acpi("IVRS").kconfig().cmdline(
        "ro amd_iommu=off")), expect={"iommu.enabled": F, "iommu.cmdline": F}),
    Scenario("iommu-amd-good", H, tree(lambda t: (
        t.cpu("amd").acpi("IVRS").kconfig().irq_remap().cmdline("ro iommu=pt"),
        t.group("3", "identity").pci("0000:c1:00.0", "10de", "2331", "030200", "vfio-pci", "3"))),
             expect={"iommu.cmdline": P, "iommu.platform": P}),
    Scenario("iommu-arm-smmu", H, tree(lambda t: (
        t.write("proc/cpuinfo", "processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n"),
        t.acpi("IORT").kconfig("CONFIG_ARM_SMMU_V3=y\nCONFIG_VFIO_PCI=m\n").iommu_unit("smmu3.0"),
        t.group("5", "DMA").pci("0000:01:00.0", "10de", "2331", "030200", "vfio-pci", "5"))),
             expect={"iommu.platform": P, "iommu.cmdline": P}),
    Scenario("iommu-unknown-vendor", H, tree(lambda t: t.write(
        "proc/cpuinfo", "vendor_id\t: SomeCPU\nflags\t\t: fpu\n")),
             expect={"iommu.platform": F, "iommu.cmdline": S}),
    Scenario("iommu-vendor-mismatch", H, good(), patch={"host": {"iommu": {"vendor": "amd"}}},
             expect={"iommu.platform": F}),
    Scenario("iommu-mode-mismatch", H, good(), patch=_mode("translated"),
             expect={"iommu.mode": F}),
    Scenario("iommu-mode-translated", H, tree(lambda t: (
        t.acpi("DMAR").kconfig().irq_remap().cmdline("ro intel_iommu=on"),
        t.group("1", "DMA-FQ").pci("0000:41:00.0", "10de", "2331", "030200", "vfio-pci", "1"))),
             patch=_mode("translated"), expect={"iommu.mode": P}),
    Scenario("iommu-mode-by-cmdline", H, good(lambda t: [
        t.write(f"sys/kernel/iommu_groups/{g}/type", "unknown\n") for g in ("0", "1", "7")]),
             patch=_mode("passthrough"), expect={"iommu.mode": P}),
    Scenario("iommu-mode-tie", H, tree(lambda t: (
        t.acpi("DMAR").kconfig().irq_remap().cmdline("ro intel_iommu=on iommu=pt"),
        [t.group(str(i), ty).pci(f"0000:4{i}:00.0", "10de", "2331", "030200", "vfio-pci", str(i))
         for i, ty in enumerate(['identity', 'DMA'])])), patch=_mode("any"),
             expect={"iommu.enabled": P}),
    Scenario("iommu-mode-one-dma-pt-cmdline", H, tree(lambda t: (
        t.acpi("DMAR").kconfig().irq_remap().cmdline("ro intel_iommu=on iommu=pt"),
        [t.group(str(i), ty).pci(f"0000:4{i}:00.0", "10de", "2331", "030200", "vfio-pci", str(i))
         for i, ty in enumerate(['DMA-FQ'])])), patch=_mode("any"),
             expect={"iommu.enabled": P}),
    Scenario("iommu-mode-unknown-types", H, tree(lambda t: (
        t.acpi("DMAR").kconfig().irq_remap().cmdline("ro intel_iommu=on"),
        [t.group(str(i), ty).pci(f"0000:4{i}:00.0", "10de", "2331", "030200", "vfio-pci", str(i))
         for i, ty in enumerate(['unknown'])])), patch=_mode("any"),
             expect={"iommu.enabled": P}),
    Scenario("iommu-mode-passthrough-1", H, tree(lambda t: (
        t.acpi("DMAR").kconfig().irq_remap().cmdline("ro intel_iommu=on iommu.passthrough=1"),
        [t.group(str(i), ty).pci(f"0000:4{i}:00.0", "10de", "2331", "030200", "vfio-pci", str(i))
         for i, ty in enumerate(['unknown'])])), patch=_mode("any"),
             expect={"iommu.enabled": P}),
    Scenario("iommu-mode-passthrough-y", H, tree(lambda t: (
        t.acpi("DMAR").kconfig().irq_remap().cmdline("ro intel_iommu=on iommu.passthrough=y"),
        [t.group(str(i), ty).pci(f"0000:4{i}:00.0", "10de", "2331", "030200", "vfio-pci", str(i))
         for i, ty in enumerate(['unknown'])])), patch=_mode("any"),
             expect={"iommu.enabled": P}),
    Scenario("iommu-mode-passthrough-on", H, tree(lambda t: (
        t.acpi("DMAR").kconfig().irq_remap().cmdline("ro intel_iommu=on iommu.passthrough=on"),
        [t.group(str(i), ty).pci(f"0000:4{i}:00.0", "10de", "2331", "030200", "vfio-pci", str(i))
         for i, ty in enumerate(['unknown'])])), patch=_mode("any"),
             expect={"iommu.enabled": P}),
    Scenario("iommu-mode-mixed-mismatch", H, tree(lambda t: (
        t.acpi("DMAR").kconfig().irq_remap().cmdline("ro intel_iommu=on"),
        [t.group(str(i), ty).pci(f"0000:4{i}:00.0", "10de", "2331", "030200", "vfio-pci", str(i))
         for i, ty in enumerate(['identity', 'DMA', 'DMA-FQ'])])), patch=_mode("passthrough"),
             expect={"iommu.enabled": P}),
    Scenario("iommu-5-paths-unreadable", H, edit(good(), lambda d: [d["errors"].__setitem__(
        f"/sys/bus/pci/devices/0000:41:00.0/x{i}", "unreadable (exit 1)") for i in range(5)]),
             expect={"iommu.targets-present": E}),
    Scenario("iommu-6-paths-unreadable", H, edit(good(), lambda d: [d["errors"].__setitem__(
        f"/sys/bus/pci/devices/0000:41:00.0/x{i}", "unreadable (exit 1)") for i in range(6)]),
             expect={"iommu.targets-present": E}),
    Scenario("iommu-vendor-from-dmar", H, tree(lambda t: (
        t.write("proc/cpuinfo", "vendor_id\t: SomeCPU\nflags\t\t: fpu\n"), t.acpi("DMAR"),
        t.kconfig().cmdline("ro intel_iommu=on"))), expect={"iommu.platform": P}),
    Scenario("iommu-vendor-from-ivrs", H, tree(lambda t: (
        t.write("proc/cpuinfo", "vendor_id\t: SomeCPU\nflags\t\t: fpu\n"), t.acpi("IVRS"),
        t.kconfig())), expect={"iommu.platform": P}),
    Scenario("iommu-vendor-from-iort", H, tree(lambda t: (
        t.write("proc/cpuinfo", "vendor_id\t: SomeCPU\nflags\t\t: fpu\n"), t.acpi("IORT"),
        t.kconfig())), expect={"iommu.platform": P}),
    Scenario("iommu-no-interrupt-remapping", H, good(lambda t: t.write(
        "proc/interrupts", "  0:  1  IO-APIC  2-edge timer\n")),
             expect={"iommu.interrupt-remapping": F}),
    Scenario("iommu-ir-not-required", H, good(lambda t: (t.write(
        "proc/interrupts", "  0:  1  IO-APIC  2-edge timer\n"), t.cmdline("ro intel_iommu=on "
                                                                            "intremap=off"))),
             patch={"host": {"iommu": {"require_interrupt_remapping": False}}},
             expect={"iommu.interrupt-remapping": W}),
    Scenario("iommu-ir-from-dmesg", H, edit(good(lambda t: t.write(
        "proc/interrupts", "  0: 1 IO-APIC\n")), _cmd(
        "dmesg", 0, "[0.1] DMAR-IR: Enabled IRQ remapping in x2apic mode\n")),
             expect={"iommu.interrupt-remapping": P}),
    Scenario("iommu-ir-unreadable", H, edit(good(), lambda d: (
        d["commands"].pop("irq_remap"), d["commands"].pop("dmesg"))),
             expect={"iommu.interrupt-remapping": F}),
    Scenario("iommu-no-kconfig-no-groups", H, tree(lambda t: t.acpi("DMAR").cmdline(
        "ro intel_iommu=on")), expect={"iommu.kernel-support": W}),
    Scenario("iommu-no-kconfig-vfio-shown", H, good(lambda t: (
        (t.root / f"boot/config-{t.kernel}").unlink(),
        (t.root / "sys/bus/pci/drivers/vfio-pci").mkdir(parents=True, exist_ok=True))),
             expect={"iommu.kernel-support": P}),
    Scenario("iommu-no-targets-in-profile", H, good(),
             patch={"host": {"passthrough": {"targets": []}}},
             expect={"iommu.targets-present": F, "iommu.targets-grouped": S}),
    Scenario("iommu-targets-absent-allowed", H, tree(lambda t: (
        t.acpi("DMAR").kconfig(), t.pci("0000:02:00.0", "1af4", "1000", "020000", None))),
             patch={"host": {"passthrough": {"require_targets_present": False}}},
             expect={"iommu.targets-present": P}),
    Scenario("iommu-targets-absent", H, tree(lambda t: (
        t.acpi("DMAR").kconfig(), t.pci("0000:02:00.0", "1af4", "1000", "030000", None))),
             expect={"iommu.targets-present": F}),
    Scenario("iommu-no-pci-at-all", H, edit(tree(lambda t: t.acpi("DMAR")), lambda d: (
        d["dirs"].pop("/sys/bus/pci/devices", None))),
             expect={"iommu.targets-present": F}),
    Scenario("iommu-cmdline-unreadable", H, edit(good(), _err("/proc/cmdline")),
             expect={"iommu.cmdline": E, "iommu.enabled": E}),
    Scenario("iommu-cmdline-missing", H, edit(good(), _rm("/proc/cmdline")),
             expect={"iommu.cmdline": E}),
    Scenario("iommu-acpi-unreadable", H, edit(good(), lambda d: (
        d["dirs"].pop("/sys/firmware/acpi/tables"),
        d["errors"].__setitem__("/sys/firmware/acpi/tables", "directory unreadable (exit 1)"))),
             expect={"iommu.platform": E}),
    Scenario("iommu-no-acpi-no-units", H, edit(tree(lambda t: t.kconfig()), lambda d: (
        d["dirs"].pop("/sys/firmware/acpi/tables", None), d["dirs"].pop("/sys/class/iommu",
                                                                         None))),
             expect={"iommu.platform": F}),
    Scenario("iommu-pci-unreadable", H, edit(good(), lambda d: d["errors"].__setitem__(
        "/sys/bus/pci/devices/0000:41:00.0/class", "unreadable (exit 1)")),
             expect={"iommu.targets-present": E, "iommu.targets-grouped": E}),
    # -- binding: dra (issue 20): gpu0 on its host driver, its second function unbound ----
    Scenario("vp-dra-rebindable", VP, fake({"gpu0": "e1000", "gpu0_fn1": None},
                                           dev_holders=CommandResult(0, "I 0\nN 40 0 0 0\n")),
             profile="lab", patch=DRA,
             expect={"vfio.rebindable": P, "persistence.coverage": P, "vfio.driver": S}),
    Scenario("vp-dra-held", VP, fake({"gpu0": "e1000", "gpu0_fn1": None}, dev_holders=CommandResult(
        0, "I 0\nH 812 3 /dev/nvidia0\nC 812 nvidia-persiste\nN 40 1 0 0\n")),
        profile="lab", patch=DRA, expect={"vfio.rebindable": F}),
    Scenario("vp-dra-not-root", VP, fake({"gpu0": "e1000", "gpu0_fn1": None},
                                         dev_holders=CommandResult(
                                             0, "I 1000\nU 1\nU 812\nN 3 0 2 0\n")),
        profile="lab", patch=DRA, expect={"vfio.rebindable": E}),
    Scenario("vp-dra-peer-on-host", VP, fake({"gpu0": "e1000", "gpu0_fn1": "e1000"},
                                             dev_holders=CommandResult(0, "I 0\nN 40 0 0 0\n")),
             profile="lab", patch=DRA, expect={"vfio.rebindable": F}),
    Scenario("vp-dra-prebound", VP, fake({"gpu0": "e1000", "gpu0_fn1": None}, files={
        "/etc/modprobe.d/kgc-vfio.conf": "options vfio-pci ids=8086:100e\n"},
        dev_holders=CommandResult(0, "I 0\nN 40 0 0 0\n")),
        profile="lab", patch=DRA, expect={"persistence.coverage": W}),
    # -- vfio + persistence (lab profile) ---------------------------------------------
    Scenario("vp-good", VP, fake(files={"/etc/modprobe.d/kgc-vfio.conf": MODPROBE,
                                        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"},
                                 initramfs=VFIO_KO + "etc/modprobe.d/kgc-vfio.conf\n",
                                 modules=("e1000", "vfio_pci")),
             profile="lab", expect=dict.fromkeys(
                 ["vfio.driver", "vfio.device-node", "vfio.group-viable", "vfio.competing-driver",
                  "vfio.host-kept", "persistence.coverage", "persistence.load-order",
                  "persistence.initramfs", "persistence.over-capture", "persistence.cmdline"], P)),
    Scenario("vp-group-peer-on-host-driver", VP, fake({"gpu0_fn1": "e1000"}), profile="lab",
             expect={"vfio.group-viable": F, "vfio.device-node": F, "vfio.driver": F}),
    Scenario("vp-bridge-bound", VP, fake(tweak=lambda ds: [setattr(x, "driver", "shpchp")
                                                           for x in ds if x.bdf.endswith("05.0")]),
             profile="lab", expect={"vfio.group-viable": P}),
    Scenario("vp-iommu-off", VP, fake({"accel0": None, "gpu0": "e1000", "gpu0_fn1": "e1000"},
                                      no_groups=True, vfio_nodes=()),
             profile="lab", expect={"vfio.driver": F, "vfio.group-viable": S,
                                    "vfio.device-node": F}),
    Scenario("vp-runtime-only", VP, fake(), profile="lab",
             expect={"persistence.coverage": F, "vfio.competing-driver": F,
                     "persistence.load-order": S}),
    Scenario("vp-no-dev-vfio", VP, fake(vfio_nodes=()), profile="lab",
             expect={"vfio.device-node": F}),
    Scenario("vp-over-capture", VP, fake({"host_nic": "vfio-pci"}, vfio_nodes=("2", "3", "4"),
                                         files={"/etc/modprobe.d/vfio.conf":
                                                "options vfio-pci ids=1234:11e8,8086:100e,"
                                                "8086:10d3\nsoftdep e1000 pre: vfio-pci\n"
                                                "softdep e1000e pre: vfio-pci\n",
                                                "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}),
             profile="lab", expect={"persistence.over-capture": W, "vfio.host-kept": F}),
    Scenario("vp-host-kept-override", VP, fake(overrides={"0000:00:06.0": "vfio-pci"}),
             profile="lab", expect={"vfio.host-kept": F}),
    Scenario("vp-driverctl-udev", VP, fake(
        overrides={"0000:00:04.0": "vfio-pci", "0000:01:01.0": "vfio-pci",
                   "0000:01:02.0": "vfio-pci"},
        files={"/etc/driverctl.d/pci-0000:00:04.0": "vfio-pci\n",
               "/etc/driverctl.d/pci-0000:01:01.0": "vfio-pci\n"},
        udev_driver_override=CommandResult(0, '/etc/udev/rules.d/70-vfio.rules:ACTION=="add", '
                                              'KERNEL=="0000:01:02.0", ATTR{driver_override}='
                                              '"vfio-pci"\n')),
             profile="lab", expect={"persistence.coverage": P, "vfio.competing-driver": P,
                                    "persistence.load-order": P}),
    Scenario("vp-udev-by-id-captures-kept", VP, fake(
        udev_driver_override=CommandResult(0, '/etc/udev/rules.d/70-vfio.rules:ATTR{vendor}=='
                                              '"0x8086", ATTR{driver_override}="vfio-pci"\n')),
             profile="lab", expect={"persistence.over-capture": W}),
    Scenario("vp-cmdline-ids-by-hand", VP, fake(
        cmdline="root=/dev/vda vfio-pci.ids=1234:11e8,8086:100e",
        files={LOADER: "options root=/dev/vda\n"}), profile="lab",
             expect={"persistence.cmdline": F, "persistence.coverage": F}),
    Scenario("vp-cmdline-ids-in-grub", VP, fake(
        cmdline="root=/dev/vda iommu=pt vfio-pci.ids=1234:11e8,8086:100e",
        files={"/etc/default/grub": 'GRUB_CMDLINE_LINUX="iommu=pt vfio-pci.ids=1234:11e8,'
                                    '8086:100e"\n',
               LOADER: "options root=/dev/vda iommu=pt vfio-pci.ids=1234:11e8,8086:100e\n",
               "/etc/modprobe.d/vfio.conf": "softdep e1000 pre: vfio-pci\n",
               "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}), profile="lab",
             expect={"persistence.coverage": P, "persistence.cmdline": P,
                     "persistence.load-order": P}),
    Scenario("vp-cmdline-pending-reboot", VP, fake(files={
        "/etc/default/grub": 'GRUB_CMDLINE_LINUX="vfio-pci.ids=1234:11e8,8086:100e"\n',
        LOADER: "options root=/ vfio-pci.ids=1234:11e8,8086:100e\n"}), profile="lab",
             expect={"persistence.cmdline": W}),
    Scenario("vp-cmdline-update-grub", VP, fake(files={
        "/etc/default/grub": 'GRUB_CMDLINE_LINUX="vfio-pci.ids=1234:11e8,8086:100e"\n',
        "/boot/grub/grub.cfg": "menuentry x {\n  linux /vmlinuz root=/\n}\n"}), profile="lab",
             expect={"persistence.cmdline": W}),
    Scenario("vp-cmdline-differs", VP, fake(
        cmdline="root=/ vfio-pci.ids=1234:11e8", files={
            LOADER: "options root=/ vfio-pci.ids=1234:11e8,8086:100e\n"}), profile="lab",
             expect={"persistence.cmdline": W}),
    Scenario("vp-no-boot-config", VP, edit(fake(), _rm(LOADER)), profile="lab",
             expect={"persistence.cmdline": S}),
    Scenario("vp-missing-softdep", VP, fake(files={
        "/etc/modprobe.d/vfio.conf": "options vfio-pci ids=1234:11e8,8086:100e\n",
        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}), profile="lab",
             expect={"persistence.load-order": F, "vfio.competing-driver": F}),
    Scenario("vp-nothing-loads-vfio", VP, fake(files={
        "/etc/modprobe.d/vfio.conf": "options vfio-pci ids=1234:11e8,8086:100e\n"
                                     "blacklist e1000\n"}), profile="lab",
             expect={"persistence.load-order": F, "vfio.competing-driver": P}),
    Scenario("vp-install-false-guard", VP, fake(files={
        "/etc/modprobe.d/vfio.conf": "options vfio-pci ids=1234:11e8,8086:100e\n"
                                     "install e1000 /bin/false\n",
        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}), profile="lab",
             expect={"persistence.load-order": P, "vfio.competing-driver": P}),
    Scenario("vp-initramfs-host-driver-no-vfio", VP, fake(
        files={"/etc/modprobe.d/kgc-vfio.conf": MODPROBE,
               "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}, initramfs=E1000_KO),
             profile="lab", expect={"persistence.initramfs": F, "persistence.load-order": F,
                                    "vfio.competing-driver": F}),
    Scenario("vp-initramfs-stale", VP, fake(
        files={"/etc/modprobe.d/kgc-vfio.conf": MODPROBE,
               "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}, initramfs=E1000_KO + VFIO_KO),
             profile="lab", expect={"persistence.initramfs": W, "persistence.load-order": W,
                                    "vfio.competing-driver": W}),
    Scenario("vp-initramfs-driverctl-host-driver", VP, fake(
        overrides={"0000:00:04.0": "vfio-pci", "0000:01:01.0": "vfio-pci",
                   "0000:01:02.0": "vfio-pci"},
        files={f"/etc/driverctl.d/pci-{b}": "vfio-pci\n" for b in
               ("0000:00:04.0", "0000:01:01.0", "0000:01:02.0")}, initramfs=E1000_KO),
             profile="lab", expect={"persistence.initramfs": W, "vfio.competing-driver": W}),
    Scenario("vp-initramfs-no-modprobe", VP, fake(
        files={"/etc/modprobe.d/kgc-vfio.conf": MODPROBE}, initramfs=E1000_KO,
        pci_modalias_drivers=CommandResult(4, "KGC-NO-MODPROBE modprobe is not installed\n")),
             profile="lab", expect={"persistence.initramfs": F}),
    Scenario("vp-initramfs-no-mechanism", VP, fake(initramfs=E1000_KO), profile="lab",
             expect={"persistence.initramfs": F, "persistence.coverage": F}),
    Scenario("vp-initramfs-udev-only", VP, fake(
        initramfs=E1000_KO, udev_driver_override=CommandResult(0, "".join(
            f'/etc/udev/rules.d/70-vfio.rules:KERNEL=="{b}", ATTR{{driver_override}}="vfio-pci"\n'
            for b in ("0000:00:04.0", "0000:01:01.0", "0000:01:02.0")))),
             profile="lab", expect={"persistence.initramfs": W, "persistence.coverage": P}),
    Scenario("vp-ids-with-subsystem", VP, fake(files={
        "/etc/modprobe.d/vfio.conf": "options vfio-pci ids=1234:11e8:1af4:1100,"
                                     "8086:100e:1af4:1100,8086:10d3:1af4:9999\n"
                                     "softdep e1000 pre: vfio-pci\n",
        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}), profile="lab",
             expect={"persistence.coverage": P, "persistence.over-capture": P}),
    Scenario("vp-candidates-with-vfio-variants", VP, fake(
        files={"/etc/modprobe.d/vfio.conf": MODPROBE, "/etc/modules-load.d/vfio.conf":
               "vfio-pci\n"}, initramfs=E1000_KO.replace("e1000/e1000", "x/e1000_vfio_pci")
        + VFIO_KO + VFIO_KO.replace("vfio-pci.ko", "pci_stub.ko"),
        pci_modalias_drivers=CommandResult(0, "D 0000:00:04.0 a1\nA a1 vfio_pci pci_stub\n"
                                              "D 0000:01:01.0 a2\nD 0000:01:02.0 a2\n"
                                              "A a2 e1000_vfio_pci vfio_pci pci_stub e1000\n")),
             profile="lab", patch={"host": {"passthrough": {"allowed_drivers": [
                 "vfio-pci", "e1000_vfio_pci"]}}},
             expect={"persistence.initramfs": P, "persistence.load-order": P}),
    Scenario("vp-udev-rule-order", VP, fake(
        udev_driver_override=CommandResult(0, UDEV_ORDER)), profile="lab",
             expect={"persistence.coverage": F}),
    Scenario("vp-cmdline-ids-with-subsystem", VP, fake(
        cmdline="root=/ vfio-pci.ids=1234:11e8:1af4:1100,8086:100e:1af4:1100",
        files={LOADER: "options root=/ vfio-pci.ids=1234:11e8:1af4:1100,8086:100e:1af4:1100\n",
               "/etc/modprobe.d/vfio.conf": "softdep e1000 pre: vfio-pci\n",
               "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}), profile="lab",
             expect={"persistence.coverage": P, "persistence.cmdline": P}),
    Scenario("vp-candidates-vfio-core-partial", VP, fake(
        files={"/etc/modprobe.d/vfio.conf": MODPROBE, "/etc/modules-load.d/vfio.conf":
               "vfio-pci\n"}, initramfs=VFIO_KO,
        pci_modalias_drivers=CommandResult(0, "D 0000:01:01.0 a2\nD 0000:01:02.0 a2\n"
                                              "A a2 vfio_pci_core e1000\n")),
             profile="lab", expect={"persistence.load-order": P, "persistence.initramfs": P}),
    Scenario("vp-no-initramfs", VP, fake(files={"/etc/modprobe.d/kgc-vfio.conf": MODPROBE}),
             profile="lab", expect={"persistence.initramfs": S}),
    Scenario("vp-no-modprobe", VP, fake(files={"/etc/modprobe.d/kgc-vfio.conf":
                                               "options vfio-pci ids=1234:11e8,8086:100e\n"},
                                        pci_modalias_drivers=CommandResult(
                                            4, "KGC-NO-MODPROBE modprobe is not installed on "
                                               "the node\n")), profile="lab",
             expect={"vfio.competing-driver": S, "persistence.load-order": F}),
    Scenario("vp-no-module-index", VP, fake(
        files={"/etc/modprobe.d/kgc-vfio.conf": MODPROBE,
               "/etc/modules-load.d/vfio.conf": "vfio-pci\n"},
        pci_modalias_drivers=CommandResult(5, "KGC-NO-MODULE-INDEX no module index\n")),
             profile="lab", expect={"vfio.competing-driver": S, "persistence.load-order": S}),
    Scenario("vp-host-driver-bound-now", VP, fake({"accel0": "e1000"}), profile="lab",
             expect={"vfio.competing-driver": F, "vfio.driver": F}),
    Scenario("vp-pci-stub", VP, fake({"accel0": "pci-stub"}), profile="lab",
             expect={"vfio.driver": F, "vfio.group-viable": P}),
    Scenario("vp-no-targets", VP, fake(tweak=lambda ds: ds.clear()), profile="lab",
             expect={"vfio.driver": S, "persistence.coverage": S, "vfio.host-kept": S,
                     "persistence.over-capture": S}),
    Scenario("vp-generic-no-host-keeps", VP, fake(), expect={"vfio.host-kept": S,
                                                             "persistence.over-capture": S}),
    Scenario("vp-mechanism-not-accepted", VP, fake(files={
        "/etc/modprobe.d/kgc-vfio.conf": MODPROBE}), profile="lab",
             patch={"host": {"persistence": {"accepted_mechanisms": ["driverctl"]}}},
             expect={"persistence.coverage": F}),
    # -- runtime (default profile) --------------------------------------------------------
    Scenario("rt-seed-live-1.7", R, ctd(SEED, stats=SOCK), expect={
        "runtime.nri-enabled": P, "runtime.nri-ignored-keys": W, "runtime.nri-socket": P,
        "runtime.containerd-version": P, "runtime.config": W}),
    Scenario("rt-v2-kata-on-2.1.9", R, ctd(v2kata, (DATA / "containerd-2.1.9.version").read_text(),
                                           dump2, stats={**SOCK, **SHIM_OK},
                                           files={KATA_CFG: KATA_OK}),
             expect={"runtime.kata-handler": P, "runtime.kata-config": P, "runtime.kata-vfio": P,
                     "runtime.kata-shim": P, "runtime.config": P, "runtime.nri-ignored-keys": W}),
    # issue 18.1: the real 1.7.24 refuses CRI with this kata-only runtimes table (its dump
    # still shows the handler): fixtures/containerd/1.7.24/kata-only
    Scenario("rt-v2-kata-on-1.7.24", R, ctd(v2kata, dump=dump17), expect={
        "runtime.kata-handler": F, "runtime.config": F, "runtime.nri-enabled": F,
        "runtime.nri-socket": F}),
    # issue 18.1 on what the real binaries said (fixtures/containerd, kgc_lab.cri_load)
    Scenario("rt-cri-refused-plugins-1.7.24", R, ctd(
        (CTD_FIX / "1.7.24/kata-only/config.toml").read_text(),
        dump=(CTD_FIX / "1.7.24/kata-only/config-dump.txt").read_text(),
        plugins=(CTD_FIX / "1.7.24/kata-only/ctr-plugins-ls-d.txt").read_text(),
        stats={"/run/containerd/containerd.sock": StatResult("socket", "660", "root", "root",
                                                             0)}),
        expect={"runtime.config": F, "runtime.kata-handler": F, "runtime.nri-socket": F}),
    Scenario("rt-cri-refused-journal-2.1.9", R, ctd(
        (CTD_FIX / "2.1.9/bad-drain-timeout/config.toml").read_text(), "containerd x 2.1.9",
        dump=(CTD_FIX / "2.1.9/bad-drain-timeout/config-dump.txt").read_text(), plugins="",
        journal=(CTD_FIX / "2.1.9/bad-drain-timeout/containerd.log").read_text()),
        expect={"runtime.config": F, "runtime.kata-handler": F, "runtime.nri-socket": F}),
    Scenario("rt-cri-ok-plugins-2.1.9", R, ctd(
        (CTD_FIX / "2.1.9/ok-kata-only/config.toml").read_text(), "containerd x 2.1.9",
        dump=(CTD_FIX / "2.1.9/ok-kata-only/config-dump.txt").read_text(),
        plugins=(CTD_FIX / "2.1.9/ok-kata-only/ctr-plugins-ls-d.txt").read_text()),
        expect={"runtime.config": P, "runtime.kata-handler": P}),
    Scenario("rt-cri-rules-offline-unknown", R, ctd(
        (CTD_FIX / "1.7.24/kata-only/config.toml").read_text(), offline=True),
        expect={"runtime.config": S}),
    Scenario("rt-cri-rules-offline-1.7", R, ctd(
        (CTD_FIX / "1.7.24/mirrors-with-config-path/config.toml").read_text(), offline=True,
        package="dpkg|containerd|1.7.24~ds1-6+deb13u1|install ok installed\n"),
        expect={"runtime.config": F}),
    Scenario("rt-misplaced-on-2.1.9", R, ctd(v3bad, "containerd x 2.1.9", dump2_bad),
             expect={"runtime.kata-handler": F, "runtime.kata-config": F}),
    Scenario("rt-v3-on-1.7", R, ctd("version = 3\n"), expect={"runtime.config": F}),
    Scenario("rt-no-config-no-dump", R, ctd(None, dump="boom", dump_rc=1),
             expect={"runtime.config": F, "runtime.nri-ignored-keys": S}),
    Scenario("rt-bad-toml", R, ctd("version = 2\n[plugins\n"), expect={"runtime.config": F}),
    Scenario("rt-dump-not-toml", R, ctd("version = 2\n", dump="[[[", ),
             expect={"runtime.config": F}),
    Scenario("rt-missing-import", R, ctd('version = 2\nimports = ["/etc/containerd/conf.d/'
                                         '*.toml", 7]\n', dump="version = 2\n"),
             expect={"runtime.config": W}),
    Scenario("rt-import-replaces-nri", R, ctd(
        'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n' + NRI_ON,
        version=None, files={"/etc/containerd/conf.d/10.toml": '[plugins."io.containerd.nri.v1.'
                                                                'nri"]\n  socket_path = "/x"\n'}),
             expect={"runtime.nri-enabled": F, "runtime.containerd-version": F}),
    Scenario("rt-old-containerd", R, ctd(SEED, "containerd x 1.6.20"), expect={
        "runtime.containerd-version": F, "runtime.nri-enabled": F}),
    Scenario("rt-version-garbage", R, ctd(SEED, "containerd x dev"), expect={
        "runtime.containerd-version": F}),
    Scenario("rt-version-failed", R, ctd(SEED, "sh: 1: containerd: not found", version_rc=127),
             expect={"runtime.containerd-version": F}),
    Scenario("rt-2x-default-on", R, ctd("version = 3\n", "containerd x 2.0.0", stats=SOCK),
             expect={"runtime.nri-enabled": P, "runtime.nri-socket": P}),
    Scenario("rt-2x-disabled", R, ctd("version = 2\n" + NRI_ON.replace("false", "true"),
                                      "containerd x 2.1.0"), expect={"runtime.nri-enabled": F}),
    Scenario("rt-disable-not-bool", R, ctd("version = 2\n" + NRI_ON.replace("false", '"no"')),
             expect={"runtime.nri-enabled": F}),
    Scenario("rt-nri-not-required", R, ctd("version = 2\n"),
             patch={"runtime": {"require_nri": False}},
             expect={"runtime.nri-enabled": S, "runtime.nri-socket": S}),
    Scenario("rt-connections-disabled", R, ctd("version = 2\n" + NRI_ON
                                               + "  disable_connections = true\n", stats=SOCK),
             expect={"runtime.nri-socket": F, "runtime.nri-enabled": P}),
    Scenario("rt-socket-missing-ctd-down", R, ctd("version = 2\n" + NRI_ON),
             expect={"runtime.nri-socket": F}),
    Scenario("rt-socket-missing-ctd-up", R, ctd("version = 2\n" + NRI_ON, stats={
        "/run/containerd/containerd.sock": SOCK["/run/containerd/containerd.sock"]}),
             expect={"runtime.nri-socket": F}),
    Scenario("rt-socket-is-file", R, ctd("version = 2\n" + NRI_ON, stats={
        "/var/run/nri/nri.sock": StatResult("regular file", "644", "root", "root", 3)}),
             expect={"runtime.nri-socket": F}),
    Scenario("rt-socket-world-writable", R, ctd("version = 2\n" + NRI_ON, stats={
        "/var/run/nri/nri.sock": StatResult("socket", "666", "root", "root", 0)}),
             expect={"runtime.nri-socket": F}),
    Scenario("rt-socket-elsewhere", R, ctd("version = 2\n" + NRI_ON + '  socket_path = "/run/'
                                           'nri/other.sock"\n', stats={
        "/run/nri/other.sock": StatResult("socket", "600", "root", "root", 0)}),
             expect={"runtime.nri-socket": W}),
    Scenario("rt-offline-unknown", R, ctd("version = 2\n", offline=True), expect={
        "runtime.containerd-version": S, "runtime.nri-socket": S, "runtime.config": P}),
    Scenario("rt-offline-dpkg", R, ctd("version = 2\n", offline=True, package=(
        "dpkg|containerd|1.7.24~ds1-6+deb13u1|install ok installed\n")),
             expect={"runtime.containerd-version": P, "runtime.nri-enabled": F}),
    Scenario("rt-offline-dpkg-removed", R, ctd("version = 2\n", offline=True, package=(
        "dpkg|containerd|1.7.24~ds1-6|deinstall ok config-files\n")),
             expect={"runtime.containerd-version": S}),
    Scenario("rt-offline-rpm", R, ctd("version = 2\n" + NRI_ON, offline=True, package=(
        "rpm|containerd.io|1.7.27-3.1.el9|installed\n")),
             expect={"runtime.containerd-version": P, "runtime.nri-socket": S}),
    Scenario("rt-offline-profile-version", R, ctd("version = 2\n", offline=True),
             patch={"runtime": {"containerd_version": "2.1"}},
             expect={"runtime.containerd-version": P, "runtime.nri-enabled": P}),
    Scenario("rt-offline-connections-off", R, ctd("version = 3\n" + NRI_ON
                                                  + "  disable_connections = true\n",
                                                  offline=True),
             expect={"runtime.nri-socket": F}),
    Scenario("rt-handler-missing-kata-other", R, ctd(KATA_V2.replace("runtimes.kata", "runtimes."
                                                                     "kata-qemu")),
             expect={"runtime.kata-handler": F, "runtime.kata-config": F}),
    Scenario("rt-handler-wrong-type", R, ctd(KATA_V2.replace("io.containerd.kata.v2",
                                                             "io.containerd.runc.v2")),
             expect={"runtime.kata-handler": F}),
    Scenario("rt-handler-runtime-path", R, ctd(KATA_V2.replace(
        'runtime_type = "io.containerd.kata.v2"', 'runtime_type = "io.containerd.kata.v2"\n'
        '  runtime_path = "/opt/kata/bin/containerd-shim-kata-v2"'), stats={
        "/opt/kata/bin/containerd-shim-kata-v2": StatResult("regular file", "755", "root",
                                                            "root", 10)},
        files={KATA_CFG: KATA_OK}), expect={"runtime.kata-shim": P}),
    Scenario("rt-shim-on-path", R, ctd(KATA_V2, shim_cmd="/opt/bin/containerd-shim-kata-v2\n"),
             expect={"runtime.kata-shim": P}),
    Scenario("rt-shim-missing", R, ctd(KATA_V2, shim_cmd=""), expect={"runtime.kata-shim": F}),
    Scenario("rt-shim-empty", R, ctd(KATA_V2, stats={SHIM: StatResult(
        "regular empty file", "644", "root", "root", 0)}), expect={"runtime.kata-shim": F}),
    Scenario("rt-shim-dangling", R, ctd(KATA_V2, stats={SHIM: StatResult(
        "symbolic link", "777", "root", "root", 38, "missing")},
        links={SHIM: "/opt/kata/bin/containerd-shim-kata-v2"}), expect={"runtime.kata-shim": F}),
    Scenario("rt-shim-dir", R, ctd(KATA_V2, stats={SHIM: StatResult(
        "directory", "755", "root", "root", 4096)}), expect={"runtime.kata-shim": F}),
    Scenario("rt-shim-zero-size-regular", R, ctd(KATA_V2, stats={SHIM: StatResult(
        "regular file", "755", "root", "root", 0)}), expect={"runtime.kata-shim": F}),
    Scenario("rt-shim-link-to-empty", R, ctd(KATA_V2, stats={SHIM: StatResult(
        "symbolic link", "777", "root", "root", 38, "regular empty file", "755", None)}),
             expect={"runtime.kata-shim": F}),
    Scenario("rt-shim-link-ok", R, ctd(KATA_V2, stats={SHIM: StatResult(
        "symbolic link", "777", "root", "root", 38, "regular file", "755", 1000)}),
             expect={"runtime.kata-shim": P}),
    Scenario("rt-shim-old-link", R, ctd(KATA_V2, stats={SHIM: StatResult(
        "symbolic link", "777", "root", "root", 38)}), expect={"runtime.kata-shim": F}),
    Scenario("rt-kata-no-config", R, ctd(KATA_V2.replace(KATA_CFG, "/etc/kata-containers/x.toml")),
             expect={"runtime.kata-config": F, "runtime.kata-vfio": F,
                     "runtime.kata-stale-keys": S}),
    Scenario("rt-kata-standard-location", R, ctd("version = 2\n", files={
        "/etc/kata-containers/configuration.toml": KATA_OK,
        "/etc/kata-containers/config.d/10.toml": "[hypervisor.qemu]\ndefault_vcpus = 4\n"}),
             expect={"runtime.kata-config": P, "runtime.kata-vfio": P}),
    Scenario("rt-kata-none", R, ctd("version = 2\n"), expect={"runtime.kata-config": F}),
    Scenario("rt-kata-bad-toml", R, ctd(KATA_V2, files={KATA_CFG: "[hypervisor\n"}),
             expect={"runtime.kata-config": F, "runtime.kata-stale-keys": S}),
    Scenario("rt-kata-no-hypervisor", R, ctd(KATA_V2, files={KATA_CFG: "[runtime]\n"}),
             expect={"runtime.kata-config": F, "runtime.kata-vfio": F}),
    Scenario("rt-kata-no-port", R, ctd(KATA_V2, files={KATA_CFG: '[hypervisor.qemu]\n'
                                                                 'hot_plug_vfio = "no-port"\n'}),
             expect={"runtime.kata-vfio": F}),
    Scenario("rt-kata-bad-port", R, ctd(KATA_V2, files={KATA_CFG: '[hypervisor.qemu]\n'
                                                                  'cold_plug_vfio = "pcie"\n'}),
             expect={"runtime.kata-vfio": F}),
    Scenario("rt-kata-root-port-zero", R, ctd(KATA_V2, files={
        KATA_CFG: '[hypervisor.qemu]\ncold_plug_vfio = "root-port"\n'}),
             expect={"runtime.kata-vfio": F}),
    Scenario("rt-kata-bridge-port-stale", R, ctd(KATA_V2, files={
        KATA_CFG: '[hypervisor.qemu]\nhot_plug_vfio = "bridge-port"\n'
                  'hotplug_vfio_on_root_bus = true\n'}),
             expect={"runtime.kata-vfio": W, "runtime.kata-stale-keys": W}),
    # -- nri ---------------------------------------------------------------------------------
    Scenario("nri-good", ("nri",), nri(), expect=dict.fromkeys(
        ["nri.events", "nri.adjustment", "nri.handshake", "nri.own-pods-only"], P)),
    Scenario("nri-unavailable", ("nri",), nri(mode="unavailable", unavailable="remote node"),
             expect={"nri.events": S, "nri.own-pods-only": S}),
    Scenario("nri-connect-error-disabled", ("nri",), nri(
        connect_error="refused", socket_exists=False, events=[], handshake={},
        runtime_context={"enabled": False, "why": "disable = true"}),
             expect={"nri.events": F, "nri.handshake": F, "nri.own-pods-only": S}),
    Scenario("nri-connect-error-connections-off", ("nri",), nri(
        connect_error="refused", events=[], handshake={},
        runtime_context={"enabled": True, "disable_connections": True}),
             expect={"nri.events": F}),
    Scenario("nri-enabled-socket-missing", ("nri",), nri(
        connect_error="no such file", socket_exists=False, events=[], handshake={},
        runtime_context={"enabled": True, "why": "disable = false"}),
             expect={"nri.events": F, "nri.adjustment": F}),
    Scenario("nri-no-socket-no-context", ("nri",), nri(
        connect_error="no such file", socket_exists=False, events=[], handshake={}),
             expect={"nri.events": F}),
    Scenario("nri-disabled-no-why", ("nri",), nri(
        connect_error="refused", socket_exists=False, events=[], handshake={},
        runtime_context={"enabled": False}), expect={"nri.events": F}),
    Scenario("nri-enabled-no-why", ("nri",), nri(
        connect_error="no such file", socket_exists=False, events=[], handshake={},
        runtime_context={"enabled": True}), expect={"nri.events": F}),
    Scenario("nri-handshake-incomplete", ("nri",), nri(events=[], handshake={
        "plugin": "99-kgc-probe", "synchronized": False}), expect={"nri.events": F}),
    Scenario("nri-trigger-error", ("nri",), nri(trigger_error="CRI socket not found", events=[]),
             expect={"nri.events": F, "nri.handshake": F}),
    Scenario("nri-no-events", ("nri",), nri(events=[], probe_error="timeout"),
             expect={"nri.events": F, "nri.own-pods-only": S}),
    Scenario("nri-only-sandbox", ("nri",), nri(events=[EV_SANDBOX]),
             expect={"nri.events": F, "nri.adjustment": F}),
    Scenario("nri-passive", ("nri",), nri(trigger="passive", events=[dict(
        EV_SANDBOX, pod_labels={})]), expect={"nri.events": P, "nri.adjustment": S}),
    Scenario("nri-passive-nothing", ("nri",), nri(trigger="passive", events=[]),
             expect={"nri.events": F}),
    Scenario("nri-adjustment-not-applied", ("nri",), nri(adjustment={
        "env": "KGC_NRI_PROBE", "expected": TOKEN, "seen": ""}), expect={"nri.adjustment": F}),
    Scenario("nri-adjustment-unread", ("nri",), nri(adjustment={
        "env": "KGC_NRI_PROBE", "expected": TOKEN}), expect={"nri.adjustment": E}),
    Scenario("nri-no-probe-image", ("nri",), nri(pod={"name": "p", "token": TOKEN}),
             expect={"nri.adjustment": S}),
    Scenario("nri-adjustment-disabled", ("nri",), nri(),
             patch={"nri": {"allow_adjustment": False}}, expect={"nri.adjustment": S}),
    Scenario("nri-foreign-adjusted", ("nri",), nri(events=[EV_SANDBOX, EV_CREATE, dict(
        EV_CREATE, pod_labels={}, pod_name="web", pod_namespace="prod")]),
             expect={"nri.own-pods-only": F}),
    Scenario("nri-slow-handshake", ("nri",), nri(handshake={
        "plugin": "99-kgc-probe", "synchronized": True, "handshake_ms": 250.0}),
             expect={"nri.handshake": W}),
    Scenario("nri-handshake-no-events", ("nri",), nri(events=[]), expect={"nri.handshake": F}),
    # -- binding: dra (issue 20): the lab's stand-in GPU on its host driver (e1000) ----------
    Scenario("rb-dra-rebindable", ("reboot",), reboot(
        before={"0000:00:04.0": DRA_ROW}, after={"0000:00:04.0": DRA_ROW},
        use_after={"scanned": 40, "uid": "0"}, settled="running"), profile="lab", patch=DRA,
        expect={"reboot.rebindable": P, "reboot.binding-persists": S}),
    Scenario("rb-dra-prebound", ("reboot",), reboot(
        before={"0000:00:04.0": DRA_ROW}, after={"0000:00:04.0": dict(DRA_ROW, driver="vfio-pci")},
        use_after={"scanned": 40, "uid": "0"}, prebound={"0000:00:04.0": [
            "modprobe: /etc/modprobe.d/vfio.conf: options vfio-pci ids=1234:11e8"]}),
        profile="lab", patch=DRA, expect={"reboot.rebindable": F}),
    Scenario("rb-dra-held-after-boot", ("reboot",), reboot(
        before={"0000:00:04.0": DRA_ROW}, after={"0000:00:04.0": DRA_ROW},
        use_after={"scanned": 40, "uid": "0", "holders": [
            {"pid": 812, "comm": "nvidia-persiste", "path": "/dev/nvidia0", "fd": 3}]}),
        profile="lab", patch=DRA, expect={"reboot.rebindable": F}),
    Scenario("rb-dra-no-scan", ("reboot",), reboot(
        before={"0000:00:04.0": DRA_ROW}, after={"0000:00:04.0": DRA_ROW}), profile="lab",
        patch=DRA, expect={"reboot.rebindable": E}),
    # -- reboot (lab profile) ---------------------------------------------------------------
    Scenario("rb-good", ("reboot",), reboot(), profile="lab", expect=dict.fromkeys(
        ["reboot.returned", "reboot.binding-persists", "reboot.host-kept"], P)),
    Scenario("rb-binding-lost", ("reboot",), reboot(after={"0000:00:04.0": dict(
        ROW, driver=None), "0000:00:06.0": KEPT}), profile="lab",
             expect={"reboot.binding-persists": F}),
    Scenario("rb-vanished", ("reboot",), reboot(after={"0000:00:06.0": KEPT}), profile="lab",
             expect={"reboot.binding-persists": F}),
    Scenario("rb-kept-captured", ("reboot",), reboot(after={"0000:00:04.0": ROW, "0000:00:06.0":
                                                           dict(KEPT, driver="vfio-pci")}),
             profile="lab", expect={"reboot.host-kept": F}),
    Scenario("rb-no-targets-no-kept", ("reboot",), reboot(before={}, after={}), profile="lab",
             expect={"reboot.binding-persists": S, "reboot.host-kept": S}),
    Scenario("rb-timeout", ("reboot",), reboot("timeout", boot_id_after=None,
                                               console_tail="kgc-node login:"), profile="lab",
             expect={"reboot.returned": E}),
    Scenario("rb-failed-to-start", ("reboot",), reboot("failed-to-start"), profile="lab",
             expect={"reboot.returned": E}),
    Scenario("rb-not-allowed", ("reboot",), reboot("not-allowed"), profile="lab",
             expect={"reboot.returned": S}),
    Scenario("rb-unknown-status", ("reboot",), reboot("rebooting"), profile="lab",
             expect={"reboot.returned": E}),
    Scenario("rb-no-boot-id-after", ("reboot",), reboot(boot_id_after=None), profile="lab",
             expect={"reboot.returned": E}),
    Scenario("rb-no-boot-id-before", ("reboot",), reboot(boot_id_before=""), profile="lab",
             expect={"reboot.returned": E}),
    Scenario("rb-timeout-no-console", ("reboot",), reboot("timeout", boot_id_after=None),
             profile="lab", expect={"reboot.returned": E}),
    Scenario("rb-refused", ("reboot",), reboot("refused"), profile="lab",
             expect={"reboot.returned": S}),
    Scenario("rb-not-recorded", ("reboot",), reboot("not-recorded"), profile="lab",
             expect={"reboot.returned": S}),
    Scenario("rb-targets-by-class", ("reboot",), reboot(
        before={"0000:41:00.0": {"vendor": "10de", "device": "2331", "class": "030200",
                                 "driver": "vfio-pci"}},
        after={"0000:41:00.0": {"vendor": "10de", "device": "2331", "class": "030200",
                                "driver": "nvidia"}}),
             expect={"reboot.binding-persists": F}),
    Scenario("rb-target-by-address", ("reboot",), reboot(), profile="lab",
             patch={"host": {"passthrough": {"targets": [{"address": "0000:00:04.0"}]}}},
             expect={"reboot.binding-persists": P}),
    Scenario("rb-same-boot-id", ("reboot",), reboot(boot_id_after="a"), profile="lab",
             expect={"reboot.returned": F}),
    Scenario("rb-no-boot-ids", ("reboot",), reboot(boot_id_before=None, boot_id_after=None),
             profile="lab", expect={"reboot.returned": E}),
]

# the runtime scenarios' containerd configs name the Kata handler `kata`; the built-in
# generic profile's platform handler is kata-deploy's `kata-qemu-nvidia-gpu`, so the
# scenarios judge against `kata` (the same inputs as when the handler was runtime.kata_handler)
KATA_HANDLER_PATCH = {"platform": {"kata": {"handler": "kata"}}}
for _sc in SCENARIOS:
    if "runtime" in _sc.layers and _sc.profile == "generic-nvidia-passthrough":
        _sc.patch = {**KATA_HANDLER_PATCH, **_sc.patch}


def judge(layer_name: str, evidence: Any, profile: Profile) -> list[dict[str, Any]]:
    from kgc.core.registry import load_layers
    from kgc.layers.nri.collect import NriEvidence
    from kgc.layers.reboot.collect import RebootEvidence

    layer = load_layers((f"kgc.layers.{layer_name}",))[layer_name]
    if layer_name == "nri":
        ev = NriEvidence.from_dict(evidence)
    elif layer_name == "reboot":
        ev = RebootEvidence.from_dict(evidence)
    else:
        snap = HostSnapshot.from_dict(evidence)
        mod = sys.modules[f"kgc.layers.{layer_name}"]
        ev = mod.parse(snap, profile) if layer_name == "runtime" else mod.parse(snap)
    rows = []
    for chk in layer.checks:
        full = chk.judge(ev, profile, "corpus").to_dict()
        # what the evaluator decided (the check's title/layer/severity are the catalogue's)
        v = {k: full.get(k) for k in ("check", "status", "reason", "remediation", "expected",
                                      "found", "evidence")}
        # the evidence a verdict shows, pinned by its digest (the file stays readable)
        v["evidence"] = hashlib.sha256(json.dumps(v["evidence"], sort_keys=True,
                                                  default=str).encode()).hexdigest()[:16]
        rows.append(json.loads(json.dumps(v, sort_keys=True, default=str)))
    return rows


def build() -> dict[str, Any]:
    out: dict[str, Any] = {"format": "kgc-verdict-corpus/1", "scenarios": []}
    problems = []
    for sc in SCENARIOS:
        with tempfile.TemporaryDirectory(prefix="kgc-corpus-") as tmp:
            ev = sc.build(Path(tmp))
        evidence = ev.to_dict() if isinstance(ev, HostSnapshot) else ev
        prof = profile_for(sc.profile, sc.patch)
        verdicts = {ln: judge(ln, evidence, prof) for ln in sc.layers}
        got = {v["check"]: v["status"] for rows in verdicts.values() for v in rows}
        for cid, want in sc.expect.items():
            if got.get(cid) != want:
                reason = next((v["reason"] for rows in verdicts.values() for v in rows
                               if v["check"] == cid), "(no verdict)")
                problems.append(f"{sc.name}: {cid} expected {want}, got {got.get(cid)}: "
                                f"{reason}")
        # the evidence as one compact line per scenario: the verdicts stay the readable part
        out["scenarios"].append({"name": sc.name, "profile": sc.profile, "patch": sc.patch,
                                 "expect": sc.expect,
                                 "evidence": json.dumps(evidence, sort_keys=True,
                                                        separators=(",", ":"),
                                                        ensure_ascii=False),
                                 "verdicts": verdicts})
    if problems:
        raise SystemExit("corpus contradicts the hand-written expectations:\n  "
                         + "\n  ".join(problems))
    return out


if __name__ == "__main__":
    doc = build()
    CORPUS.parent.mkdir(parents=True, exist_ok=True)
    CORPUS.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    n = sum(len(r) for s in doc["scenarios"] for r in s["verdicts"].values())
    print(f"{CORPUS}: {len(doc['scenarios'])} scenarios, {n} verdicts")
