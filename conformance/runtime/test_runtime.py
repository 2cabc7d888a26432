"""Layer 3. containerd + NRI — the containerd runtime. NRI must really be on (by containerd's
semantics, not by keys it ignores), the Kata handler must be wired where this config version
reads it, and Kata's own config must plug VFIO GPUs on a PCIe root port."""

import pytest

pytestmark = pytest.mark.layer("runtime")


def test_containerd_is_new_enough_for_nri_plugins(certify):
    certify("runtime.containerd-version")


def test_containerd_config_is_valid(certify):
    certify("runtime.config")


def test_nri_is_enabled_by_its_real_semantics(certify):
    certify("runtime.nri-enabled")


def test_no_nri_keys_that_containerd_ignores(certify):
    certify("runtime.nri-ignored-keys")


def test_nri_socket_is_a_root_owned_socket(certify):
    certify("runtime.nri-socket")


def test_kata_handler_is_wired_in_the_right_section(certify):
    certify("runtime.kata-handler")


def test_kata_shim_is_installed(certify):
    certify("runtime.kata-shim")


def test_kata_configuration_is_found(certify):
    certify("runtime.kata-config")


def test_kata_plugs_vfio_on_a_root_port(certify):
    certify("runtime.kata-vfio")


def test_kata_configuration_has_no_stale_keys(certify):
    certify("runtime.kata-stale-keys")
