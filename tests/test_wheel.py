"""The product as a user gets it: a wheel, installed into a fresh venv outside the checkout,
run from an empty directory — the README's "Run it on a node" lines, verbatim.

No `make`, no test extra (so no pytest-xdist, no lab dependencies), no repository on
sys.path: what works here works on a node."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

# the README's exit-code table, case by case (tests/test_exit_codes.py), through the
# installed wheel: its tests run here again with ``py`` = the wheel venv's python (below)
from test_exit_codes import (  # noqa: F401 - collected here as tests of the wheel
    inputs,
    test_an_unreachable_api_server_is_exit_1_everywhere_with_one_reason,
    test_an_unreachable_ssh_node_is_probed_once_and_every_path_says_the_same,
    test_bad_input_is_one_line_exit_2_and_nothing_written,
    test_help_writes_nothing,
)

# builds the wheel and pip-installs it and its dependencies from the package index: the
# network, so the lab tier (`make test`), not `make check`
pytestmark = [pytest.mark.slow, pytest.mark.lab]


def _run(cmd: list[str] | str, cwd: Path, env: dict[str, str], timeout: int = 600,
         shell: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False, shell=shell,
                          executable="/bin/bash" if shell else None)


def _readme_block(name: str) -> list[str]:
    readme = (REPO / "README.md").read_text()
    m = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", readme, re.S)
    assert m, f"README lost its {name} block"
    return [ln.strip() for ln in m.group(1).splitlines() if ln.strip()]


def _activate(venv: Path) -> str:
    return f". {venv / 'bin' / 'activate'} 2>/dev/null; "


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Build the wheel from a copy of the tracked files and install it as the README's
    "Run it on a node" block does: its venv and pip lines verbatim but for where the venv
    lives (/opt/kgc) and which wheel file it installs, run from an empty directory. Every
    test of this file uses that one venv, the many-nodes block (the fleet extra) last, as
    the README runs it after the node block in the same venv."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src-copy"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    dist = base / "dist"
    b = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "-w", str(dist), str(src)],
                       capture_output=True, text=True, timeout=600, check=False)
    assert b.returncode == 0, b.stderr[-3000:]
    wheel = next(dist.glob("kata_gpu_conformance-*.whl"))
    venv = base / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV",
                                                                     "KGC_", "PYTEST"))}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    empty = base / "empty"
    empty.mkdir()
    # the node path: only the wheel, with its declared dependencies
    lines = _readme_block("node-run")
    assert lines[0].startswith("python3 -m venv /opt/kgc") and \
        lines[1].startswith("pip install "), lines[:2]
    for line in lines[:2]:
        cmd = line.replace("/opt/kgc", str(venv))
        cmd = re.sub(r"\S+\.whl", str(wheel), cmd)
        cmd = cmd.replace("python3", sys.executable, 1) if cmd.startswith("python3 ") else cmd
        prefix = _activate(venv) if venv.exists() else ""
        r = _run(prefix + cmd, empty, env, timeout=900, shell=True)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-3000:])
    assert not list(empty.iterdir()), "installing wrote into the working directory"
    # what the base install holds, before the many-nodes test adds the fleet extra
    fresh = {mod: _run([str(venv / "bin" / "python"), "-c", f"import {mod}"], empty,
                       env).returncode == 0 for mod in ("xdist", "hypothesis")}
    return {"venv": venv, "wheel": wheel, "empty": empty, "base": base, "env": env,  # type: ignore[dict-item]
            "base_install_imports": fresh, "node_run": lines[2:]}


@pytest.fixture(scope="module")
def py(installed) -> str:
    """The exit-code contract's interpreter (tests/test_exit_codes.py): the wheel's venv."""
    return str(installed["venv"] / "bin" / "python")


def test_the_contract_runs_the_wheel_not_the_checkout(py: str) -> None:
    """The imported exit-code tests must judge the installed wheel: its kgc is imported from
    the venv's site-packages, not from the checkout's src/."""
    out = subprocess.run([py, "-c", "import kgc; print(kgc.__file__)"], capture_output=True,
                         text=True, check=True, cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert "/site-packages/kgc/" in out.stdout and str(REPO) not in out.stdout, out.stdout


def test_the_wheel_carries_suites_and_profiles_and_no_test_tools(installed) -> None:
    names = subprocess.run([sys.executable, "-m", "zipfile", "-l", str(installed["wheel"])],
                           capture_output=True, text=True, check=True).stdout
    assert "kgc/conformance/iommu/test_iommu.py" in names
    assert "kgc/profiles/generic-nvidia-passthrough.yaml" in names
    assert "kgc/nri/probe.py" in names and "kgc/cri/client.py" in names
    for mod, importable in installed["base_install_imports"].items():
        assert not importable, f"{mod} should not be installed by the wheel"


def test_the_wheel_carries_no_lab(installed) -> None:
    """The labs are their own distribution (lab/): not one of their files is in the
    product's wheel, and the product installed alone has no lab package."""
    import zipfile

    names = zipfile.ZipFile(installed["wheel"]).namelist()
    assert any(n.startswith("kgc/image/") for n in names), names[:20]  # the listing works
    lab = [n for n in names if n.startswith(("kgc_lab", "lab/")) or "kgc/lab/" in n
           or "kgc_lab" in n]
    assert not lab, lab
    meta = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = zipfile.ZipFile(installed["wheel"]).read(meta).decode()
    assert "lab" not in entry_points.replace("kgc.plugin", ""), entry_points
    py = str(installed["venv"] / "bin" / "python")
    r = _run([py, "-c", "import kgc_lab"], installed["empty"], installed["env"])
    assert r.returncode != 0 and "No module named 'kgc_lab'" in r.stderr, r.stderr[-500:]
    r = _run([py, "-c", "import kgc.lab"], installed["empty"], installed["env"])
    assert r.returncode != 0, "kgc.lab is still a package of the product"


