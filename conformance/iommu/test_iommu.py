"""Layer 1. Host IOMMU. A node can hand a GPU to a Kata microVM only if its platform has an
IOMMU, the kernel has turned it on, interrupts are remapped, and every GPU meant for guests sits
in an IOMMU group."""

import pytest

pytestmark = pytest.mark.layer("iommu")


def test_platform_firmware_describes_an_iommu(certify):
    certify("iommu.platform")


def test_kernel_has_the_iommu_driver_and_vfio_pci(certify):
    certify("iommu.kernel-support")


def test_kernel_has_enabled_the_iommu(certify):
    certify("iommu.enabled")


def test_kernel_command_line_is_right_for_the_vendor(certify):
    certify("iommu.cmdline")


def test_iommu_mode_matches_the_profile(certify):
    certify("iommu.mode")


def test_interrupt_remapping_is_enabled(certify):
    certify("iommu.interrupt-remapping")


def test_passthrough_targets_are_present(certify):
    certify("iommu.targets-present")


def test_every_passthrough_target_is_in_an_iommu_group(certify):
    certify("iommu.targets-grouped")
