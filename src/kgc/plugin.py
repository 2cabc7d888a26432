"""pytest plugin: targets, profile, the ``certify`` fixture and the run's outputs.

Suites stay thin: a suite module says which layer it certifies
(``pytestmark = pytest.mark.layer("iommu")``) and each test calls ``certify("iommu.enabled")``.
The layer's scope decides how the plugin parametrises it: node layers once per node target
(``--hosts``, default this machine), cluster layers once per cluster (``--kubeconfig`` /
``--context``, default ``$KUBECONFIG``'s files merged, else ``~/.kube/config``, as kubectl
reads them); with ``--snapshot`` the
recorded bundles are the targets. The layer's markers (``host``, ``cluster``, ...) come
from the layer registry.

A conformance run writes ``verdict.json``, ``junit.xml`` and ``allure-results/`` into the
report directory (``--report-dir``, default ``./reports``). Runs that judge nothing
(``--collect-only``, self-tests) leave an existing verdict.json alone.

Exit codes (the same for ``kgc``; the README's table): 0 certified (for the layers run), 1
not certified (a target that does not answer is error verdicts), 2 bad input or usage (a bad
target spec or kubeconfig, refused credentials, an unwritable output: one line on stderr,
nothing written), 3 internal error.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
import platform
import re
import shlex
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from kgc import __version__, progress
from kgc.core import report
from kgc.core.bundle import BundleError, load_bundle
from kgc.core.engine import Context, Unavailable
from kgc.core.layer import Layer, Scope
from kgc.core.logfilter import pytest_plugin as install_log_filter
from kgc.core.model import Check, Outcome, Status, Verdict
from kgc.core.options import DEPRECATED, UnwritableOutput, check_writable, deprecation
from kgc.core.profile import DEFAULT_PROFILE, Profile, ProfileError, load_profile
from kgc.core.registry import catalogue, load_layers, markers
from kgc.core.target import ClusterTarget, NodeTarget, TargetError, Unreachable, redact_url

USER_PROP = "kgc_verdict"
NO_TARGET = "none"
ITEM_INFO = pytest.StashKey[tuple[str, str]]()  # (layer, target key)
RECORDED = pytest.StashKey[bool]()


class KgcWarning(UserWarning):
    """A check ended in ``warn``: certified, with something to look at."""


class CheckError(Exception):
    """A check could not decide (``error`` verdict): shown as broken, counted as failed."""


def suites_dir() -> Path:
    """The conformance suites: the repository's conformance/ folder, shipped in the wheel
    as the package ``kgc.conformance``."""
    return Path(str(importlib.resources.files("kgc.conformance")))


def _bad_input(msg: str) -> None:
    """Bad input: one line on stderr, exit 2, nothing written."""
    pytest.exit(f"kgc: {msg}", returncode=2)


class KgcState:
    def __init__(self, config: pytest.Config, profile: Profile) -> None:
        self.config = config
        self.profile = profile
        self.layers: dict[str, Layer] = load_layers()
        self.targets: dict[str, Any] = {}  # key -> NodeTarget | ClusterTarget | Bundle
        self.ids: dict[str, str] = {}  # key -> the target's name (test id)
        self.by_scope: dict[Scope, list[str]] = {Scope.NODE: [], Scope.CLUSTER: []}
        self.contexts: dict[str, Context] = {}
        self.verdicts: dict[tuple[str, str], dict[str, Any]] = {}
        self.selected: set[str] = set()
        self.selected_layers: set[str] = set()
        self.started = time.time()
        self.active = False
        # the plugin runs the suites (targets built): False for self-tests and other suites,
        # where a conformance test errors instead of judging nothing (kgc_context)
        self.conformance = False
        self.snapshot_mode = bool(config.option.kgc_snapshot)
        self.final: dict[str, Any] | None = None

    # -- options and targets -----------------------------------------------------------
    def options(self) -> dict[str, Any]:
        opt = self.config.option
        return {
            "allow_reboot": bool(opt.kgc_allow_reboot),
            "reboot_timeout_s": float(opt.kgc_reboot_timeout),
            "nri_probe": bool(opt.kgc_nri_probe),
            "nri_socket": opt.kgc_nri_socket,
            "cri_socket": opt.kgc_cri_socket,
        }

    def add_target(self, t: Any) -> None:
        key = f"{t.scope}{len(self.by_scope[t.scope])}"
        name = t.name
        taken = set(self.ids.values())
        n = 2
        while name in taken:  # two targets with one name would merge their verdicts
            name = f"{t.name}#{n}"
            n += 1
        self.targets[key] = t
        self.ids[key] = name
        self.by_scope[t.scope].append(key)

    def build_targets(self, probe: bool = True) -> None:
        """The run's targets, each validated before any check runs: a bad spec, a missing
        ``chroot://`` directory, a bad kubeconfig or context, or a cluster that refuses the
        credentials is one line and exit 2, nothing written. A cluster that does not
        answer is probed once (``probe``: on the controller) and its checks share that
        error. The cluster is judged only by cluster layers: when the selection (``-m``,
        the paths) leaves none, an implicit kubeconfig (``$KUBECONFIG``, ~/.kube/config) is
        neither checked nor contacted, an explicit ``--kubeconfig`` only checked."""
        opt = self.config.option
        if opt.kgc_snapshot:
            for path in [s for s in opt.kgc_snapshot.split(",") if s.strip()]:
                try:
                    self.add_target(load_bundle(path.strip(), self.layers))
                except BundleError as exc:
                    _bad_input(str(exc))
            return
        hosts = getattr(opt, "hosts", None)
        specs = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else ["local://"]
        for spec in specs:
            try:
                self.add_target(NodeTarget(
                    spec=spec,
                    root=opt.kgc_root or "",
                    sudo=bool(getattr(opt, "sudo", False)),
                    ssh_config=getattr(opt, "ssh_config", None),
                    ssh_identity_file=getattr(opt, "ssh_identity_file", None),
                    host_keys="accept-new" if opt.kgc_accept_new_host_keys else "strict",
                ).validate())
            except TargetError as exc:
                _bad_input(str(exc))
        wanted = _cluster_selectable(self.config, self.layers)
        explicit = bool(opt.kgc_kubeconfig or opt.kgc_context)
        try:  # kubectl's rules: --kubeconfig, else $KUBECONFIG merged, else ~/.kube/config
            cluster = ClusterTarget.for_run(opt.kgc_kubeconfig, opt.kgc_context,
                                            validate=wanted or explicit)
            if cluster is not None and wanted and probe:
                try:
                    cluster.probe()
                except Unreachable:
                    pass  # kept on the target: every cluster check errors with it
        except TargetError as exc:
            _bad_input(str(exc))
            return
        if cluster is not None:
            self.add_target(cluster)

    def probes(self) -> dict[str, list[str] | None]:
        """The controller's probe answers, for xdist workers (key -> [message, fix])."""
        out: dict[str, list[str] | None] = {}
        for key, t in self.targets.items():
            answer = getattr(t, "_probed", None)
            if isinstance(t, ClusterTarget) and answer is not None:
                out[key] = [str(answer[0]), answer[0].remediation] if answer else None
        return out

    def context(self, key: str) -> Context:
        ctx = self.contexts.get(key)
        if ctx is None:
            ctx = Context(target=self.targets[key], profile=self.profile, layers=self.layers,
                          options=self.options())
            self.contexts[key] = ctx
        return ctx

    def target_names(self) -> list[str]:
        """The targets as the results name them (``run.targets``: the gate pairs them)."""
        return [self.ids[k] for k in self.targets]

    def target_scopes(self) -> dict[str, str]:
        return {self.ids[k]: str(t.scope) for k, t in self.targets.items()}

    def target_specs(self) -> dict[str, str]:
        """name -> where it is (credentials redacted)."""
        return {self.ids[k]: t.redacted for k, t in self.targets.items()}

    # registered as a plugin: on the controller this also sees xdist workers' reports
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, val in report.user_properties:
            if key == USER_PROP and isinstance(val, str):
                d = json.loads(val)
                d["test"] = report.nodeid
                self.verdicts.setdefault((report.nodeid, d["check"]), d)