def test_kgc_lab_without_the_lab_names_the_distribution(installed) -> None:
    """`kgc lab` is a plug-in command: without the lab installed it says in one line which
    distribution brings it and exits 2 (bad usage), nothing else."""
    kgc = str(installed["venv"] / "bin" / "kgc")
    r = _run([kgc, "lab", "node", "list"], installed["empty"], installed["env"])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "pip install kata-gpu-conformance-lab" in r.stderr and not r.stdout
    assert not (installed["venv"] / "bin" / "kgc-lab").exists()


def test_image_boot_is_the_products_own(installed, tmp_path: Path) -> None:
    """`kgc image check --boot` (release gating) works with the product alone: a bare
    filesystem is refused as not bootable (exit 2), not as "install the lab"."""
    bare = tmp_path / "bare.ext4"
    subprocess.run(["truncate", "-s", "8M", str(bare)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(bare)], check=True, capture_output=True)
    kgc = str(installed["venv"] / "bin" / "kgc")
    r = _run([kgc, "image", "check", str(bare), "--boot", "--report-dir",
              str(tmp_path / "r")], installed["empty"], installed["env"])
    assert r.returncode == 2 and "has no boot loader" in r.stderr, (r.stdout, r.stderr)
    assert "lab" not in r.stderr and not (tmp_path / "r").exists()


def test_readme_node_run_works_verbatim_from_an_empty_directory(installed) -> None:
    """The block's lines after the venv and pip lines (which the ``installed`` fixture ran
    verbatim), in the same empty directory and the activated venv."""
    lines = installed["node_run"]
    assert lines and lines[0].startswith("pytest -m host"), lines
    work = installed["empty"]
    env = dict(installed["env"])
    for line in lines:
        cmd = re.sub(r"\S+\.whl", str(installed["wheel"]), line)
        r = _run(_activate(installed["venv"]) + cmd, work, env, timeout=900, shell=True)
        # this CI machine is a VM without an IOMMU or GPU: certification fails (exit 1),
        # nothing may crash (exit 2 = bad input, 3 = internal error, 4/5 = pytest problems)
        assert r.returncode in (0, 1), (line, r.returncode, r.stdout[-2000:], r.stderr[-2000:])
        assert "Traceback" not in r.stdout + r.stderr, (line, r.stderr[-2000:])
        if line.startswith("pytest -m host"):
            doc = json.loads((work / "reports" / "verdict.json").read_text())
            layers = {r["layer"] for r in doc["results"]}
            assert {"iommu", "vfio", "persistence", "runtime", "reboot", "nri"} <= layers, layers
            assert doc["overall"] == "fail" and not doc["incomplete"]
            skips = {r["check"]: r["reason"] for r in doc["results"] if r["status"] == "skip"}
            assert "--allow-reboot" in skips["reboot.returned"]
            assert "--nri-probe" in skips["nri.events"]
            assert "what to fix" in r.stdout and "fix:" in r.stdout
            # the verdict is the last thing on screen (issue 19): nothing of pytest's after it
            assert r.stdout.rstrip().splitlines()[-1].startswith("overall: FAIL"), \
                r.stdout[-1500:]
            want = "lab" if "--profile lab" in line else "generic-nvidia-passthrough"
            assert doc["run"]["profile"] == want
    bundle = work / "node.json"
    assert bundle.stat().st_mode & 0o077 == 0, "bundles are private (0600)"


def test_commands_write_under_the_current_directory(installed) -> None:
    work = installed["base"] / "cwd-check"
    work.mkdir()
    kgc = str(installed["venv"] / "bin" / "kgc")
    env = installed["env"]
    r = _run([kgc, "certify", "-m", "iommu"], work, env)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert (work / "reports" / "verdict.json").is_file()
    assert (work / "reports" / "junit.xml").is_file()
    site = installed["venv"] / "lib"
    assert not list(site.rglob("verdict.json")), "reports leaked into the venv"
    r = _run([kgc, "profile", "check", "lab"], work, env)
    assert r.returncode == 0 and "ok" in r.stdout
    r = _run([kgc, "certify", "-m", "iommu", "--profile",
              str(REPO / "profiles" / "lab.yaml")], work, env)  # space form, absolute path
    doc = json.loads((work / "reports" / "verdict.json").read_text())
    assert r.returncode == 1 and doc["run"]["profile"] == "lab"
    assert {x["layer"] for x in doc["results"]} == {"iommu"}, "collected the wrong rootdir"


