"""Cluster lab: a real Kubernetes control plane with simulated (kwok) GPU nodes and KEDA.

``kgc lab cluster up | down | status``. Binaries come from
``scripts/bootstrap.d/30-cluster.sh`` (built from the Go modules under ``lab/cluster/go/``)
and live in ``${KGC_CACHE:-~/.cache/kgc}/cluster/bin``. A run directory (default
``${KGC_CACHE}/cluster/run``) holds the generated PKI, kubeconfigs, logs, etcd data and
``state.json`` listing every process started (pid, binary, ports) so that ``down`` can stop
them all — also after a failed ``up``.

Components, all on 127.0.0.1 with ports chosen at start:
etcd, kube-apiserver (authz Node,RBAC; admission incl. RuntimeClass, ResourceQuota,
LimitRanger), kube-controller-manager, kube-scheduler, kwok (nodes and pods simulated
through stages), a metric HTTP endpoint (``kgc.lab.metric_server``), the KEDA operator and
the KEDA metrics API server (registered as ``v1beta1.external.metrics.k8s.io``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_delay,
    wait_fixed,
)

from kgc.core.profile import ClusterProfile, ProfileError, load_profile, profiles_dir
from kgc.lab import cluster_pki

LAB_PROFILE = "lab"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
KEDA_NAMESPACE = "keda"
KEDA_APISERVICE = "v1beta1.external.metrics.k8s.io"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_NODE_LABEL = "kgc.io/gpu"
STATE_VERSION = 1


class LabError(Exception):
    """The lab could not be brought up; the message names the component and its log."""


# --------------------------------------------------------------------------- paths


def cache_dir() -> Path:
    return Path(os.environ.get("KGC_CACHE") or Path.home() / ".cache" / "kgc") / "cluster"


def default_run_dir() -> Path:
    return Path(os.environ.get("KGC_CLUSTER_RUN_DIR") or cache_dir() / "run")


@dataclass(frozen=True)
class Binaries:
    root: Path

    @property
    def etcd(self) -> Path:
        return self.root / "etcd"

    @property
    def apiserver(self) -> Path:
        return self.root / "kube" / "kube-apiserver"

    @property
    def controller_manager(self) -> Path:
        return self.root / "kube" / "kube-controller-manager"

    @property
    def scheduler(self) -> Path:
        return self.root / "kube" / "kube-scheduler"

    @property
    def kwok(self) -> Path:
        return self.root / "kwok" / "kwok"

    @property
    def keda_operator(self) -> Path:
        return self.root / "keda" / "operator"

    @property
    def keda_adapter(self) -> Path:
        return self.root / "keda" / "adapter"

    def missing(self, keda: bool = True) -> list[Path]:
        need = [self.etcd, self.apiserver, self.controller_manager, self.scheduler, self.kwok]
        if keda:
            need += [self.keda_operator, self.keda_adapter]
        return [p for p in need if not os.access(p, os.X_OK)]


def binaries() -> Binaries:
    return Binaries(Path(os.environ.get("KGC_CLUSTER_BIN") or cache_dir() / "bin"))


def keda_crd_dir() -> Path:
    return cache_dir() / "keda-crds"


def kwok_crd_dir() -> Path:
    return cache_dir() / "kwok-crds"


def kwok_stage_dir() -> Path:
    return cache_dir() / "kwok-stages"


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    def component_kubeconfig(self, stem: str) -> Path:
        return self.root / f"kubeconfig-{stem}"


# --------------------------------------------------------------------------- state


def read_state(paths: RunPaths) -> dict[str, Any] | None:
    try:
        return json.loads(paths.state.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        raise LabError(f"{paths.state}: corrupt state file ({exc}); remove it after "
                       "checking no lab process is left (ps -ef | grep kgc)") from None


def write_state(paths: RunPaths, state: dict[str, Any]) -> None:
    tmp = paths.state.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.replace(paths.state)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening_ports() -> dict[int, set[int]]:
    """Listening TCP ports on this host (from /proc/net/tcp{,6}) -> socket inodes."""
    out: dict[int, set[int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A":
                port = int(cols[1].rsplit(":", 1)[1], 16)
                out.setdefault(port, set()).add(int(cols[9]))
    return out


def pid_alive(pid: int, exe: str | None = None) -> bool:
    """True when ``pid`` runs and (if given) its command line starts with ``exe``."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False
    if exe is None:
        return True
    return bool(cmdline) and cmdline[0].decode(errors="replace") == exe


# --------------------------------------------------------------------------- manifests


