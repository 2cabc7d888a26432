"""Targets decide, in one place, a target's name, locality, reboot safety, socket reach and
the remediation of a transport failure."""

from __future__ import annotations

import platform
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgc.core.target import Address, ClusterTarget, NodeTarget, TargetError, redact_url


@pytest.mark.parametrize("spec,name", [
    ("local://", platform.node()),
    ("ssh://root@gpu-a", "gpu-a"),
    ("paramiko://admin@10.0.0.5", "10.0.0.5"),
    ("gpu-b", "gpu-b"),
    ("chroot:///mnt/image", "chroot:/mnt/image"),
    ("kubectl://kgc-node-x?namespace=kgc", "kgc/kgc-node-x"),
    ("docker://c1", "docker:c1"),
    ("ssh://[::1]:22", "[::1]:22"),
])
def test_one_name_per_node_without_credentials(spec: str, name: str) -> None:
    assert NodeTarget(spec).name == name


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="@/:?#[]"),
               min_size=3, max_size=20))
def test_passwords_never_survive_redaction(pw: str) -> None:
    """What is left after redaction does not depend on the password at all (a containment
    check was wrong for a password such as ``ssh`` that the scheme itself spells)."""
    assert redact_url(f"ssh://root:{pw}@host:22") == "ssh://root:***@host:22"


@pytest.mark.parametrize("spec,root,refused", [
    ("local://", "", "machine that runs kgc"),
    ("ssh://root@127.0.0.1:2222", "", "loopback"),
    ("ssh://root@localhost", "", "loopback"),
    ("ssh://root@[::1]:22", "", "loopback"),
    ("kubectl://pod", "", "pod or container"),
    ("docker://c", "", "pod or container"),
    ("chroot:///mnt", "", "offline tree"),
    ("ssh://root@gpu-a", "/mnt/tree", "offline tree"),
    ("ssh://root@gpu-a", "", None),
    ("ssh://root@kgc-lab-vm", "", None),  # an ssh_config alias for a lab VM
])
def test_reboot_refusal_is_decided_by_the_target(spec: str, root: str, refused: str | None):
    why = NodeTarget(spec, root=root).reboot_refusal()
    if refused is None:
        assert why is None
    else:
        assert why and refused in why


def test_only_this_machine_reaches_its_sockets_directly() -> None:
    assert NodeTarget("local://").sockets_reachable
    assert not NodeTarget("local://", root="/tmp/x").sockets_reachable
    assert not NodeTarget("ssh://root@gpu-a").sockets_reachable
    assert NodeTarget("chroot:///mnt").offline_tree


@pytest.mark.parametrize("spec,needle", [
    ("ssh://root@gpu-a", "known_hosts"),
    ("kubectl://p", "kubectl exec"),
    ("chroot:///x", "root"),
    ("local://", "--sudo"),
])
def test_remediation_comes_from_the_transport(spec: str, needle: str) -> None:
    assert needle in NodeTarget(spec).remediation


def test_unreachable_ssh_target_fails_with_the_ssh_remedy() -> None:
    t = NodeTarget("ssh://root@127.0.0.1:1", timeout_s=5)
    with pytest.raises(TargetError) as ei:
        t.run("true")
    assert "ssh" in str(ei.value) and "known_hosts" in ei.value.remediation


def test_unparseable_target_is_bad_input() -> None:
    with pytest.raises(TargetError):
        Address.parse("ssh://host:notaport")


def test_ssh_host_keys_are_strict_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import testinfra

    seen: dict[str, Any] = {}

    def fake_get_host(spec: str, **kw: Any) -> object:
        seen.update(kw)
        return object()

    monkeypatch.setattr(testinfra, "get_host", fake_get_host)
    _ = NodeTarget("ssh://root@gpu-a").host
    assert "StrictHostKeyChecking=yes" in seen["ssh_extra_args"]
    _ = NodeTarget("ssh://root@gpu-b", host_keys="accept-new").host
    assert "StrictHostKeyChecking=accept-new" in seen["ssh_extra_args"]