STATE = pytest.StashKey[KgcState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kgc", "kata-gpu-conformance")
    g.addoption("--profile", dest="kgc_profile", default=None, metavar="NAME|PATH",
                help=f"platform profile (built-in name or YAML path; default {DEFAULT_PROFILE})")
    g.addoption("--snapshot", dest="kgc_snapshot", default=None, metavar="FILE[,FILE]",
                help="judge recorded evidence bundles (kgc snapshot) instead of live targets")
    g.addoption("--report-dir", dest="kgc_report_dir", default=None, metavar="DIR",
                help="where verdict.json, junit.xml and allure-results go (default ./reports)")
    g.addoption("--root", dest="kgc_root", default=None, metavar="PATH",
                help="read host files under PATH instead of / (an offline tree)")
    g.addoption("--kgc-root", dest="kgc_root_deprecated", default=None, metavar="PATH",
                help="deprecated spelling of --root")
    g.addoption("--allow-reboot", dest="kgc_allow_reboot", action="store_true", default=False,
                help="DESTRUCTIVE: allow the reboot test to reboot the target nodes")
    g.addoption("--reboot-timeout", dest="kgc_reboot_timeout", default=600, type=float,
                help="seconds to wait for a rebooted node to come back (default 600)")
    g.addoption("--nri-probe", dest="kgc_nri_probe", action="store_true", default=False,
                help="run the live NRI probe: registers a plugin and starts a labelled probe "
                "pod on the node (not read-only)")
    g.addoption("--nri-socket", dest="kgc_nri_socket", default=None, metavar="PATH",
                help="NRI socket to probe (default: from the node's containerd config); for a "
                "remote node, a local path forwarded with `ssh -L`")
    g.addoption("--cri-socket", dest="kgc_cri_socket", default=None, metavar="PATH",
                help="CRI socket the NRI probe uses to start its probe pod")
    g.addoption("--kubeconfig", dest="kgc_kubeconfig", default=None, metavar="FILE",
                help="kubeconfig of the cluster the cluster layers certify (default: "
                "$KUBECONFIG's files merged, else ~/.kube/config, as kubectl)")
    g.addoption("--context", dest="kgc_context", default=None, metavar="NAME",
                help="kubeconfig context (default: its current-context)")
    g.addoption("--ssh-accept-new-host-keys", dest="kgc_accept_new_host_keys",
                action="store_true", default=False,
                help="INSECURE: accept SSH host keys not yet known (default: refuse them)")


def _arg_path(config: pytest.Config, arg: str) -> Path:
    """The file or folder a collection argument names, resolved the way pytest resolves it:
    with ``--pyargs`` a dotted module name (``kgc.conformance``, ``kgc.conformance.iommu``)
    is looked up on ``sys.path`` first — read as a path relative to the current directory
    it names nothing, and the plugin switched itself off for the installed suites."""
    strpath = arg.partition("[")[0].split("::")[0]
    if config.option.pyargs:
        try:
            spec = importlib.util.find_spec(strpath)
        except (AttributeError, ImportError, ValueError):  # pytest's search_pypath too
            spec = None
        if spec is not None and spec.submodule_search_locations:
            return Path(list(spec.submodule_search_locations)[0]).resolve()
        if spec is not None and spec.origin:
            return Path(spec.origin).resolve()
    return (Path(config.invocation_params.dir) / strpath).resolve()


def _suite_args(config: pytest.Config) -> bool:
    """Point a run without explicit paths at the installed suites; True when every
    collection argument lies inside them (a conformance run that writes reports)."""
    suites = suites_dir().resolve()
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        config.args = [str(suites)]
        return True
    for a in config.args:
        p = _arg_path(config, a)
        if not (p == suites or suites in p.parents):
            return False
    return True


def _report_dir(config: pytest.Config) -> Path:
    d = config.option.kgc_report_dir or "reports"
    p = Path(d)
    return p if p.is_absolute() else Path(config.invocation_params.dir) / p


# the options of pytest's cache plugin: a user who gives one asks for the cache
CACHE_OPTIONS = ("lf", "failedfirst", "newfirst", "stepwise", "stepwise_skip", "cacheshow",
                 "cacheclear")


def _explicit_args(config: pytest.Config) -> list[str]:
    """What the user typed: the command line and ``$PYTEST_ADDOPTS`` (not an ini file's
    addopts, which a checkout sets for its self-tests)."""
    return [str(a) for a in config.invocation_params.args] + shlex.split(
        os.environ.get("PYTEST_ADDOPTS", ""))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """A conformance run leaves nothing but its reports in the user's directory: pytest's
    cache (``.pytest_cache/``, last-failed test ids) is off unless the user asks for it
    (``-p cacheprovider`` or one of its options: ``--lf``, ``--ff``, ``--nf``, ``--sw``,
    ``--cache-show``, ``--cache-clear``). Here, before pytest_configure, the one moment the
    plugin can still leave it out of the run."""
    if not config.pluginmanager.has_plugin("cacheprovider"):
        return
    if any(getattr(config.option, o, False) for o in CACHE_OPTIONS):
        return
    args = _explicit_args(config)
    if any(a in ("-pcacheprovider", "cacheprovider") for a in args):
        return
    if not _suite_args(config) and not config.option.kgc_snapshot:
        return  # not a conformance run: pytest as usual
    for name in ("cacheprovider", "stepwise"):  # stepwise reads the cache (pytest: -p no:)
        config.pluginmanager.set_blocked(name)


def _cluster_selectable(config: pytest.Config, layers: dict[str, Layer]) -> bool:
    """May this run select a cluster layer? Decided before collection (the cluster must be
    checked and probed before anything is written) from what selects layers: the paths
    (``conformance/gpu``) and ``-m`` (evaluated against each layer's markers). ``-k`` and
    anything that cannot be evaluated count as "may" (a probe too many, never one missing)."""
    cluster = [lay for lay in layers.values() if lay.scope is Scope.CLUSTER]
    if config.args_source is pytest.Config.ArgsSource.ARGS:
        suites = suites_dir().resolve()
        named: set[str] = set()
        for a in config.args:
            p = _arg_path(config, a)
            if p == suites or suites not in p.parents:
                named = set(layers)
                break
            named.add(p.relative_to(suites).parts[0])
        cluster = [lay for lay in cluster if lay.name in named]
    expr = getattr(config.option, "markexpr", "") or ""
    if not expr or not cluster:
        return bool(cluster)
    try:
        from _pytest.mark.expression import Expression

        compiled = Expression.compile(expr)
        return any(compiled.evaluate(
            lambda name, /, _m=set(lay.all_markers), **_kw: name in _m or name == "layer")
            for lay in cluster)
    except Exception:  # noqa: BLE001 - pytest reports a bad -m itself; here: may select
        return True


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    install_log_filter(config)  # secrets out of captured logs, private attachments
    for name, desc in markers().items():
        config.addinivalue_line("markers", f"{name}: {desc}")
    config.addinivalue_line("markers", "layer(name): the layer a conformance suite certifies")
    # the plugin marks every suite test with it (one xdist worker per target): registered
    # here too, so a run without pytest-xdist does not warn PytestUnknownMarkWarning
    config.addinivalue_line("markers", "xdist_group(name): tests of one target run in one "
                            "xdist worker (--dist loadgroup)")
    try:
        profile = load_profile(config.option.kgc_profile or DEFAULT_PROFILE)
    except ProfileError as exc:
        _bad_input(str(exc).replace("\n", " "))
        return
    _deprecated_spellings(config)
    state = KgcState(config, profile)
    config.stash[STATE] = state
    config.pluginmanager.register(state, "kgc-state")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "kgc-xdist")
    config.pluginmanager.register(_Console(), "kgc-console")
    worker = hasattr(config, "workerinput")
    conformance = _suite_args(config)
    if not conformance and not config.option.kgc_snapshot:
        return  # self-tests or other suites: the plugin stays out of the way
    state.conformance = True
    informational = _informational(config)
    state.build_targets(probe=not worker and not informational)
    if worker:
        wi = config.workerinput  # type: ignore[attr-defined]
        for key, answer in (wi.get("kgc_probes") or {}).items():
            t = state.targets.get(key)
            if isinstance(t, ClusterTarget):
                t.probed(Unreachable(*answer) if answer else None)
        if wi.get("kgc_alluredir") and config.option.allure_report_dir is None:
            config.option.allure_report_dir = wi["kgc_alluredir"]
        return
    if config.option.verbose >= 0:  # progress of long work on stderr, quiet under -q
        config.stash[PROGRESS] = progress.install(_ProgressLines(config))
    if informational:
        return
    state.active = True
    rdir = _report_dir(config)
    try:  # the last check: it makes the directory
        check_writable(rdir, "--report-dir", directory=True)
    except UnwritableOutput as exc:
        _bad_input(str(exc))
    if config.option.allure_report_dir is None:
        config.option.allure_report_dir = str(rdir / "allure-results")
        config.option.clean_alluredir = True
    if config.option.xmlpath is None:
        config.option.xmlpath = str(rdir / "junit.xml")