def node_manifests(cluster: ClusterProfile) -> list[dict[str, Any]]:
    lab = cluster.lab
    nodes = []
    for i in range(lab.gpu_nodes + lab.cpu_nodes):
        gpu = i < lab.gpu_nodes
        name = f"kgc-gpu-{i}" if gpu else f"kgc-cpu-{i - lab.gpu_nodes}"
        capacity = {"cpu": lab.node_cpu, "memory": lab.node_memory, "pods": lab.node_pods}
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            GPU_NODE_LABEL: "true" if gpu else "false",
        }
        if gpu and cluster.gpu_resources:
            # GPU nodes alternate between the profile's resource names, as a real fleet
            # exposes either the container stack (nvidia.com/gpu) or passthrough (pgpu).
            resource = cluster.gpu_resources[i % len(cluster.gpu_resources)]
            capacity[resource] = str(lab.gpus_per_node)
            labels["kgc.io/gpu-resource"] = resource.replace("/", "_")
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": labels,
                },
                "spec": {},
                "status": {"capacity": capacity, "allocatable": dict(capacity)},
            }
        )
    return nodes


def runtime_class_manifests(cluster: ClusterProfile) -> list[dict[str, Any]]:
    lab = cluster.lab
    return [
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": cluster.runtime_class},
            "handler": cluster.runtime_class,
            "overhead": {
                "podFixed": {"cpu": lab.kata_overhead_cpu, "memory": lab.kata_overhead_memory}
            },
        },
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": cluster.baseline_runtime_class},
            "handler": cluster.baseline_runtime_class,
        },
    ]


_SANDBOX_TEMPLATE = """\
{{ $now := Now }}
conditions:
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: PodReadyToStartContainers
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  message: 'containers with unready status: [{{ range .spec.containers }} {{ .name }} {{ end }}]'
  reason: ContainersNotReady
  status: "False"
  type: Ready
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  message: 'containers with unready status: [{{ range .spec.containers }} {{ .name }} {{ end }}]'
  reason: ContainersNotReady
  status: "False"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    waiting:
      reason: ContainerCreating
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Pending
"""

_READY_TEMPLATE = """\
{{ $now := Now }}
conditions:
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""


def kwok_stages(cluster: ClusterProfile) -> list[dict[str, Any]]:
    """Pod stages: sandbox (delay per runtime class) -> PodReadyToStartContainers, then
    containers start -> Ready. Node and deletion stages come from kwok's own set."""
    lab = cluster.lab
    rc = cluster.runtime_class

    def sandbox(name: str, op: str, delay_ms: int) -> dict[str, Any]:
        return {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": name},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {
                    "matchExpressions": [
                        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                        {"key": ".status.podIP", "operator": "DoesNotExist"},
                        {"key": ".spec.runtimeClassName", "operator": op, "values": [rc]},
                    ]
                },
                "delay": {"durationMilliseconds": delay_ms},
                "next": {
                    "event": {
                        "type": "Normal",
                        "reason": "SandboxReady",
                        "message": f"sandbox ready after simulated {delay_ms} ms ({name})",
                    },
                    "statusTemplate": _SANDBOX_TEMPLATE,
                },
            },
        }

    ready = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "kgc-pod-containers-ready"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
                    {
                        "key": ".status.conditions.[]"
                        ' | select( .type == "PodReadyToStartContainers" ) | .status',
                        "operator": "In",
                        "values": ["True"],
                    },
                    {
                        "key": ".status.containerStatuses.[].state.running.startedAt",
                        "operator": "DoesNotExist",
                    },
                ]
            },
            "delay": {"durationMilliseconds": lab.container_start_delay_ms},
            "next": {
                "event": {"type": "Normal", "reason": "Started", "message": "Started container"},
                "statusTemplate": _READY_TEMPLATE,
            },
        },
    }
    return [
        sandbox("kgc-pod-sandbox-kata", "In", lab.kata_sandbox_delay_ms),
        sandbox("kgc-pod-sandbox-other", "NotIn", lab.runc_sandbox_delay_ms),
        ready,
    ]


def keda_manifests(adapter_port: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "keda-metrics-apiserver", "namespace": KEDA_NAMESPACE},
            # ExternalName: the aggregator dials <externalName>:<APIService port>, i.e. the
            # adapter on loopback (Endpoints may not carry loopback addresses).
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": KEDA_APISERVICE},
            "spec": {
                "service": {
                    "name": "keda-metrics-apiserver",
                    "namespace": KEDA_NAMESPACE,
                    "port": adapter_port,
                },
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "insecureSkipTLSVerify": True,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    ]


# --------------------------------------------------------------------------- processes


