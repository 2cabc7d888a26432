"""A scripted HTTP server speaking just enough of the Kubernetes API for the client and
watch tests that must not need a cluster: fixed answers per path, and watch streams that
replay a script of events (including the ``410 Gone`` a real server sends for a
resourceVersion that was compacted away)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Script:
    # path -> (status, body) for plain GETs (lists, /version)
    answers: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)
    # path -> list of watch streams; each stream is a list of event dicts
    watches: dict[str, list[list[dict[str, Any]]]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def answer(self, path: str) -> tuple[int, Any]:
        seq = self.answers.get(path) or [(404, {"kind": "Status", "code": 404})]
        return seq.pop(0) if len(seq) > 1 else seq[0]


def pod(name: str, rv: str, ready: bool = False, node: str | None = None) -> dict[str, Any]:
    conds = [{"type": "Ready", "status": "True" if ready else "False",
              "lastTransitionTime": "2025-01-01T00:00:05Z"}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "uid": f"u-{name}",
                     "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": node},
        "status": {"phase": "Running" if ready else "Pending", "conditions": conds},
    }


def pod_list(rv: str, *pods: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": rv},
            "items": list(pods)}


@contextmanager
def serve(script: Script) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            parts = urlsplit(self.path)
            parts = parts._replace(path=parts.path.rstrip("/") or "/")
            q = parse_qs(parts.query)
            script.requests.append(self.path)
            if q.get("watch") == ["true"]:
                streams = script.watches.get(parts.path) or []
                events = streams.pop(0) if streams else []
                if not events:
                    time.sleep(0.2)  # an idle watch: the server ends it after a while
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for ev in events:
                    data = (json.dumps(ev) + "\n").encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                return
            status, body = script.answer(parts.path)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def kubeconfig(server: str, context: str = "lab", cluster: str = "lab-cluster",
               token: str = "t0ken") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": cluster, "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": "u"}}],
    }
