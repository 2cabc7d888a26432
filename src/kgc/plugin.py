"""pytest plugin: targets, profile, the ``certify`` fixture and the run's outputs.

Suites stay thin: ``certify("iommu.enabled")`` judges one check on the current target and
records the verdict. The plugin parametrises every test that uses ``certify`` by target
(``--hosts`` from testinfra, or ``--snapshot`` bundles), and at the end writes
``verdict.json``, JUnit XML and allure-results into the report directory.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from kgc import __version__
from kgc.core import report
from kgc.core.engine import Context, load_layers
from kgc.core.model import Status, Verdict
from kgc.core.profile import DEFAULT_PROFILE, Profile, ProfileError, load_profile
from kgc.core.target import BundleTarget, LiveTarget, TargetError

USER_PROP = "kgc_verdict"


class KgcWarning(UserWarning):
    """A check ended in ``warn``: certified, with something to look at."""


class CheckError(Exception):
    """A check could not decide (``error`` verdict): shown as broken, counted as failed."""


class KgcState:
    def __init__(self, config: pytest.Config, profile: Profile) -> None:
        self.config = config
        self.profile = profile
        self.layers = load_layers()
        self.contexts: dict[str, Context] = {}
        self.verdicts: list[dict[str, Any]] = []
        self.started = time.time()
        self.active = False

    def options(self) -> dict[str, Any]:
        opt = self.config.option
        return {
            "allow_reboot": bool(opt.kgc_allow_reboot),
            "reboot_timeout_s": float(opt.kgc_reboot_timeout),
            "kubeconfig": opt.kgc_kubeconfig,
            "nri_socket": opt.kgc_nri_socket,
            "cri_socket": opt.kgc_cri_socket,
        }

    def context(self, spec: str) -> Context:
        ctx = self.contexts.get(spec)
        if ctx is None:
            opt = self.config.option
            if spec.startswith("bundle://"):
                target: Any = BundleTarget(Path(spec[len("bundle://") :]))
            else:
                target = LiveTarget(
                    spec=spec,
                    root=opt.kgc_root or "",
                    sudo=bool(getattr(opt, "sudo", False)),
                    ssh_config=getattr(opt, "ssh_config", None),
                    ssh_identity_file=getattr(opt, "ssh_identity_file", None),
                )
            ctx = Context(
                target=target, profile=self.profile, layers=self.layers, options=self.options()
            )
            self.contexts[spec] = ctx
        return ctx

    # registered as a plugin: on the controller this also sees xdist workers' reports
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for key, val in report.user_properties:
            if key == USER_PROP and isinstance(val, str):
                d = json.loads(val)
                d["test"] = report.nodeid
                self.verdicts.append(d)


STATE = pytest.StashKey[KgcState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kgc", "kata-gpu-conformance")
    g.addoption(
        "--profile",
        dest="kgc_profile",
        default=None,
        metavar="NAME|PATH",
        help=f"platform profile (built-in name or YAML path; default {DEFAULT_PROFILE})",
    )
    g.addoption(
        "--snapshot",
        dest="kgc_snapshot",
        default=None,
        metavar="FILE[,FILE]",
        help="evaluate recorded evidence bundles (kgc snapshot) instead of live nodes",
    )
    g.addoption(
        "--report-dir",
        dest="kgc_report_dir",
        default=None,
        metavar="DIR",
        help="where verdict.json, junit.xml and allure-results go (default reports/)",
    )
    g.addoption(
        "--kgc-root",
        dest="kgc_root",
        default=None,
        metavar="PATH",
        help="read host files under PATH instead of / (an offline tree)",
    )
    g.addoption(
        "--allow-reboot",
        dest="kgc_allow_reboot",
        action="store_true",
        default=False,
        help="DESTRUCTIVE: allow the reboot test to reboot the target nodes",
    )
    g.addoption(
        "--reboot-timeout",
        dest="kgc_reboot_timeout",
        default=600,
        type=float,
        help="seconds to wait for a rebooted node to come back (default 600)",
    )
    g.addoption(
        "--nri-socket",
        dest="kgc_nri_socket",
        default=None,
        metavar="PATH",
        help="NRI socket to probe (default: from the node's containerd config); for a remote "
        "node, a local path forwarded with `ssh -L`",
    )
    g.addoption(
        "--cri-socket",
        dest="kgc_cri_socket",
        default=None,
        metavar="PATH",
        help="CRI socket the NRI probe uses to start its probe pod",
    )
    g.addoption(
        "--kubeconfig",
        dest="kgc_kubeconfig",
        default=None,
        metavar="FILE",
        help="kubeconfig of the cluster the cluster layers certify",
    )


def _is_conformance_run(config: pytest.Config) -> bool:
    """Reports are written only for runs of the conformance suites, not for self-tests."""
    if config.option.kgc_report_dir or config.option.kgc_snapshot:
        return True
    args = [a for a in config.args if not a.startswith("-")]
    if not args or args == [str(config.rootpath)]:
        return "conformance" in (config.getini("testpaths") or [])
    return any("conformance" in Path(a.split("::")[0]).resolve().parts for a in args)


def _report_dir(config: pytest.Config) -> Path:
    d = config.option.kgc_report_dir or os.environ.get("KGC_REPORT_DIR") or "reports"
    p = Path(d)
    return p if p.is_absolute() else Path(config.invocation_params.dir) / p


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    try:
        profile = load_profile(config.option.kgc_profile or DEFAULT_PROFILE)
    except ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = KgcState(config, profile)
    config.stash[STATE] = state
    config.pluginmanager.register(state, "kgc-state")
    if _is_conformance_run(config) and not hasattr(config, "workerinput"):
        state.active = True
        rdir = _report_dir(config)
        rdir.mkdir(parents=True, exist_ok=True)
        if config.option.allure_report_dir is None:
            config.option.allure_report_dir = str(rdir / "allure-results")
            config.option.clean_alluredir = True
        if config.option.xmlpath is None:
            config.option.xmlpath = str(rdir / "junit.xml")
    elif hasattr(config, "workerinput"):
        # xdist workers inherit the controller's command line, not its mutated options
        wi = config.workerinput  # type: ignore[attr-defined]
        if wi.get("kgc_alluredir") and config.option.allure_report_dir is None:
            config.option.allure_report_dir = wi["kgc_alluredir"]


def pytest_configure_node(node: Any) -> None:  # xdist hook, controller side
    node.workerinput["kgc_alluredir"] = node.config.option.allure_report_dir


def _targets(config: pytest.Config) -> list[str]:
    snap = config.option.kgc_snapshot
    if snap:
        return [f"bundle://{Path(s).resolve()}" for s in snap.split(",") if s]
    hosts = getattr(config.option, "hosts", None)
    if hosts:
        return [h.strip() for h in hosts.split(",") if h.strip()]
    return ["local://"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kgc_target" in metafunc.fixturenames:
        targets = _targets(metafunc.config)
        metafunc.parametrize("kgc_target", targets, ids=[_tid(t) for t in targets], scope="module")


def _tid(spec: str) -> str:
    if spec.startswith("bundle://"):
        return "bundle:" + Path(spec).name
    return spec.replace("://", ":").rstrip(":") or "local"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # with `-n N --dist loadgroup` every test of one node runs in one worker: one
    # collection round trip per node, however the checks are spread
    for item in items:
        cs = getattr(item, "callspec", None)
        if cs is not None and "kgc_target" in cs.params:
            item.add_marker(pytest.mark.xdist_group(name=_tid(cs.params["kgc_target"])))


@pytest.fixture(scope="session")
def kgc_state(request: pytest.FixtureRequest) -> KgcState:
    return request.config.stash[STATE]


@pytest.fixture(scope="session")
def kgc_profile(kgc_state: KgcState) -> Profile:
    return kgc_state.profile


@pytest.fixture(scope="module")
def kgc_context(kgc_state: KgcState, kgc_target: str) -> Context:
    return kgc_state.context(kgc_target)


def _record(request: pytest.FixtureRequest, v: Verdict) -> None:
    request.node.user_properties.append((USER_PROP, json.dumps(v.to_dict(), default=str)))
    try:
        import allure

        allure.dynamic.title(f"{v.check} — {v.title} [{v.target}]")
        allure.dynamic.epic(v.layer)
        allure.dynamic.feature(v.check)
        allure.dynamic.story(v.title)
        allure.dynamic.parent_suite(v.target)
        allure.dynamic.severity(str(v.severity))
        allure.dynamic.tag(str(v.status))
        allure.dynamic.description(
            f"**{v.title}**\n\nTarget: `{v.target}`\n\nStatus: **{v.status}** — {v.reason}"
            + (f"\n\nRemediation: {v.remediation}" if v.remediation else "")
        )
        allure.attach(
            json.dumps(v.to_dict(), indent=2, default=str),
            name="verdict+evidence",
            attachment_type=allure.attachment_type.JSON,
        )
        if v.remediation:
            allure.attach(
                v.remediation, name="remediation", attachment_type=allure.attachment_type.TEXT
            )
    except ImportError:  # allure-pytest is a dependency; without it only allure output is lost
        pass


def format_verdict(v: Verdict) -> str:
    lines = [f"[{v.status.upper()}] {v.check} on {v.target}: {v.reason}"]
    if v.expected is not None or v.found is not None:
        lines.append(f"  expected: {v.expected}    found: {v.found}")
    if v.remediation:
        lines.append(f"  remediation: {v.remediation}")
    return "\n".join(lines)


@pytest.fixture
def certify(request: pytest.FixtureRequest, kgc_context: Context):  # type: ignore[no-untyped-def]
    """Judge one check on this test's target; fail/skip the test according to the verdict."""

    def _certify(check_id: str) -> Verdict:
        v = kgc_context.judge(check_id)
        _record(request, v)
        if v.status is Status.PASS:
            return v
        if v.status is Status.WARN:
            warnings.warn(KgcWarning(format_verdict(v)), stacklevel=2)
            return v
        if v.status is Status.SKIP:
            pytest.skip(format_verdict(v))
        if v.status is Status.ERROR:
            raise CheckError(format_verdict(v))
        pytest.fail(format_verdict(v), pytrace=False)
        return v  # unreachable: pytest.fail raises

    return _certify


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(STATE, None)
    if state is None or not state.active:
        return
    rdir = _report_dir(config)
    verdicts = state.verdicts
    env = _environment(state)
    report.write_verdict_json(
        rdir / "verdict.json",
        verdicts,
        run={
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(state.started)),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "duration_s": round(time.time() - state.started, 3),
            "kgc_version": __version__,
            "profile": state.profile.name,
            "profile_source": state.profile.source,
            "targets": _targets(config),
            "command": ["pytest", *config.invocation_params.args],
            "pytest_exit": int(exitstatus),
            "environment": env,
        },
    )
    alluredir = config.option.allure_report_dir
    if alluredir:
        report.write_allure_environment(Path(alluredir), env)
        report.write_allure_categories(Path(alluredir))