@dataclass
class Proc:
    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM me when the parent dies (Linux prctl)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Lab:
    """One lab instance bound to a run directory."""

    def __init__(
        self,
        run_dir: Path | None = None,
        cluster: ClusterProfile | None = None,
        bins: Binaries | None = None,
        keda: bool = True,
        timeout_s: float = 120.0,
        die_with_parent: bool = False,
    ) -> None:
        self.paths = RunPaths(Path(run_dir) if run_dir else default_run_dir())
        self.cluster = cluster or lab_cluster_profile()
        self.bins = bins or binaries()
        self.keda = keda
        self.timeout_s = timeout_s
        # Test fixtures set this: the kernel then stops the lab's processes when the test
        # process dies without running its teardown (SIGKILL, OOM). The CLI does not: its
        # processes must outlive `kgc lab cluster up`.
        self.die_with_parent = die_with_parent
        self.state: dict[str, Any] = {}
        self._say: Callable[[str], None] = lambda _m: None

    # ---- state helpers
    def _save(self) -> None:
        write_state(self.paths, self.state)

    def _start(self, proc: Proc) -> subprocess.Popen[bytes]:
        proc.log.parent.mkdir(parents=True, exist_ok=True)
        with open(proc.log, "ab") as log:
            env = {**os.environ, **proc.env}
            p = subprocess.Popen(  # noqa: S603 - argv built from our own paths
                proc.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=self.paths.root,
                preexec_fn=_die_with_parent if self.die_with_parent else None,  # noqa: PLW1509
            )
        proc.popen = p
        self.state["processes"].append(
            {"name": proc.name, "pid": p.pid, "exe": proc.argv[0], "log": str(proc.log)}
        )
        self._save()
        self._say(f"started {proc.name} (pid {p.pid})")
        return p

    def _wait(self, what: str, probe: Callable[[], bool], procs: list[Proc],
              timeout: float | None = None) -> None:
        """Wait until ``probe()`` is true; fail fast when one of ``procs`` exits."""

        class _NotYet(Exception):
            pass

        def attempt() -> None:
            for pr in procs:
                if pr.popen is not None and pr.popen.poll() is not None:
                    raise LabError(
                        f"{pr.name} exited with code {pr.popen.returncode} while waiting for "
                        f"{what}; log {pr.log}:\n{_log_tail(pr.log)}"
                    )
            try:
                ok = probe()
            except (OSError, ssl.SSLError, urllib.error.URLError, ValueError) as exc:
                raise _NotYet(str(exc)) from exc
            except Exception as exc:  # noqa: BLE001 - kubernetes client raises ApiException etc.
                raise _NotYet(f"{type(exc).__name__}: {exc}") from exc
            if not ok:
                raise _NotYet(what)

        try:
            for att in Retrying(
                stop=stop_after_delay(timeout or self.timeout_s),
                wait=wait_fixed(0.25),
                retry=retry_if_exception_type(_NotYet),
                reraise=False,
            ):
                with att:
                    attempt()
        except RetryError as exc:
            last = exc.last_attempt.exception()
            logs = "; ".join(f"{p.name}: {p.log}" for p in procs)
            raise LabError(f"timed out waiting for {what} ({last}); logs: {logs}") from None

    # ---- HTTP probes
    def _https_ok(self, url: str, ca: Path | None = None, cert: tuple[Path, Path] | None = None,
                  expect: bytes = b"ok") -> bool:
        ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()  # noqa: S323
        if cert:
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        with urllib.request.urlopen(url, context=ctx, timeout=3) as r:  # noqa: S310
            return r.status == 200 and expect in r.read()

    @staticmethod
    def _http_ok(url: str, expect: bytes) -> bool:
        with urllib.request.urlopen(url, timeout=3) as r:  # noqa: S310
            return r.status == 200 and expect in r.read()

    # ---- up
    def up(self, say: Callable[[str], None] | None = None) -> dict[str, Any]:
        self._say = say or (lambda _m: None)
        missing = self.bins.missing(keda=self.keda)
        if missing:
            raise LabError(
                "cluster lab binaries missing: " + ", ".join(map(str, missing))
                + " — run scripts/bootstrap.d/30-cluster.sh"
            )
        old = read_state(self.paths)
        if old and any(pid_alive(p["pid"], p["exe"]) for p in old.get("processes", [])):
            raise LabError(f"a lab is already running from {self.paths.root} "
                           "(kgc lab cluster status / down)")
        if old:
            down(self.paths.root)
        t0 = time.monotonic()
        root = self.paths.root
        root.mkdir(parents=True, exist_ok=True)
        for sub in (self.paths.pki, self.paths.etcd_data, self.paths.logs):
            shutil.rmtree(sub, ignore_errors=True)
        self.paths.logs.mkdir()
        self.state = {
            "version": STATE_VERSION,
            "run_dir": str(root),
            "phase": "starting",
            "started": time.time(),
            "processes": [],
            "ports": {},
        }
        self._save()
        for attempt in (1, 2):
            try:
                self._up(t0)
                break
            except LabError as exc:
                self.state["phase"] = "failed"
                self._save()
                down(root)
                # A free port can be taken by another process between choosing and
                # binding it: choose new ports once.
                if attempt == 2 or "address already in use" not in str(exc):
                    raise
                self._say("a chosen port was taken meanwhile; retrying with new ports")
                shutil.rmtree(self.paths.etcd_data, ignore_errors=True)
                shutil.rmtree(self.paths.pki, ignore_errors=True)
                self.state.update(phase="starting", processes=[], ports={})
                self._save()
            except BaseException:
                self.state["phase"] = "failed"
                self._save()
                down(root)
                raise
        return self.state

    def _up(self, t0: float) -> None:
        paths, bins, lab = self.paths, self.bins, self.cluster.lab
        ports = {k: free_port() for k in (
            "etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kwok",
            "keda_metrics", "keda_probe", "keda_grpc", "keda_adapter")}
        self.state["ports"] = ports
        self._save()
        pki = cluster_pki.generate(paths.pki, SERVICE_IP)
        server = f"https://127.0.0.1:{ports['apiserver']}"
        cluster_pki.kubeconfig(pki, server, "admin", paths.kubeconfig)
        kcfg = {stem: cluster_pki.kubeconfig(pki, server, stem, paths.component_kubeconfig(stem))
                for stem in ("controller-manager", "scheduler", "kwok", "keda")}
        self.state.update(kubeconfig=str(paths.kubeconfig), server=server)
        self._save()
        logs = paths.logs

        etcd_url = f"http://127.0.0.1:{ports['etcd']}"
        peer_url = f"http://127.0.0.1:{ports['etcd_peer']}"
        etcd = Proc("etcd", [
            str(bins.etcd), "--name=kgc", f"--data-dir={paths.etcd_data}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=kgc={peer_url}", "--unsafe-no-fsync",
            "--log-level=warn", "--quota-backend-bytes=1073741824",
        ], {"ETCD_UNSUPPORTED_ARCH": ""}, logs / "etcd.log")
        self._start(etcd)
        self._wait("etcd /health", lambda: self._http_ok(f"{etcd_url}/health", b"true"), [etcd])

        apiserver = Proc("kube-apiserver", [
            str(bins.apiserver),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", f"--secure-port={ports['apiserver']}",
            "--advertise-address=127.0.0.1", f"--cert-dir={paths.root / 'apiserver-certs'}",
            f"--tls-cert-file={pki.apiserver.cert}", f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,"
            "RuntimeClass,ResourceQuota,NodeRestriction,DefaultTolerationSeconds,Priority",
            f"--requestheader-client-ca-file={pki.front_proxy_ca.cert}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.front_proxy_client.cert}",
            f"--proxy-client-key-file={pki.front_proxy_client.key}",
            # Logs/exec go to the node's kubelet endpoint: kwok's server on 127.0.0.1.
            f"--kubelet-client-certificate={pki.client('kubelet-client').cert}",
            f"--kubelet-client-key={pki.client('kubelet-client').key}",
            "--kubelet-preferred-address-types=InternalIP",
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
        ], {}, logs / "kube-apiserver.log")
        self._start(apiserver)
        admin = (pki.client("admin").cert, pki.client("admin").key)
        self._wait(
            "kube-apiserver /readyz",
            lambda: self._https_ok(f"{server}/readyz", ca=pki.ca.cert, cert=admin),
            [etcd, apiserver],
        )
        self._say(f"kube-apiserver ready at {server} ({time.monotonic() - t0:.1f} s)")
        self.state["api_ready_s"] = round(time.monotonic() - t0, 2)
        self._save()

        api = _api_client(paths.kubeconfig)
        # kwok watches its Logs/ClusterLogs CRDs from the start: install them first.
        self._create_crds(api, kwok_crd_dir(), "kwok CRDs")

        common_kube = ["--bind-address=127.0.0.1", "--leader-elect=false", "--v=1"]
        kcm = Proc("kube-controller-manager", [
            str(bins.controller_manager), *common_kube,
            f"--secure-port={ports['controller_manager']}",
            f"--cert-dir={paths.root / 'kcm-certs'}",
            f"--kubeconfig={kcfg['controller-manager']}",
            f"--authentication-kubeconfig={kcfg['controller-manager']}",
            f"--authorization-kubeconfig={kcfg['controller-manager']}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca.cert}",
            f"--cluster-signing-cert-file={pki.ca.cert}",
            f"--cluster-signing-key-file={pki.ca.key}",
            f"--horizontal-pod-autoscaler-sync-period={lab.hpa_sync_period_s}s",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
        ], {}, logs / "kube-controller-manager.log")
        sched = Proc("kube-scheduler", [
            str(bins.scheduler), *common_kube,
            f"--secure-port={ports['scheduler']}",
            f"--cert-dir={paths.root / 'scheduler-certs'}",
            f"--kubeconfig={kcfg['scheduler']}",
            f"--authentication-kubeconfig={kcfg['scheduler']}",
            f"--authorization-kubeconfig={kcfg['scheduler']}",
        ], {}, logs / "kube-scheduler.log")
        self._start(kcm)
        self._start(sched)

        stages = paths.root / "kwok.yaml"
        self._write_kwok_config(stages)
        kwok = Proc("kwok", [
            str(bins.kwok), f"--kubeconfig={kcfg['kwok']}", f"--config={stages}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            # Nodes report 127.0.0.1:<kwok port> as their kubelet endpoint, so the
            # apiserver's logs/exec requests reach kwok's server (TLS, lab CA).
            f"--server-address=127.0.0.1:{ports['kwok']}",
            "--node-ip=127.0.0.1", f"--node-port={ports['kwok']}",
            f"--tls-cert-file={pki.kwok_serving.cert}",
            f"--tls-private-key-file={pki.kwok_serving.key}",
            "--enable-crds=Logs,ClusterLogs",
            "--cidr=10.244.0.0/16",
        ], {}, logs / "kwok.log")
        self._start(kwok)

        metric_port_file = paths.root / "metric.port"
        metric_port_file.unlink(missing_ok=True)
        metric = Proc("metric-server", [
            sys.executable, "-m", "kgc.lab.metric_server", f"--port-file={metric_port_file}",
        ], {}, logs / "metric-server.log")
        self._start(metric)

        self._create_objects(api, ports)
        self._wait("metric endpoint", metric_port_file.exists, [metric], timeout=30)
        ports["metric"] = int(metric_port_file.read_text())
        self.state["metric_url"] = f"http://127.0.0.1:{ports['metric']}/metric"
        self._save()

        kc = [kcm, sched]
        self._wait("kube-controller-manager /healthz", lambda: self._https_ok(
            f"https://127.0.0.1:{ports['controller_manager']}/healthz"), kc)
        self._wait("kube-scheduler /healthz", lambda: self._https_ok(
            f"https://127.0.0.1:{ports['scheduler']}/healthz"), kc)
        self._wait("kwok /healthz", lambda: self._https_ok(
            f"https://127.0.0.1:{ports['kwok']}/healthz", ca=pki.ca.cert), [kwok])
        node_names = [n["metadata"]["name"] for n in node_manifests(self.cluster)]
        self._wait(f"nodes Ready and untainted ({', '.join(node_names)})",
                   lambda: _nodes_ready(api, node_names), [kwok])
        self._wait("default ServiceAccount", lambda: _has_default_sa(api), [kcm])

        if self.keda:
            keda_env = {
                "KUBECONFIG": str(kcfg["keda"]),
                "WATCH_NAMESPACE": "",
                "POD_NAMESPACE": KEDA_NAMESPACE,
                "KEDA_CLUSTER_OBJECT_NAMESPACE": KEDA_NAMESPACE,
                "KEDA_HTTP_DEFAULT_TIMEOUT": "3000",
            }
            operator = Proc("keda-operator", [
                str(bins.keda_operator),
                f"--metrics-bind-address=127.0.0.1:{ports['keda_metrics']}",
                f"--health-probe-bind-address=127.0.0.1:{ports['keda_probe']}",
                f"--metrics-service-bind-address=127.0.0.1:{ports['keda_grpc']}",
                f"--cert-dir={pki.keda_dir}", "--enable-cert-rotation=false",
                "--enable-webhook-patching=false", "--enable-apiservice-patching=false",
                f"--ca-dir={pki.keda_dir}", "--zap-log-level=info",
            ], keda_env, logs / "keda-operator.log")
            adapter = Proc("keda-adapter", [
                str(bins.keda_adapter),
                f"--secure-port={ports['keda_adapter']}", "--bind-address=127.0.0.1",
                f"--cert-dir={pki.keda_dir}",
                f"--tls-cert-file={pki.keda_dir / 'tls.crt'}",
                f"--tls-private-key-file={pki.keda_dir / 'tls.key'}",
                f"--metrics-service-address=127.0.0.1:{ports['keda_grpc']}",
                "--metrics-service-grpc-authority=keda-operator.keda.svc.cluster.local",
                f"--authentication-kubeconfig={kcfg['keda']}",
                f"--authorization-kubeconfig={kcfg['keda']}",
                f"--kubeconfig={kcfg['keda']}",
                f"--lister-kubeconfig={kcfg['keda']}",
                "--port=0",
            ], keda_env, logs / "keda-adapter.log")
            self._start(operator)
            self._start(adapter)
            self._wait("keda-operator /readyz", lambda: self._http_ok(
                f"http://127.0.0.1:{ports['keda_probe']}/readyz", b"ok"), [operator])
            self._wait(f"APIService {KEDA_APISERVICE} Available",
                       lambda: _apiservice_available(api, KEDA_APISERVICE), [operator, adapter])

        self.state["phase"] = "up"
        self.state["up_s"] = round(time.monotonic() - t0, 2)
        self._save()
        self._say(f"lab up in {self.state['up_s']} s; kubeconfig {paths.kubeconfig}")

    def _write_kwok_config(self, path: Path) -> None:
        docs: list[dict[str, Any]] = []
        stage_dir = kwok_stage_dir()
        for name in ("node-initialize.yaml", "node-heartbeat-with-lease.yaml", "pod-delete.yaml",
                     "pod-complete.yaml"):
            f = stage_dir / name
            if not f.exists():
                raise LabError(f"kwok stage {f} missing — run scripts/bootstrap.d/30-cluster.sh")
            docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
        docs.extend(kwok_stages(self.cluster))
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))

    def _create_crds(self, api: Any, crd_dir: Path, what: str) -> None:
        from kubernetes import client

        ext: Any = client.ApiextensionsV1Api(api)
        crds = sorted(crd_dir.glob("*.yaml"))
        if not crds:
            raise LabError(f"no {what} in {crd_dir} — run scripts/bootstrap.d/30-cluster.sh")
        names = []
        for f in crds:
            doc = yaml.safe_load(f.read_text())
            ext.create_custom_resource_definition(doc)
            names.append(doc["metadata"]["name"])
        self._wait(f"{what} Established", lambda: _crds_established(api, names), [])

    def _create_objects(self, api: Any, ports: dict[str, int]) -> None:
        from kubernetes import client

        core: Any = client.CoreV1Api(api)
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": KEDA_NAMESPACE}})
        node_api: Any = client.NodeV1Api(api)
        for rc in runtime_class_manifests(self.cluster):
            node_api.create_runtime_class(rc)
        for node in node_manifests(self.cluster):
            created = core.create_node(node)
            if not (created.status and created.status.capacity):
                core.patch_node_status(node["metadata"]["name"], {"status": node["status"]})
        if not self.keda:
            return
        self._create_crds(api, keda_crd_dir(), "KEDA CRDs")
        for m in keda_manifests(ports["keda_adapter"]):
            if m["kind"] == "Service":
                core.create_namespaced_service(KEDA_NAMESPACE, m)
            else:
                api_reg: Any = client.ApiregistrationV1Api(api)
                api_reg.create_api_service(m)


