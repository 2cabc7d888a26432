"""Issue 18.1: the runtime layer judges what containerd really started, not its config dump.

The inputs are what the REAL containerd 1.7.24 (Debian trixie) and 2.1.9 (Debian sid)
binaries said about configs that break their CRI plugin in different ways and configs that
break nothing: ``fixtures/containerd/<version>/<case>/`` (config.toml, ``ctr plugins ls
-d`` through kgc's collector command, containerd's own log, ``config dump``), captured by
``python -m kgc_lab.cri_load fixtures/containerd`` (lab/kgc_lab/cri_load.py; the lab test
lab/tests/nri/test_cri_load_lab.py runs the same cases live). The truth each test checks
against is the binary's own plugin list, never kgc's rules.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.core.hostfs import CommandResult, HostSnapshot, StatResult
from kgc.core.model import Status
from kgc.evidence.containerd_load import (
    CRI_PLUGINS_2,
    Edit,
    apply_edits,
    go_duration_ok,
    parse_plugins,
)
from kgc.layers.runtime import parse
from kgc.layers.runtime.checks import CHECKS
from systree import kata_handler_profile

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "containerd"
CASES = sorted(p for p in ROOT.glob("*/*") if (p / "ctr-plugins-ls-d.txt").is_file())
CFG = "/etc/containerd/config.toml"
OFFLINE = CommandResult(3, "KGC-OFFLINE-TREE\n")


def _profile(version: str | None = None):  # type: ignore[no-untyped-def]
    p = kata_handler_profile()
    if version is None:
        return p
    return p.model_copy(update={"runtime": p.runtime.model_copy(
        update={"containerd_version": version})})


def _truth(case: Path) -> tuple[bool, str]:
    """(the CRI plugin loaded, its init error) as the binary's own plugin list says."""
    plugins = parse_plugins((case / "ctr-plugins-ls-d.txt").read_text())
    assert plugins is not None
    cri = [p for p in plugins if p.name in CRI_PLUGINS_2]
    bad = [p for p in cri if p.status != "ok"]
    return not bad, (bad[0].error if bad else "")


def _observed(case: Path) -> dict[str, str]:
    out = {}
    for ln in (case / "observed.txt").read_text().splitlines():
        k, _, v = ln.partition(": ")
        out[k] = v
    return out


def judge(snap: HostSnapshot, profile=None):  # type: ignore[no-untyped-def]
    profile = profile or _profile()
    ev = parse(snap, profile)
    return {c.id: c.judge(ev, profile, "t") for c in CHECKS}


def _live(case: Path, plugins: bool = True, journal: bool = True) -> HostSnapshot:
    cmds = {
        "containerd_version": CommandResult(0, (case / "containerd-version.txt").read_text()),
        "containerd_config_dump": CommandResult(0, (case / "config-dump.txt").read_text()),
    }
    if plugins:
        cmds["containerd_plugins"] = CommandResult(0, (case / "ctr-plugins-ls-d.txt").read_text())
    else:
        cmds["containerd_plugins"] = CommandResult(1, "ctr: failed to dial: connection refused")
    if journal:
        cmds["containerd_journal"] = CommandResult(0, (case / "containerd.log").read_text())
    # as in the lab: containerd's API socket is not at the default path, only its answer
    # (the plugin list) or its log shows that it runs
    stats: dict[str, StatResult] = {}
    if _observed(case)["nri socket created"] == "true":  # where the case's config put it
        sock = tomllib.loads((case / "config.toml").read_text())["plugins"][
            "io.containerd.nri.v1.nri"]["socket_path"]
        stats[sock] = StatResult("socket", "600", "root", "root", 0)
    return HostSnapshot(files={CFG: (case / "config.toml").read_text()}, stats=stats,
                        commands=cmds)


def _offline(config: str) -> HostSnapshot:
    return HostSnapshot(files={CFG: config}, commands={
        k: OFFLINE for k in ("containerd_version", "containerd_config_dump",
                             "containerd_plugins", "containerd_journal")})


def _ids(cases: list[Path]) -> list[str]:
    return [f"{c.parent.name}-{c.name}" for c in cases]


