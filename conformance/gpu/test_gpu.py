"""Layer 4. GPU pod passthrough. When a pod asks for a GPU with the Kata RuntimeClass, it gets
that GPU inside a real microVM — and when it does not, the cause is named. Judged once per
cluster (``--kubeconfig``); the node and the pod of each result are in its evidence."""

import pytest

pytestmark = pytest.mark.layer("gpu")


# preflight: the cluster is set up for GPU pods
def test_the_kata_runtimeclass_exists_with_the_expected_handler(certify):
    certify("gpu.runtimeclass")


def test_the_runtimeclass_declares_the_vmm_overhead(certify):
    certify("gpu.runtimeclass-overhead")


def test_gpu_nodes_advertise_gpus_with_capacity_and_allocatable(certify):
    certify("gpu.nodes-advertise")


def test_the_device_plugin_is_ready_on_every_gpu_node(certify):
    certify("gpu.device-plugin")


# preflight under DRA (platform.gpu.request.mode dra-extended / claim; skipped otherwise)
def test_the_dra_api_resource_k8s_io_v1_is_served(certify):
    certify("gpu.dra-api")


def test_the_profile_device_class_exists_and_maps_the_requested_resource(certify):
    certify("gpu.dra-device-class")


def test_each_gpu_node_publishes_resourceslices_with_its_gpus(certify):
    certify("gpu.dra-slices")


def test_no_node_advertises_the_gpu_both_in_allocatable_and_by_dra(certify):
    certify("gpu.dra-both-ways")


# the GPU pod
def test_a_gpu_pod_with_the_kata_runtimeclass_runs_to_completion(certify):
    certify("gpu.pod-runs")


def test_the_gpu_pod_runs_in_a_vm_not_on_the_node(certify):
    certify("gpu.in-vm")


def test_the_gpu_is_an_nvidia_pci_function_in_the_guest_with_its_bars(certify):
    certify("gpu.pci-function")


def test_nvidia_smi_sees_exactly_the_requested_gpus(certify):
    certify("gpu.smi-count")


def test_the_gpu_model_is_the_one_the_profile_certifies(certify):
    certify("gpu.product")


def test_the_workload_gets_the_whole_gpu_or_the_mig_slices_the_profile_expects(certify):
    certify("gpu.mig")


def test_each_gpu_has_at_least_the_profile_memory(certify):
    certify("gpu.memory")


def test_nvidia_smi_reports_each_gpu_healthy(certify):
    certify("gpu.health")


def test_the_guest_driver_is_at_least_the_profile_minimum(certify):
    certify("gpu.driver")


def test_the_guest_cuda_version_is_at_least_the_profile_minimum(certify):
    certify("gpu.cuda")


def test_the_guest_gpu_agrees_with_the_node_product_label(certify):
    certify("gpu.node-labels")


def test_no_two_gpu_pods_on_one_node_share_a_gpu(certify):
    certify("gpu.unique")


def test_a_cuda_matmul_in_the_guest_matches_the_cpu(certify):
    certify("gpu.compute")


def test_the_gpu_claim_is_allocated_by_dra_on_the_pods_node(certify):
    certify("gpu.dra-allocation")


def test_the_guest_gpu_is_the_device_dra_allocated(certify):
    certify("gpu.dra-device-match")