def _api_client(kubeconfig: Path) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(kubeconfig))


def _nodes_ready(api: Any, names: list[str]) -> bool:
    from kubernetes import client

    core: Any = client.CoreV1Api(api)
    nodes = {n.metadata.name: n for n in core.list_node().items}
    for name in names:
        node = nodes.get(name)
        conds = {c.type: c.status for c in (node.status.conditions or [])} if node else {}
        if conds.get("Ready") != "True":
            return False
        # node.kubernetes.io/not-ready stays until the node lifecycle controller has seen
        # the Ready condition; the lab sets no taints of its own.
        if node is not None and node.spec.taints:
            return False
    return True


def _has_default_sa(api: Any) -> bool:
    from kubernetes import client

    core: Any = client.CoreV1Api(api)
    sas = core.list_namespaced_service_account("default").items
    return any(sa.metadata.name == "default" for sa in sas)


def _crds_established(api: Any, names: list[str]) -> bool:
    from kubernetes import client

    ext: Any = client.ApiextensionsV1Api(api)
    for name in names:
        crd = ext.read_custom_resource_definition(name)
        conds = {c.type: c.status for c in (crd.status.conditions or [])}
        if conds.get("Established") != "True":
            return False
    return True


def _apiservice_available(api: Any, name: str) -> bool:
    from kubernetes import client

    reg: Any = client.ApiregistrationV1Api(api)
    svc = reg.read_api_service(name)
    conds = {c.type: c.status for c in (svc.status.conditions or [])}
    return conds.get("Available") == "True"