def test_the_fixtures_cover_both_versions_and_several_ways_to_break_cri() -> None:
    broken = {(c.parent.name, _truth(c)[1].split(":")[1][:25]) for c in CASES
              if not _truth(c)[0]}
    assert {v for v, _ in broken} == {"1.7.24", "2.1.9"}
    assert len(broken) >= 6, broken
    assert sum(1 for c in CASES if _truth(c)[0]) >= 4


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
@pytest.mark.parametrize("source", ["plugins", "journal"])
def test_live_verdicts_follow_what_containerd_started(case: Path, source: str) -> None:
    """Its plugin list (or, when ctr cannot answer, its log) decides; the config dump
    looks fine in every case (it did before: runtime.config / kata-handler PASSed)."""
    loads, error = _truth(case)
    v = judge(_live(case, plugins=source == "plugins"))
    cfg, handler, sock = v["runtime.config"], v["runtime.kata-handler"], v["runtime.nri-socket"]
    if loads:
        assert cfg.status is Status.PASS, cfg.reason
        assert handler.status is not Status.FAIL or "CRI" not in handler.reason
        # the lab's socket is under its temp dir, not the profile's path: WARN says so
        assert sock.status in (Status.PASS, Status.WARN), sock.reason
        return
    assert cfg.status is Status.FAIL and error in cfg.reason, cfg.reason
    assert handler.status is Status.FAIL and error in handler.reason, handler.reason
    # the missing NRI socket is blamed on the failed CRI plugin, not on a missed restart
    assert sock.status is Status.FAIL, sock.reason
    assert "CRI plugin" in sock.reason and error in sock.reason, sock.reason
    assert "not restarted" not in sock.reason


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_offline_load_rules_agree_with_the_binary(case: Path) -> None:
    """No binary, no plugin list: the load rules, given the version the profile declares,
    reach the verdict the real binary reached, in containerd's own words."""
    loads, error = _truth(case)
    v = judge(_offline((case / "config.toml").read_text()), _profile(case.parent.name))
    cfg = v["runtime.config"]
    if loads:
        assert cfg.status is Status.PASS, cfg.reason
    else:
        assert cfg.status is Status.FAIL, cfg.reason
        # the rule quotes containerd (minus the binary's own wrapping of the message)
        said = error.split(": ", 1)[1] if error.startswith(("invalid plugin config",
                                                              "invalid cri image config",
                                                              "unable to load")) else error
        core = said.split(": time:")[0].replace("invalid plugin config: ", "")
        core = core.replace("invalid cri image config: ", "")
        assert core in cfg.reason, (core, cfg.reason)
        assert v["runtime.kata-handler"].status is Status.FAIL


def test_an_unknown_version_is_said_not_passed() -> None:
    """kata-only on an unknown containerd: 1.7 refuses CRI, 2.x does not — skip, saying so."""
    cfg = (ROOT / "1.7.24" / "kata-only" / "config.toml").read_text()
    v = judge(_offline(cfg))["runtime.config"]
    assert v.status is Status.SKIP, v.reason
    assert "could not be checked" in v.reason and "1.7" in v.reason


def test_a_running_cri_with_a_config_that_breaks_it_on_restart_fails() -> None:
    """containerd still runs the old config (CRI loaded) while the file on disk would make
    CRI refuse to load at the next restart."""
    ok = ROOT / "1.7.24" / "ok-kata-runc"
    snap = _live(ok)
    snap = HostSnapshot(files={CFG: (ROOT / "1.7.24" / "kata-only" / "config.toml").read_text()},
                        stats=snap.stats, commands={**snap.commands,
                                                    "containerd_config_dump": CommandResult(1, "")})
    v = judge(snap)["runtime.config"]
    assert v.status is Status.FAIL and "next restart" in v.reason, v.reason


def test_plugin_list_parsing_real_output() -> None:
    ps = parse_plugins((ROOT / "2.1.9" / "bad-drain-timeout" / "ctr-plugins-ls-d.txt")
                       .read_text())
    assert ps is not None
    by = {p.name: p for p in ps}
    assert by["io.containerd.cri.v1.runtime"].status == "error"
    assert "drain_exec_sync_io_timeout" in by["io.containerd.cri.v1.runtime"].error
    assert by["io.containerd.internal.v1.tracing"].status == "skip"
    assert by["io.containerd.nri.v1.nri"].status == "ok"


@pytest.mark.parametrize(("s", "ok"), [("4h0m0s", True), ("30s", True), ("1.5h", True),
                                       ("0", True), ("4 hours", False), ("forever", False),
                                       ("10", False), ("", False)])
def test_go_durations(s: str, ok: bool) -> None:
    assert go_duration_ok(s) is ok


# -- remedies computed from the recorded config (issue 18.2, containerd side) ---------------
def _fix_and_rejudge(config: str, version: str, check: str) -> tuple[str, object]:
    prof = _profile(version)
    v = judge(_offline(config), prof)[check]
    edits = [Edit(e["file"], tuple(e["table"]), e["key"], e["value"], e["delete"])
             for e in v.evidence.get("config_edits", [])]
    assert edits, (check, v.status, v.reason)
    fixed = apply_edits({CFG: config}, edits)[CFG]
    tomllib.loads(fixed)  # valid TOML: never a second [table] header
    return fixed, judge(_offline(fixed), prof)[check]


@pytest.mark.parametrize("case", [c for c in CASES if not _truth(c)[0]],
                         ids=_ids([c for c in CASES if not _truth(c)[0]]))
