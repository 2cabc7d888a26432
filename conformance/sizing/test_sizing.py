"""Layer 5. Resource limits -> VM sizing — Kata VM sizing. Kata sizes a pod's microVM from its
containers' limits on top of a default VM (requests are ignored; RuntimeClass overhead does not
enlarge the VM). A cluster is sized right when Kata's configuration is known, every pod shape's
guest has exactly the vCPUs and memory Kata's rules predict, no Kata pod relies on requests the
VM will not honour, and no node hosts more VM memory than it can allocate."""

import pytest

pytestmark = pytest.mark.layer("sizing")


def test_every_kata_runtime_class_has_a_known_sane_sizing_configuration(certify):
    certify("sizing.kata-config")


def test_each_pod_shapes_microvm_has_the_predicted_vcpus_and_memory(certify):
    certify("sizing.vm-matches-limits")


def test_no_kata_pod_relies_on_requests_the_vm_will_not_honour(certify):
    certify("sizing.starved-pods")


def test_no_node_hosts_kata_vms_beyond_its_allocatable_memory(certify):
    certify("sizing.node-overcommit")