# --------------------------------------------------------------------------- down / status


def down(run_dir: Path | None = None, grace_s: float = 10.0) -> dict[str, Any]:
    """Stop every process recorded in the run directory's state; verify none is left and
    none of the lab's ports still listens. Returns a report dict."""
    paths = RunPaths(Path(run_dir) if run_dir else default_run_dir())
    state = read_state(paths)
    report: dict[str, Any] = {"run_dir": str(paths.root), "stopped": [], "left": [],
                              "listening": []}
    if not state:
        return report
    procs = list(reversed(state.get("processes", [])))
    # One at a time, newest first: the apiserver shuts down gracefully only while etcd is
    # still there (signalled together, its shutdown stalls for ~10 s).
    for p in procs:
        if pid_alive(p["pid"], p["exe"]):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p["pid"], signal.SIGTERM)
        if not _gone(p["pid"], p["exe"], grace_s):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p["pid"], signal.SIGKILL)
        report["stopped"].append({"name": p["name"], "pid": p["pid"]})
    for p in procs:
        if not _gone(p["pid"], p["exe"], 5.0):
            report["left"].append({"name": p["name"], "pid": p["pid"]})
    # Anything a component spawned stays in its process group (each was started in a new
    # session): kill and report stragglers there too.
    groups = {p["pid"] for p in procs}
    for pid in group_members(groups):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        if not _gone(pid, None, 5.0):
            report["left"].append({"name": "group member", "pid": pid})
    ports = set((state.get("ports") or {}).values())
    listening = listening_ports()
    report["listening"] = sorted(p for p in ports if p in listening and _owned_by(p, procs))
    if not report["left"]:
        state["phase"] = "down"
        state["stopped"] = time.time()
        write_state(paths, state)
    return report


