"""Loopback metric endpoint for the cluster lab (KEDA ``metrics-api`` trigger target).

    GET  /metric            -> {"value": <number>, "updated": <unix time>}
    PUT  /metric {"value": N}  sets the value (POST is accepted too)

Binds 127.0.0.1 on a free port and writes that port to ``--port-file`` once listening.
Run as ``python -m kgc.lab.cluster.metric_server --port-file FILE [--value N]``.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _State:
    def __init__(self, value: float) -> None:
        self.lock = threading.Lock()
        self.value = value
        self.updated = time.time()


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if self.path.split("?")[0] not in ("/metric", "/"):
                self._send(404, {"error": f"no such path {self.path}"})
                return
            with state.lock:
                self._send(200, {"value": state.value, "updated": state.updated})

        def do_PUT(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                value = float(body["value"])
            except (ValueError, KeyError, TypeError) as exc:
                self._send(400, {"error": f"expected JSON {{\"value\": number}}: {exc}"})
                return
            with state.lock:
                state.value = value
                state.updated = time.time()
                self._send(200, {"value": state.value, "updated": state.updated})

        do_POST = do_PUT  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kgc-lab-metric-server")
    ap.add_argument("--port-file", required=True, type=Path)
    ap.add_argument("--value", type=float, default=0.0)
    args = ap.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(_State(args.value)))
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.rename(args.port_file)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
