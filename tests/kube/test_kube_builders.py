"""Builders: every manifest survives the kubernetes client's own typed models unchanged
(a misspelled or mistyped field would be dropped or refused there), and carries the run's
labels on the object and on its pod template."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from kgc.kube import builders as b
from kgc.kube.run import Run, with_labels

API = client.ApiClient()
RUN = {"kgc.io/run": "abc123"}


def roundtrip(manifest: dict[str, Any], model: str) -> dict[str, Any]:
    obj = API.deserialize(json.dumps(manifest), model, "application/json")
    return dict(API.sanitize_for_serialization(obj))


def gpu_pod() -> dict[str, Any]:
    collector = b.config_map_volume("collector", "kgc-collector", items={"collect.py": "c.py"})
    return b.pod(
        "gpu", [b.container(
            "cuda", "registry.example/cuda:12", command=["/bin/sh", "/kgc/c.py"],
            requests={"cpu": 1, "memory": "1Gi", "nvidia.com/gpu": 1},
            limits={"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"},
            env={"KGC_TOKEN": "x"}, mounts=[b.volume_mount("collector", "/kgc")],
        )],
        labels=RUN, annotations={"kgc.io/why": "test"}, runtime_class="kata-qemu-nvidia-gpu",
        node_selector={"kgc.io/gpu": "true"}, node_name="gpu-node-1",
        tolerations=[b.toleration("nvidia.com/gpu", effect="NoSchedule")],
        volumes=[collector], termination_grace_period_s=5,
    )


def test_pod_carries_everything_a_gpu_layer_sets() -> None:
    m = gpu_pod()
    assert roundtrip(m, "V1Pod") == m
    spec = m["spec"]
    c = spec["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert spec["runtimeClassName"] == "kata-qemu-nvidia-gpu"
    assert spec["volumes"][0]["configMap"] == {
        "name": "kgc-collector", "defaultMode": 0o555,
        "items": [{"key": "collect.py", "path": "c.py"}]}
    assert c["volumeMounts"] == [{"name": "collector", "mountPath": "/kgc", "readOnly": True}]
    assert m["metadata"]["labels"] == RUN and spec["restartPolicy"] == "Never"


def test_deployment_labels_its_pods_with_the_run() -> None:
    m = b.deployment("app", [b.container("app", "img", requests={"cpu": "100m"})],
                     replicas=0, labels=RUN, runtime_class="kata")
    assert roundtrip(m, "V1Deployment") == m
    tmpl = m["spec"]["template"]
    assert tmpl["metadata"]["labels"] == {**RUN, "app": "app"}
    assert m["spec"]["selector"] == {"matchLabels": {"app": "app"}}
    assert tmpl["spec"]["runtimeClassName"] == "kata" and m["spec"]["replicas"] == 0


def test_config_map_and_service() -> None:
    cm = b.config_map("kgc-collector", {"c.py": "print(1)\n"}, labels=RUN)
    assert roundtrip(cm, "V1ConfigMap") == cm
    svc = b.service("metric", {"app": "metric"}, {"http": 8080}, labels=RUN,
                    target_ports={"http": 80})
    assert roundtrip(svc, "V1Service") == svc
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP",
                                     "targetPort": 80}]
    assert b.service("s", {"a": "b"}, [53])["spec"]["ports"][0]["name"] == "p53"


def test_scaled_object_metrics_api_trigger() -> None:
    so = b.scaled_object("app", target="app", url="http://127.0.0.1:1/metric", labels=RUN,
                         max_replicas=8, target_value=2)
    assert so["apiVersion"] == "keda.sh/v1alpha1" and so["metadata"]["labels"] == RUN
    trig = so["spec"]["triggers"][0]
    assert trig == {"type": "metrics-api", "metricType": "AverageValue", "metadata": {
        "url": "http://127.0.0.1:1/metric", "valueLocation": "value", "targetValue": "2",
        "activationTargetValue": "0.5"}}
    assert so["spec"]["scaleTargetRef"] == {"name": "app"}
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (0, 8)


@pytest.mark.parametrize("bad", [
    lambda: b.pod("", [b.container("c", "i")]),
    lambda: b.pod("p", []),
])
def test_builders_refuse_what_cannot_be_a_manifest(bad: Any) -> None:
    with pytest.raises(ValueError):
        bad()


def test_with_labels_copies_and_reaches_the_template() -> None:
    d = b.deployment("app", [b.container("app", "img")])
    out = with_labels(d, RUN)
    assert out["metadata"]["labels"]["kgc.io/run"] == "abc123"
    assert out["spec"]["template"]["metadata"]["labels"]["kgc.io/run"] == "abc123"
    assert "kgc.io/run" not in d["metadata"]["labels"]  # the input is not changed


@pytest.mark.parametrize("rid", ["", "UPPER", "with_underscore", "-lead", "x" * 70])
def test_a_run_id_must_make_a_namespace_name(rid: str) -> None:
    with pytest.raises(ValueError):
        Run(kube=None, run_id=rid)  # type: ignore[arg-type]


def test_run_names_and_labels_follow_the_profile() -> None:
    class Cluster:
        namespace_prefix = "gpu-cert-"
        label = "example.com/run"

    run = Run.for_profile(None, Cluster(), run_id="r1")  # type: ignore[arg-type]
    assert run.namespace == "gpu-cert-r1"
    assert run.labels == {"example.com/run": "r1"} and run.selector == "example.com/run=r1"


def test_a_run_that_cannot_start_raises_its_own_error_and_restores_sigterm(
    tmp_path: Any,
) -> None:
    """The namespace cannot be created (the server refuses the method): that error is
    the one raised, a failed teardown is noted on it, and the SIGTERM handler is back."""
    import signal

    import yaml
    from kubernetes.client.rest import ApiException

    from kgc import kube
    from kube.fakeapi import Script, kubeconfig, serve

    before = signal.getsignal(signal.SIGTERM)
    with serve(Script()) as url:
        (tmp_path / "kc").write_text(yaml.safe_dump(kubeconfig(url)))
        k = kube.connect(tmp_path / "kc")
        with pytest.raises(ApiException) as err, Run(k, run_id="r1"):
            pytest.fail("never entered")
    assert err.value.status == 501
    assert any("tearing down run r1 failed too" in n for n in err.value.__notes__)
    assert signal.getsignal(signal.SIGTERM) is before
