"""``kgc node-run``: the fleet image's entry point — the node layers against a node's paths
mounted at ``--host-root`` (default ``/host``), the way kube-bench runs in a pod. The
fleet pod mounts only what the layers read (:data:`kgc.fleet.manifests.HOST_PATHS`: /usr,
/bin, /lib..., /etc, /boot, /sys, /dev, /run and five /proc files), a partial tree that is
enough for the chroot: its programs come from the node's /usr, /bin, /lib.

It runs ``pytest -m host`` over the installed suites with the target
``chroot://<host root>?node=<node>[&live=1]``: the batched collector runs under ``chroot``
in the node's root, so it reads the node's files and runs the node's own ``sh`` and
``containerd``, and every verdict names the node (``--node``, else ``$KGC_NODE_NAME`` — the
downward API's ``spec.nodeName`` —, else this host's name). When the host root holds a
running kernel's ``/proc`` (a pod on a live node) the target is live; otherwise it is an
offline tree (a mounted image) and the checks that need a running kernel skip saying so.

Then it prints the protocol of :mod:`kgc.fleet.protocol` (the node's name, the host's own
identity — boot id, machine id, host name read from the host root —, its mounts, pytest's
exit status, ``verdict.json`` between markers) for ``kgc fleet collect``, and by ``--mode``:

* ``daemonset`` (default): idles until SIGTERM (a DaemonSet's pods must not exit);
* ``job``: exits with the run's code (0 certified, 1 not, 2 bad input);
* ``sonobuoy``: copies the run's JUnit into ``$SONOBUOY_RESULTS_DIR`` (default
  /tmp/sonobuoy/results) as ``kgc-<node>.xml``, writes that path into the ``done`` file
  there (Sonobuoy's worker protocol), then idles.

A run that produced no ``verdict.json`` still says why (``KGC-ERROR``) and, for Sonobuoy,
leaves a JUnit with one errored test case: a node that could not be judged never reads as
a pass.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from kgc.core.policy import FILE_LAYERS
from kgc.core.profile import ProfileError, load_profile
from kgc.fleet import protocol
from kgc.fleet.manifests import HOST_ROOT, PROFILE, SONOBUOY_RESULTS
from kgc.plugin import suites_dir

MODES = ("daemonset", "job", "sonobuoy")
# a name a node may have (RFC 1123 subdomain); anything else is refused as bad input
_NODE_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class NodeRunError(Exception):
    """Bad input: one line, exit 2."""


def node_name(given: str | None) -> str:
    name = (given or os.environ.get("KGC_NODE_NAME") or platform.node() or "").strip()
    if not _NODE_RE.match(name):
        raise NodeRunError(f"node name {name[:80]!r} is not a Kubernetes node name "
                           "(give --node NAME, or set KGC_NODE_NAME from spec.nodeName)")
    return name


# what the host root says about the host it is (KGC-HOST): the running kernel's boot id (the
# node's kubelet reports the same in status.nodeInfo.bootID, which `kgc fleet collect`
# compares), the machine id and the host name (the pod's own are not the node's)
HOST_IDENTITY = {"boot_id": "proc/sys/kernel/random/boot_id", "machine_id": "etc/machine-id",
                 "hostname": "etc/hostname"}
_IDENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,252}$")


def host_identity(host_root: Path) -> dict[str, str]:
    """The host's identity as its root tells it (a value that is absent or not one plain
    word is left out: the collector then says it is missing)."""
    out = {}
    for key, rel in HOST_IDENTITY.items():
        try:
            text = (host_root / rel).read_text(errors="replace")[:300].strip()
        except OSError:
            continue
        if _IDENT_RE.match(text):
            out[key] = text
    return out


def host_line(ident: dict[str, str]) -> str:
    return " ".join([protocol.HOST, *(f"{k}={v}" for k, v in ident.items())])


def is_live(host_root: Path) -> bool:
    """A running kernel's procfs is mounted under the host root."""
    return (host_root / "proc" / "sys" / "kernel" / "osrelease").is_file()


def target_spec(host_root: Path, node: str, live: bool) -> str:
    path = urllib.parse.quote(str(host_root), safe="/")
    q = urllib.parse.urlencode({"node": node, **({"live": "1"} if live else {})})
    return f"chroot://{path}?{q}"


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts_under(root: Path, mountinfo: str) -> list[tuple[str, str]]:
    """(mount point, options) of every mount at or under ``root``, from mountinfo text."""
    top = str(root).rstrip("/") or "/"
    out = []
    for line in mountinfo.splitlines():
        f = line.split()
        if len(f) < 6:
            continue
        mp = _unescape(f[4])
        if mp == top or mp.startswith(top + "/"):
            out.append((mp.replace(" ", "\\040"), f[5]))
    return out


def junit_error(node: str, reason: str) -> str:
    """A JUnit document with one errored case: the node could not be judged."""
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            '<testsuites><testsuite name="kgc-node-run" tests="1" errors="1" failures="0" '
            'skipped="0">'
            f'<testcase classname="kgc.node-run" name={quoteattr(f"node-run [{node}]")}>'
            f'<error message={quoteattr(reason[:500])}>{escape(reason)}</error>'
            "</testcase></testsuite></testsuites>\n")


