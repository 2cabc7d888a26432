"""``kgc node-run`` against the partial host tree the fleet pod really gets: the mounts of
:func:`kgc.fleet.manifests.fleet_daemonset` (its hostPath volumes, masks and scratch
volume) rebuilt from this machine's own root in a private mount namespace, and judged live
under chroot. Compared with the same run over the whole root, every check gives the same
verdict, except where the evidence is one the pod deliberately does not mount
(``NOT_MOUNTED``) — and then the reason names it and it is not a pass. The masked paths
read empty and ``/var`` is not there."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kgc.fleet import manifests as fm
from kgc.fleet import protocol

pytestmark = [pytest.mark.slow]


def tree_script(tree: Path) -> str:
    """Shell lines that lay the fleet pod's /host mounts out under ``tree``."""
    spec = fm.fleet_daemonset()["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    lines = ["set -e"]
    for m in spec["containers"][0]["volumeMounts"]:
        if not m["mountPath"].startswith(fm.HOST_ROOT + "/"):
            continue
        dest = shlex.quote(str(tree) + m["mountPath"][len(fm.HOST_ROOT):])
        v = vols[m["name"]]
        hp = v.get("hostPath")
        if hp and hp["type"] == "Directory":
            lines += [f"mkdir -p {dest}", f"mount --rbind {hp['path']} {dest}",
                      f"mount -o remount,bind,ro {dest}"]
        elif hp:  # a file (or /dev/null over a masked file): only where the node has it
            lines += [f"if [ -e {dest} ] || [ {hp['type']} = File ]; then "
                      f"mkdir -p $(dirname {dest}); [ -e {dest} ] || touch {dest}; "
                      f"mount --bind {hp['path']} {dest}; mount -o remount,bind,ro {dest}; fi"]
        elif "emptyDir" in v and m.get("readOnly"):  # a mask: a node without it stops the pod
            lines += [f"if [ -d {dest} ]; then mount -t tmpfs -o ro,size=4k tmpfs {dest}; fi"]
        else:
            lines += [f"mkdir -p {dest}", f"mount -t tmpfs -o size=64m tmpfs {dest}"]
    return "\n".join(lines)


def node_run(tmp: Path, whole: bool) -> tuple[str, dict[str, Any], str]:
    tree, rep = tmp / "host", tmp / "report"
    tree.mkdir()
    setup = (f"mount --rbind / {tree} && mount -o remount,bind,ro {tree}" if whole
             else tree_script(tree))
    probe = "" if whole else (
        f"; echo PROBE shadow=$(wc -c < {tree}/etc/shadow 2>/dev/null || echo none) "
        f"var_lib=$([ -e {tree}/var/lib ] && echo yes || echo no)")
    kgc = [sys.executable, "-m", "kgc.cli", "node-run", "--host-root", str(tree),
           "--mode", "job", "--no-idle", "--report-dir", str(rep), "--profile", "lab",
           "--", "-q"]
    script = f"{setup}{probe}\n{shlex.join(kgc)}"
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "KGC_NODE_NAME": "partial-node"})
    run = protocol.parse_node_log(p.stdout)
    assert run.done and run.verdict is not None, p.stdout[-3000:] + p.stderr[-2000:]
    assert run.mode == "live" and run.node == "partial-node" and run.host.get("boot_id")
    return p.stdout, {r["check"]: r for r in run.verdict["results"]}, p.stderr


@pytest.mark.lab  # root and a private mount namespace: the lab tier
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root and unshare (a private mount namespace)")
def test_node_run_judges_the_partial_tree_like_the_whole_root(tmp_path: Path) -> None:
    (tmp_path / "part").mkdir()
    (tmp_path / "whole").mkdir()
    out, part, _ = node_run(tmp_path / "part", whole=False)
    _, whole, _ = node_run(tmp_path / "whole", whole=True)
    probe = next(ln for ln in out.splitlines() if ln.startswith("PROBE"))
    assert "var_lib=no" in probe and ("shadow=0" in probe or "shadow=none" in probe), probe
    assert set(part) == set(whole)
    for cid, r in part.items():
        w = whole[cid]
        if r["status"] == w["status"]:
            continue
        # only evidence the pod does not mount on purpose may differ: the reason names it,
        # and it is never a pass
        assert any(p in r["reason"] for p in fm.NOT_MOUNTED), (cid, r["reason"], w["reason"])
        assert r["status"] != "pass", (cid, r["status"], w["status"])
    print(json.dumps({c: (part[c]["status"], whole[c]["status"]) for c in part}))
