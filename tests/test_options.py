"""One name per option across pytest and kgc.

The pytest plugin's options (with testinfra's, which the plugin's node targets read) and
every ``kgc`` subcommand's are listed from their parsers and held against the table below:
an option that means the same thing on two surfaces has one spelling on both. Every option
of every surface is either a shared one (``SHARED``), a deprecated spelling
(``kgc.core.options.DEPRECATED``) or that surface's own (``OWN``, with what it means), so a new
option has to be classified here — and one that repeats a shared meaning under another
name fails. A second, mechanical check catches what the table might miss: two options whose
destinations name the same thing (``kgc_root`` in pytest, ``root`` in kgc) must be spelled
the same. ``kgc lab`` is the lab's, not the product's; ``kgc guest`` runs inside a GPU pod.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import testinfra.plugin
from _pytest.config.argparsing import Parser

from kgc import plugin
from kgc.cli import build_parser
from kgc.core.options import DEPRECATED, deprecation
from kgc.fleet import noderun
from systree import intel_good

# meaning -> (the one spelling, the surfaces that have it)
SHARED: dict[str, tuple[str, set[str]]] = {
    "platform profile (built-in name or YAML path)": ("--profile", {
        "pytest", "snapshot", "evaluate", "report", "cleanup", "gate", "diff", "image check",
        "fleet manifests", "node-run"}),
    "node target(s)": ("--hosts", {"pytest", "snapshot"}),
    "read the node's files under this directory (an offline tree)": ("--root", {
        "pytest", "snapshot"}),
    "sudo on the node": ("--sudo", {"pytest", "snapshot"}),
    "SSH client config file": ("--ssh-config", {"pytest", "snapshot"}),
    "SSH private key file": ("--ssh-identity-file", {"pytest", "snapshot", "image check"}),
    "accept SSH host keys not yet known": ("--ssh-accept-new-host-keys", {"pytest",
                                                                          "snapshot"}),
    "run the live NRI probe": ("--nri-probe", {"pytest", "snapshot"}),
    "NRI socket": ("--nri-socket", {"pytest", "snapshot"}),
    "CRI socket": ("--cri-socket", {"pytest", "snapshot"}),
    "allow the reboot test": ("--allow-reboot", {"pytest", "snapshot"}),
    "seconds a rebooted node may take": ("--reboot-timeout", {"pytest", "snapshot",
                                                              "image check"}),
    "kubeconfig file": ("--kubeconfig", {"pytest", "snapshot", "cleanup", "fleet collect",
                                         "kubeconfig"}),
    "kubeconfig context": ("--context", {"pytest", "snapshot", "cleanup", "fleet collect",
                                         "kubeconfig"}),
    "where verdict.json and the reports go": ("--report-dir", {
        "pytest", "image check", "fleet collect", "node-run"}),
    "only these layers": ("--layers", {"snapshot", "evaluate", "image check"}),
    "machine-readable output": ("--json", {"evaluate", "gate", "diff", "image check"}),
    "seconds to wait for the cluster to finish": ("--wait", {"cleanup", "fleet collect"}),
    "the fleet's namespace": ("--namespace", {"fleet collect", "fleet manifests"}),
    "Allure history file kept between runs": ("--history", {"certify", "report"}),
    "bound on the whole command": ("--timeout", {"image check", "node-run"}),
}

# options only one surface has, with why they are not a shared meaning under another name
OWN: dict[str, dict[str, str]] = {
    "pytest": {
        "--snapshot": "judge recorded bundles instead of live targets (kgc evaluate takes "
                      "them as arguments)",
        # testinfra's, not read by kgc's targets (its --hosts specs carry the transport)
        "--connection": "", "--ssh-extra-args": "", "--sudo-user": "",
        "--ansible-inventory": "", "--force-ansible": "", "--nagios": "",
    },
    "checks": {"--format": "md or json", "--write-readme": "refresh a README's catalogue"},
    "certify": {"--html": "build the HTML report after the run"},
    "snapshot": {"--output": "the bundle file", "-o": "short for --output"},
    "evaluate": {"--output": "the verdict.json to write (what kgc gate reads)",
                 "-o": "short for --output"},
    "kubeconfig": {"--service-account": "NAMESPACE/NAME whose token the file carries",
                   "--duration": "the token's lifetime (TokenRequest)",
                   "--output": "the kubeconfig file to write (mode 0600)",
                   "-o": "short for --output"},
    "report": {"--results": "the allure-results to read", "--out": "the HTML directory",
               "--verdict": "the run's verdict.json"},
    "cleanup": {"--run": "one run's objects", "--all": "every run's objects"},
    "gate": {}, "diff": {"--timing": "show the timing figures diff leaves out"},
    "image check": {"--hardware": "a bundle's PCI inventory (not judged: read)",
                    "--keep-tree": "", "--boot": "", "--boot-host-key": "",
                    "--ssh-user": "(pytest and snapshot: the user is in the --hosts spec)",
                    "--boot-timeout": ""},
    "fleet collect": {"--name": "the DaemonSet"},
    "fleet manifests": {"--image": "", "--node-selector": "", "--toleration": "",
                        "--runtime-class": "", "--recursive-read-only": "", "--no-lib64": "",
                        "--mask": "", "--sonobuoy": "", "--rbac": ""},
    "node-run": {
        "--host-root": "a node's root to chroot into and run the node's own programs in (a "
                       "live node in a pod), not --root's offline tree read with this "
                       "machine's programs",
        "--node": "the node's name in verdicts", "--mode": "", "--results-dir":
        "Sonobuoy's results directory (not the report)", "--no-idle": ""},
}

CERTIFY_OWN = ("--html", "--history")  # taken off the line before pytest sees it (cli._take)


def pytest_options() -> dict[str, str]:
    """The plugin's options and testinfra's: option string -> dest."""
    p = Parser(_ispytest=True)
    plugin.pytest_addoption(p)
    testinfra.plugin.pytest_addoption(p)
    out = {}
    for g in p._groups:  # noqa: SLF001 - the parser keeps its groups there, no public view
        for o in g.options:
            for name in o.names():
                out[name] = o.dest
    return out


def _walk(ap: argparse.ArgumentParser, path: str, out: dict[str, dict[str, str]]) -> None:
    opts: dict[str, str] = {}
    for act in ap._actions:  # noqa: SLF001 - argparse has no public list of its actions
        if isinstance(act, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in act.choices.items():
                _walk(sub, f"{path} {name}".strip(), out)
        elif act.option_strings and act.dest != "help":
            opts.update({s: act.dest for s in act.option_strings})
    if path:
        out[path] = opts


def kgc_options() -> dict[str, dict[str, str]]:
    """Every kgc subcommand's options: surface -> option string -> dest."""
    out: dict[str, dict[str, str]] = {}
    _walk(build_parser(), "", out)
    out["node-run"] = {s: a.dest for a in noderun.build_parser()._actions  # noqa: SLF001
                       for s in a.option_strings if a.dest != "help"}
    out["certify"] = {s: s.lstrip("-") for s in CERTIFY_OWN}
    # groups of subcommands and a positional-only one; `guest` and `lab` hand their line on
    for none in ("profile", "profile check", "image", "fleet", "guest", "lab"):
        assert not out.pop(none), none
    return out


