"""runtime.* evaluators on config trees read through the real collector (KGC_ROOT), plus
pure-parser cases and fuzzing of the config parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.core.hostfs import CommandResult, HostSnapshot, StatResult
from kgc.core.model import Status
from kgc.core.target import NodeTarget
from kgc.evidence.containerd import parse_version, strip_log_lines
from kgc.layers.runtime import QUERY, parse
from kgc.layers.runtime.checks import CHECKS
from systree import kata_handler_profile

SEED = """version = 2

[plugins."io.containerd.grpc.v1.cri"]
  enable_nri = true
  enable_unprivileged_ports = false

[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = "/var/run/nri/nri.sock"
"""

CRI_KEY_ONLY = """version = 2

[plugins."io.containerd.grpc.v1.cri"]
  enable_nri = true
"""

GPU_CFG = (
    "/opt/kata/share/defaults/kata-containers/runtimes/qemu-nvidia-gpu/"
    "configuration-qemu-nvidia-gpu.toml"
)

KATA_V2 = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata-qemu-nvidia-gpu]
  runtime_type = "io.containerd.kata.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata-qemu-nvidia-gpu.options]
  ConfigPath = "{GPU_CFG}"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
""".replace("{GPU_CFG}", GPU_CFG)  # runc listed: 1.7 refuses CRI without it (issue 18.1)

KATA_GPU = """[hypervisor.qemu]
default_memory = 8192
cold_plug_vfio = "root-port"
pcie_root_port = 8
hotplug_vfio_on_root_bus = true
enable_annotations = ["enable_iommu"]
[runtime]
static_sandbox_resource_mgmt = true
"""

PROFILE = kata_handler_profile()  # the configs below name the handler `kata`


def tree(root: Path, files: dict[str, str]) -> HostSnapshot:
    for rel, text in files.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return NodeTarget("local://", root=str(root)).collect(QUERY)


def judge(snap: HostSnapshot, profile=PROFILE):  # type: ignore[no-untyped-def]
    ev = parse(snap, profile)
    return {c.id: c.judge(ev, profile, "t") for c in CHECKS}


def test_seed_config_offline_nri_on_and_enable_nri_named_as_ignored(tmp_path: Path):
    v = judge(tree(tmp_path, {"/etc/containerd/config.toml": SEED}))
    assert v["runtime.nri-enabled"].status is Status.PASS
    ign = v["runtime.nri-ignored-keys"]
    assert ign.status is Status.WARN
    assert "enable_nri" in ign.reason and "io.containerd.grpc.v1.cri" in ign.reason
    assert "enable_nri" in ign.remediation
    # offline tree: no binary to ask
    assert v["runtime.containerd-version"].status is Status.SKIP


def test_cri_key_only_offline_is_undecided_and_fails_with_the_real_section(tmp_path: Path):
    v = judge(tree(tmp_path, {"/etc/containerd/config.toml": CRI_KEY_ONLY}))
    nri = v["runtime.nri-enabled"]
    assert nri.status is Status.FAIL
    assert "enable_nri" in nri.reason and "io.containerd.nri.v1.nri" in nri.reason
    assert "disable = false" in nri.remediation


def test_config_version_3_implies_containerd_2_default_on(tmp_path: Path):
    v = judge(tree(tmp_path, {"/etc/containerd/config.toml": "version = 3\n"}))
    assert v["runtime.nri-enabled"].status is Status.PASS
    assert "2.x is disable = false" in v["runtime.nri-enabled"].reason


def test_kata_deploy_handler_name_mismatch_names_the_present_handler(tmp_path: Path):
    v = judge(tree(tmp_path, {"/etc/containerd/config.toml": KATA_V2}))
    h = v["runtime.kata-handler"]
    assert h.status is Status.FAIL and "kata-qemu-nvidia-gpu" in h.reason
    prof = PROFILE.model_copy(
        update={
            "runtime": PROFILE.runtime.model_copy(update={"kata_handler": "kata-qemu-nvidia-gpu"})
        }
    )
    snap = tree(
        tmp_path,
        {
            GPU_CFG: KATA_GPU,
        },
    )
    v = judge(snap, prof)
    assert v["runtime.kata-handler"].status is Status.PASS
    assert v["runtime.kata-config"].status is Status.PASS
    assert v["runtime.kata-config"].evidence["sizing"]["hypervisor.qemu.default_memory"] == 8192
    assert v["runtime.kata-vfio"].status is Status.PASS
    stale = v["runtime.kata-stale-keys"]
    assert stale.status is Status.WARN and "hotplug_vfio_on_root_bus" in stale.reason


def test_handler_in_the_v2_section_of_a_v3_config_is_misplaced(tmp_path: Path):
    cfg = "version = 3\n" + KATA_V2.split("\n", 1)[1].replace("kata-qemu-nvidia-gpu", "kata")
    v = judge(tree(tmp_path, {"/etc/containerd/config.toml": cfg}))
    h = v["runtime.kata-handler"]
    assert h.status is Status.FAIL
    assert "does not read" in h.reason
    assert "io.containerd.cri.v1.runtime" in h.remediation


def test_kata_no_port_fails_vfio(tmp_path: Path):
    snap = tree(
        tmp_path,
        {
            "/etc/kata-containers/configuration.toml": (
                '[hypervisor.qemu]\nhot_plug_vfio = "no-port"\n'
            )
        },
    )
    v = judge(snap)
    assert v["runtime.kata-vfio"].status is Status.FAIL
    assert "neither cold_plug_vfio nor hot_plug_vfio" in v["runtime.kata-vfio"].reason


def test_invalid_toml_is_a_named_failure(tmp_path: Path):
    v = judge(tree(tmp_path, {"/etc/containerd/config.toml": "version = 2\n[plugins\n"}))
    assert v["runtime.config"].status is Status.FAIL
    assert "/etc/containerd/config.toml: invalid TOML" in v["runtime.config"].reason


def test_imports_replace_whole_plugin_sections(tmp_path: Path):
    main = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n' + SEED.split("\n", 1)[1]
    imp = '[plugins."io.containerd.nri.v1.nri"]\n  socket_path = "/run/x.sock"\n'
    snap = tree(
        tmp_path, {"/etc/containerd/config.toml": main, "/etc/containerd/conf.d/10-nri.toml": imp}
    )
    v = judge(snap)
    # the import replaced the whole NRI section: `disable = false` is gone, 1.7/2.x unknown
    assert v["runtime.nri-enabled"].status is Status.FAIL
    assert "does not set `disable`" in v["runtime.nri-enabled"].reason


def _live_snap(
    config: str, version: str, dump: str | None, sock_kind: str = "socket", mode: str = "600"
):
    cmds = {"containerd_version": CommandResult(0, version)}
    if dump is not None:
        cmds["containerd_config_dump"] = CommandResult(0, dump)
    return HostSnapshot(
        files={"/etc/containerd/config.toml": config},
        stats={"/var/run/nri/nri.sock": StatResult(sock_kind, mode, "root", "root", 0)},
        commands=cmds,
    )


def test_version_parsing():
    assert (
        str(parse_version("containerd github.com/containerd/containerd/v2 2.1.9+unknown "))
        == "2.1.9"
    )
    assert (
        str(parse_version("containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24~ds1-6"))
        == "1.7.24"
    )
    assert not parse_version("garbage").known


def test_dump_log_lines_are_stripped():
    assert strip_log_lines('time="x" level=warning msg="y"\nversion = 2') == "version = 2"


@pytest.mark.parametrize(
    ("version", "nri", "status"),
    [
        ("containerd x 1.7.24", "", Status.FAIL),
        ("containerd x 2.1.9", "", Status.PASS),
        (
            "containerd x 1.6.20",
            '[plugins."io.containerd.nri.v1.nri"]\ndisable = false\n',
            Status.FAIL,
        ),
        (
            "containerd x 2.0.0",
            '[plugins."io.containerd.nri.v1.nri"]\ndisable = true\n',
            Status.FAIL,
        ),
    ],
)
def test_per_version_default(version, nri, status):
    v = judge(_live_snap("version = 2\n" + nri, version, None))
    assert v["runtime.nri-enabled"].status is status


def test_world_writable_socket_fails():
    v = judge(_live_snap(SEED, "containerd x 1.7.24", None, mode="666"))
    assert v["runtime.nri-socket"].status is Status.FAIL
    assert "mode 666" in v["runtime.nri-socket"].reason


def test_socket_that_is_a_file_fails():
    v = judge(_live_snap(SEED, "containerd x 1.7.24", None, sock_kind="regular file"))
    assert "not a socket" in v["runtime.nri-socket"].reason


# -- fuzzing ----------------------------------------------------------------------------------
toml_key = st.sampled_from(
    [
        "version",
        "plugins",
        "disable",
        "disable_connections",
        "socket_path",
        "io.containerd.nri.v1.nri",
        "io.containerd.grpc.v1.cri",
        "containerd",
        "runtimes",
        "kata",
        "runtime_type",
        "options",
        "ConfigPath",
        "imports",
        "enable_nri",
        "hypervisor",
        "qemu",
        "cold_plug_vfio",
        "pcie_root_port",
    ]
)
scalars = st.one_of(st.booleans(), st.integers(-5, 10), st.text(max_size=12), st.none())
structs = st.recursive(
    scalars,
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(toml_key, kids, max_size=4)),
    max_leaves=20,
)