def _informational(config: pytest.Config) -> bool:
    """A run that only shows something and judges nothing — ``--collect-only``, ``--help``,
    ``--markers``, ``--fixtures``, ``--fixtures-per-test``: no probe, no report written
    (``--help`` made an empty ``reports/allure-results/`` where it was asked)."""
    opt = config.option
    return any(getattr(opt, name, False) for name in (
        "collectonly", "help", "markers", "showfixtures", "show_fixtures_per_test"))


def _deprecated_spellings(config: pytest.Config) -> None:
    """An old option spelling (kgc.core.options.DEPRECATED) works as the new one and says so in
    one line on stderr (once: on the controller, not again in each xdist worker)."""
    opt = config.option
    for old, new in DEPRECATED["pytest"].items():
        dest = "kgc_" + new.lstrip("-").replace("-", "_")
        given = getattr(opt, dest + "_deprecated", None)
        if given is None:
            continue
        if getattr(opt, dest) not in (None, given):
            _bad_input(f"{old} {given} and {new} {getattr(opt, dest)}: give {new} only")
        setattr(opt, dest, given)
        if not hasattr(config, "workerinput"):
            print(deprecation(old, new), file=sys.stderr)


PROGRESS = pytest.StashKey[Any]()


class _ProgressLines(progress.StderrHandler):
    """kgc's progress lines (:mod:`kgc.progress`) on the terminal's stderr while a test
    runs: pytest's capture is suspended for the write (the lines are for the operator
    watching, not the test's captured output) and pytest's line of dots is ended first."""

    def __init__(self, config: pytest.Config) -> None:
        super().__init__()
        self.config = config

    def write(self, line: str) -> None:
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if capman is None or threading.current_thread() is not threading.main_thread():
            super().write(line)
            return
        with capman.global_and_fixture_disabled():
            if tr is not None:
                tr.ensure_newline()
                self.config.get_terminal_writer().flush()
            super().write(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    handler = config.stash.get(PROGRESS, None)
    if handler is not None:
        progress.uninstall(handler)


class _XdistHooks:
    """Only registered when pytest-xdist is installed (its hooks are unknown otherwise)."""

    @staticmethod
    def pytest_configure_node(node: Any) -> None:  # controller side
        node.workerinput["kgc_alluredir"] = node.config.option.allure_report_dir
        state = node.config.stash.get(STATE, None)
        if state is not None:  # probed once, here: the workers take the answers
            node.workerinput["kgc_probes"] = state.probes()

    @staticmethod
    def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
        state = node.config.stash.get(STATE, None)
        if state is not None and not state.selected:
            state.selected = set(ids)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kgc_target" not in metafunc.fixturenames:
        return
    state = metafunc.config.stash.get(STATE, None)
    mark = metafunc.definition.get_closest_marker("layer")
    if state is None or mark is None or not mark.args:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: a conformance suite declares its layer "
            "(pytestmark = pytest.mark.layer('NAME'))")
    lay = state.layers.get(mark.args[0])
    if lay is None:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: unknown layer {mark.args[0]!r}")
    keys = state.by_scope[lay.scope] or [NO_TARGET]
    ids = [state.ids.get(k, f"no-{lay.scope}") for k in keys]
    metafunc.parametrize("kgc_target", keys, ids=ids, scope="module")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    keep, drop = [], []
    for item in items:
        cs = getattr(item, "callspec", None)
        mark = item.get_closest_marker("layer")
        if cs is None or "kgc_target" not in cs.params or mark is None:
            keep.append(item)
            continue
        lay = state.layers[mark.args[0]]
        key = cs.params["kgc_target"]
        for m in lay.all_markers:
            item.add_marker(m)
        # with `-n N --dist loadgroup` every test of one target runs in one worker: one
        # collection round trip per node, however the checks are spread
        item.add_marker(pytest.mark.xdist_group(name=state.ids.get(key, NO_TARGET)))
        item.stash[ITEM_INFO] = (lay.name, key)
        if key == NO_TARGET and state.snapshot_mode:
            drop.append(item)  # no bundle of this scope: the layer is not part of the run
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    state.selected = {it.nodeid for it in session.items if ITEM_INFO in it.stash}
    state.selected_layers = {it.stash[ITEM_INFO][0] for it in session.items
                             if ITEM_INFO in it.stash}
    if state.active:
        # a run in progress (or one that crashes) never leaves an older verdict in place
        report.write_verdict_json(_report_dir(session.config) / "verdict.json", [],
                                  _run_meta(state, session, -1), incomplete=True)


