"""A small in-memory Kubernetes API for tests that need live watches without a cluster:
pods and events in namespaces, created by POST, changed by the test (a stand-in kubelet),
served to list and watch requests as they happen (a watch stays open and streams each
change, like the real server), plus pod logs and pod deletion.

It speaks only what ``kgc.kube.pods.run_pods`` and the watchers use. Every request is
counted in ``requests`` (method, path) so tests can assert API-call budgets.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Obj = dict[str, Any]


def _match(labels: dict[str, str], selector: str | None) -> bool:
    for req in (selector or "").split(","):
        if not req.strip():
            continue
        k, eq, v = req.partition("=")
        if eq and labels.get(k) != v:
            return False
        if not eq and k not in labels:
            return False
    return True


class LiveApi:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rv = 100
        self.pods: dict[tuple[str, str], Obj] = {}
        self.events: dict[tuple[str, str], Obj] = {}
        self.history: list[tuple[int, str, str, str, Obj]] = []  # rv, kind, type, ns, obj
        self.logs: dict[tuple[str, str], str] = {}
        self.requests: list[tuple[str, str]] = []
        # on_create(pod) -> None (accept) or (status, message) to refuse
        self.on_create: Callable[[Obj], tuple[int, str] | None] = lambda _p: None
        self.after_create: Callable[[Obj], None] = lambda _p: None
        self.closing = False

    # ---- state changes (tests play kubelet / scheduler with these)
    def _emit(self, kind: str, etype: str, ns: str, obj: Obj) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, kind, etype, ns, copy.deepcopy(obj)))
        self.cond.notify_all()

    def update_pod(self, ns: str, name: str, fn: Callable[[Obj], None]) -> None:
        with self.cond:
            pod = self.pods[(ns, name)]
            fn(pod)
            self._emit("pods", "MODIFIED", ns, pod)

    def schedule(self, ns: str, name: str, node: str) -> None:
        def f(p: Obj) -> None:
            p["spec"]["nodeName"] = node
            p.setdefault("status", {})["conditions"] = [
                {"type": "PodScheduled", "status": "True"}]
        self.update_pod(ns, name, f)

    def finish(self, ns: str, name: str, log: str, exit_code: int = 0) -> None:
        self.logs[(ns, name)] = log

        def f(p: Obj) -> None:
            st = p.setdefault("status", {})
            st["phase"] = "Succeeded" if exit_code == 0 else "Failed"
            st["containerStatuses"] = [
                {"name": c["name"], "restartCount": 0, "image": c["image"], "imageID": "",
                 "ready": False,
                 "state": {"terminated": {"exitCode": exit_code, "reason": "Completed"}}}
                for c in p["spec"]["containers"]]
        self.update_pod(ns, name, f)

    def wait_container(self, ns: str, name: str, reason: str, message: str = "") -> None:
        def f(p: Obj) -> None:
            p.setdefault("status", {})["containerStatuses"] = [
                {"name": c["name"], "restartCount": 0, "image": c["image"], "imageID": "",
                 "ready": False, "state": {"waiting": {"reason": reason, "message": message}}}
                for c in p["spec"]["containers"]]
        self.update_pod(ns, name, f)

    def event(self, ns: str, pod: str, etype: str, reason: str, message: str,
              count: int = 1, uid: str | None = None) -> str:
        uid = uid or uuid.uuid4().hex
        with self.cond:
            ev = self.events.get((ns, uid)) or {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{pod}.{uid[:8]}", "namespace": ns, "uid": uid},
                "involvedObject": {"kind": "Pod", "name": pod, "namespace": ns},
                "source": {"component": "kubelet"},
            }
            ev.update(type=etype, reason=reason, message=message, count=count)
            self.events[(ns, uid)] = ev
            self._emit("events", "ADDED" if count == 1 else "MODIFIED", ns, ev)
        return uid

    def pods_alive(self, ns: str) -> list[str]:
        with self.cond:
            return sorted(n for (s, n), p in self.pods.items()
                          if s == ns and p.get("status", {}).get("phase") not in
                          ("Succeeded", "Failed"))

    # ---- request handling
    def create_pod(self, ns: str, body: Obj) -> tuple[int, Obj]:
        refusal = self.on_create(body)
        if refusal is not None:
            status, msg = refusal
            return status, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": msg, "reason": "Forbidden", "code": status}
        with self.cond:
            name = body["metadata"]["name"]
            if (ns, name) in self.pods:
                return 409, {"kind": "Status", "message": f'pods "{name}" already exists',
                             "code": 409}
            pod = copy.deepcopy(body)
            md = pod["metadata"]
            md.update(namespace=ns, uid=uuid.uuid4().hex,
                      creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            pod.setdefault("status", {"phase": "Pending"})
            self.pods[(ns, name)] = pod
            self._emit("pods", "ADDED", ns, pod)
            out = copy.deepcopy(pod)
        threading.Thread(target=self.after_create, args=(copy.deepcopy(out),),
                         daemon=True).start()
        return 201, out

    def delete_pod(self, ns: str, name: str) -> tuple[int, Obj]:
        with self.cond:
            pod = self.pods.pop((ns, name), None)
            if pod is None:
                return 404, {"kind": "Status", "code": 404}
            self._emit("pods", "DELETED", ns, pod)
            return 200, pod

    def items(self, kind: str, ns: str, selector: str | None,
              fields: str | None = None) -> list[Obj]:
        store = self.pods if kind == "pods" else self.events
        want = dict(f.split("=", 1) for f in (fields or "").split(",") if "=" in f)

        def field_ok(o: Obj) -> bool:
            inv = o.get("involvedObject") or {}
            return all(inv.get(k.split(".", 1)[1]) == v for k, v in want.items()
                       if k.startswith("involvedObject."))

        return [copy.deepcopy(o) for (s, _), o in sorted(store.items())
                if s == ns and _match(o["metadata"].get("labels") or {}, selector)
                and field_ok(o)]


@contextmanager
def serve(api: LiveApi) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def _send(self, status: int, body: Any, ctype: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _parts(self) -> tuple[list[str], dict[str, list[str]]]:
            u = urlsplit(self.path)
            return [p for p in u.path.split("/") if p], parse_qs(u.query)

        def do_POST(self) -> None:  # noqa: N802
            parts, _ = self._parts()
            api.requests.append(("POST", "/" + "/".join(parts)))
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if len(parts) == 5 and parts[4] == "pods":
                self._send(*api.create_pod(parts[3], body))
            else:
                self._send(404, {"kind": "Status", "code": 404})

        def do_DELETE(self) -> None:  # noqa: N802
            parts, _ = self._parts()
            api.requests.append(("DELETE", "/" + "/".join(parts)))
            self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
            if len(parts) == 6 and parts[4] == "pods":
                self._send(*api.delete_pod(parts[3], parts[5]))
            else:
                self._send(404, {"kind": "Status", "code": 404})

        def do_GET(self) -> None:  # noqa: N802
            parts, q = self._parts()
            api.requests.append(("GET", "/" + "/".join(parts) + ("?watch" if q.get("watch")
                                                                  else "")))
            # /api/v1/namespaces/{ns}/pods/{name}/log
            if len(parts) == 7 and parts[4] == "pods" and parts[6] == "log":
                log = api.logs.get((parts[3], parts[5]))
                if log is None:
                    self._send(400, {"kind": "Status", "code": 400,
                                     "message": "container is waiting to start"})
                else:
                    self._send(200, log.encode(), "text/plain")
                return
            if len(parts) != 5 or parts[4] not in ("pods", "events"):
                self._send(404, {"kind": "Status", "code": 404})
                return
            kind, ns = parts[4], parts[3]
            sel = (q.get("labelSelector") or [None])[0]
            if q.get("watch") != ["true"]:
                with api.cond:
                    body = {"kind": "List", "apiVersion": "v1",
                            "metadata": {"resourceVersion": str(api.rv)},
                            "items": api.items(kind, ns, sel,
                                               (q.get("fieldSelector") or [None])[0])}
                self._send(200, body)
                return
            since = int((q.get("resourceVersion") or ["0"])[0] or 0)
            until = time.monotonic() + float((q.get("timeoutSeconds") or ["60"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                while time.monotonic() < until and not api.closing:
                    with api.cond:
                        new = [h for h in api.history if h[0] > since and h[1] == kind
                               and h[3] == ns and _match(h[4]["metadata"].get("labels") or {},
                                                         sel)]
                        if not new:
                            api.cond.wait(0.2)
                            continue
                    for rv, _k, etype, _ns, obj in new:
                        since = rv
                        data = (json.dumps({"type": etype, "object": obj}) + "\n").encode()
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        api.closing = True
        with api.cond:
            api.cond.notify_all()
        srv.shutdown()
        srv.server_close()