def group_members(pgids: set[int]) -> list[int]:
    """Live processes whose process group is one of ``pgids``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields after the command: state, ppid, pgrp, ...
        if fields[0] != "Z" and int(fields[2]) in pgids:
            out.append(int(d.name))
    return out


def _gone(pid: int, exe: str | None, timeout: float) -> bool:
    """Wait (bounded) until ``pid`` has exited; reap it if it is our child."""

    def alive() -> bool:
        _reap(pid)
        return pid_alive(pid, exe)

    still = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(0.05),
        retry=retry_if_result(bool),
        retry_error_callback=lambda rs: rs.outcome.result() if rs.outcome else True,
    )(alive)
    return not still


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _owned_by(port: int, procs: list[dict[str, Any]]) -> bool:
    """Whether a listening ``port`` belongs to one of the lab's (recorded) pids — a port we
    chose may since have been taken by an unrelated process."""
    inodes = listening_ports().get(port, set())
    for p in procs:
        fd_dir = Path(f"/proc/{p['pid']}/fd")
        try:
            for fd in fd_dir.iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:[") and int(link[8:-1]) in inodes:
                        return True
        except OSError:
            continue
    return False


def status(run_dir: Path | None = None) -> dict[str, Any]:
    paths = RunPaths(Path(run_dir) if run_dir else default_run_dir())
    state = read_state(paths) or {}
    procs = [
        {**p, "alive": pid_alive(p["pid"], p["exe"])} for p in state.get("processes", [])
    ]
    up = state.get("phase") == "up" and bool(procs) and all(p["alive"] for p in procs)
    return {
        "run_dir": str(paths.root),
        "phase": state.get("phase", "down"),
        "up": up,
        "kubeconfig": state.get("kubeconfig", str(paths.kubeconfig)),
        "server": state.get("server"),
        "metric_url": state.get("metric_url"),
        "ports": state.get("ports", {}),
        "processes": procs,
        "api_ready_s": state.get("api_ready_s"),
        "up_s": state.get("up_s"),
    }


# --------------------------------------------------------------------------- helpers for tests


def set_metric(value: float, run_dir: Path | None = None) -> dict[str, Any]:
    url = status(run_dir)["metric_url"]
    if not url:
        raise LabError("the lab has no metric endpoint (is it up?)")
    req = urllib.request.Request(  # noqa: S310 - loopback URL from our own state
        url, data=json.dumps({"value": value}).encode(), method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=5) as r:  # noqa: S310
        return json.loads(r.read())


def cri_log(text: str, when: float | None = None) -> str:
    """Text as a CRI container log (what kwok, like the kubelet, serves): one
    ``<RFC3339Nano> stdout F <line>`` record per line."""
    import datetime as dt

    ts = dt.datetime.fromtimestamp(when if when is not None else time.time(), dt.UTC)
    stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
    return "".join(f"{stamp} stdout F {line}\n" for line in text.splitlines())


def serve_recorded_logs(
    api: Any,
    namespace: str,
    pod: str,
    logs_file: Path,
    containers: list[str] | None = None,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Make ``kubectl logs`` of a simulated pod return a recorded file (real evidence from
    ``fixtures/``), through kwok's ``Logs`` resource. The pod itself never ran: suites must
    treat such output as simulated (the lab profile sets ``cluster.simulated: true``)."""
    from kubernetes import client

    src = Path(logs_file).resolve()
    if not src.is_file():
        raise LabError(f"recorded evidence {src} not found")
    out_dir = RunPaths(Path(run_dir) if run_dir else default_run_dir()).root / "evidence"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{namespace}_{pod}.log"
    path.write_text(cri_log(src.read_text(errors="replace"), src.stat().st_mtime))
    log: dict[str, Any] = {"logsFile": str(path), "follow": False}
    if containers:
        log["containers"] = containers
    body = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Logs",
        "metadata": {"name": pod, "namespace": namespace,
                     "annotations": {"kgc.io/simulated": "recorded evidence"}},
        "spec": {"logs": [log]},
    }
    custom: Any = client.CustomObjectsApi(api)
    return custom.create_namespaced_custom_object(
        "kwok.x-k8s.io", "v1alpha1", namespace, "logs", body
    )