def test_paramiko_refuses_unknown_host_keys(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import paramiko

    policies = []

    def fake_connect(self: paramiko.SSHClient, **cfg: Any) -> None:
        policies.append(type(self._policy).__name__)

    monkeypatch.setattr(paramiko.SSHClient, "connect", fake_connect)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config to weaken anything
    cfg = tmp_path / "cfg"
    cfg.write_text("Host gpu-a\n  StrictHostKeyChecking no\n")
    _ = NodeTarget("paramiko://root@gpu-a", ssh_config=str(cfg)).host.backend.client
    _ = NodeTarget("paramiko://root@gpu-b", host_keys="accept-new").host.backend.client
    assert policies == ["RejectPolicy", "AutoAddPolicy"]


def test_cluster_target_is_named_by_its_context_not_its_credentials(tmp_path) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        "contexts: [{name: lab, context: {cluster: kgc-lab, user: admin}}]\n"
        "clusters: [{name: kgc-lab, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: admin, user: {token: SECRET-TOKEN}}]\n")
    t = ClusterTarget(str(kc))
    assert t.name == "kgc-lab" and "SECRET" not in t.redacted
    assert ClusterTarget(str(kc), "other").name == "other"


# -- passwords in target specs -----------------------------------------------------------------
# A password in --hosts is on kgc's own command line (every local user's `ps`) and testinfra
# hands an ssh:// one to `sshpass -p PW`, a second command line: refused, never carried.
PASSWORD_SPECS = [
    "ssh://root:PLANTED-PW@gpu-a:2222",
    "safe-ssh://root:PLANTED%40PW@gpu-a",  # percent-encoded
    "paramiko://admin:PLANTED-PW@10.0.0.5",
    "root:PLANTED-PW@gpu-b",  # bare: testinfra's paramiko default
    "ssh://ro@ot:PLANTED-PW@gpu-a",  # testinfra splits at the first '@', urllib at the last
    "ssh://root:@gpu-a",  # an empty password is still a password field
    "docker://u:PLANTED-PW@c1",
    "ssh://root:PLANTED/PW@gpu-a",  # urllib would read "/PW@gpu-a" as a path
]


@pytest.mark.parametrize("spec", PASSWORD_SPECS)
def test_a_password_in_a_target_is_refused_saying_why_and_what_to_do(
        spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import testinfra

    def no_host(*a: Any, **kw: Any) -> Any:
        raise AssertionError("a password spec reached testinfra")

    monkeypatch.setattr(testinfra, "get_host", no_host)
    with pytest.raises(TargetError) as ei:
        NodeTarget(spec).host  # noqa: B018 - the refusal comes before any transport
    msg = str(ei.value)
    assert "\n" not in msg and "PLANTED" not in msg and "***" in msg, msg
    assert "password" in msg and "ps" in msg, msg  # why
    assert "--ssh-identity-file" in msg and "ssh-agent" in msg and "--ssh-config" in msg, msg


def test_a_recorded_name_with_a_password_still_parses_and_redacts() -> None:
    # earlier bundles recorded the spec: it names the node, it is never connected to
    assert Address.parse("ssh://root:pw@gpu-a:2222").name == "gpu-a:2222"
    assert redact_url("ssh://u:PLANTED/PW@h") == "ssh://u:***@h"
    assert redact_url("chroot:///mnt/x:y@z") == "chroot:///mnt/x:y@z"


@pytest.mark.parametrize("spec", ["ssh://root@gpu-a:2222", "ssh://gpu-a", "safe-ssh://u@[::1]:22"])
def test_the_ssh_command_line_never_carries_a_password(spec: str) -> None:
    host = NodeTarget(spec, ssh_identity_file="/k/id", ssh_config="/k/cfg").host
    cmd, args = host.backend._build_ssh_command("true")
    argv = " ".join(cmd) % tuple(args)
    assert "sshpass" not in argv and host.backend.host.password is None, argv
    assert argv.startswith("ssh ") and "-i /k/id" in argv


def test_kgc_and_pytest_refuse_a_password_target_with_exit_2(tmp_path) -> None:
    import subprocess
    import sys

    spec = "ssh://root:PLANTED-PW@127.0.0.1:1"
    runs = [
        [sys.executable, "-m", "kgc.cli", "snapshot", "--hosts", spec, "-o", "x.json"],
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "iommu", "--hosts",
         spec],
    ]
    for argv in runs:
        r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           check=False)
        assert r.returncode == 2, (argv, r.stdout[-2000:], r.stderr[-2000:])
        out = r.stdout + r.stderr
        assert "PLANTED" not in out and "carries a password" in out, out[-2000:]
    assert not list(tmp_path.iterdir())  # nothing written


