"""Layer 2. VFIO binding and persistence — persistence, proven statically: the vfio binding of
every target comes back at the next boot (modprobe.d, boot loader command line, initramfs,
driverctl, udev)."""

import pytest

pytestmark = pytest.mark.layer("persistence")


def test_every_target_is_covered_by_a_boot_time_mechanism(certify):
    certify("persistence.coverage")


def test_vfio_pci_loads_before_competing_host_drivers(certify):
    certify("persistence.load-order")


def test_initramfs_carries_vfio_when_it_carries_a_host_driver(certify):
    certify("persistence.initramfs")


def test_no_id_rule_captures_a_host_kept_device(certify):
    certify("persistence.over-capture")


def test_running_and_configured_vfio_pci_ids_agree(certify):
    certify("persistence.cmdline")
