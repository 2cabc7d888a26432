"""Layer 4, confidential GPUs (only when the profile sets ``cluster.gpu.cc``): the GPU pod's
guest is the profile's TEE (SEV-SNP or TDX), its GPU is in CC mode and ready, and the
attestation resource the profile names is released by the guest's confidential data hub."""

import pytest

pytestmark = pytest.mark.layer("gpu")


def test_the_guest_is_the_profiles_tee(certify):
    certify("gpu.cc-tee")


def test_the_gpu_is_in_confidential_computing_mode(certify):
    certify("gpu.cc-mode")


def test_the_confidential_gpu_is_ready(certify):
    certify("gpu.cc-ready")


def test_the_pod_obtains_its_attestation_resource(certify):
    certify("gpu.cc-attestation")