def test_report_without_allure_says_how_to_install_it_not_npm_in_site_packages(installed):
    work = installed["base"] / "report-check"
    work.mkdir()
    env = dict(installed["env"])
    env["PATH"] = f"{installed['venv'] / 'bin'}:/usr/bin:/bin"  # no allure on this PATH
    kgc = str(installed["venv"] / "bin" / "kgc")
    _run([kgc, "certify", "-m", "iommu"], work, env)
    r = _run([kgc, "report"], work, env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "npm install --global allure@" in r.stderr and "site-packages" not in r.stderr


def test_product_commands_import_no_lab(installed) -> None:
    work = installed["base"] / "imports"
    work.mkdir()
    py = str(installed["venv"] / "bin" / "python")
    code = (
        "import sys, contextlib, io\n"
        "from kgc import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['snapshot', '-o', 'b.json'])\n"
        "    cli.main(['evaluate', 'b.json'])\n"
        "    cli.main(['checks'])\n"
        "    cli.main(['profile', 'check', 'lab'])\n"
        "import kgc.plugin\n"
        "print(sorted(m for m in sys.modules if m.startswith('kgc_lab')))\n"
    )
    r = _run([py, "-c", code], work, installed["env"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_the_wheel_ships_the_certification_rbac(installed) -> None:
    """The cluster path from the wheel alone: `kgc rbac certify` prints the role the
    README's cluster block applies (package data, the same bytes as the checkout's file),
    and `kgc kubeconfig` is there (its bad input is one line, exit 2)."""
    kgc = str(installed["venv"] / "bin" / "kgc")
    for role, name in (("certify", "kgc-certify.yaml"),
                       ("certify-namespaced", "kgc-certify-namespaced.yaml")):
        r = _run([kgc, "rbac", role], installed["empty"], installed["env"])
        assert r.returncode == 0, r.stderr
        assert r.stdout == (REPO / "deploy" / "rbac" / name).read_text()
    r = _run([kgc, "kubeconfig", "--service-account", "no-slash", "-o", "x.kubeconfig"],
             installed["empty"], installed["env"])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (installed["empty"] / "x.kubeconfig").exists()


def test_the_tree_is_layer_then_check_from_the_venv(installed) -> None:
    """A kubeconfig inside the venv (an ancestor shared with the installed suites) made
    pytest's rootdir the venv: the report's tree read venv > lib > python3.11 >
    site-packages > kgc > … . Now every result sits under its card layer, and `kgc
    certify`'s test ids start at the layer."""
    work = installed["base"] / "tree"
    work.mkdir()
    kc = installed["venv"] / "kgc-test.kubeconfig"
    shutil.copy(REPO / "tests" / "data" / "kubeconfig-unreachable.yaml", kc)
    for cmd in ([str(installed["venv"] / "bin" / "pytest"), "-m", "iommu"],
                [str(installed["venv"] / "bin" / "kgc"), "certify", "-m", "iommu"]):
        r = _run([*cmd, "--kubeconfig", str(kc)], work, installed["env"])
        assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
        paths = {tuple(json.loads(f.read_text()).get("titlePath") or ())
                 for f in (work / "reports" / "allure-results").glob("*-result.json")}
        assert paths == {("1. Host IOMMU",)}, paths
    doc = json.loads((work / "reports" / "verdict.json").read_text())
    assert all(x["test"].startswith("iommu/") for x in doc["results"]), doc["results"][0]


# installs the fleet extra into the shared venv: keep it the module's last test
def test_readme_many_nodes_runs_with_the_fleet_extra(installed) -> None:
    """`pip install 'WHEEL[fleet]'` brings pytest-xdist, which the README's many-nodes
    command (`-n 4 --dist loadgroup`) needs (the base install does not: the fixture's
    record, judged by the wheel-contents test). The block's lines verbatim, in the node
    block's venv as the README runs them, but for the wheel's path and the nodes (this
    machine, local://, here: no SSH hosts in CI)."""
    lines = _readme_block("many-nodes")
    env = installed["env"]
    work = installed["base"] / "many-nodes"
    work.mkdir()
    for line in lines:
        cmd = re.sub(r"[\w.-]+\.whl", str(installed["wheel"]), line)
        cmd = re.sub(r"--hosts \S+", "--hosts local://", cmd)
        r = _run(_activate(installed["venv"]) + cmd, work, env, timeout=900, shell=True)
        assert r.returncode in (0, 1), (line, r.stdout[-2000:], r.stderr[-2000:])
        assert "Traceback" not in r.stdout + r.stderr
        if line.startswith("pytest"):
            assert "4 workers" in r.stdout, r.stdout[-2000:]  # xdist really ran it
            doc = json.loads((work / "reports" / "verdict.json").read_text())
            assert {x["layer"] for x in doc["results"]} >= {"iommu", "vfio", "runtime"}