def sonobuoy_done(results_dir: Path, node: str, junit: str) -> Path:
    """Write the JUnit, then the ``done`` file naming it (Sonobuoy's worker protocol)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    out = results_dir / f"kgc-{node}.xml"
    out.write_text(junit)
    (results_dir / "done").write_text(str(out))  # the path, no newline
    return out


def idle() -> None:
    """Until SIGTERM (or SIGINT): a DaemonSet's pod must not exit."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()


def run(host_root: Path, node: str, profile: str, report_dir: Path, extra: Sequence[str],
        timeout_s: float, echo: bool = True) -> tuple[int, str]:
    """pytest -m host against the host root; returns (exit status, one-line error or '')."""
    live = is_live(host_root)
    spec = target_spec(host_root, node, live)
    print(f"{protocol.NODE} {node}", flush=True)
    print(host_line(host_identity(host_root)), flush=True)
    print(f"{protocol.MODE} {'live' if live else 'offline'}", flush=True)
    try:
        info = Path("/proc/self/mountinfo").read_text()
    except OSError:
        info = ""
    for mp, opts in mounts_under(host_root, info):
        print(f"{protocol.MOUNT} {mp} {opts}", flush=True)
    report_dir.mkdir(parents=True, exist_ok=True)
    verdict = report_dir / "verdict.json"
    verdict.unlink(missing_ok=True)
    # an offline tree (no running kernel under it) is judged like an image file: only the
    # layers that files decide (kgc.core.policy.FILE_LAYERS); the gate names the rest
    marker = "host" if live else "host and (" + " or ".join(FILE_LAYERS) + ")"
    if not live:
        print(f"kgc node-run: {host_root} has no running kernel's /proc: an offline tree, "
              f"judging only {', '.join(FILE_LAYERS)}", flush=True)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(suites_dir()),
           "-m", marker, "--hosts", spec, "--profile", profile,
           "--report-dir", str(report_dir), *extra]
    print(f"kgc node-run: {shlex.join(cmd)}", flush=True)
    try:
        proc = subprocess.run(cmd, cwd=report_dir, timeout=timeout_s, check=False,
                              stdout=None if echo else subprocess.DEVNULL,
                              stderr=subprocess.STDOUT if echo else subprocess.DEVNULL)
        rc = proc.returncode
        error = ""
    except subprocess.TimeoutExpired:
        rc, error = 3, f"the node layers did not finish within {timeout_s:g} s"
    except OSError as exc:
        rc, error = 3, f"could not start pytest: {exc}"
    print(f"{protocol.EXIT} {rc}", flush=True)
    if not error and not verdict.is_file():
        error = f"pytest exited {rc} without writing verdict.json (see the log above)"
    if error:
        print(f"{protocol.ERROR} {error}", flush=True)
        return rc, error
    print(protocol.BEGIN, flush=True)
    sys.stdout.write(verdict.read_text().rstrip("\n") + "\n")
    print(protocol.END, flush=True)
    return rc, ""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="kgc node-run",
        description="run the node layers against a node's root mounted in a container "
                    "(the fleet image's entry point); extra pytest arguments after --")
    ap.add_argument("--host-root", default=HOST_ROOT,
                    help="where the node's root is mounted (read-only), default /host")
    ap.add_argument("--node", default=None,
                    help="the node's name in verdicts (default $KGC_NODE_NAME, the hostname)")
    ap.add_argument("--profile", default=PROFILE)
    ap.add_argument("--mode", choices=MODES, default="daemonset")
    ap.add_argument("--report-dir", default="/var/lib/kgc/report")
    ap.add_argument("--results-dir", default=None,
                    help="sonobuoy mode: where the JUnit and the done file go "
                         f"(default $SONOBUOY_RESULTS_DIR, else {SONOBUOY_RESULTS})")
    ap.add_argument("--no-idle", action="store_true",
                    help="exit after the run in every mode (default: daemonset and sonobuoy "
                         "idle until SIGTERM so the DaemonSet does not restart the pod)")
    ap.add_argument("--timeout", type=float, default=1800.0, metavar="S",
                    help="give up on the node layers after S seconds (default 1800)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, extra = args[:at], args[at + 1:]
    a = build_parser().parse_args(args)
    try:
        node = node_name(a.node)
        root = Path(a.host_root)
        if not root.is_dir() or not (root / "bin").exists() and not (root / "usr").is_dir():
            raise NodeRunError(f"--host-root {root}: not a node's root filesystem (no /usr "
                               "or /bin under it): mount the node's paths there read-only "
                               "(kgc fleet manifests)")

        try:
            load_profile(a.profile)
        except ProfileError as exc:
            raise NodeRunError(str(exc).replace("\n", " ")) from None
    except NodeRunError as exc:
        print(f"{protocol.ERROR} {exc}", flush=True)
        print(f"kgc node-run: {exc}", file=sys.stderr)
        return 2
    rc, error = run(root, node, a.profile, Path(a.report_dir), extra, a.timeout)
    if a.mode == "sonobuoy":
        rdir = Path(a.results_dir or os.environ.get("SONOBUOY_RESULTS_DIR") or SONOBUOY_RESULTS)
        junit = Path(a.report_dir) / "junit.xml"
        text = junit.read_text() if not error and junit.is_file() else junit_error(
            node, error or "the run wrote no junit.xml")
        out = sonobuoy_done(rdir, node, text)
        print(f"kgc node-run: results for Sonobuoy: {out} (done file written)", flush=True)
    if a.mode == "job" or a.no_idle:
        return rc
    idle()
    return 0
