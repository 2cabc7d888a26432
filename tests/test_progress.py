"""Progress of long work (issue 19.6): one line per phase and per pod state change that
matters, waits with the budget they have left — on stderr in a conformance run, nothing
under ``-q``; the collectors only call :mod:`kgc.progress`, the run decides the sink."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from kgc import kube, progress
from kgc.kube import run_pods
from kube.fakeapi import kubeconfig
from kube.liveapi import LiveApi, serve

NS = "kgc-t1"
GOOD = REPO / "fixtures" / "bundles" / "good.json"


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == progress.LOGGER]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_wait_is_quiet_while_quick_then_says_what_it_sees_and_its_budget_left(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=progress.LOGGER)
    clock = Clock()
    w = progress.Waiting("pod ns/p Ready", 60, clock=clock)
    w.update("phase=Pending")  # at once: quiet
    clock.t += 3
    w.update("phase=Pending")
    clock.t += 1
    w.update("phase=Pending, node=a")  # changed, but within every_s of the last line
    clock.t += 10
    w.update("phase=Running")
    clock.t += 11
    w.update("phase=Running")  # the same observation: not again before 3 x every_s
    clock.t += 20
    w.update("phase=Running")
    assert lines(caplog) == [
        "waiting for pod ns/p Ready (57 s of 60 s left): phase=Pending",
        "waiting for pod ns/p Ready (46 s of 60 s left): phase=Running",
        "waiting for pod ns/p Ready (15 s of 60 s left): phase=Running",
    ]


def test_a_bounded_wait_that_takes_time_reports_itself(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=progress.LOGGER)
    t0 = time.monotonic()
    with pytest.raises(kube.WaitTimeout):
        kube.wait_for("the endpoint to answer", lambda: kube.NotYet("connection refused"),
                      timeout_s=2.6, interval_s=0.2)
    assert time.monotonic() - t0 >= 2.5
    got = lines(caplog)
    assert got and got[0].startswith("waiting for the endpoint to answer (")
    assert got[0].endswith("s of 3 s left): connection refused"), got


def test_a_pod_batch_says_each_pod_created_scheduled_and_done(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=progress.LOGGER)
    api = LiveApi()

    def kubelet(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        time.sleep(0.05)
        api.schedule(NS, name, "node-a")
        time.sleep(0.3)
        api.finish(NS, name, "out\n", 0)

    api.after_create = kubelet
    with serve(api) as url:
        (tmp_path / "kc").write_text(yaml.safe_dump(kubeconfig(url)))
        run = kube.Run(kube.connect(tmp_path / "kc"), run_id="t1")
        run_pods(run, [kube.builders.pod(f"p{i}", [kube.builders.container("collector", "i")])
                       for i in range(2)], container="collector", schedule_timeout_s=10,
                 finish_timeout_s=20, max_parallel=1)
    got = lines(caplog)
    assert got[0] == ("2 pod(s) to run in kgc-t1, at most 1 at once (scheduled within 10 s, "
                      "finished within 20 s each)")
    for name, n in (("p0", 1), ("p1", 2)):
        mine = [ln for ln in got if ln.startswith(f"pod {name}")]
        assert mine[0] == f"pod {name} created", got
        assert mine[1].startswith(f"pod {name} scheduled on node-a after "), got
        assert "s of its 20 s budget left)" in mine[1]
        assert mine[-1].startswith(f"pod {name}: the pod succeeded after ")
        assert mine[-1].endswith(f"({n} of 2 done)"), got


def test_nothing_is_shown_without_a_sink(capfd: pytest.CaptureFixture[str]) -> None:
    """A library caller that installed nothing sees nothing (logging's last resort shows
    WARNING and above only)."""
    progress.note("a line nobody asked for")
    out = capfd.readouterr()
    assert out.out == "" and out.err == ""


EMITTER = '''
from kgc import progress

def pytest_runtest_call(item):
    progress.note("collecting for %s", item.name)
'''


@pytest.mark.parametrize("quiet", [False, True])
def test_a_conformance_run_shows_progress_on_stderr_and_none_under_q(
        quiet: bool, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's sink: each line on stderr while the test runs (pytest's capture does not
    swallow it), nothing on stdout; under -q no line at all. Before, the plugin had no sink:
    the collectors' lines went nowhere."""
    pytester.makepyfile(kgc_emitter=EMITTER)
    pytester.syspathinsert()
    monkeypatch.chdir(pytester.path)
    args = ["-p", "kgc_emitter", "-p", "no:randomly", "-m", "iommu", "--snapshot", str(GOOD),
            "--profile", "lab"] + (["-q"] if quiet else [])
    r = pytester.runpytest_inprocess(*args)
    assert int(r.ret) == 0, r.outlines[-20:]
    said = [ln for ln in r.errlines if ln.startswith("kgc: collecting for ")]
    assert not [ln for ln in r.outlines if "collecting for" in ln]
    if quiet:
        assert said == []
    else:
        assert len(said) == 8 and said[0].startswith("kgc: collecting for test_"), r.errlines
    assert not progress.log.handlers  # the sink leaves with the run


class _Node:
    """A node that reboots: answers with the old boot_id three times, then with a new one."""

    name = "node-x"

    def __init__(self) -> None:
        self.calls = 0

    def reboot_refusal(self) -> None:
        return None

    def run(self, script: str) -> tuple[int, str, str]:
        return 0, "kgc-reboot-scheduled\n", ""

    def collect(self, query: Any) -> Any:
        from kgc.core.hostfs import HostSnapshot
        from kgc.layers.reboot.collect import BOOT_ID

        self.calls += 1
        return HostSnapshot(files={BOOT_ID: "new\n" if self.calls > 3 else "old\n"})


def test_the_reboot_test_says_what_it_waits_for(monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from types import SimpleNamespace

    from tenacity import wait_fixed

    from kgc.core.hostfs import HostSnapshot
    from kgc.layers.reboot import collect

    caplog.set_level(logging.INFO, logger=progress.LOGGER)
    monkeypatch.setattr(collect, "NodeTarget", _Node)  # the live-node gate lets the stand-in by
    monkeypatch.setattr(collect, "wait_fixed", lambda _s: wait_fixed(1.1))
    ctx = SimpleNamespace(target=_Node(), options={"reboot_timeout_s": 30},
                          host=lambda: HostSnapshot(files={collect.BOOT_ID: "old\n"}))
    ev = collect.gather(ctx)  # type: ignore[arg-type]
    assert ev.status == "done", ev
    got = lines(caplog)
    assert got[0] == ("reboot: node-x is rebooting; waiting up to 30 s for it to answer with "
                      "a new boot_id"), got
    assert got[1].startswith("waiting for node-x to come back from its reboot (")
    assert got[1].endswith("s of 30 s left): answering with the old boot_id (not rebooted yet)")