@pytest.fixture(scope="session")
def kgc_state(request: pytest.FixtureRequest) -> KgcState:
    return request.config.stash[STATE]


@pytest.fixture(scope="session")
def kgc_profile(kgc_state: KgcState) -> Profile:
    return kgc_state.profile


PLUGIN_OFF = (
    "kgc did not run this as a conformance suite: the collection arguments are not the "
    "installed suites ({suites}), so no target was set up and nothing can be judged. Run "
    "`pytest --pyargs kgc.conformance [-m LAYER]`, `pytest {suites}/LAYER` or `kgc certify`.")


@pytest.fixture(scope="module")
def kgc_context(kgc_state: KgcState, kgc_target: str) -> Context | None:
    if not kgc_state.conformance:
        # a skip here would be exit 0 with nothing judged ("certified"): an error instead
        pytest.fail(PLUGIN_OFF.format(suites=suites_dir()), pytrace=False)
    return None if kgc_target == NO_TARGET else kgc_state.context(kgc_target)


def _record(item: pytest.Item, v: Verdict) -> None:
    item.user_properties.append((USER_PROP, json.dumps(v.to_dict(), default=str)))
    item.stash[RECORDED] = True
    try:
        import allure

        allure.dynamic.title(f"{v.check} — {v.title} [{v.target}]")
        for name, value in report.layer_labels(v.layer, item.config.stash[STATE].layers):
            allure.dynamic.label(name, value)
        allure.dynamic.feature(v.check)
        allure.dynamic.story(v.title)
        allure.dynamic.parent_suite(v.target)
        allure.dynamic.severity(str(v.severity))
        allure.dynamic.tag(str(v.status))
        allure.dynamic.tag(f"origin:{v.origin}")
        if v.simulated:
            allure.dynamic.tag("simulated")
        if v.category:
            allure.dynamic.label("kgc_category", v.category)
        allure.dynamic.description(
            f"**{v.title}**\n\nTarget: `{v.target}`\n\nStatus: **{v.status}** — {v.reason}"
            + (f"\n\n**Simulated evidence**: {v.simulated_why}" if v.simulated else "")
            + ("\n\nEvidence replayed from a bundle" if v.origin == "bundle" else "")
            + (f"\n\nRemediation:\n\n```\n{v.remediation}\n```" if v.remediation else "")
        )
        allure.attach(json.dumps(v.to_dict(), indent=2, default=str), name="verdict+evidence",
                      attachment_type=allure.attachment_type.JSON)
        if v.remediation:
            allure.attach(v.remediation, name="remediation",
                          attachment_type=allure.attachment_type.TEXT)
    except ImportError:  # allure-pytest is a dependency; without it only allure output is lost
        pass


