"""What the cluster lab serves to the suites: the metric KEDA scales on, and recorded real
evidence as the log of a simulated pod."""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from kgc import kube
from kgc_lab.cluster.lab import _paths, status
from kgc_lab.common import LabError


def set_metric(value: float, run_dir: Path | None = None) -> dict[str, Any]:
    """Set the value the lab's metric endpoint serves (KEDA's metrics-api trigger)."""
    url = status(run_dir)["metric_url"]
    if not url:
        raise LabError("the lab has no metric endpoint (is it up?)")
    req = urllib.request.Request(  # noqa: S310 - loopback URL from our own state
        url, data=json.dumps({"value": value}).encode(), method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=5) as r:  # noqa: S310
        return dict(json.loads(r.read()))


def cri_log(text: str, when: float | None = None) -> str:
    """Text as a CRI container log (what kwok, like the kubelet, serves): one
    ``<RFC3339Nano> stdout F <line>`` record per line."""
    ts = dt.datetime.fromtimestamp(when if when is not None else time.time(), dt.UTC)
    stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
    return "".join(f"{stamp} stdout F {line}\n" for line in text.splitlines())


def serve_recorded_logs(
    api: kube.Kube | Any,
    namespace: str,
    pod: str,
    logs_file: Path,
    containers: list[str] | None = None,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Make ``kubectl logs`` of a simulated pod return a recorded file (real evidence from
    ``fixtures/``), through kwok's ``Logs`` resource. The pod itself never ran: suites must
    treat such output as simulated (the lab profile sets ``cluster.simulated: true``).
    ``api``: a ``kgc.kube.Kube`` (or a kubernetes ``ApiClient``)."""
    k = api if isinstance(api, kube.Kube) else kube.Kube.from_api_client(api)
    src = Path(logs_file).resolve()
    if not src.is_file():
        raise LabError(f"recorded evidence {src} not found")
    out_dir = _paths(run_dir).root / "evidence"
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
    return kube.create_object(k, body)
