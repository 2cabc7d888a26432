"""Layer 3. containerd + NRI — the live NRI probe. A real NRI plugin registers on the node and
must observe pod and container events (a handshake alone proves nothing: containerd 1.7 keeps a
plugin that missed a deadline connected but sends it no events); on its own probe pod only, its
environment-variable adjustment must be visible inside the container.

To get events without Kubernetes the probe runs one short-lived host-network probe pod
through the node's CRI socket and removes it (profile ``nri.trigger: cri``, the default);
``nri.trigger: passive`` only listens to pods the cluster creates and adjusts nothing."""

import pytest

pytestmark = pytest.mark.layer("nri")


def test_nri_plugin_observes_pod_and_container_events(certify):
    certify("nri.events")


def test_runtime_applies_the_probe_adjustment(certify):
    certify("nri.adjustment")


def test_probe_handshake_is_fast_and_followed_by_events(certify):
    certify("nri.handshake")


def test_probe_adjusts_only_its_own_pods(certify):
    certify("nri.own-pods-only")