def surfaces() -> dict[str, dict[str, str]]:
    s = kgc_options()
    s["pytest"] = pytest_options()
    return s


def test_every_shared_meaning_has_one_spelling_everywhere_it_exists() -> None:
    s = surfaces()
    missing = [(meaning, name, where) for meaning, (name, wheres) in SHARED.items()
               for where in sorted(wheres) if name not in s[where]]
    assert not missing, f"spelled otherwise (or gone) on: {missing}"
    names = [n for n, _ in SHARED.values()]
    assert len(names) == len(set(names)), "one spelling names two meanings"


def test_every_option_is_classified() -> None:
    """A new option is shared (one spelling), deprecated, or a surface's own: listing it
    here is where a divergent spelling of a shared meaning is caught."""
    s = surfaces()
    shared = {where: {name for name, wheres in SHARED.values() if where in wheres}
              for where in s}
    unknown = {where: sorted(set(opts) - shared[where] - set(OWN.get(where, {}))
                             - set(DEPRECATED.get(where, {})))
               for where, opts in s.items()}
    assert not {w: u for w, u in unknown.items() if u}, unknown
    assert set(OWN) <= set(s) and set(DEPRECATED) <= set(s)
    for where, old_new in DEPRECATED.items():
        for old, new in old_new.items():
            assert old in s[where] and new in s[where], (where, old, new)
            assert all(old != name for name, _ in SHARED.values())
    clash = {(w, o) for w, own in OWN.items() for o in own for name, _ in SHARED.values()
             if o == name}
    assert not clash, f"a surface's own option spelled as a shared one: {clash}"