# -- validated before any check, probed once (issue 18.5, 19.2) ------------------------------
def test_the_schemes_are_testinfras() -> None:
    from testinfra.backend import BACKENDS

    from kgc.core.target import SCHEMES

    assert set(SCHEMES) == set(BACKENDS)


def test_an_unknown_scheme_lists_the_valid_ones() -> None:
    with pytest.raises(TargetError) as ei:
        NodeTarget("sshh://root@gpu-a")
    assert "unknown scheme 'sshh://'" in str(ei.value) and "ssh://, safe-ssh://" in str(ei.value)
    assert "make the" not in ei.value.remediation


def test_a_missing_chroot_or_root_directory_is_bad_input(tmp_path) -> None:
    with pytest.raises(TargetError, match="no directory '/no/such'"):
        NodeTarget("chroot:///no/such").validate()
    with pytest.raises(TargetError, match="--root /no/such: no such directory"):
        NodeTarget("local://", root="/no/such").validate()
    assert NodeTarget(f"chroot://{tmp_path}").validate().name == f"chroot:{tmp_path}"


@pytest.mark.parametrize("spec,ssh_config,cmd", [
    ("ssh://root@127.0.0.1:1", None, "`ssh -p 1 root@127.0.0.1 true`"),
    ("paramiko://admin@gpu-a", None, "`ssh admin@gpu-a true`"),
    ("ssh://gpu-a:2222", "/etc/kgc ssh", "`ssh -F '/etc/kgc ssh' -p 2222 gpu-a true`"),
])
def test_the_ssh_fix_is_a_command_that_runs(spec: str, ssh_config: str | None,
                                            cmd: str) -> None:
    """``ssh 127.0.0.1:1 true`` (the name, not the address) is not ssh syntax."""
    assert cmd in NodeTarget(spec, ssh_config=ssh_config).remediation


def _kubeconfig(tmp_path, server: str) -> str:
    kc = tmp_path / "kc"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        "contexts: [{name: lab, context: {cluster: c, user: u}}]\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: T}}]\n")
    return str(kc)


def test_an_invalid_kubeconfig_is_bad_input_before_the_run(tmp_path) -> None:
    """Before: only a missing file and an unknown context were; a file that is not a
    kubeconfig was left to every cluster check to report."""
    bad = tmp_path / "bad"
    bad.write_text("just: [text\n")
    with pytest.raises(TargetError, match="not valid YAML"):
        ClusterTarget.for_run(str(bad), None)
    assert ClusterTarget.for_run(str(bad), None, validate=False) is not None


def test_an_unreachable_cluster_is_probed_once_and_every_layer_shares_the_error(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from kgc.core.engine import Context
    from kgc.core.profile import DEFAULT_PROFILE, load_profile
    from kgc.core.target import Unreachable
    from kgc.kube import client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = ClusterTarget(_kubeconfig(tmp_path, f"http://127.0.0.1:{port}"))
    calls = []
    real = client.Kube.server_version
    monkeypatch.setattr(client.Kube, "server_version",
                        lambda self: calls.append(1) or real(self))
    with pytest.raises(Unreachable):
        t.probe()
    ctx = Context(target=t, profile=load_profile(DEFAULT_PROFILE))
    verdicts = ctx.judge_all()
    assert len(calls) == 1
    assert {v.status for v in verdicts} == {"error"}
    assert len({v.reason for v in verdicts}) == 1 and " at 0x" not in verdicts[0].reason