# -- layer artefacts -----------------------------------------------------------------------
# A layer may expose ``artefacts(evidence, profile) -> [(filename, mime, bytes)]`` (the KEDA
# layer: CSVs, the timeline SVG, the per-phase table): computed once per target and layer,
# written next to verdict.json (prefixed with the target when the scope has several),
# attached to the Allure result of each of the layer's checks, and ``text/plain`` ones shown
# in the console summary.
ARTEFACTS = pytest.StashKey[dict[tuple[str, str], list[tuple[str, str, bytes]]]]()


def _artefacts(item: pytest.Item, state: KgcState, ctx: Context | None, v: Verdict) -> None:
    hook = getattr(state.layers.get(v.layer), "artefacts", None)
    if hook is None or ctx is None:
        return
    done = item.config.stash.setdefault(ARTEFACTS, {})
    key = (ctx.name, v.layer)
    if key not in done:
        try:
            done[key] = list(hook(ctx.evidence(v.layer), ctx.profile))
        except Unavailable:
            done[key] = []
        if state.active:
            several = len(state.by_scope[ctx.scope]) > 1
            prefix = "".join(c if c.isalnum() or c in "-_." else "_" for c in ctx.name) + "-"
            rdir = _report_dir(item.config)
            rdir.mkdir(parents=True, exist_ok=True)
            for name, _mime, data in done[key]:
                (rdir / ((prefix if several else "") + name)).write_bytes(data)
    try:
        import allure

        for name, mime, data in done[key]:
            allure.attach(data, name=name, attachment_type=mime,
                          extension=name.rpartition(".")[2])
    except ImportError:
        pass