def _meaning(dest: str) -> str:
    return dest.removeprefix("kgc_").removesuffix("_deprecated")


def test_options_with_the_same_destination_are_spelled_the_same() -> None:
    """What caught ``--kgc-root`` (pytest, dest kgc_root) against ``--root`` (kgc, root)."""
    s = surfaces()
    spelled: dict[str, set[tuple[str, str]]] = {}
    for where, opts in s.items():
        deprecated = DEPRECATED.get(where, {})
        for name, dest in opts.items():
            if name in deprecated or not name.startswith("--"):
                continue
            spelled.setdefault(_meaning(dest), set()).add((name, where))
    divergent = {m: sorted(v) for m, v in spelled.items() if len({n for n, _ in v}) > 1
                 and m not in ("ssh_key",)}
    assert not divergent, divergent
    # image check stores --ssh-identity-file in `ssh_key` (the boot code's name for it)
    assert {n for n, _ in spelled["ssh_key"]} == {"--ssh-identity-file"}


def test_pytests_deprecated_root_still_works_and_says_the_new_name(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """The new spelling in this process (pytester: what the run judged and that nothing went
    to stderr); the old one in a real process, whose whole stderr is the one line."""
    node = intel_good(tmp_path / "node")
    args = ["-p", "no:cacheprovider", "-p", "no:randomly", "--pyargs", "kgc.conformance",
            "-m", "iommu"]
    new = pytester.runpytest_inprocess(*args, "--root", str(node.root),
                                       "--report-dir", str(tmp_path / "root"))
    old = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--kgc-root", str(node.root),
         "--report-dir", str(tmp_path / "kgc-root")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert new.ret == old.returncode == 0, old.stdout[-2000:] + old.stderr
    assert "\n".join(new.errlines).strip() == ""
    assert old.stderr.strip().splitlines() == [deprecation("--kgc-root", "--root")]
    # both judged the tree: the same verdicts
    verdicts = [{(r["check"], r["status"], r["reason"]) for r in json.loads(
        (tmp_path / d / "verdict.json").read_text())["results"]} for d in ("root", "kgc-root")]
    assert verdicts[0] == verdicts[1] and verdicts[0]


def test_kgc_deprecated_ssh_key_still_works_and_says_the_new_name(
        capsys: pytest.CaptureFixture[str]) -> None:
    ap = build_parser()
    a = ap.parse_args(["image", "check", "img.qcow2", "--ssh-key", "id"])
    assert a.ssh_key == "id"
    assert capsys.readouterr().err.splitlines() == [deprecation("--ssh-key",
                                                                "--ssh-identity-file")]
    a = ap.parse_args(["image", "check", "img.qcow2", "--ssh-identity-file", "id2"])
    assert a.ssh_key == "id2" and capsys.readouterr().err == ""
    assert ap.parse_args(["image", "check", "img.qcow2"]).ssh_key is None
