"""The trigger endpoint the KEDA layer deploys in its run namespace (``endpoint.mode:
deploy``): KEDA's ``metrics-api`` scaler reads the value, the run sets it.

    GET  /metric               -> {"value": <number>, "updated": <epoch s>, "sets": <n>}
    PUT  /metric {"value": N}  -> sets it (POST too); answers like GET
    GET  /healthz              -> ok (the pod's readiness probe)

Standard library only: the driver ships this file in a ConfigMap and runs it with the
profile's ``endpoint.image`` (any image with ``python3``):
``python3 /kgc/endpoint_server.py --port 8080``. It binds every address (a pod's own
network namespace) -- never run it on a host.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 4096


class State:
    def __init__(self, value: float = 0.0) -> None:
        self.lock = threading.Lock()
        self.value = value
        self.updated = time.time()
        self.sets = 0

    def doc(self) -> dict[str, Any]:
        return {"value": self.value, "updated": self.updated, "sets": self.sets}


def parse_value(body: bytes) -> float:
    """The number in ``{"value": N}``; ValueError naming what is wrong otherwise."""
    try:
        doc = json.loads(body.decode("utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or "value" not in doc:
        raise ValueError('expected {"value": number}')
    v = doc["value"]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"value must be a finite number, got {v!r}")
    return float(v)


def handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode() if not isinstance(body, bytes) else body
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            path = self.path.split("?")[0].rstrip("/")
            if path == "/healthz":
                self._send(200, b"ok")
            elif path in ("/metric", ""):
                with state.lock:
                    self._send(200, state.doc())
            else:
                self._send(404, {"error": f"no such path {self.path}"})

        def do_PUT(self) -> None:  # noqa: N802
            if self.path.split("?")[0].rstrip("/") not in ("/metric", ""):
                self._send(404, {"error": f"no such path {self.path}"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                self._send(400, {"error": f"body length must be 0..{MAX_BODY}"})
                return
            try:
                value = parse_value(self.rfile.read(length))
            except ValueError as exc:
                self._send(400, {"error": str(exc)})
                return
            with state.lock:
                state.value, state.updated = value, time.time()
                state.sets += 1
                self._send(200, state.doc())

        do_POST = do_PUT  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kgc-keda-endpoint")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--bind", default="0.0.0.0")  # noqa: S104 - a pod's own netns
    ap.add_argument("--value", type=float, default=0.0)
    args = ap.parse_args(argv)
    server = ThreadingHTTPServer((args.bind, args.port), handler(State(args.value)))
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"kgc-keda-endpoint listening on {args.bind}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
