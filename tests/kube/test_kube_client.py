"""connect(): kubeconfig resolution and every way it can be unusable, each a one-line
KubeError with a remediation; names safe to print; refusals and an unreachable server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.kube import KubeError, connect
from kgc.kube.client import redact_url
from kgc_lab.common import free_port
from kube.fakeapi import Script, kubeconfig, serve


def write(path: Path, doc: object) -> Path:
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


def test_explicit_kubeconfig_and_context_give_safe_names(tmp_path: Path) -> None:
    doc = kubeconfig("https://admin:s3cret@10.0.0.1:6443/", context="prod", cluster="east")
    doc["contexts"].append({"name": "other", "context": {"cluster": "east", "user": "u"}})
    k = connect(write(tmp_path / "kc", doc))
    assert (k.context, k.cluster_name) == ("prod", "east")
    assert k.server == "https://10.0.0.1:6443"
    assert "s3cret" not in repr(k) and "t0ken" not in repr(k)
    assert connect(tmp_path / "kc", context="other").context == "other"


def test_kubeconfig_env_is_merged_first_file_wins(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    a = write(tmp_path / "a", kubeconfig("https://a.example:443", context="a"))
    b_doc = kubeconfig("https://b.example:443", context="b", cluster="b-cluster")
    b_doc.pop("current-context")
    b = write(tmp_path / "b", b_doc)
    monkeypatch.setenv("KUBECONFIG", f"{a}:{tmp_path / 'missing'}:{b}")
    assert connect().context == "a"
    k = connect(context="b")
    assert (k.context, k.server) == ("b", "https://b.example:443")


def test_default_is_home_kube_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeError) as err:
        connect()
    assert str(tmp_path / ".kube" / "config") in str(err.value)
    assert "--kubeconfig" in err.value.remediation
    (tmp_path / ".kube").mkdir()
    write(tmp_path / ".kube" / "config", kubeconfig("https://h:1"))
    assert connect().context == "lab"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("clusters: [", "not valid YAML"),
        ("- a\n- b\n", "no mapping at the top level"),
        ({"contexts": {"a": 1}}, "`contexts` must be a list"),
        ({"contexts": [{"context": {}}]}, "`contexts` must be a list"),
        ({"contexts": [{"name": "x", "context": "no"}]}, "is not a mapping"),
        ({"clusters": [], "contexts": [], "users": []}, "no current-context"),
        (kubeconfig("https://h:1", context="lab") | {"current-context": "gone"},
         "context 'gone' not found"),
    ],
)
def test_bad_kubeconfigs_are_one_line_errors(tmp_path: Path, content: object,
                                             says: str) -> None:
    with pytest.raises(KubeError) as err:
        connect(write(tmp_path / "kc", content))
    assert says in str(err.value)
    assert "\n" not in str(err.value) and err.value.remediation


def test_context_naming_a_missing_cluster(tmp_path: Path) -> None:
    doc = kubeconfig("https://h:1")
    doc["clusters"] = []
    with pytest.raises(KubeError) as err:
        connect(write(tmp_path / "kc", doc))
    assert "context 'lab'" in str(err.value)


def test_unknown_context_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(KubeError) as err:
        connect(write(tmp_path / "kc", kubeconfig("https://h:1")), context="nope")
    assert "'nope' not found" in str(err.value) and "lab" in err.value.remediation


def test_non_utf8_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "kc").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(KubeError, match="not valid YAML"):
        connect(tmp_path / "kc")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(doc=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["clusters", "contexts", "users", "current-context", "name",
                         "context", "cluster", "user", "server", "token"]), inner, max_size=4),
    max_leaves=12,
))
def test_any_yaml_document_is_a_kube_or_a_kube_error(tmp_path: Path, doc: object) -> None:
    path = tmp_path / "fuzz"
    path.write_text(yaml.safe_dump(doc))
    try:
        connect(path)
    except KubeError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize(("url", "safe"), [
    ("https://u:p@host:6443/base", "https://host:6443/base"),
    ("https://[::1]:6443", "https://[::1]:6443"),
    ("http://host", "http://host"),
    ("https://user@host:99999", "https://host"),
])
def test_server_url_never_carries_userinfo(url: str, safe: str) -> None:
    assert redact_url(url) == safe


def test_unreachable_server_names_it(tmp_path: Path) -> None:
    port = free_port()  # nobody listens there
    k = connect(write(tmp_path / "kc", kubeconfig(f"http://127.0.0.1:{port}")), retries=0)
    with pytest.raises(KubeError) as err:
        k.server_version()
    assert f"cannot reach the API server http://127.0.0.1:{port}" in str(err.value)
    assert "context 'lab'" in str(err.value) and "reach" in err.value.remediation


def test_server_version_of_a_server_that_answers(tmp_path: Path) -> None:
    info = {"major": "1", "minor": "37", "gitVersion": "v1.37.2", "gitCommit": "abc",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.26",
            "compiler": "gc", "platform": "linux/amd64"}
    script = Script(answers={"/version": [(200, info)]})
    with serve(script) as url:
        k = connect(write(tmp_path / "kc", kubeconfig(url)))
        assert k.server_version() == "v1.37.2"


@pytest.mark.parametrize(("status", "says", "fix"), [
    (401, "rejected the credentials of context 'lab' (401 Unauthorized) on get /version",
     "refresh the credentials"),
    (403, "refused get /version (403 Forbidden): forbidden: User \"bob\" cannot get path",
     "grant the user of context 'lab' 'get' on '/version'"),
])
def test_refusals_name_the_verb_and_resource(tmp_path: Path, status: int, says: str,
                                             fix: str) -> None:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
            "reason": "Forbidden" if status == 403 else "Unauthorized",
            "message": 'forbidden: User "bob" cannot get path "/version"'}
    with serve(Script(answers={"/version": [(status, body)]})) as url:
        k = connect(write(tmp_path / "kc", kubeconfig(url)))
        with pytest.raises(KubeError) as err:
            k.server_version()
    assert says in str(err.value), str(err.value)
    assert fix in err.value.remediation
    assert "t0ken" not in str(err.value) + err.value.remediation