def format_verdict(v: Verdict) -> str:
    lines = [f"[{v.status.upper()}] {v.check} on {v.target}: {v.reason}"]
    if v.expected is not None or v.found is not None:
        lines.append(f"  expected: {v.expected}    found: {v.found}")
    if v.remediation:
        lines.append("  remediation: " + v.remediation.replace("\n", "\n    "))
    return "\n".join(lines)


def _no_target_verdict(state: KgcState, check_id: str) -> Verdict:
    """A selected check whose scope has no target in this run: a skip that says what to give."""
    chk = catalogue(state.layers).get(check_id)
    scope = state.layers[chk.layer].scope
    why = ("no cluster to judge: give --kubeconfig FILE [--context NAME] (or set $KUBECONFIG)"
           if scope is Scope.CLUSTER else "no node to judge: give --hosts SPEC")
    out = Outcome(Status.SKIP, why)
    return Check(chk.id, chk.layer, chk.title, chk.severity, chk.remediation,
                 lambda _e, _p: out).judge(None, None, f"no-{scope}")


@pytest.fixture
def certify(request: pytest.FixtureRequest, kgc_state: KgcState, kgc_context: Context | None):  # type: ignore[no-untyped-def]  # noqa: E501
    """Judge one check on this test's target; fail/skip the test according to the verdict."""

    def _certify(check_id: str) -> Verdict:
        if kgc_context is None:
            v = _no_target_verdict(kgc_state, check_id)
        else:
            v = kgc_context.judge(check_id)
        _record(request.node, v)
        _artefacts(request.node, kgc_state, kgc_context, v)
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]  # noqa: E501
    """A suite test that broke before it recorded a verdict still leaves one: ``error``
    (or ``skip``) with what happened — never a silent hole in verdict.json."""
    rep: pytest.TestReport = yield
    info = item.stash.get(ITEM_INFO, None)
    if info is None or item.stash.get(RECORDED, False) or rep.when == "teardown":
        return rep
    if rep.passed and rep.when == "setup":
        return rep
    layer, key = info
    state = item.config.stash[STATE]
    text = str(rep.longrepr)[-1500:] if rep.longrepr else "(no detail)"
    status = "skip" if rep.skipped else "error"
    d = {
        "check": f"{layer}.(suite)", "layer": layer, "title": item.name,
        "severity": "blocker", "target": state.ids.get(key, NO_TARGET), "status": status,
        "reason": f"the suite test did not record a verdict ({rep.when} {rep.outcome}): "
                  + text.strip().splitlines()[-1][:500],
        "remediation": "" if status == "skip" else
        "This is a defect in kgc or its installation: report it with this output.",
        "expected": None, "found": None, "origin": "live", "simulated": False,
        "simulated_why": "", "evidence": {"detail": text},
    }
    item.stash[RECORDED] = True
    item.user_properties.append((USER_PROP, json.dumps(d)))
    rep.user_properties = list(item.user_properties)
    return rep


