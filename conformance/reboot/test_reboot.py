"""Layer 2. VFIO binding and persistence — the live reboot test. DESTRUCTIVE: reboots the node,
only with --allow-reboot, never the machine running pytest. The only real proof that passthrough
survives a reboot."""

import pytest

pytestmark = pytest.mark.layer("reboot")


def test_node_reboots_and_returns_with_a_new_boot_id(certify):
    certify("reboot.returned")


def test_every_target_is_bound_to_vfio_pci_again_after_the_reboot(certify):
    certify("reboot.binding-persists")


def test_host_kept_devices_stay_on_host_drivers_after_the_reboot(certify):
    certify("reboot.host-kept")


def test_under_dra_every_target_comes_back_rebindable_not_pre_bound(certify):
    certify("reboot.rebindable")