def lab_cluster_profile() -> ClusterProfile:
    try:
        # By path: resolve("lab") would pick the repo's lab/ directory when run from the root.
        return load_profile(profiles_dir() / f"{LAB_PROFILE}.yaml").cluster
    except ProfileError:
        return ClusterProfile()


@contextlib.contextmanager
def running(run_dir: Path | None = None, **kw: Any) -> Iterator[Lab]:
    lab = Lab(run_dir, **kw)
    try:
        lab.up()
        yield lab
    finally:
        down(lab.paths.root)


@contextlib.contextmanager
def certify_stage(work: Path) -> Iterator[list[str]]:
    """Stage for ``kgc lab certify``: bring the lab up under ``work``, yield the pytest
    arguments that point the cluster suites at it (lab profile, its kubeconfig), take it
    down afterwards. The suites find the run directory (metric endpoint, recorded logs)
    through ``KGC_CLUSTER_RUN_DIR``."""
    run_dir = Path(work) / "cluster-lab"
    lab = Lab(run_dir)
    state = lab.up(say=lambda m: print(f"[certify] cluster lab: {m}", flush=True))
    old = os.environ.get("KGC_CLUSTER_RUN_DIR")
    os.environ["KGC_CLUSTER_RUN_DIR"] = str(run_dir)
    try:
        suites = [
            str(p) for p in (profiles_dir().parent / "conformance").glob("*")
            if p.name in ("gpu", "sizing", "keda", "cluster") and p.is_dir()
        ]
        yield [
            "-m", "cluster", *(sorted(suites) or [str(profiles_dir().parent / "conformance")]),
            "--profile", str(profiles_dir() / f"{LAB_PROFILE}.yaml"),
            "--kubeconfig", state["kubeconfig"],
        ]
    finally:
        if old is None:
            os.environ.pop("KGC_CLUSTER_RUN_DIR", None)
        else:
            os.environ["KGC_CLUSTER_RUN_DIR"] = old
        down(run_dir)


