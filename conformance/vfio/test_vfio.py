"""Layer 2. VFIO binding and persistence — the binding. A GPU reaches a Kata microVM only if it
is bound to vfio-pci, its VFIO device node exists, its whole IOMMU group is viable, no host
driver can grab it first, and the devices the host keeps are left alone."""

import pytest

pytestmark = pytest.mark.layer("vfio")


def test_every_target_is_bound_to_vfio_pci(certify):
    certify("vfio.driver")


def test_every_bound_target_has_its_vfio_device_node(certify):
    certify("vfio.device-node")


def test_every_target_iommu_group_is_viable(certify):
    certify("vfio.group-viable")


def test_no_host_driver_can_claim_a_target_first(certify):
    certify("vfio.competing-driver")


def test_host_kept_devices_are_not_captured(certify):
    certify("vfio.host-kept")


def test_under_dra_every_target_is_rebindable(certify):
    certify("vfio.rebindable")