def _environment(state: KgcState) -> dict[str, str]:
    env = {
        "kgc": __version__,
        "python": platform.python_version(),
        "pytest": pytest.__version__,
        "profile": state.profile.name,
        "runner": platform.node(),
    }
    for spec, ctx in state.contexts.items():
        try:
            snap = ctx.host()
        except TargetError:
            continue
        tag = _tid(spec)
        kernel = snap.text("/proc/sys/kernel/osrelease")
        if kernel:
            env[f"{tag}.kernel"] = kernel
        for line in (snap.read("/etc/os-release") or "").splitlines():
            if line.startswith("PRETTY_NAME="):
                env[f"{tag}.distro"] = line.split("=", 1)[1].strip('"')
        env[f"{tag}.round_trips"] = str(getattr(ctx.target, "round_trips", 0))
    return env


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or not state.active or not state.verdicts:
        return
    tr = terminalreporter
    tr.section("kata-gpu-conformance verdicts")
    for line in report.summary_table(state.verdicts):
        tr.write_line(line)
    overall = report.overall(state.verdicts)
    tr.write_line("")
    tr.write_line(
        f"overall: {overall.upper()}    report: {_report_dir(config) / 'verdict.json'}",
        red=overall == "fail",
        green=overall == "pass",
        bold=True,
    )
    if sys.stdout.isatty():
        tr.write_line("HTML: kgc report")