def _run_meta(state: KgcState, session: pytest.Session, exitstatus: int) -> dict[str, Any]:
    results = list(state.verdicts.values())
    judged = sorted({r["layer"] for r in results if r["status"] != "skip"},
                    key=list(state.layers).index)
    selected = sorted(state.selected_layers or {r["layer"] for r in results},
                      key=list(state.layers).index)
    opt = session.config.option
    return {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(state.started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "duration_s": round(time.time() - state.started, 3),
        "kgc_version": __version__,
        "profile": state.profile.name,
        "profile_source": state.profile.source,
        "targets": state.target_names(),
        "target_specs": state.target_specs(),
        "layers": selected,
        "layers_judged": judged,
        # what was really judged: the gate refuses a selection that dropped a check it needs
        # and a profile whose content is not the policy's
        **report.run_identity(state.profile, state.target_scopes(), selected, results,
                              markers=getattr(opt, "markexpr", "") or "",
                              keywords=getattr(opt, "keyword", "") or "",
                              registry=state.layers),
        "scope": report.scope_note(selected, judged, list(state.layers)),
        "command": ["pytest", *(_redact_args(session.config.invocation_params.args))],
        "pytest_exit": int(exitstatus),
        "ssh_host_keys": "accept-new (INSECURE)" if session.config.option.kgc_accept_new_host_keys
        else "strict",
    }


def _redact_args(args: Any) -> list[str]:
    return [redact_url(str(a)) for a in args]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(STATE, None)
    if state is None or not state.active:
        return
    rdir = _report_dir(config)
    results = list(state.verdicts.values())
    recorded = {r["test"] for r in results}
    missing = len(state.selected - recorded)
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    run = _run_meta(state, session, exitstatus)
    env = _environment(state)
    run["environment"] = env
    report.write_verdict_json(rdir / "verdict.json", results, run, missing=missing,
                              incomplete=interrupted)
    status, why = report.overall_and_reason(results, missing)
    state.final = {"overall": "fail" if interrupted else status, "reason": why, "run": run,
                   "results": results}
    alluredir = config.option.allure_report_dir
    if alluredir:
        report.write_allure_environment(Path(alluredir), env)
        report.write_allure_categories(Path(alluredir))
        report.clean_skipped_results(Path(alluredir))
        report.place_results(Path(alluredir), state.layers)
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED,
                      pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = 0 if status == "pass" else 1


def _environment(state: KgcState) -> dict[str, str]:
    env = {
        "kgc": __version__,
        "python": platform.python_version(),
        "pytest": pytest.__version__,
        "profile": state.profile.name,
        "runner": platform.node(),
    }
    for key, ctx in state.contexts.items():
        tag = state.ids[key]
        env[f"{tag}.origin"] = ctx.target.origin
        env.update({f"{tag}.{k}": v for k, v in ctx.describe().items()})
        if ctx.scope is not Scope.NODE:
            continue
        try:
            snap = ctx.host()
        except TargetError:
            continue
        # descriptive only: a file kept out of the evidence is simply not described
        kernel = snap.files.get("/proc/sys/kernel/osrelease", "").strip()
        if kernel:
            env[f"{tag}.kernel"] = kernel
        for line in snap.files.get("/etc/os-release", "").splitlines():
            if line.startswith("PRETTY_NAME="):
                env[f"{tag}.distro"] = line.split("=", 1)[1].strip('"')
        env[f"{tag}.round_trips"] = str(getattr(ctx.target, "round_trips", 0))
    return env


# -- the console -----------------------------------------------------------------------
# A conformance run ends with kgc's summary and nothing after it: the layers' text
# artefacts, the verdict table, a section per status that needs a reader, the report's
# path, and the overall line last (printed after pytest's own last line, from the outermost
# pytest_sessionfinish). pytest's FAILURES section, short test summary and warnings summary
# would repeat the same verdicts by test function: for kgc's checks (a suite test that
# recorded a verdict) they are left out, unless the user asked for them with ``--tb`` /
# ``-r`` on the command line. A suite test that broke before it judged (``CHECK.(suite)``)
# keeps pytest's traceback: that is what its bug report needs.
def _kgc_check_report(rep: Any) -> bool:
    """A report of a suite test whose check recorded its verdict (shown by kgc)."""
    for key, val in getattr(rep, "user_properties", None) or ():
        if key == USER_PROP and isinstance(val, str):
            try:
                check = str(json.loads(val).get("check", ""))
            except (ValueError, AttributeError):
                return False
            return not check.endswith(".(suite)")
    return False


def _kgc_warning(rep: Any) -> bool:
    return KgcWarning.__name__ in str(getattr(rep, "message", ""))


def _asked(config: pytest.Config) -> tuple[bool, bool]:
    """(``--tb`` given, ``-r`` given) by the user: then pytest's sections show kgc's checks
    too (its traceback style, its short summary), as asked."""
    args = _explicit_args(config)
    tb = any(a == "--tb" or a.startswith("--tb=") for a in args)
    chars = any(re.fullmatch(r"-[a-zA-Z]*r.*", a) for a in args)
    return tb, chars


HIDDEN = pytest.StashKey[dict[str, list[Any]]]()
_SHOWN_BY_KGC = {"failed": _kgc_check_report, "error": _kgc_check_report,
                 "skipped": _kgc_check_report, "warnings": _kgc_warning}


def _hide(config: pytest.Config, stats: dict[str, list[Any]], cats: tuple[str, ...]) -> None:
    """Leave kgc's reports of ``cats`` out of pytest's terminal stats (kept in HIDDEN)."""
    saved = config.stash.setdefault(HIDDEN, {})
    for cat in cats:
        saved.setdefault(cat, list(stats.get(cat, [])))
        if cat in stats:
            stats[cat] = [r for r in saved[cat] if not _SHOWN_BY_KGC[cat](r)]


def _restore(config: pytest.Config, stats: dict[str, list[Any]], cats: tuple[str, ...]) -> None:
    saved = config.stash.get(HIDDEN, {})
    for cat in cats:
        if cat in saved:
            stats[cat] = saved.pop(cat)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Runs between pytest's FAILURES sections and its short test summary: what the user
    asked for with ``-r`` but not ``--tb`` comes back for the short summary; what ``--tb``
    showed and ``-r`` did not ask for leaves it."""
    state = config.stash.get(STATE, None)
    if state is None or not state.active:
        return
    tb, chars = _asked(config)
    if chars and not tb:
        _restore(config, terminalreporter.stats, ("failed", "error", "skipped"))
    elif tb and not chars:
        _hide(config, terminalreporter.stats, ("failed", "error", "skipped"))


class _Console:
    """The outermost terminal hooks of a conformance run (registered on the controller)."""

    @staticmethod
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config):  # type: ignore[no-untyped-def]  # noqa: E501
        state = config.stash.get(STATE, None)
        if state is None or not state.active:
            return (yield)
        tb, chars = _asked(config)
        stats = terminalreporter.stats
        # pytest's FAILURES/ERRORS sections (--tb) and its short summary and warnings
        # summary (-r) leave kgc's checks out unless asked for
        _hide(config, stats, (() if tb else ("failed", "error"))
              + (() if chars else ("skipped", "warnings")))
        try:
            return (yield)
        finally:  # pytest's last line (summary_stats) counts every test again
            _restore(config, stats, tuple(_SHOWN_BY_KGC))

    @staticmethod
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(session: pytest.Session):  # type: ignore[no-untyped-def]
        result = yield
        config = session.config
        state = config.stash.get(STATE, None)
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if state is not None and state.active and state.final is not None and tr is not None:
            _kgc_summary(tr, config, state)
        return result


def _artefact_summary(tr: Any, config: pytest.Config) -> None:
    """The layers' text artefacts (the KEDA per-phase table), each text once: the same
    table for several targets is one section naming them."""
    texts: dict[tuple[str, str, bytes], list[str]] = {}
    for (target, layer), files in config.stash.get(ARTEFACTS, {}).items():
        for name, mime, data in files:
            if mime == "text/plain":
                texts.setdefault((layer, name, data), []).append(target)
    for (layer, name, data), targets in texts.items():
        tr.section(f"{layer} on {', '.join(targets)}: {name}")
        for line in data.decode(errors="replace").splitlines():
            tr.write_line(line)


def _kgc_summary(tr: Any, config: pytest.Config, state: KgcState) -> None:
    fin = state.final
    assert fin is not None
    ok = fin["overall"] == "pass"
    overall = f"overall: {fin['overall'].upper()} {fin['run']['scope']} — {fin['reason']}"
    if config.option.no_summary or config.option.verbose < -1:  # --no-summary, -qq
        tr.write_line(overall, red=not ok, green=ok, bold=True)
        return
    width = config.get_terminal_writer().fullwidth
    _artefact_summary(tr, config)
    tr.section("kata-gpu-conformance verdicts")
    for line in report.summary_table(fin["results"], width=width, registry=state.layers):
        tr.write_line(line)
    for title, lines in report.sections(fin["results"], width=width):
        tr.section(title)
        for line in lines:
            tr.write_line(line)
    tr.write_line("")
    if config.option.kgc_accept_new_host_keys:
        tr.write_line("WARNING: SSH host keys were accepted without verification "
                      "(--ssh-accept-new-host-keys)", red=True, bold=True)
    tr.write_line(f"report: {_report_dir(config) / 'verdict.json'}"
                  + ("  (HTML: kgc report)" if sys.stdout.isatty() else ""))
    tr.write_line(overall, red=not ok, green=ok, bold=True)