# --------------------------------------------------------------------------- CLI


def _cmd_up(args: argparse.Namespace) -> int:
    cluster = load_profile(args.profile).cluster if args.profile else lab_cluster_profile()
    lab = Lab(args.run_dir, cluster=cluster, keda=not args.no_keda, timeout_s=args.timeout)
    try:
        st = lab.up(say=lambda m: print(f"kgc lab cluster: {m}", file=sys.stderr))
    except (LabError, ProfileError) as exc:
        print(f"kgc lab cluster up: FAILED: {exc}", file=sys.stderr)
        print("all processes started by this attempt were stopped", file=sys.stderr)
        return 1
    print(f"kubeconfig: {st['kubeconfig']}")
    print(f"server: {st['server']}")
    print(f"metric: {st.get('metric_url')}")
    print(f"export KUBECONFIG={st['kubeconfig']}")
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    rep = down(args.run_dir)
    for p in rep["stopped"]:
        print(f"stopped {p['name']} (pid {p['pid']})")
    if rep["left"] or rep["listening"]:
        print(f"kgc lab cluster down: still running {rep['left']}, ports still listening "
              f"{rep['listening']}", file=sys.stderr)
        return 1
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    st = status(args.run_dir)
    if args.json:
        print(json.dumps(st, indent=2, sort_keys=True))
    else:
        print(f"phase: {st['phase']} ({'up' if st['up'] else 'not up'})")
        print(f"kubeconfig: {st['kubeconfig']}")
        print(f"server: {st['server']}")
        print(f"metric: {st['metric_url']}")
        for p in st["processes"]:
            print(f"  {p['name']:<24} pid {p['pid']:<8} {'alive' if p['alive'] else 'stopped'}")
    return 0 if st["up"] else 3


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("cluster", help="Kubernetes control plane + kwok GPU nodes + KEDA")
    sub = p.add_subparsers(dest="cluster_cmd", required=True)
    up = sub.add_parser("up", help="start the lab (etcd, apiserver, kcm, scheduler, kwok, KEDA)")
    up.add_argument("--profile", default=None, help="profile name/path (default: lab)")
    up.add_argument("--no-keda", action="store_true", help="skip the KEDA operator/adapter")
    up.add_argument("--timeout", type=float, default=120.0, help="per-component wait (s)")
    down_p = sub.add_parser("down", help="stop every lab process")
    st = sub.add_parser("status", help="show state, kubeconfig path and processes")
    st.add_argument("--json", action="store_true")
    for sp in (up, down_p, st):
        sp.add_argument("--run-dir", type=Path, default=None,
                        help="run directory (default ${KGC_CACHE}/cluster/run)")
    up.set_defaults(func=_cmd_up)
    down_p.set_defaults(func=_cmd_down)
    st.set_defaults(func=_cmd_status)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kgc lab")
    register(ap.add_subparsers(dest="lab", required=True))
    args = ap.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
