"""``kgc lab cluster up | down | status``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kgc.core.profile import ProfileError, load_profile
from kgc_lab.cluster.lab import Lab, down, lab_cluster_profile, status
from kgc_lab.common import LabError


def _cmd_up(args: argparse.Namespace) -> int:
    try:
        cluster = load_profile(args.profile).cluster if args.profile else lab_cluster_profile()
        lab = Lab(args.run_dir, cluster=cluster, keda=not args.no_keda, timeout_s=args.timeout,
                  with_node=args.with_node)
        st = lab.up(say=lambda m: print(f"kgc lab cluster: {m}", file=sys.stderr, flush=True))
    except (LabError, ProfileError) as exc:
        print(f"kgc lab cluster up: FAILED: {exc}", file=sys.stderr)
        print("all processes started by this attempt were stopped", file=sys.stderr)
        return 1
    print(f"kubeconfig: {st['kubeconfig']}")
    print(f"server: {st['server']}")
    print(f"metric: {st.get('metric_url')}")
    print(f"profile: {st.get('profile')}")
    for node in st.get("nodes", []):
        print(f"node: {node['name']} (real kubelet; ssh -F {node.get('ssh_config')} "
              f"kgc-{node['vm']})")
    print(f"export KUBECONFIG={st['kubeconfig']}")
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    rep = down(args.run_dir)
    for n in rep.get("nodes_stopped", []):
        print(f"stopped real node {n} (its VM powered off)")
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
        for n in st.get("nodes", []):
            print(f"  real node {n.get('name')}: VM {n.get('vm')}, kubelet 127.0.0.1:"
                  f"{n.get('kubelet_port')}, ssh 127.0.0.1:{n.get('ssh_port')}")
    if not st["up"]:  # not an internal error: the documented "not up" (kgc_lab.cli)
        print(f"kgc lab cluster status: the cluster lab is not up (phase {st['phase']}; "
              "start it: kgc lab cluster up)", file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add ``kgc lab cluster {up,down,status}``."""
    p = subparsers.add_parser("cluster", help="Kubernetes control plane + kwok GPU nodes + KEDA")
    sub = p.add_subparsers(dest="cluster_cmd", required=True)
    up = sub.add_parser("up", help="start the lab (etcd, apiserver, kcm, scheduler, kwok, KEDA)")
    up.add_argument("--profile", default=None, help="profile name/path (default: lab)")
    up.add_argument("--no-keda", action="store_true", help="skip the KEDA operator/adapter")
    up.add_argument("--timeout", type=float, default=120.0, help="per-component wait (s)")
    up.add_argument("--with-node", action="store_true",
                    help="also boot the kube node image (QEMU) and join its real kubelet")
    down_p = sub.add_parser("down", help="stop every lab process")
    st = sub.add_parser("status", help="show state, kubeconfig path and processes")
    st.add_argument("--json", action="store_true")
    for sp in (up, down_p, st):
        sp.add_argument("--run-dir", type=Path, default=None,
                        help="run directory (default ${KGC_CACHE}/cluster/run)")
    up.set_defaults(func=_cmd_up)
    down_p.set_defaults(func=_cmd_down)
    st.set_defaults(func=_cmd_status)
