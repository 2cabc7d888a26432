"""Node-lab benchmarks (method in benchmarks/node.md): boot to SSH, round trips and wall of a
full host run with 4 vs 64 stand-in devices, a 3-node fleet vs 1 node through pytest-xdist,
and our host run vs ``virt-host-validate`` on the same VM over the same SSH transport."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kgc.core.engine import Context
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc_lab.node.lab import Hardware, NodeVM, build_variant, run_dir
from kgc_lab.node.runner import HOST_LAYERS, lab_profile
from kgc_lab.node.scenarios import VARIANTS

REPO = Path(__file__).resolve().parents[3]


def host_run(vm: NodeVM) -> tuple[int, float, int]:
    """One full host run (iommu + vfio + persistence): round trips, seconds, verdicts."""
    t = NodeTarget(vm.spec, ssh_config=str(vm.ssh_config), timeout_s=30)
    ctx = Context(target=t, profile=lab_profile(), layers=load_layers())
    t0 = time.monotonic()
    vs = ctx.judge_all([n for n in HOST_LAYERS if n in ctx.layers])
    return t.round_trips, time.monotonic() - t0, len(vs)


def fleet_ssh_config(vms: list[NodeVM]) -> Path:
    p = run_dir() / f"fleet_ssh_config-{os.getpid()}"
    p.write_text("".join(vm.ssh_config.read_text() for vm in vms))
    return p


def pytest_fleet(vms: list[NodeVM], out: Path) -> tuple[float, dict[str, Any]]:
    cfg = fleet_ssh_config(vms)
    hosts = ",".join(vm.spec for vm in vms)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "host",
           str(REPO / "conformance"), "--profile", str(REPO / "profiles" / "lab.yaml"),
           f"--hosts={hosts}", f"--ssh-config={cfg}", "--report-dir", str(out),
           "-n", str(len(vms)), "--dist", "loadgroup"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    wall = time.monotonic() - t0
    info: dict[str, Any] = {"rc": proc.returncode, "tail": proc.stdout[-600:]}
    vj = out / "verdict.json"
    if vj.exists():
        doc = json.loads(vj.read_text())
        info["targets"] = sorted({r["target"] for r in doc["results"]})
        info["verdicts"] = len(doc["results"])
        info["counts"] = doc.get("counts")
    return wall, info


def main(out_json: Path, repeats: int = 3) -> dict[str, Any]:
    img = build_variant(VARIANTS["good"])
    fleet = os.environ.get("KGC_BENCH_FLEET", "1") != "0"
    specs = {"n4": Hardware(), "n64": Hardware(extra_accels=60)}
    if fleet:
        specs |= {"f2": Hardware(), "f3": Hardware()}
    vms = {k: NodeVM(f"bench-{k}-{os.getpid()}", img, hw) for k, hw in specs.items()}
    res: dict[str, Any] = {"machine": {"cpus": os.cpu_count(),
                                       "load_at_start": os.getloadavg()[0]}}
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            boots = dict(zip(vms, pool.map(lambda v: v.start(), vms.values()), strict=True))
        res["boot_to_ssh_s"] = {k: round(v, 1) for k, v in boots.items()}
        for k in ("n4", "n64"):
            runs = [host_run(vms[k]) for _ in range(repeats)]
            res[f"host_run_{k}"] = {
                "devices": len(vms[k].ssh("ls /sys/bus/pci/devices").stdout.split()),
                "round_trips": runs[0][0], "verdicts": runs[0][2],
                "wall_s_median": round(statistics.median(r[1] for r in runs), 2),
                "wall_s_all": [round(r[1], 2) for r in runs]}
        res["host_run_wall_ratio_64_vs_4"] = round(
            res["host_run_n64"]["wall_s_median"] / res["host_run_n4"]["wall_s_median"], 2)
        out = run_dir() / "bench-reports"
        if fleet:
            one = [pytest_fleet([vms["n4"]], out / "one") for _ in range(2)]
            three = [pytest_fleet([vms["n4"], vms["f2"], vms["f3"]], out / "three")
                     for _ in range(2)]
            res["fleet"] = {
                "one_node_s": [round(x[0], 1) for x in one],
                "three_nodes_s": [round(x[0], 1) for x in three],
                "ratio": round(min(x[0] for x in three) / min(x[0] for x in one), 2),
                "one_node_report": one[-1][1], "three_node_report": three[-1][1]}
        else:
            res["fleet"] = "not measured (KGC_BENCH_FLEET=0)"
        vhv = []
        ours = []
        for _ in range(repeats):
            t0 = time.monotonic()
            r = vms["n4"].ssh("virt-host-validate qemu", check=False, timeout=120)
            vhv.append(time.monotonic() - t0)
            ours.append(host_run(vms["n4"])[1])
        res["virt_host_validate"] = {
            "rc": r.returncode, "output": r.stdout[-2000:],
            "vhv_wall_s_median": round(statistics.median(vhv), 2),
            "kgc_host_run_wall_s_median": round(statistics.median(ours), 2),
            "ratio_kgc_vs_vhv": round(statistics.median(ours) / statistics.median(vhv), 2)}
    finally:
        for vm in vms.values():
            vm.stop()
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/node.json")),
                     indent=1))