def test_the_cri_remedy_applied_to_the_real_config_makes_it_load(case: Path) -> None:
    fixed, v = _fix_and_rejudge((case / "config.toml").read_text(), case.parent.name,
                                "runtime.config")
    assert v.status is Status.PASS, (v.reason, fixed)  # type: ignore[attr-defined]


_RUNTIMES = st.lists(st.sampled_from(["kata", "runc", "nvidia"]), unique=True, max_size=3)


@st.composite
def cri_configs(draw: st.DrawFn) -> tuple[str, str]:
    major = draw(st.sampled_from(["1.7.24", "2.1.9"]))
    v3 = major.startswith("2") and draw(st.booleans())
    rt = "io.containerd.cri.v1.runtime" if v3 else "io.containerd.grpc.v1.cri"
    srv = "io.containerd.grpc.v1.cri"
    img = "io.containerd.cri.v1.images" if v3 else "io.containerd.grpc.v1.cri"
    lines = [f"version = {3 if v3 else 2}"]
    body: dict[str, list[str]] = {}
    default = draw(st.sampled_from([None, "runc", "kata", "nvidia"]))
    if default:
        body.setdefault(f'[plugins."{rt}".containerd]', []).append(
            f'default_runtime_name = "{default}"')
    for name in draw(_RUNTIMES):
        body.setdefault(f'[plugins."{rt}".containerd.runtimes.{name}]', []).append(
            f'runtime_type = "io.containerd.{name}.v2"')
    idle = draw(st.sampled_from([None, "4h0m0s", "4 hours"]))
    if idle:
        body.setdefault(f'[plugins."{srv}"]', []).append(f'stream_idle_timeout = "{idle}"')
    if draw(st.booleans()):
        body.setdefault(f'[plugins."{img}".registry]', []).append(
            'config_path = "/etc/containerd/certs.d"')
        body.setdefault(f'[plugins."{img}".registry.mirrors."docker.io"]', []).append(
            'endpoint = ["https://m.example"]')
    for hdr, kv in body.items():
        lines += ["", hdr, *(f"  {x}" for x in kv)]
    return "\n".join(lines) + "\n", major


@given(cri_configs())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_property_cri_remedy_yields_valid_toml_that_loads(case: tuple[str, str]) -> None:
    config, version = case
    v = judge(_offline(config), _profile(version))["runtime.config"]
    if v.status is Status.PASS:
        return
    assert v.status is Status.FAIL, v.reason
    _fixed, after = _fix_and_rejudge(config, version, "runtime.config")
    assert after.status is Status.PASS, after.reason  # type: ignore[attr-defined]


@st.composite
def nri_configs(draw: st.DrawFn) -> tuple[str, str]:
    version = draw(st.sampled_from(["1.7.24", "2.1.9"]))
    lines = ["version = 2", "", '[plugins."io.containerd.grpc.v1.cri"]', "  enable_nri = true"]
    if draw(st.booleans()):
        lines += ["", '[plugins."io.containerd.nri.v1.nri"]']
        if draw(st.booleans()):
            lines.append(f"  disable = {draw(st.sampled_from(['true', 'false']))}")
        if draw(st.booleans()):
            lines.append('  socket_path = "/var/run/nri/nri.sock"')
        if draw(st.booleans()):
            lines.append("  disable_connections = false")
    return "\n".join(lines) + "\n", version


@given(nri_configs())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_property_nri_remedy_edits_the_table_that_is_there(case: tuple[str, str]) -> None:
    config, version = case
    v = judge(_offline(config), _profile(version))["runtime.nri-enabled"]
    if v.status is Status.PASS:
        return
    has_table = '[plugins."io.containerd.nri.v1.nri"]' in config
    if has_table:
        assert "existing table" in v.remediation and "add to" not in v.remediation, v.remediation
    _fixed, after = _fix_and_rejudge(config, version, "runtime.nri-enabled")
    assert after.status is Status.PASS, after.reason  # type: ignore[attr-defined]


def test_a_handler_already_in_the_right_section_is_never_told_to_move_there() -> None:
    """The handler sits in the v2 section of config.toml; an import redefines the CRI
    plugin's section (containerd replaces it whole), so the dump lacks the handler. The old
    remedy said "Move it to" the very section it is in."""
    main = ('version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n'
            '  runtime_type = "io.containerd.kata.v2"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
            '  runtime_type = "io.containerd.runc.v2"\n')
    imp = '[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.10"\n'
    dump = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n' \
           '  runtime_type = "io.containerd.runc.v2"\n'
    snap = HostSnapshot(files={CFG: main, "/etc/containerd/conf.d/10-cri.toml": imp},
                        commands={"containerd_version": CommandResult(0, "containerd x 1.7.24"),
                                  "containerd_config_dump": CommandResult(0, dump)})
    v = judge(snap)["runtime.kata-handler"]
    assert v.status is Status.FAIL, v.reason
    assert "Move it" not in v.remediation and "already" not in v.remediation
    assert "import" in v.reason, v.reason
