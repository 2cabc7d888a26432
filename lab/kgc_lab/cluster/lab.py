"""The cluster lab: a real Kubernetes control plane with simulated (kwok) GPU nodes and KEDA.

Binaries come from ``scripts/bootstrap.d/30-cluster.sh`` (built from the Go modules under
``lab/cluster/go/``) and live in ``${KGC_CACHE:-~/.cache/kgc}/cluster/bin``. A run directory
(default ``${KGC_CACHE}/cluster/run``) holds the generated PKI, kubeconfigs, logs, etcd data
``state.json`` listing every process started (pid, start time, binary, ports) so that
``down`` can stop them all, and ``profile.yaml``: the lab profile with what only the running
lab knows, in the keda layer's profile fields (:func:`keda_profile_fields`), the profile the
lab hands the suites — also after a failed ``up``. Every start is also written to the
lab's ``LabRecord`` (``kgc_lab.ledger``), which ``kgc lab cleanup`` reads when nobody is
left to run ``down``.

Components, all on 127.0.0.1 with ports chosen at start: etcd, kube-apiserver (authz
Node,RBAC; admission incl. RuntimeClass, ResourceQuota, LimitRanger),
kube-controller-manager, kube-scheduler, kwok (nodes and pods simulated through stages), the
collector simulator (``kgc_lab.cluster.simulate``: what simulated collector pods print), a
metric HTTP endpoint (``kgc_lab.cluster.metric_server``), the KEDA operator and the KEDA
metrics API server (registered as ``v1beta1.external.metrics.k8s.io``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kgc import kube
from kgc.core.profile import ClusterProfile, ProfileError, load_profile, profiles_dir
from kgc_lab import procs
from kgc_lab.cluster import pki as cluster_pki
from kgc_lab.cluster.manifests import (
    DEVICE_PLUGIN_LABELS,
    DEVICE_PLUGIN_NAMESPACE,
    KEDA_APISERVICE,
    KEDA_NAMESPACE,
    KWOK_ANNOTATION,
    device_plugin_manifests,
    keda_manifests,
    kwok_stages,
    node_manifests,
    runtime_class_manifests,
)
from kgc_lab.cluster.shape import LabClusterProfile, lab_cluster
from kgc_lab.common import LabError, free_port, lab_cache
from kgc_lab.ledger import LabRecord
from kgc_lab.supervise import Proc, Supervisor, http_ok, stop_processes

LAB_PROFILE = "lab"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
STATE_VERSION = 2

# --------------------------------------------------------------------------- paths


def cache_dir() -> Path:
    return lab_cache("cluster")


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
    def profile(self) -> Path:
        return self.root / "profile.yaml"

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


def _paths(run_dir: Path | str | None) -> RunPaths:
    return RunPaths(Path(run_dir) if run_dir else default_run_dir())


# --------------------------------------------------------------------------- state


def read_state(paths: RunPaths) -> dict[str, Any] | None:
    try:
        state = json.loads(paths.state.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LabError(f"{paths.state}: corrupt state file ({exc}); `kgc lab cleanup` stops "
                       "whatever the lab left running, then remove the file") from None
    if not isinstance(state, dict):
        raise LabError(f"{paths.state}: not a lab state (a JSON object expected)")
    return state


def write_state(paths: RunPaths, state: Mapping[str, Any]) -> None:
    tmp = paths.state.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.replace(paths.state)


def _state_processes(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [p for p in state.get("processes") or [] if isinstance(p, dict)
            and isinstance(p.get("pid"), int)]


def keda_profile_fields(state: Mapping[str, Any]) -> dict[str, Any]:
    """What the keda layer needs of the running lab, in its documented profile fields
    (``cluster.keda``): the lab's loopback metric endpoint as the trigger endpoint (kwok
    pods never run, so the endpoint a real run deploys could not answer) and the HPA sync
    period its kube-controller-manager runs with (a process, not a pod the API shows)."""
    return {"endpoint": {"mode": "url", "url": state["metric_url"]},
            "hpa_sync_period_s": state["hpa_sync_period_s"]}


def write_lab_profile(path: Path, state: Mapping[str, Any]) -> Path:
    """``profiles/lab.yaml`` with the running lab's :func:`keda_profile_fields`: what
    ``--profile`` gets wherever the suites run against this lab."""
    doc = yaml.safe_load((profiles_dir() / f"{LAB_PROFILE}.yaml").read_text())
    keda = doc.setdefault("cluster", {}).setdefault("keda", {})
    fields = keda_profile_fields(state)
    keda["endpoint"] = {**(keda.get("endpoint") or {}), **fields.pop("endpoint")}
    keda.update(fields)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------- the lab


def lab_cluster_profile() -> LabClusterProfile:
    """The lab profile's ``cluster`` section with the lab's own shape beside it."""
    try:
        # By path: resolve("lab") would pick the repo's lab/ directory when run from the root.
        return lab_cluster(load_profile(profiles_dir() / f"{LAB_PROFILE}.yaml").cluster)
    except ProfileError:
        return lab_cluster()


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
        with_node: bool = False,
    ) -> None:
        self.paths = _paths(run_dir)
        # the product's section the lab runs, with the lab's shape (kgc_lab.cluster.shape)
        self.cluster = lab_cluster(cluster) if cluster is not None else lab_cluster_profile()
        self.bins = bins or binaries()
        self.keda = keda
        self.timeout_s = timeout_s
        self.die_with_parent = die_with_parent
        self.with_node = with_node  # also boot and join a real node (kgc_lab.cluster.realnode)
        self.state: dict[str, Any] = {}
        self._say: Callable[[str], None] = lambda _m: None
        self._sup: Supervisor | None = None
        self._kube: kube.Kube | None = None

    # ---- state helpers
    def _save(self) -> None:
        write_state(self.paths, self.state)

    def _recorded(self, proc: Proc, pid: int) -> None:
        self.state["processes"].append({
            "name": proc.name, "pid": pid, "start": procs.proc_start(pid),
            "exe": proc.argv[0], "log": str(proc.log), "group": True,
        })
        self._save()

    def _start(self, proc: Proc) -> None:
        assert self._sup is not None
        self._sup.start(proc)

    def _wait(self, what: str, probe: Callable[[], Any], needs: list[Proc],
              timeout: float | None = None) -> Any:
        assert self._sup is not None
        return self._sup.wait(what, probe, needs, timeout or self.timeout_s)

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
        if old and any(procs.is_same(p["pid"], p.get("start"), p.get("exe"))
                       for p in _state_processes(old)):
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
        for attempt in (1, 2):
            record = LabRecord.create("cluster", run_dir=str(root))
            self._sup = Supervisor(record, cwd=root, die_with_parent=self.die_with_parent,
                                   on_start=self._recorded, say=self._say)
            self.state = {
                "version": STATE_VERSION,
                "run_dir": str(root),
                "phase": "starting",
                "started": time.time(),
                "record": str(record.path),
                "processes": [],
                "ports": {},
            }
            self._save()
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
        self._wait("etcd /health", lambda: http_ok(f"{etcd_url}/health", b"true"), [etcd])

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
            lambda: http_ok(f"{server}/readyz", b"ok", ca=pki.ca.cert, cert=admin),
            [etcd, apiserver],
        )
        self._say(f"kube-apiserver ready at {server} ({time.monotonic() - t0:.1f} s)")
        self.state["api_ready_s"] = round(time.monotonic() - t0, 2)
        self._save()

        api = kube.connect(paths.kubeconfig)
        self._kube = api
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
            # kwok renews each node's Lease (kube-node-lease): without it the node lifecycle
            # controller marks the nodes NotReady after its 40 s grace period, their pods
            # not Ready, and kwok's node-initialize stage then drops the nodes' addresses
            # (pod logs stop working)
            "--node-lease-duration-seconds=40",
            "--cidr=10.244.0.0/16",
        ], {}, logs / "kwok.log")
        self._start(kwok)

        metric_port_file = paths.root / "metric.port"
        metric_port_file.unlink(missing_ok=True)
        metric = Proc("metric-server", [
            sys.executable, "-m", "kgc_lab.cluster.metric_server",
            f"--port-file={metric_port_file}",
        ], {}, logs / "metric-server.log")
        self._start(metric)

        sim_ready = paths.root / "simulator.ready"
        sim_ready.unlink(missing_ok=True)
        simulator = Proc("kgc-simulator", [
            sys.executable, "-m", "kgc_lab.cluster.simulate", f"--kubeconfig={paths.kubeconfig}",
            f"--run-dir={paths.root}", f"--ready-file={sim_ready}",
        ], {}, logs / "simulator.log")
        self._start(simulator)

        self._create_objects(api, ports)
        self._wait("collector simulator watching pods", sim_ready.exists, [simulator],
                   timeout=30)
        self._wait("metric endpoint", metric_port_file.exists, [metric], timeout=30)
        ports["metric"] = int(metric_port_file.read_text())
        self.state["metric_url"] = f"http://127.0.0.1:{ports['metric']}/metric"
        self.state["hpa_sync_period_s"] = lab.hpa_sync_period_s
        self.state["profile"] = str(write_lab_profile(paths.profile, self.state))
        self._save()

        kc = [kcm, sched]
        self._wait("kube-controller-manager /healthz", lambda: http_ok(
            f"https://127.0.0.1:{ports['controller_manager']}/healthz", b"ok", verify=False), kc)
        self._wait("kube-scheduler /healthz", lambda: http_ok(
            f"https://127.0.0.1:{ports['scheduler']}/healthz", b"ok", verify=False), kc)
        self._wait("kwok /healthz", lambda: http_ok(
            f"https://127.0.0.1:{ports['kwok']}/healthz", b"ok", ca=pki.ca.cert), [kwok])
        node_names = [n["metadata"]["name"] for n in node_manifests(self.cluster)]
        self._wait(f"nodes Ready and untainted ({', '.join(node_names)})",
                   lambda: _nodes_ready(api, node_names), [kwok])
        self._wait("default ServiceAccount", lambda: _has_default_sa(api), [kcm])
        if device_plugin_manifests(self.cluster):
            gpu_nodes = [n for n in node_names if n.startswith("kgc-gpu-")]
            self._wait(f"device-plugin pods Ready on {', '.join(gpu_nodes)}",
                       lambda: _plugin_ready(api, gpu_nodes), [kcm, sched, kwok])

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
            self._wait("keda-operator /readyz", lambda: http_ok(
                f"http://127.0.0.1:{ports['keda_probe']}/readyz", b"ok"), [operator])
            self._wait(f"APIService {KEDA_APISERVICE} Available",
                       lambda: _apiservice_available(api, KEDA_APISERVICE), [operator, adapter])

        if self.with_node:
            from kgc_lab.cluster import realnode

            assert self._sup is not None
            realnode.join(self.paths.root, self.state, record=self._sup.record, save=self._save,
                          say=self._say)

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

    def _create_crds(self, api: kube.Kube, crd_dir: Path, what: str) -> None:
        crds = sorted(crd_dir.glob("*.yaml"))
        if not crds:
            raise LabError(f"no {what} in {crd_dir} — run scripts/bootstrap.d/30-cluster.sh")
        names = []
        for f in crds:
            doc = yaml.safe_load(f.read_text())
            kube.create_object(api, doc)
            names.append(doc["metadata"]["name"])
        self._wait(f"{what} Established", lambda: _crds_established(api, names), [])

    def _create_objects(self, api: kube.Kube, ports: dict[str, int]) -> None:
        kube.create_object(api, {"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": KEDA_NAMESPACE}})
        for rc in runtime_class_manifests(self.cluster):
            kube.create_object(api, rc)
        for node in node_manifests(self.cluster):
            created = kube.create_object(api, node)
            if not (created.get("status") or {}).get("capacity"):
                api.core.patch_node_status(node["metadata"]["name"], {"status": node["status"]})
        for m in device_plugin_manifests(self.cluster):
            kube.create_object(api, m)
        if not self.keda:
            return
        self._create_crds(api, keda_crd_dir(), "KEDA CRDs")
        for m in keda_manifests(ports["keda_adapter"]):
            kube.create_object(api, m)


# --------------------------------------------------------------------------- readiness probes


def _nodes_ready(api: kube.Kube, names: list[str]) -> Any:
    items: list[Any] = api.core.list_node().items
    nodes = {n.metadata.name: n for n in items}
    for name in names:
        node = nodes.get(name)
        conds = {c.type: c.status for c in (node.status.conditions or [])} if node else {}
        if conds.get("Ready") != "True":
            return kube.NotYet(f"node {name} not Ready ({conds or 'not registered'})")
        # node.kubernetes.io/not-ready stays until the node lifecycle controller has seen
        # the Ready condition; the lab sets no taints of its own.
        if node is not None and node.spec.taints:
            return kube.NotYet(f"node {name} tainted: {[t.key for t in node.spec.taints]}")
    return True


def _plugin_ready(api: kube.Kube, nodes: list[str]) -> Any:
    sel = ",".join(f"{k}={v}" for k, v in DEVICE_PLUGIN_LABELS.items())
    pods: list[Any] = api.core.list_namespaced_pod(DEVICE_PLUGIN_NAMESPACE,
                                                   label_selector=sel).items
    ready = {p.spec.node_name for p in pods
             if any(c.type == "Ready" and c.status == "True"
                    for c in (p.status.conditions or []))}
    left = [n for n in nodes if n not in ready]
    return True if not left else kube.NotYet(f"no Ready device-plugin pod on {', '.join(left)}")


def _has_default_sa(api: kube.Kube) -> bool:
    sas: list[Any] = api.core.list_namespaced_service_account("default").items
    return any(sa.metadata.name == "default" for sa in sas)


def _crds_established(api: kube.Kube, names: list[str]) -> Any:
    for name in names:
        crd: Any = api.extensions.read_custom_resource_definition(name)
        conds = {c.type: c.status for c in (crd.status.conditions or [])}
        if conds.get("Established") != "True":
            return kube.NotYet(f"CRD {name}: {conds}")
    return True


def _apiservice_available(api: kube.Kube, name: str) -> Any:
    svc: Any = api.registration.read_api_service(name)
    conds = {c.type: (c.status, c.message) for c in (svc.status.conditions or [])}
    ok = conds.get("Available", ("", ""))[0] == "True"
    return True if ok else kube.NotYet(f"APIService {name}: {conds}")


# --------------------------------------------------------------------------- down / status


def down(run_dir: Path | str | None = None, grace_s: float = 10.0) -> dict[str, Any]:
    """Stop every process recorded in the run directory's state; verify none is left and
    none of the lab's ports still listens; forget the lab's record. Returns a report."""
    paths = _paths(run_dir)
    state = read_state(paths)
    report: dict[str, Any] = {"run_dir": str(paths.root), "stopped": [], "left": [],
                              "listening": []}
    if not state:
        return report
    if state.get("nodes"):
        from kgc_lab.cluster import realnode

        # real nodes first, while their API server still answers: a clean power-off
        for node in state["nodes"]:
            if isinstance(node, dict) and realnode.leave(node):
                report.setdefault("nodes_stopped", []).append(node.get("name"))
    entries = _state_processes(state)
    stopped, left = stop_processes(entries, grace_s)
    if state.get("relay_dir"):
        from kgc_lab.cluster import realnode

        left += [{"name": "node relay", "pid": p} for p in realnode.stop_relays(state)]
    report["stopped"], report["left"] = stopped, left
    ports = {int(p) for p in (state.get("ports") or {}).values() if isinstance(p, int)}
    listening = procs.listening_ports()
    pids = [int(p["pid"]) for p in entries]
    report["listening"] = sorted(p for p in ports if p in listening
                                 and procs.port_owned_by(p, pids))
    if not report["left"]:
        state["phase"] = "down"
        state["stopped"] = time.time()
        write_state(paths, state)
        rec = LabRecord.open(state.get("record"))
        if rec is not None and not report["listening"]:
            rec.close()
    return report


def status(run_dir: Path | str | None = None) -> dict[str, Any]:
    paths = _paths(run_dir)
    state = read_state(paths) or {}
    entries = [
        {**p, "alive": procs.is_same(p["pid"], p.get("start"), p.get("exe"))}
        for p in _state_processes(state)
    ]
    up = state.get("phase") == "up" and bool(entries) and all(p["alive"] for p in entries)
    return {
        "run_dir": str(paths.root),
        "phase": state.get("phase", "down"),
        "up": up,
        "kubeconfig": state.get("kubeconfig", str(paths.kubeconfig)),
        "server": state.get("server"),
        "metric_url": state.get("metric_url"),
        "profile": state.get("profile"),
        "ports": state.get("ports", {}),
        "processes": entries,
        "api_ready_s": state.get("api_ready_s"),
        "up_s": state.get("up_s"),
        "record": state.get("record"),
        "nodes": state.get("nodes", []),
    }


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
    arguments that point the cluster suites at it (the lab's ``profile.yaml``, and the
    kubeconfig of the least-privilege ServiceAccount of ``deploy/rbac/kgc-certify.yaml``,
    applied to the lab first: the suites run as a user's certification run would), take it
    down afterwards. ``KGC_CLUSTER_RUN_DIR`` is exported for the lab's own tools."""
    from kgc_lab.cluster import rbac

    run_dir = Path(work) / "cluster-lab"
    lab = Lab(run_dir)
    try:
        state = lab.up(say=lambda m: print(f"[certify] cluster lab: {m}", flush=True))
        admin = kube.connect(state["kubeconfig"])
        rbac.apply_certify_rbac(admin)
        sa_kubeconfig = rbac.certify_kubeconfig(admin, state["server"], lab.paths.pki / "ca.crt",
                                                run_dir / "kubeconfig-kgc-certify")
        rbac.wait_policy_enforced(kube.connect(sa_kubeconfig))
        old = os.environ.get("KGC_CLUSTER_RUN_DIR")
        os.environ["KGC_CLUSTER_RUN_DIR"] = str(run_dir)
        try:
            # in the layers' own order (gpu, sizing, keda: the card's 4, 5, 6), so the
            # report's tree, which follows the run, lists them as numbered
            from kgc.core.registry import load_layers

            order = {name: i for i, name in enumerate(load_layers())}
            suites = [
                str(p) for p in sorted((profiles_dir().parent / "conformance").glob("*"),
                                       key=lambda p: (order.get(p.name, len(order)), p.name))
                if p.name in ("gpu", "sizing", "keda", "cluster") and p.is_dir()
            ]
            yield [
                "-m", "cluster",
                *(suites or [str(profiles_dir().parent / "conformance")]),
                "--profile", state["profile"],
                "--kubeconfig", str(sa_kubeconfig),
            ]
        finally:
            if old is None:
                os.environ.pop("KGC_CLUSTER_RUN_DIR", None)
            else:
                os.environ["KGC_CLUSTER_RUN_DIR"] = old
    finally:
        down(run_dir)
