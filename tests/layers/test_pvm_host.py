"""A VM whose host virtualizes without VT-x/AMD-V: GPU passthrough is impossible there, and
the IOMMU checks say so instead of a firmware or hypervisor-flag remedy (issue 18, "Also").

The evidence is real: fixtures/host/pvm-firecracker.bundle.json, this project's development
machine (a Firecracker microVM whose KVM is PVM: /sys/module/kvm_pvm, cpuinfo flags with
``hypervisor`` and without vmx/svm, no IVRS table, no IOMMU), captured with ``kgc snapshot``
(see fixtures/host/README.md). PVM itself: virt-pvm/linux,
Documentation/virt/kvm/x86/pvm-spec.rst ("The PVM guest is only running on the underlying
CPU with underlying CPL=3").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kgc.cli import evaluate_bundles

BUNDLE = Path(__file__).resolve().parents[2] / "fixtures" / "host" / "pvm-firecracker.bundle.json"
SAYS_IMPOSSIBLE = ("iommu.platform", "iommu.enabled", "iommu.interrupt-remapping", "iommu.mode",
                   "iommu.kernel-support", "iommu.targets-present")


def verdicts(path: Path) -> dict[str, dict[str, Any]]:
    return {v["check"]: v for v in evaluate_bundles([str(path)], "generic-nvidia-passthrough")}


def test_the_pvm_host_capture_is_what_the_fixture_claims() -> None:
    host = json.loads(BUNDLE.read_text())["host"]
    assert "kvm_pvm" in host["dirs"]["/sys/module"]
    flags = next(ln for ln in host["commands"]["cpu"]["output"].splitlines()
                 if ln.startswith("flags")).split()
    assert "hypervisor" in flags and "vmx" not in flags and "svm" not in flags


@pytest.mark.parametrize("check", SAYS_IMPOSSIBLE)
def test_every_iommu_check_says_passthrough_is_impossible_here(check: str) -> None:
    v = verdicts(BUNDLE)[check]
    assert v["status"] == "fail", v["reason"]
    assert "GPU passthrough is impossible on this node" in v["reason"]
    assert "/sys/module/kvm_pvm" in v["reason"] and "no vmx/svm flag" in v["reason"]
    fix = v["remediation"]
    for generic in ("BIOS", "UEFI", "-device amd-iommu", "<iommu model", "CONFIG_"):
        assert generic not in fix, (check, fix)
    assert "bare metal" in fix


def test_the_same_vm_with_hardware_virtualization_keeps_the_vm_iommu_remedy(
        tmp_path: Path) -> None:
    """One token changed (the svm flag a host exposing AMD-V gives its VM): that host could
    give the VM a virtual IOMMU, so the hypervisor remedy stays and nothing says impossible."""
    doc = json.loads(BUNDLE.read_text())
    cpu = doc["host"]["commands"]["cpu"]
    cpu["output"] = cpu["output"].replace(" hypervisor ", " svm hypervisor ")
    doc["host"]["dirs"]["/sys/module"].remove("kvm_pvm")
    p = tmp_path / "svm.bundle.json"
    p.write_text(json.dumps(doc))
    v = verdicts(p)["iommu.platform"]
    assert v["status"] == "fail"
    assert "impossible" not in v["reason"]
    assert "virtual IOMMU the hypervisor must provide" in v["remediation"]