def _toml(d, prefix=""):  # type: ignore[no-untyped-def]
    """A rough TOML writer for fuzzing (it may write invalid TOML on purpose)."""
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out.append(f'\n[{prefix}"{k}"]')
            out.append(_toml(v, f'{prefix}"{k}".'))
        elif v is None:
            continue
        else:
            out.append(f'"{k}" = {v!r}'.replace("True", "true").replace("False", "false"))
    return "\n".join(out)


@given(text=st.text(max_size=400))
@settings(max_examples=200, deadline=None)
def test_parser_never_crashes_on_arbitrary_text(text):
    v = judge(_live_snap(text, "containerd x 1.7.24", text))
    assert all(not x.reason.startswith("evaluator crashed") for x in v.values()), v


@given(
    doc=st.dictionaries(toml_key, structs, max_size=5),
    version=st.sampled_from(["1.7.24", "2.1.9", "?"]),
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_evaluators_never_crash_on_odd_structures(doc, version):
    text = _toml(doc)
    snap = _live_snap(text, f"containerd x {version}", text)
    snap = HostSnapshot(
        files={**snap.files, "/etc/kata-containers/configuration.toml": text},
        stats=snap.stats,
        commands=snap.commands,
    )
    v = judge(snap)
    crashed = {k: x.reason for k, x in v.items() if x.reason.startswith("evaluator crashed")}
    assert not crashed, (text, crashed)


def test_a_profile_that_moves_paths_costs_no_extra_round_trip(tmp_path: Path):
    from kgc.core.engine import Context
    from kgc.core.registry import load_layers

    root = tmp_path / "node"
    tree(root, {"/etc/containerd/config.toml": SEED})
    layers = load_layers(("kgc.layers.runtime",))
    target = NodeTarget("local://", root=str(root))
    ctx = Context(target=target, profile=PROFILE, layers=layers)  # type: ignore[arg-type]
    ctx.judge_all(["runtime"])
    assert target.round_trips == 1  # the whole layer in one batched script

    moved = PROFILE.model_copy(
        update={
            "runtime": PROFILE.runtime.model_copy(update={"containerd_config": "/srv/ctd.toml"})
        }
    )
    tree(root, {"/srv/ctd.toml": CRI_KEY_ONLY})
    target2 = NodeTarget("local://", root=str(root))
    ctx2 = Context(target=target2, profile=moved, layers=layers)  # type: ignore[arg-type]
    assert ctx2.judge("runtime.nri-enabled").status is Status.FAIL
    assert target2.round_trips == 1  # the moved paths join the one batched script


def test_stale_keys_in_two_hypervisor_sections_are_each_named(tmp_path: Path):
    """Mutation survivor (node, stop 27): every stale key is named, one per section, in
    the reason a user reads ("; " between them), not run together."""
    cfg = ('[hypervisor.qemu]\ncold_plug_vfio = "root-port"\npcie_root_port = 8\n'
           "hotplug_vfio_on_root_bus = true\n"
           "[hypervisor.clh]\nhotplug_vfio_on_root_bus = false\n")
    v = judge(tree(tmp_path, {"/etc/containerd/config.toml": KATA_V2, GPU_CFG: cfg}),
              PROFILE.model_copy(update={
        "runtime": PROFILE.runtime.model_copy(update={"kata_handler": "kata-qemu-nvidia-gpu"})}))
    stale = v["runtime.kata-stale-keys"]
    assert stale.status is Status.WARN, stale
    assert stale.reason.endswith(
        "[hypervisor.clh] hotplug_vfio_on_root_bus = False: removed in Kata 3.18; use "
        'hot_plug_vfio / cold_plug_vfio = "root-port"; [hypervisor.qemu] '
        "hotplug_vfio_on_root_bus = True: removed in Kata 3.18; use hot_plug_vfio / "
        'cold_plug_vfio = "root-port"') or stale.reason.endswith(
        "[hypervisor.qemu] hotplug_vfio_on_root_bus = True: removed in Kata 3.18; use "
        'hot_plug_vfio / cold_plug_vfio = "root-port"; [hypervisor.clh] '
        "hotplug_vfio_on_root_bus = False: removed in Kata 3.18; use hot_plug_vfio / "
        'cold_plug_vfio = "root-port"'), stale.reason
    assert len(stale.evidence["stale"]) == 2


def test_cri_evidence_lists_no_load_rules_as_an_empty_list(tmp_path: Path):
    """Mutation survivor (node, stop 27): a CRI state decided without load rules (e.g. from
    containerd's own plugin list) records ``cri_load_rules: []`` -- a list like every other
    run's, never null."""
    from kgc.evidence.containerd_load import CriLoad
    from kgc.layers.runtime.checks import _cri_evidence

    ev = parse(tree(tmp_path, {"/etc/containerd/config.toml": KATA_V2}), PROFILE)
    out = _cri_evidence(CriLoad(True, "containerd's plugin list"), ev)
    assert out["cri_load_rules"] == [] and out["cri_loaded"] is True
    assert out["cri_source"] == "containerd's plugin list"
