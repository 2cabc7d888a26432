"""Issue 18.2 on the Kata side: runtime.kata-vfio and runtime.kata-stale-keys compute their
remedies from the Kata configuration that is there (the hypervisor table it judged, the
key that is set, in the file whose value wins), and applying them to the recorded
configuration gives valid TOML that the checks then pass.

Before, both remedies were one template: ``cold_plug_vfio = "root-port" and
pcie_root_port = 8 under [hypervisor.<name>]`` -- telling a config that already has
``cold_plug_vfio = "root-port"`` to set it, and telling one that plugs on a bridge port
through ``hot_plug_vfio`` to add ``cold_plug_vfio``, which changes nothing: with both set,
Kata uses the hot-plug port (kata-containers src/runtime/virtcontainers/sandbox.go,
``coldOrHotPlugVFIO``: ``if hotPlugVFIO && isVFIODevice`` is taken first), so the check kept
warning. The keys and their values are Kata's: ``cold_plug_vfio`` / ``hot_plug_vfio`` in
``no-port | bridge-port | root-port | switch-port``, ``pcie_root_port`` (kata-containers
src/runtime/pkg/device/config/config.go ``PCIePort``; the NVIDIA configs set
``cold_plug_vfio = "root-port"`` and ``pcie_root_port = 8``, src/runtime/Makefile), and the
``config.d/*.toml`` drop-ins merged over the base file in name order.
"""

from __future__ import annotations

import tomllib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.core.hostfs import CommandResult, HostSnapshot
from kgc.core.model import Status
from kgc.evidence.containerd_load import Edit, apply_edits
from kgc.layers.runtime import parse
from kgc.layers.runtime.checks import CHECKS
from systree import kata_handler_profile

CTD = "/etc/containerd/config.toml"
CTD_CFG = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n'
           '  runtime_type = "io.containerd.kata.v2"\n')
KATA = "/etc/kata-containers/configuration.toml"
DROP = "/etc/kata-containers/config.d/50-gpu.toml"
IDS = ("runtime.kata-vfio", "runtime.kata-stale-keys")


def judge(kata: dict[str, str]) -> dict[str, Any]:
    snap = HostSnapshot(files={CTD: CTD_CFG, **kata},
                        commands={"containerd_version": CommandResult(0, "containerd x 1.7.24")})
    prof = kata_handler_profile()
    ev = parse(snap, prof)
    return {c.id: c.judge(ev, prof, "t") for c in CHECKS if c.id in IDS}


def edits_of(v: Any) -> list[Edit]:
    return [Edit(e["file"], tuple(e["table"]), e["key"], e["value"], e["delete"])
            for e in v.evidence.get("config_edits", [])]


def fix(kata: dict[str, str], check: str) -> tuple[dict[str, str], dict[str, Any]]:
    v = judge(kata)[check]
    edits = edits_of(v)
    assert edits, (check, v.status, v.reason, v.remediation)
    fixed = apply_edits(kata, edits)
    for text in fixed.values():
        tomllib.loads(text)  # valid TOML: never a second [hypervisor.x] header
    return fixed, judge(fixed)


def test_root_port_without_ports_asks_only_for_the_ports_in_the_table_it_judged() -> None:
    kata = {KATA: '[hypervisor.qemu]\ncold_plug_vfio = "root-port"\n'}
    v = judge(kata)["runtime.kata-vfio"]
    assert v.status is Status.FAIL
    assert "cold_plug_vfio" not in v.remediation, v.remediation  # it is set already
    assert "<name>" not in v.remediation and "[hypervisor.qemu]" in v.remediation
    assert "pcie_root_port = 8" in v.remediation and KATA in v.remediation
    _fixed, after = fix(kata, "runtime.kata-vfio")
    assert after["runtime.kata-vfio"].status is Status.PASS


def test_a_bridge_port_is_edited_where_it_is_set_not_shadowed_by_a_second_key() -> None:
    kata = {KATA: '[hypervisor.qemu]\nhot_plug_vfio = "bridge-port"\n'
                  'hotplug_vfio_on_root_bus = true\n'}
    got = judge(kata)
    v = got["runtime.kata-vfio"]
    assert v.status is Status.WARN
    assert 'hot_plug_vfio = "root-port"' in v.remediation, v.remediation
    assert "cold_plug_vfio" not in v.remediation, v.remediation
    fixed, after = fix(kata, "runtime.kata-vfio")
    assert after["runtime.kata-vfio"].status is Status.PASS, after["runtime.kata-vfio"].reason
    # the stale key's remedy tells the same story (one fix for both checks)
    stale = got["runtime.kata-stale-keys"]
    assert stale.status is Status.WARN
    assert 'hot_plug_vfio = "root-port"' in stale.remediation, stale.remediation
    assert "cold_plug_vfio" not in stale.remediation, stale.remediation
    fixed, after = fix(kata, "runtime.kata-stale-keys")
    assert {v.status for v in after.values()} == {Status.PASS}, {
        k: v.reason for k, v in after.items()}
    assert "hotplug_vfio_on_root_bus" not in fixed[KATA]


def test_a_value_a_drop_in_sets_is_edited_in_that_drop_in() -> None:
    kata = {KATA: '[hypervisor.qemu]\ncold_plug_vfio = "root-port"\npcie_root_port = 8\n',
            DROP: '[hypervisor.qemu]\npcie_root_port = 0\n'}
    v = judge(kata)["runtime.kata-vfio"]
    assert v.status is Status.FAIL and DROP in v.remediation, v.remediation
    fixed, after = fix(kata, "runtime.kata-vfio")
    assert fixed[KATA] == kata[KATA]  # the base file's value is overridden anyway
    assert after["runtime.kata-vfio"].status is Status.PASS


_PORT = st.sampled_from([None, "no-port", "bridge-port", "root-port", "switch-port", "pcie"])
_PORTS = st.sampled_from([None, 0, 1, 8, "8"])


@st.composite
def kata_configs(draw: st.DrawFn) -> dict[str, str]:
    """A Kata configuration (base file and, maybe, a drop-in) with the VFIO keys drawn."""
    files: dict[str, list[str]] = {KATA: ["[hypervisor.qemu]", 'path = "/opt/kata/bin/qemu"']}
    drop = draw(st.booleans())
    if drop:
        files[DROP] = ["[hypervisor.qemu]"]
    for key, strat in (("cold_plug_vfio", _PORT), ("hot_plug_vfio", _PORT),
                       ("pcie_root_port", _PORTS)):
        for f in files:
            val = draw(strat)
            if val is not None:
                files[f].append(f"{key} = {val if isinstance(val, int) else repr(val)}"
                                .replace("'", '"'))
    if draw(st.booleans()):
        files[KATA].append("hotplug_vfio_on_root_bus = true")
    if draw(st.booleans()):
        files[KATA] += ["", "[runtime]", "enable_debug = false"]
    return {f: "\n".join(lines) + "\n" for f, lines in files.items()}


@given(kata_configs())
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_property_applying_the_kata_remedies_makes_the_checks_pass(kata: dict[str, str]) -> None:
    got = judge(kata)
    for check in IDS:
        if got[check].status is Status.PASS:
            continue
        assert got[check].status in (Status.FAIL, Status.WARN), got[check].reason
        _fixed, after = fix(kata, check)
        assert after[check].status is Status.PASS, (check, after[check].reason, _fixed)
